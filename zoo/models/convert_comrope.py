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

The encoding's rows (generators and the APE) are mapped by the encoding itself
(:meth:`zoo.encodings.ComRoPE.map_checkpoint`): the official APE, sampled so that only the row position counts, is
folded into an ordinary APE table at the model's grid (:func:`zoo.encodings.comrope.fold_official_ape`), or dropped
when the model has no APE (the official ``keep_ape=True`` model). The backbone must use the official CLIP settings to
reproduce logits: ``pre_norm=True``, ``fc_norm=True`` with ``global_pool='token'``, ``act_layer='quick_gelu'`` and
LayerNorm eps 1e-5.
"""
from __future__ import annotations

import re
from typing import Dict, Tuple

import torch
from torch import nn

from zoo.encodings.comrope import fold_official_ape  # re-exported: the official APE rule

__all__ = ['filter_hf_clip_comrope', 'fold_official_ape']

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


def filter_hf_clip_comrope(state_dict: Dict[str, torch.Tensor], model: nn.Module) -> Dict[str, torch.Tensor]:
    """Convert an official ComRoPE/LieRE state dict (keys ``vision_model.*``, ``classification_head.*``).

    Args:
        state_dict: the official model's ``state_dict()`` (float tensors).
        model: the target zoo ViT (``pe`` = ``'comrope'`` or ``'liere'``), built with the official CLIP settings.

    Returns:
        A state dict in the zoo layout. The caller (``checkpoint_filter_fn``) checks it against the model.

    Raises:
        ValueError: frequency tensors (``freqs`` / ``multiplier``) whose presence or shapes do not match the model's
            encoding (wrong variant, block size, heads or head dim; raised by the encoding's
            ``map_checkpoint``); a classification head that is not a single Linear; an incomplete q/k/v triple; any
            key this converter and the encoding do not know.
    """
    out: Dict[str, torch.Tensor] = {}
    qkv: Dict[Tuple[int, str], Dict[str, torch.Tensor]] = {}
    rest: Dict[str, torch.Tensor] = {}  # not the backbone's: the encoding's, or unknown
    unknown = []
    for key, value in state_dict.items():
        if key in _TOP_RENAMES:
            out[_TOP_RENAMES[key]] = value
            continue
        if key == 'vision_model.embeddings.class_embedding':
            out['cls_token'] = value.reshape(1, 1, -1)
            continue
        if key.startswith('classification_head.'):
            unknown.append(f'{key} (only a single-Linear head, mlp_intermediate=0, converts)')
            continue
        m = _LAYER.match(key)
        pm = re.match(r'^self_attn\.([qkv])_proj\.(weight|bias)$', m.group(2)) if m else None
        if pm:
            qkv.setdefault((int(m.group(1)), pm.group(2)), {})[pm.group(1)] = value
            continue
        new = _layer_name(int(m.group(1)), m.group(2)) if m else None
        if new is None:
            rest[key] = value
        else:
            out[new] = value
    for (idx, kind), parts in sorted(qkv.items()):
        if set(parts) != {'q', 'k', 'v'}:
            raise ValueError(f'layer {idx}: q/k/v_proj.{kind} incomplete, found only {sorted(parts)}')
        out[f'blocks.{idx}.attn.qkv.{kind}'] = torch.cat([parts['q'], parts['k'], parts['v']], 0)
    out.update(model.pe.map_checkpoint('comrope_hf_clip', rest, prefix='pe.'))
    unknown += [f'{k} (the model\'s {getattr(model, "pe_name", "?")!r} encoding takes no such tensor)'
                if k.endswith(('self_attn.freqs', 'self_attn.multiplier')) else k for k in rest]
    if unknown:
        raise ValueError(f'official ComRoPE checkpoint has keys this converter does not know: {sorted(unknown)}')
    return out


def _layer_name(idx: int, rest: str):
    """The zoo name of a backbone tensor ``rest`` of encoder layer ``idx``, or ``None`` when it is not one."""
    for old, new in _LAYER_RENAMES.items():
        if rest.startswith(old):
            return f'blocks.{idx}.{new}{rest[len(old):]}'
    return None
