"""Convert official ComRoPE / LieRE checkpoints (Hugging Face CLIP vision layout) to the zoo ViT layout.

Source: ComRoPE: Scalable and Robust Rotary Position Embedding Parameterized by Trainable Commuting Angle Matrices,
Yu et al., CVPR 2025, arXiv:2506.03737 (official code: github.com/Longin-Yu/ComRoPE, ``model.py``).

Key map (``L`` = ``vision_model.encoder.layers.N``):

==========================================================  ===========================================
official                                                    zoo
==========================================================  ===========================================
``vision_model.embeddings.class_embedding`` (C)             ``cls_token`` (1, 1, C)
``vision_model.embeddings.patch_embedding.weight``          ``patch_embed.proj.weight`` (conv, no bias)
``vision_model.embeddings.position_embedding`` (F, n, n, C) ``pe.ape.pos_embed`` (1, P + H*W, C), folded
``vision_model.pre_layrnorm.*``                             ``norm_pre.*``
``L.self_attn.{q,k,v}_proj.*``                              ``blocks.N.attn.qkv.*`` (q | k | v)
``L.self_attn.out_proj.*``                                  ``blocks.N.attn.proj.*``
``L.self_attn.freqs`` / ``L.self_attn.multiplier``          ``pe.layers.N.freqs`` / ``pe.layers.N.multiplier``
``L.layer_norm1.*`` / ``L.layer_norm2.*``                   ``blocks.N.norm1.*`` / ``blocks.N.norm2.*``
``L.mlp.fc1.*`` / ``L.mlp.fc2.*``                           ``blocks.N.mlp.fc1.*`` / ``blocks.N.mlp.fc2.*``
``vision_model.post_layernorm.*``                           ``fc_norm.*`` (class token only)
``classification_head.*``                                   ``head.*``
==========================================================  ===========================================

The official APE is sampled with a 3-D ``grid_sample`` whose coordinates make only the row position count: a token at
normalised row ``r`` gets ``lerp_rows(0.5 * (T[:, (n-1)//2] + T[:, n//2]), r * (n - 1))`` for the ``n x n`` table
``T``, whatever its column (see ``shared/golden/README.md``). :func:`fold_official_ape` evaluates that rule once at
the target grid and writes an ordinary APE table, so the standard learned APE reproduces the official embedding
exactly at that grid. When the target model has no APE, the table is dropped (the official ``keep_ape=True`` model).
The backbone must use the official CLIP settings to reproduce logits: ``pre_norm=True``, ``fc_norm=True`` with
``global_pool='token'``, ``act_layer='quick_gelu'`` and LayerNorm eps 1e-5.
"""
from __future__ import annotations

import re
from typing import Dict, Tuple

import torch
from torch import nn

__all__ = ['filter_hf_clip_comrope', 'fold_official_ape']

_PREFIX = 'vision_model.'
_LAYER = re.compile(r'^vision_model\.encoder\.layers\.(\d+)\.(.+)$')
_LAYER_RENAMES = {
    'self_attn.out_proj.': 'attn.proj.',
    'layer_norm1.': 'norm1.',
    'layer_norm2.': 'norm2.',
    'mlp.fc1.': 'mlp.fc1.',
    'mlp.fc2.': 'mlp.fc2.',
}
_TOP_RENAMES = {
    'vision_model.embeddings.patch_embedding.weight': 'patch_embed.proj.weight',
    'vision_model.pre_layrnorm.weight': 'norm_pre.weight',
    'vision_model.pre_layrnorm.bias': 'norm_pre.bias',
    'vision_model.post_layernorm.weight': 'fc_norm.weight',
    'vision_model.post_layernorm.bias': 'fc_norm.bias',
    'classification_head.weight': 'head.weight',
    'classification_head.bias': 'head.bias',
}


def fold_official_ape(table: torch.Tensor, grid_size: Tuple[int, int], num_prefix_tokens: int = 1) -> torch.Tensor:
    """Evaluate the official ComRoPE APE sampling on a grid and return a standard APE table.

    Args:
        table: ``position_embedding`` of shape ``(F, n, n, C)`` (``F = 1`` for images) or ``(n, n, C)``.
        grid_size: target patch grid ``(H, W)``.
        num_prefix_tokens: prefix entries to write first; each gets the value at the class position (0.5, 0.5),
            as the official code gives its class token.

    Returns:
        ``(1, num_prefix_tokens + H * W, C)`` in the table's dtype, tokens row-major. Every token of an image row gets
        the same vector, because the official sampling ignores the column coordinate.

    Raises:
        ValueError: the table is not ``(1, n, n, C)`` / ``(n, n, C)`` (video tables with F > 1 are not supported).
    """
    if table.ndim == 4:
        if table.shape[0] != 1:
            raise ValueError(f'official position_embedding has {table.shape[0]} frames; only images (F=1) convert')
        table = table[0]
    if table.ndim != 3 or table.shape[0] != table.shape[1]:
        raise ValueError(f'official position_embedding must be (1, n, n, C), got {tuple(table.shape)}')
    n = table.shape[0]
    t = table.double()
    centre = 0.5 * (t[:, (n - 1) // 2] + t[:, n // 2])  # (n, C): second table axis sampled at index (n-1)/2

    def at_row(r: torch.Tensor) -> torch.Tensor:
        idx = (r * (n - 1)).clamp(0, n - 1)  # align_corners=True, border padding
        lo = idx.floor().long().clamp(max=n - 1)
        hi = (lo + 1).clamp(max=n - 1)
        wgt = (idx - lo.double())[:, None]
        return centre[lo] * (1 - wgt) + centre[hi] * wgt

    h, w = grid_size
    rows = (torch.arange(h, dtype=torch.float32) + 0.5) / h  # official positions are float32
    per_row = at_row(rows.double())  # (H, C)
    patches = per_row[:, None, :].expand(h, w, -1).reshape(h * w, -1)
    prefix = at_row(torch.tensor([0.5], dtype=torch.float64)).expand(num_prefix_tokens, -1)
    return torch.cat([prefix, patches], 0)[None].to(table.dtype)


def _grid_of(model: nn.Module) -> Tuple[int, int]:
    ape = getattr(getattr(model, 'pe', None), 'ape', None)
    if ape is not None and getattr(ape, 'grid_size', None) is not None:
        return tuple(ape.grid_size)
    return tuple(model.patch_embed.grid_size)


def filter_hf_clip_comrope(state_dict: Dict[str, torch.Tensor], model: nn.Module) -> Dict[str, torch.Tensor]:
    """Convert an official ComRoPE/LieRE state dict (keys ``vision_model.*``, ``classification_head.*``).

    Args:
        state_dict: the official model's ``state_dict()`` (float tensors).
        model: the target zoo ViT (``pe`` = ``'comrope'`` or ``'liere'``), built with the official CLIP settings.

    Returns:
        A state dict in the zoo layout. The caller (``checkpoint_filter_fn``) checks it against the model.

    Raises:
        ValueError: frequency tensors (``freqs`` / ``multiplier``) whose presence or shapes do not match the model's
            encoding (wrong variant, block size, heads or head dim); a classification head that is not a single
            Linear; an incomplete q/k/v triple; any key this converter does not know.
    """
    target = model.state_dict()
    out: Dict[str, torch.Tensor] = {}
    qkv: Dict[Tuple[int, str], Dict[str, torch.Tensor]] = {}
    unknown = []
    for key, value in state_dict.items():
        if key in _TOP_RENAMES:
            out[_TOP_RENAMES[key]] = value
            continue
        if key == 'vision_model.embeddings.class_embedding':
            out['cls_token'] = value.reshape(1, 1, -1)
            continue
        if key == 'vision_model.embeddings.position_embedding':
            if 'pe.ape.pos_embed' in target:
                num_prefix = target['pe.ape.pos_embed'].shape[1] - _grid_of(model)[0] * _grid_of(model)[1]
                out['pe.ape.pos_embed'] = fold_official_ape(value, _grid_of(model), max(num_prefix, 0))
            continue  # a model without APE is the official keep_ape=True model: drop the table
        if key.startswith('classification_head.'):
            unknown.append(f'{key} (only a single-Linear head, mlp_intermediate=0, converts)')
            continue
        m = _LAYER.match(key)
        if m is None:
            unknown.append(key)
            continue
        idx, rest = int(m.group(1)), m.group(2)
        blk = f'blocks.{idx}.'
        pm = re.match(r'^self_attn\.([qkv])_proj\.(weight|bias)$', rest)
        if pm:
            qkv.setdefault((idx, pm.group(2)), {})[pm.group(1)] = value
            continue
        if rest in ('self_attn.freqs', 'self_attn.multiplier'):
            out[f'pe.layers.{idx}.{rest.split(".")[1]}'] = value
            continue
        for old, new in _LAYER_RENAMES.items():
            if rest.startswith(old):
                out[blk + new + rest[len(old):]] = value
                break
        else:
            unknown.append(key)
    for (idx, kind), parts in sorted(qkv.items()):
        if set(parts) != {'q', 'k', 'v'}:
            raise ValueError(f'layer {idx}: q/k/v_proj.{kind} incomplete, found only {sorted(parts)}')
        out[f'blocks.{idx}.attn.qkv.{kind}'] = torch.cat([parts['q'], parts['k'], parts['v']], 0)
    if unknown:
        raise ValueError(f'official ComRoPE checkpoint has keys this converter does not know: {sorted(unknown)}')
    _check_frequencies(out, target, model)
    return out


def _check_frequencies(out: Dict[str, torch.Tensor], target: Dict[str, torch.Tensor], model: nn.Module) -> None:
    """Raise a ValueError naming every frequency tensor that is missing, extra or mis-shaped."""
    is_freq = re.compile(r'^pe\.layers\.\d+\.(freqs|multiplier)$')
    got = {k: tuple(v.shape) for k, v in out.items() if is_freq.match(k)}
    want = {k: tuple(v.shape) for k, v in target.items() if is_freq.match(k)}
    problems = [f'{k}: checkpoint {got[k]} vs model {want[k]}'
                for k in sorted(set(got) & set(want)) if got[k] != want[k]]
    problems += [f'{k}: missing from the checkpoint (model expects {want[k]})' for k in sorted(set(want) - set(got))]
    problems += [f'{k}: {got[k]} in the checkpoint but not in the model' for k in sorted(set(got) - set(want))]
    if problems:
        pe = getattr(model, 'pe', None)
        desc = (f"variant={getattr(pe, 'variant', '?')!r}, block_size={getattr(pe, 'block_size', '?')}, "
                f"heads={getattr(pe, 'num_heads', '?')}, head_dim={getattr(pe, 'head_dim', '?')}")
        raise ValueError('official ComRoPE frequency tensors do not fit the model encoding (' + desc + '):\n  '
                         + '\n  '.join(problems)
                         + '\n  Expected layouts: AP freqs (H, 1, m, b, b); LD freqs (H, 1, m, b, b) + multiplier '
                           '(1, 2, m, 1, 1); LieRE freqs (H, 2, m, b, b), m = head_dim / b. Build the model with '
                           'the checkpoint\'s variant and pe_kwargs=dict(block_size=b).')
