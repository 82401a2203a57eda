"""Inflate an image (2D) checkpoint into a video (3D) model of the same position encoding.

The I3D recipe ("Quo Vadis, Action Recognition?", Carreira & Zisserman, arXiv:1705.07750) as ViViT and VideoMAE
fine-tuning use it: the patch embedding is spread over the tubelet, everything shared by the two models (blocks,
norms, LayerScale) is copied, and each parameter of the position encoding is extended to the time axis as that
encoding defines it. This module knows no encoding: it hands every ``pe.*`` tensor to the video model's encoding
(:meth:`zoo.encodings.PosEncoding.inflate_param`; the rules of each encoding are listed in
``docs/video_encodings.md``, "Inflating an image checkpoint").

Inflated this way, a model whose encoding starts with a zero time part (all but ComRoPE-AP and the fixed tables) and
``patch_embed='average'`` maps a static clip (one image repeated) to exactly the image model's output when both have
no prefix tokens and pool by mean: every frame gets the image tokens, and attention over ``T'`` identical copies of the
keys gives the image attention (a class token would see its own key once but each patch key ``T'`` times).
"""
from __future__ import annotations

import logging
from typing import Dict, Optional, Sequence

import torch
from torch import nn
from timm.layers import resample_patch_embed

from .checkpoint_filters import (CheckpointMismatchError, check_state_dict, convert_state_dict, detect_layout,
                                 unwrap_state_dict)

__all__ = ['inflate_2d_to_3d']

_logger = logging.getLogger(__name__)
_PE = 'pe.'  # the video model's position encoding: its parameters are inflated by the encoding itself


def _inflate_patch_embed(w: torch.Tensor, target: torch.Tensor, mode: str) -> torch.Tensor:
    """``(C, I, p, p)`` -> ``(C, I, t, p', p')``: ``average`` spreads ``w / t`` over the tubelet (a static clip gives
    the image embedding), ``center`` puts ``w`` in the middle frame ``t // 2`` and zeros elsewhere."""
    c, i, t, ph, pw = target.shape
    if tuple(w.shape[-2:]) != (ph, pw):
        w = resample_patch_embed(w, [ph, pw], verbose=False)
    if mode == 'average':
        return (w / t).unsqueeze(2).expand(-1, -1, t, -1, -1).contiguous().to(target.dtype)
    out = torch.zeros_like(target)
    out[:, :, t // 2] = w
    return out


def inflate_2d_to_3d(image_state_dict: Dict, video_model: nn.Module, patch_embed: str = 'average',
                     image_grid: Optional[Sequence[int]] = None) -> Dict[str, torch.Tensor]:
    """A state dict for ``video_model`` made from an image checkpoint of the same encoding (see the module docstring).

    Args:
        image_state_dict: a zoo image model's state dict (``pe_vit_*``; wrappers such as ``{'model': ...}`` are
            removed) or a timm ViT / Eva one.
        video_model: the target :class:`~zoo.models.video_vit.PEVideoTransformer`.
        patch_embed: ``'average'`` (weights / tubelet on every frame: a static clip embeds as the image) or
            ``'center'`` (weights on the middle frame of the tubelet, zeros elsewhere).
        image_grid: the image model's patch grid ``(H, W)`` (sizes its learned tables); default: the video model's
            frame grid.

    Returns:
        A state dict for ``video_model.load_state_dict(..., strict=True)``. Class / register tokens the video model
        lacks are dropped; an image ``norm`` goes to the video ``fc_norm`` when the video model pools first; a
        classifier of another size keeps the video model's initialisation (each logged).

    Raises:
        ValueError: an unknown ``patch_embed`` mode.
        CheckpointMismatchError: a checkpoint that is not an image one, of another encoding, width or depth (every
            key that could not be placed is listed).
    """
    if patch_embed not in ('average', 'center'):
        raise ValueError(f"patch_embed must be 'average' or 'center', got {patch_embed!r}")
    sd = unwrap_state_dict(image_state_dict)
    layout = detect_layout(sd)
    if layout in ('timm_vit', 'timm_eva'):
        sd = convert_state_dict(sd, video_model, layout)
    elif layout != 'zoo':
        raise CheckpointMismatchError(f'{layout} checkpoints are converted for image models: load it into the '
                                      f'matching pe_vit_* model first, then inflate that model\'s state_dict()')
    proj = sd.get('patch_embed.proj.weight')
    if proj is None or proj.ndim != 4:
        what = 'no patch_embed.proj.weight' if proj is None else f'a {proj.ndim}D patch embedding'
        raise CheckpointMismatchError(f'inflate_2d_to_3d needs an image checkpoint (4D patch_embed.proj.weight); this '
                                      f'one has {what}. A video checkpoint loads with pretrained_cfg_overlay='
                                      f'dict(file=...) or video_checkpoint_filter_fn')
    target = video_model.state_dict()
    pe = video_model.pe
    _, h_grid, w_grid = video_model.patch_embed.grid_size
    src_grid = tuple(int(v) for v in (image_grid or (h_grid, w_grid)))
    out: Dict[str, torch.Tensor] = {}
    skipped = []
    for k, v in sd.items():
        if k not in target:
            if k in ('cls_token', 'reg_token'):
                _logger.info('inflate: %s dropped (the video model has no such token)', k)
                continue
            if k.startswith('norm.') and 'fc_' + k in target and k not in target:
                _logger.info('inflate: image %s -> video fc_%s (the video model pools before its final norm)', k, k)
                out['fc_' + k] = v
                continue
            skipped.append(k)
            continue
        tv = target[k]
        if k == 'patch_embed.proj.weight':
            out[k] = _inflate_patch_embed(v, tv, patch_embed)
            continue
        if k.startswith(_PE):
            ext = pe.inflate_param(k[len(_PE):], v, tv, src_grid, _PE)
        elif tuple(v.shape) == tuple(tv.shape):
            ext = v
        elif k in ('head.weight', 'head.bias'):
            _logger.info('inflate: %s %s vs %s: the classifier keeps the video model\'s initialisation', k,
                         tuple(v.shape), tuple(tv.shape))
            ext = tv
        else:
            ext = None
        if ext is None:
            raise CheckpointMismatchError(
                f'inflate_2d_to_3d: {k} has shape {tuple(v.shape)} in the image checkpoint and {tuple(tv.shape)} '
                f'in the video model ({getattr(video_model, "pe_name", "?")!r}); they are not related by '
                f'appending a time part. Build the video model with the image model\'s encoding, width and depth')
        out[k] = ext
    for k, tv in target.items():
        if k in out:
            continue
        if k.startswith(_PE):  # a video parameter the image has none of (TimeSformer's time table: zeros)
            ext = pe.inflate_param(k[len(_PE):], None, tv, src_grid, _PE)
            if ext is not None:
                out[k] = ext
        elif k in ('head.weight', 'head.bias'):
            out[k] = tv
    if skipped:
        extra = [k for k in skipped if not k.startswith('head.')]
        if extra:
            raise CheckpointMismatchError(f'inflate_2d_to_3d: image keys with no place in the video model '
                                          f'({len(extra)}): {", ".join(sorted(extra)[:20])}; build the video model '
                                          f'with the image model\'s encoding, width and depth')
    check_state_dict(out, video_model, source='inflated image checkpoint')
    return out
