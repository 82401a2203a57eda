"""Inflate an image (2D) checkpoint into a video (3D) model of the same position encoding.

The I3D recipe ("Quo Vadis, Action Recognition?", Carreira & Zisserman, arXiv:1705.07750) as ViViT and VideoMAE
fine-tuning use it: the patch embedding is spread over the tubelet, everything shared by the two models (blocks,
norms, LayerScale, the PE's per-layer tables) is copied, and each PE's tables are extended to the time axis as that
PE defines it:

* ``ape``: the 2D table (resampled bicubically if the frame grid differs) is repeated over the ``T'`` tubelets;
* ``st_ape``: the spatial table is the 2D one, the time table starts at zero (TimeSformer's initialisation);
* ``peg``: the ``k x k`` depthwise kernel becomes the middle time slice of a ``k x k x k`` kernel (zeros elsewhere);
* parameters whose time part comes last along one axis (``rope_mixed`` frequencies, Fourier ``W_r``, ComRoPE-LD
  multipliers, LieRE generators, see each encoding's docstring): the 2D values are kept and the time part is zero;
* ``irpe`` (``product`` buckets): the image buckets are the ``dt = 0`` slice of the video's ``(dt, dr, dc)`` buckets;
  every ``dt`` slice starts as the image table (time-agnostic at first), the class bucket is kept when both have one;
* ComRoPE-AP keeps its generators (same shape), but its blocks cycle over (row, col, t) instead of (row, col), so a
  third of them change axis: an approximate start, not an exact one;
* fixed tables (``sincos`` / ``sincos1d`` / ``sincos3d``, ``rope3d``) and ``nope`` have nothing to inflate.

Inflated this way, a model with a zero time part (all but ComRoPE-AP and the fixed tables) and
``patch_embed='average'`` maps a static clip (one image repeated) to exactly the image model's output when both have
no prefix tokens and pool by mean: every frame gets the image tokens, and attention over ``T'`` identical copies of the
keys gives the image attention (a class token would see its own key once but each patch key ``T'`` times).
"""
from __future__ import annotations

import logging
from typing import Dict, Optional, Sequence, Tuple

import torch
from torch import nn
from timm.layers import resample_abs_pos_embed, resample_patch_embed

from .checkpoint_filters import (CheckpointMismatchError, _convert_timm_eva, _convert_timm_vit, _detect_layout,
                                 check_state_dict, unwrap_state_dict)

__all__ = ['inflate_2d_to_3d']

_logger = logging.getLogger(__name__)


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


def _spatial_table(table: torch.Tensor, src_grid: Tuple[int, int], dst_grid: Tuple[int, int]) -> torch.Tensor:
    """Patch rows ``(1, H*W, C)`` resampled to ``dst_grid`` (bicubic, timm)."""
    if tuple(src_grid) == tuple(dst_grid):
        return table
    return resample_abs_pos_embed(table, new_size=list(dst_grid), old_size=list(src_grid), num_prefix_tokens=0)


def _src_prefix(key: str, table: torch.Tensor, src_grid: Tuple[int, int]) -> int:
    extra = table.shape[1] - src_grid[0] * src_grid[1]
    if extra < 0 or extra > 16:
        raise CheckpointMismatchError(
            f'{key} {tuple(table.shape)} does not hold a {src_grid[0]}x{src_grid[1]} patch table; pass '
            f'image_grid=(H, W), the patch grid the image model was trained on')
    return extra


def _extend_last(src: torch.Tensor, target: torch.Tensor) -> Optional[torch.Tensor]:
    """``src`` zero-padded along the single axis where it is shorter than ``target`` (time parameters come last), or
    ``None`` when the shapes differ otherwise."""
    if src.ndim != target.ndim:
        return None
    diff = [d for d in range(src.ndim) if src.shape[d] != target.shape[d]]
    if len(diff) != 1 or src.shape[diff[0]] > target.shape[diff[0]]:
        return None
    out = torch.zeros_like(target)
    out.narrow(diff[0], 0, src.shape[diff[0]]).copy_(src)
    return out


def _inflate_irpe(key: str, src: torch.Tensor, target: torch.Tensor, model: nn.Module) -> Optional[torch.Tensor]:
    """An iRPE ``product`` lookup table with ``k^2`` (+ class) buckets -> ``k^3`` (+ class): the image table in every
    ``dt`` slice (time the most significant digit of the bucket id). ``None`` for other keys or methods."""
    pe = getattr(model, 'pe', None)
    if 'lookup_table' not in key or getattr(pe, 'method', None) != 'product' or src.ndim != target.ndim:
        return None
    diff = [d for d in range(src.ndim) if src.shape[d] != target.shape[d]]
    if len(diff) != 1:
        return None
    ax = diff[0]
    from zoo.encodings.irpe import irpe_coefficients
    k = 2 * int(irpe_coefficients(pe.ratio)[1]) + 1
    src_skip, dst_skip = src.shape[ax] - k * k, target.shape[ax] - k ** 3
    if src_skip not in (0, 1) or dst_skip not in (0, 1):
        return None
    out = torch.zeros_like(target)
    plane = src.narrow(ax, 0, k * k)
    for dt in range(k):
        out.narrow(ax, dt * k * k, k * k).copy_(plane)
    if src_skip and dst_skip:
        out.narrow(ax, k ** 3, 1).copy_(src.narrow(ax, k * k, 1))
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
    layout = _detect_layout(sd)
    if layout == 'timm_vit':
        sd = _convert_timm_vit(sd, video_model)
    elif layout == 'timm_eva':
        sd = _convert_timm_eva(sd, video_model)
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
    t_grid, h_grid, w_grid = video_model.patch_embed.grid_size
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
        elif tuple(v.shape) == tuple(tv.shape) and not k.endswith('pos_embed'):
            out[k] = v
        elif k.endswith('pos_embed'):
            per_frame = k[:-len('pos_embed')] + 'time_embed' in target
            out[k] = _inflate_table(k, v, tv, src_grid, (t_grid, h_grid, w_grid), per_frame)
        elif v.ndim == 4 and tv.ndim == 5 and tv.shape[2] == tv.shape[3] == tv.shape[4] and \
                tuple(v.shape) == (tv.shape[0], tv.shape[1], tv.shape[3], tv.shape[4]):
            t = tv.shape[2]  # a k x k conv (PEG) -> the middle time slice of k x k x k
            w3 = torch.zeros_like(tv)
            w3[:, :, t // 2] = v
            out[k] = w3
        elif k in ('head.weight', 'head.bias'):
            _logger.info('inflate: %s %s vs %s: the classifier keeps the video model\'s initialisation', k,
                         tuple(v.shape), tuple(tv.shape))
            out[k] = tv
        else:
            ext = _inflate_irpe(k, v, tv, video_model)
            ext = _extend_last(v, tv) if ext is None else ext
            if ext is None:
                raise CheckpointMismatchError(
                    f'inflate_2d_to_3d: {k} has shape {tuple(v.shape)} in the image checkpoint and {tuple(tv.shape)} '
                    f'in the video model ({getattr(video_model, "pe_name", "?")!r}); they are not related by '
                    f'appending a time part. Build the video model with the image model\'s encoding, width and depth')
            out[k] = ext
    for k, tv in target.items():
        if k not in out and k.endswith('time_embed'):
            out[k] = torch.zeros_like(tv)  # TimeSformer initialises its time table at zero
        elif k in ('head.weight', 'head.bias') and k not in out:
            out[k] = tv
    if skipped:
        extra = [k for k in skipped if not k.startswith('head.')]
        if extra:
            raise CheckpointMismatchError(f'inflate_2d_to_3d: image keys with no place in the video model '
                                          f'({len(extra)}): {", ".join(sorted(extra)[:20])}; build the video model '
                                          f'with the image model\'s encoding, width and depth')
    check_state_dict(out, video_model, source='inflated image checkpoint')
    return out


def _inflate_table(key: str, table: torch.Tensor, target: torch.Tensor, src_grid: Tuple[int, int],
                   grid: Tuple[int, int, int], per_frame: bool) -> torch.Tensor:
    """A learned 2D position table ``(1, P + H*W, C)`` for the video table ``target``: the per-frame table of a
    space + time embedding (``per_frame``, ``st_ape``), else repeated over the ``T'`` tubelets of one
    ``(1, [P +] T'*H'*W', C)`` table. The video table keeps the first of the image's prefix rows it has room for."""
    t, h, w = grid
    src_p = _src_prefix(key, table, src_grid)
    patches = _spatial_table(table[:, src_p:], src_grid, (h, w))
    dst_p = target.shape[1] - (h * w if per_frame else t * h * w)
    if not 0 <= dst_p <= src_p:
        raise CheckpointMismatchError(f'inflate_2d_to_3d: {key} {tuple(table.shape)} ({src_p} prefix rows) cannot '
                                      f'fill the video table {tuple(target.shape)} (grid {grid})')
    out = torch.cat([table[:, :dst_p], patches if per_frame else patches.repeat(1, t, 1)], dim=1)
    return out.to(target.dtype)
