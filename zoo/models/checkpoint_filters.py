"""Checkpoint filters: detect a state dict's source layout, convert it into the zoo ViT layout, check keys and shapes.

Sources (the layout is detected from the keys; the backbone's names are renamed here, and the position encoding's own
tensors are handed to the encoding's hook ``model.pe.map_checkpoint(layout, ...)``, which knows where they sit in
each layout and resamples its learned tables, see :data:`zoo.encodings.checkpoint.CHECKPOINT_LAYOUTS`):

* timm ``VisionTransformer`` (``vit_*_patch16_224``): backbone names as the zoo's.
* timm ``Eva`` RoPE models (``vit_*_patch16_rope[_mixed][_ape]_224``): ``q_bias`` / ``v_bias`` -> ``qkv.bias``;
  LayerScale ``gamma_1/2`` -> ``ls1/ls2.gamma``, or folded exactly into ``attn.proj`` / ``mlp.fc2`` when the target
  model has no LayerScale.
* official DeiT-iRPE (``blocks.N.attn.rpe_*``): DeiT's backbone names as the zoo's (``zoo.models.convert_irpe``).
* official LaPE (``blocks.N.pe_norm.*``): DeiT's backbone names as the zoo's; the per-layer PE norms and
  ``pos_embed`` mapped by the LaPE encoding (``zoo.models.convert_lape``).
* official ComRoPE, HF CLIP layout (``vision_model.*``): ``zoo.models.convert_comrope``.
* the zoo's own layout (``pe.*``) passes through (learned tables resampled to the model's grid).

Video models (``pe_video_vit_*``) use :func:`video_checkpoint_filter_fn`: the V-JEPA 2 encoder layout (its
``target_encoder`` / ``encoder`` wrappers and ``module.`` / ``backbone.`` prefixes removed) and the zoo's own video
layout; an image checkpoint is refused with a pointer to :func:`zoo.models.inflate_2d_to_3d`.
"""
from __future__ import annotations

import logging
import math
from typing import Dict, Iterable, Optional

import torch
from torch import nn

from zoo.encodings import CheckpointMismatchError, Positions
from .convert_comrope import filter_hf_clip_comrope

__all__ = ['checkpoint_filter_fn', 'video_checkpoint_filter_fn', 'unwrap_state_dict', 'check_state_dict',
           'detect_layout', 'convert_state_dict', 'CheckpointMismatchError']

_logger = logging.getLogger(__name__)

# Classifier keys: timm's load_pretrained drops them itself when num_classes differs.
_CLASSIFIER_KEYS = ('head.weight', 'head.bias')
# How a layout is named in messages (default: 'checkpoint (<layout> layout)').
_SOURCE_NAMES = {'deit_irpe': 'DeiT-iRPE checkpoint', 'deit_lape': 'official LaPE (DeiT) checkpoint'}


def unwrap_state_dict(checkpoint: Dict) -> Dict[str, torch.Tensor]:
    """Return the tensor dict inside common wrappers (``{'model': ...}``, ``{'state_dict': ...}``, ``{'module.'}``)."""
    if not isinstance(checkpoint, dict):
        raise CheckpointMismatchError(f'expected a state dict, got {type(checkpoint).__name__}')
    for key in ('model', 'state_dict', 'model_ema'):
        if key in checkpoint and isinstance(checkpoint[key], dict):
            checkpoint = checkpoint[key]
            break
    if checkpoint and all(k.startswith('module.') for k in checkpoint):
        checkpoint = {k[len('module.'):]: v for k, v in checkpoint.items()}
    return checkpoint


def _fmt(keys: Iterable[str], limit: int = 25) -> str:
    keys = sorted(keys)
    more = f' ... (+{len(keys) - limit} more)' if len(keys) > limit else ''
    return ', '.join(keys[:limit]) + more


def check_state_dict(state_dict: Dict[str, torch.Tensor], model: nn.Module, source: str = 'checkpoint',
                     ignore_classifier: bool = True) -> None:
    """Raise :class:`CheckpointMismatchError` listing missing, unexpected and mis-shaped keys.

    Args:
        state_dict: converted tensors in the model's layout.
        model: the target model.
        source: a description used in the message (layout name or path).
        ignore_classifier: skip shape checks of ``head.*`` (a different ``num_classes`` is handled by timm).
    """
    expected = model.state_dict()
    missing = set(expected) - set(state_dict)
    unexpected = set(state_dict) - set(expected)
    mismatched = [f'{k}: checkpoint {tuple(state_dict[k].shape)} vs model {tuple(expected[k].shape)}'
                  for k in set(expected) & set(state_dict)
                  if tuple(state_dict[k].shape) != tuple(expected[k].shape)
                  and not (ignore_classifier and k in _CLASSIFIER_KEYS)]
    if missing or unexpected or mismatched:
        parts = [f'{source} does not fit {type(model).__name__} (pe={getattr(model, "pe_name", "?")!r}):']
        if missing:
            parts.append(f'  missing keys ({len(missing)}): {_fmt(missing)}')
        if unexpected:
            parts.append(f'  unexpected keys ({len(unexpected)}): {_fmt(unexpected)}')
        if mismatched:
            parts.append(f'  mis-shaped keys ({len(mismatched)}): {_fmt(mismatched, 10)}')
        parts.append('  Fix: build the model that matches the checkpoint (same name, embed_dim, depth, num_heads, '
                     'patch_size and pe/pe_kwargs), or pick the checkpoint made for this model.')
        raise CheckpointMismatchError('\n'.join(parts))


def _convert_timm_eva(sd: Dict[str, torch.Tensor], model: nn.Module) -> Dict[str, torch.Tensor]:
    """timm Eva backbone names -> the zoo's (the encoding's tensors were taken out before)."""
    target = model.state_dict()
    out = {}
    for k, v in sd.items():
        if k.endswith('.attn.q_bias'):
            prefix = k[:-len('q_bias')]
            k_bias = sd.get(prefix + 'k_bias', torch.zeros_like(v))
            out[prefix + 'qkv.bias'] = torch.cat([v, k_bias, sd[prefix + 'v_bias']])
        elif k.endswith(('.attn.k_bias', '.attn.v_bias')):
            continue
        elif k.endswith(('.gamma_1', '.gamma_2')):
            continue  # handled below
        else:
            out[k] = v
    # LayerScale: keep it if the model has it, else fold it into the projection that precedes it (exact).
    for k, gamma in sd.items():
        if not k.endswith(('.gamma_1', '.gamma_2')):
            continue
        blk = k[:-len('gamma_1')]
        ls, proj = ('ls1', 'attn.proj') if k.endswith('gamma_1') else ('ls2', 'mlp.fc2')
        if blk + ls + '.gamma' in target:
            out[blk + ls + '.gamma'] = gamma
        else:
            out[blk + proj + '.weight'] = out[blk + proj + '.weight'] * gamma[:, None]
            if blk + proj + '.bias' in out:
                out[blk + proj + '.bias'] = out[blk + proj + '.bias'] * gamma
    return out


def detect_layout(state_dict: Dict[str, torch.Tensor]) -> str:
    """The source layout of an (unwrapped) image state dict, from its keys: ``'comrope_hf_clip'``, ``'deit_irpe'``,
    ``'deit_lape'``, ``'zoo'``, ``'timm_eva'`` or ``'timm_vit'``
    (:data:`zoo.encodings.checkpoint.CHECKPOINT_LAYOUTS`)."""
    keys = list(state_dict)
    if any(k.startswith('vision_model.') for k in keys):
        return 'comrope_hf_clip'
    if any('.attn.rpe_' in k or '.attn.rp_rows' in k or '.attn.rp_cols' in k for k in keys):
        return 'deit_irpe'
    if any(k.startswith('blocks.') and '.pe_norm.' in k for k in keys):
        return 'deit_lape'
    if any(k.startswith('pe.') for k in keys):
        return 'zoo'
    if 'rope.freqs' in state_dict or any(k.endswith(('.gamma_1', '.attn.q_bias')) for k in keys):
        return 'timm_eva'
    return 'timm_vit'


def convert_state_dict(state_dict: Dict[str, torch.Tensor], model: nn.Module, layout: str) -> Dict[str, torch.Tensor]:
    """An (unwrapped) state dict of ``layout`` in the zoo layout of ``model``, not yet checked: the backbone's names
    renamed here, the encoding's tensors mapped by ``model.pe.map_checkpoint(layout, ...)`` (learned 2D tables
    resampled to the model's grid).

    Raises:
        CheckpointMismatchError / ValueError: what the layout's converter or the encoding's hook raise (tensors that
            cannot fit, keys a converter does not know).
    """
    if layout == 'comrope_hf_clip':
        return filter_hf_clip_comrope(state_dict, model)
    sd = dict(state_dict)
    pe = model.pe.map_checkpoint(layout, sd, prefix='pe.')
    if layout == 'timm_eva':
        sd = _convert_timm_eva(sd, model)
    sd.update(pe)
    return sd


def checkpoint_filter_fn(state_dict: Dict, model: nn.Module, layout: Optional[str] = None) -> Dict[str, torch.Tensor]:
    """Convert any supported upstream layout to the zoo layout and verify it (timm ``pretrained_filter_fn``).

    Args:
        state_dict: a state dict or a wrapper dict holding one under ``'model'`` / ``'state_dict'``.
        model: the target :class:`~zoo.models.vit.PEVisionTransformer`.
        layout: the source layout; detected from the keys when ``None`` (:func:`detect_layout`).

    Returns:
        A state dict ready for ``model.load_state_dict(strict=True)``.

    Raises:
        CheckpointMismatchError (a ValueError): missing, unexpected or mis-shaped keys, all listed.
    """
    sd = unwrap_state_dict(state_dict)
    layout = detect_layout(sd) if layout is None else layout
    out = convert_state_dict(sd, model, layout)
    check_state_dict(out, model, source=_SOURCE_NAMES.get(layout, f'checkpoint ({layout} layout)'))
    return out


# --------------------------------------------------------------------------------------------------------- video
_VIDEO_WRAPPERS = ('target_encoder', 'encoder', 'model', 'state_dict')  # V-JEPA 2 evaluates ``target_encoder``


def _unwrap_video(checkpoint: Dict) -> Dict[str, torch.Tensor]:
    """The encoder tensors of a V-JEPA 2 / zoo checkpoint, without wrappers or ``module.`` / ``backbone.`` prefixes."""
    if not isinstance(checkpoint, dict):
        raise CheckpointMismatchError(f'expected a state dict, got {type(checkpoint).__name__}')
    for key in _VIDEO_WRAPPERS:
        if isinstance(checkpoint.get(key), dict):
            checkpoint = checkpoint[key]
            break
    for prefix in ('module.', 'backbone.'):
        if checkpoint and all(k.startswith(prefix) for k in checkpoint):
            checkpoint = {k[len(prefix):]: v for k, v in checkpoint.items()}
    return checkpoint


def _check_own_table(table: torch.Tensor, model: nn.Module) -> None:
    """A top-level ``pos_embed`` that no encoding tensor took (V-JEPA's fixed 3D sin-cos table when
    ``use_rope=False``) must equal the table the model's own encoding adds, checked on the model's default grid (a
    fixed table is rebuilt, not loaded)."""
    grid = tuple(model.patch_embed.grid_size)
    zeros = torch.zeros(1, model.num_prefix_tokens + math.prod(grid), table.shape[-1])
    with torch.no_grad():
        own = model.pe.embed(zeros, Positions(grid, model.num_prefix_tokens, model.num_class_tokens))
    own = own[:, model.num_prefix_tokens:]
    if own.shape != table.shape or not torch.allclose(own.float(), table.float(), atol=1e-4):
        err = 'shapes differ' if own.shape != table.shape else f'max |diff| {(own - table).abs().max():.3g}'
        raise CheckpointMismatchError(
            f'checkpoint pos_embed {tuple(table.shape)} is not the table of the model\'s {model.pe_name!r} encoding '
            f'on its {grid} grid ({tuple(own.shape)}; {err}); build the model with the encoding the checkpoint was '
            f'trained with (V-JEPA without RoPE: pe=\'sincos3d\'; a learned table: pe=\'ape\') and its '
            f'num_frames / img_size')
    _logger.info('checkpoint pos_embed equals the %r table the model builds itself; not loaded', model.pe_name)


def video_checkpoint_filter_fn(state_dict: Dict, model: nn.Module) -> Dict[str, torch.Tensor]:
    """Convert a video checkpoint to the zoo video ViT layout and verify it (timm ``pretrained_filter_fn``).

    Layouts:
        * V-JEPA 2 encoder (Bardes et al. / Assran et al., "V-JEPA 2", arXiv:2506.09985): ``patch_embed.proj``
          (Conv3d weight ``(C, 3, tubelet, p, p)``), ``blocks.N.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1,
          mlp.fc2}``, final ``norm``; read from ``target_encoder`` (else ``encoder``), ``module.`` / ``backbone.``
          prefixes removed. RoPE encoders go into ``pe='rope3d'`` with ``pe_kwargs=dict(pairing='vjepa2')`` (the
          released code's pairing), ``fc_norm=False`` (the final ``norm`` acts on every token); a ``pos_embed``
          (``use_rope=False``) must equal the model encoding's own table (``sincos3d``) or fit ``pe.pos_embed``.
          Encoders carry no classifier: ``head.*`` keeps the model's initialisation (logged).
        * the zoo's own video layout (``pe.*`` keys): unchanged.

    Load one with ``timm.create_model(name, pretrained=True, pretrained_cfg_overlay=dict(file=path), ...)``.

    Raises:
        CheckpointMismatchError (a ValueError): an image checkpoint (4D patch embedding: use
            :func:`zoo.models.inflate_2d_to_3d`), another layout, or missing / unexpected / mis-shaped keys (all
            listed, with the fix).
    """
    sd = dict(_unwrap_video(state_dict))
    target = model.state_dict()
    proj = sd.get('patch_embed.proj.weight')
    if proj is None:
        raise CheckpointMismatchError(
            f'checkpoint has no patch_embed.proj.weight (first keys: {_fmt(list(sd)[:8], 8)}): not a V-JEPA 2 or zoo '
            f'video encoder; convert it to the timm key names (patch_embed.proj, blocks.N.attn.qkv, norm) first')
    if proj.ndim == 4:
        raise CheckpointMismatchError(
            f'checkpoint has a 2D patch embedding {tuple(proj.shape)}: an image checkpoint, not a video one; inflate '
            f'it with zoo.models.inflate_2d_to_3d(state_dict, model) and load the result')
    if proj.ndim != 5:
        raise CheckpointMismatchError(f'patch_embed.proj.weight has shape {tuple(proj.shape)}; a video checkpoint '
                                      f'has a Conv3d weight (C, in_chans, tubelet, p, p)')
    layout = 'zoo video' if any(k.startswith('pe.') for k in sd) else 'V-JEPA 2 encoder'
    if 'pos_embed' in sd:  # a learned table goes to the encoding; a fixed one must be the encoding's own
        sd.update(model.pe.map_checkpoint('vjepa2', sd, prefix='pe.'))
        if 'pos_embed' in sd:
            _check_own_table(sd.pop('pos_embed'), model)
    missing_head = [k for k in _CLASSIFIER_KEYS if k in target and k not in sd]
    if missing_head and layout == 'V-JEPA 2 encoder':
        _logger.info('the encoder checkpoint has no classifier; %s keep their initialisation', ', '.join(missing_head))
        sd.update({k: target[k] for k in missing_head})
    try:
        check_state_dict(sd, model, source=f'checkpoint ({layout} layout)')
    except CheckpointMismatchError as e:
        hint = ''
        if 'norm.weight' in sd and 'fc_norm.weight' in target and 'norm.weight' not in target:
            hint = ('\n  Hint: the checkpoint normalises every token with its final norm (V-JEPA 2); build the model '
                    'with fc_norm=False')
        raise CheckpointMismatchError(f'{e}{hint}') from None
    return sd
