"""Multimodal rotary position schemes for video-LLMs: M-RoPE, MRoPE-Interleave, VRoPE, V2PE and flat RoPE.

Every scheme is one function of the same inputs (Qwen2-VL ``get_rope_index`` conventions) and returns
``(position_ids, rope_deltas)``; the rotary frequencies are then shared among the position axes by a per-scheme
pair-to-axis allocation and applied by :func:`apply_multimodal_rope`. Pure torch, no ``transformers`` dependency.

Schemes (names accepted by :func:`get_position_ids`):

* ``rope1d``: vanilla 1-D RoPE (Su et al., RoFormer, arXiv:2104.09864). One axis, every token advances by 1.
* ``mrope`` (alias ``qwen2_vl``): M-RoPE of Qwen2-VL (Wang et al., arXiv:2409.12191, Sec. 2.1). Three axes
  ``(t, h, w)``; text gets the same index on all three, a visual block starting at ``s`` puts frame ``f``, row ``r``,
  column ``c`` at ``(s + tau(f), s + r, s + c)`` with ``tau(f) = f``. Frequencies are split in contiguous chunks
  ``mrope_section = [16, 24, 24]`` (pairs, head_dim 128).
* ``mrope`` with ``tokens_per_second`` (alias ``qwen2_5_vl``, which defaults ``tokens_per_second=2``): Qwen2.5-VL
  absolute-time M-RoPE (Bai et al., arXiv:2502.13923, Sec. 2.1.3): ``tau(f) = floor(f * second_per_grid_t *
  tokens_per_second)``, evaluated in float64 before the single cast to an integer (the transformers 4.x releases cast
  ``second_per_grid_t`` to int first, which collapses every frame to ``tau = 0`` when it is below 1; not reproduced).
* ``mrope_interleave`` (aliases ``mrope_i``, ``qwen3_vl``): MRoPE-Interleave of Qwen3-VL (Qwen3-VL report; "Revisiting
  Multimodal Positional Encoding in Vision-Language Models", Huang et al., arXiv:2510.23095, code
  JJJYmmm/Multimodal-RoPEs). Same positions as M-RoPE, but a video grid ``[T, h, w]`` is split into ``T`` frames of
  ``t = 1`` (Qwen3-VL puts timestamp text before every frame), the frequency pairs are interleaved t, h, w, t, h, w,
  ... (``mrope_section = [24, 20, 20]``), ``temporal_stride`` multiplies ``tau`` and ``spatial_reset`` makes the h/w
  indices of a visual block local (starting at 0).
* ``vrope``: VRoPE (Liu et al., arXiv:2502.11664, code johncaged/VRoPE). Four coordinates; frame ``f`` of an
  ``H x W`` block starting at ``s`` puts row ``i``, column ``j`` at ``base + (i + j, i + W-1-j, H-1-i + j,
  H-1-i + W-1-j)`` with ``base = s + f (H + W - 1)``; the block uses ``T (H + W - 1)`` indices and text continues with
  no gap. Rotary pair ``k`` uses coordinate ``k % 4``. (The paper's separate temporal-centre channels are disabled
  in the official code, which forces their share to 0; followed here. ``second_per_grid_t`` is not used.)
* ``v2pe``: V2PE (Ge et al., arXiv:2412.09616, code OpenGVLab/V2PE ``v2pe_fix``). One float position; text advances
  by 1, visual token ``k = 1..n`` of a block gets ``p + k * delta`` where ``p`` is the position of the token before
  the block and ``delta = stride / 256``; the next token is at ``ceil(p + n * delta) + 1``.

Conventions fixed by this module (the official releases disagree, see ``docs/multimodal_rope.md``):

* Marker tokens (``<|vision_start|>``, ``<|vision_end|>``, ``<img>``, timestamps, ...) are ordinary text tokens.
* After a visual block, the next token starts at ``1 +`` the largest index used so far on any axis (the original
  Qwen code and transformers 4.57.1; transformers 5.x continues at ``s + max(h, w)`` and lets text overlap the last
  frames' temporal ids, which is not followed). For every scheme this equals ``s + extent(block)``.
* Padded slots (``attention_mask == 0``) hold :data:`PAD_POSITION_ID` ``= 1`` on every axis (transformers 4.57.1,
  Multimodal-RoPEs and V2PE use 1).
* ``rope_deltas[b] = next_position[b] - L`` where ``next_position`` is the position the scheme assigns to the first
  token after the row's last real token and ``L = input_ids.shape[1]`` is the PADDED row length (transformers 4.57.1
  and Multimodal-RoPEs definition). A token at cache position ``k`` (its index in the padded sequence) is decoded at
  ``k + rope_deltas[b]`` on every axis: see :func:`decode_position_ids`. The value is recomputed on every call; there
  is no cached state to go stale between ``generate`` calls.
* Positions are computed from real tokens only, so left padding never changes a real token's ids. A packed row is
  marked by document numbers in ``attention_mask`` (``[1, 1, 2, 2, 2, 0]``: two documents then one pad); every
  document restarts at position 0.
"""
from __future__ import annotations

import argparse
import math
import random
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

__all__ = [
    'PAD_POSITION_ID', 'QWEN_TOKEN_IDS', 'V2PE_STRIDES', 'list_schemes', 'scheme_num_axes', 'scheme_axis_names',
    'get_position_ids', 'get_layout_position_ids', 'layout_to_inputs', 'axis_of_pair', 'default_mrope_section',
    'multimodal_rope_cos_sin', 'apply_multimodal_rope', 'decode_position_ids', 'sample_v2pe_stride',
    'demo_table',
]

#: Value written into padded slots (``attention_mask == 0``) of ``position_ids`` for every scheme.
PAD_POSITION_ID = 1

#: Special token ids of the Qwen2-VL / Qwen2.5-VL / Qwen3-VL tokenizers (used as defaults).
QWEN_TOKEN_IDS = {'vision_start': 151652, 'vision_end': 151653, 'image': 151655, 'video': 151656, 'pad': 151643}

#: V2PE training-time strides (delta = stride / 256), Ge et al., Sec. 3.2.
V2PE_STRIDES = (1, 2, 4, 8, 16, 32, 64, 128, 256)

_TEXT, _IMAGE, _VIDEO = 0, 1, 2
_MODALITY_NAME = {_IMAGE: 'image', _VIDEO: 'video'}


# ---------------------------------------------------------------------------------------------------------------
# Scheme registry
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Scheme:
    name: str
    kind: str                      # rope1d | mrope | mrope_interleave | vrope | v2pe
    axis_names: Tuple[str, ...]
    defaults: Mapping[str, Any]
    float_positions: bool = False


_SCHEMES: Dict[str, _Scheme] = {}


def _add(name: str, kind: str, axes: Tuple[str, ...], defaults: Mapping[str, Any], float_positions: bool = False):
    _SCHEMES[name] = _Scheme(name, kind, axes, dict(defaults), float_positions)


_add('rope1d', 'rope1d', ('pos',), {})
_add('mrope', 'mrope', ('t', 'h', 'w'), {'tokens_per_second': None})
_add('qwen2_vl', 'mrope', ('t', 'h', 'w'), {'tokens_per_second': None})
_add('qwen2_5_vl', 'mrope', ('t', 'h', 'w'), {'tokens_per_second': 2})
_MROPE_I_DEFAULTS = {'spatial_reset': False, 'temporal_stride': 1, 'split_video_frames': True}
for _n in ('mrope_interleave', 'mrope_i', 'qwen3_vl'):
    _add(_n, 'mrope_interleave', ('t', 'h', 'w'), _MROPE_I_DEFAULTS)
_add('vrope', 'vrope', ('p1', 'p2', 'p3', 'p4'), {})
_add('v2pe', 'v2pe', ('pos',), {'stride': 64, 'delta': None, 'num_image_token': 256}, float_positions=True)


def list_schemes() -> List[str]:
    """Names accepted by :func:`get_position_ids`, :func:`axis_of_pair` and :func:`apply_multimodal_rope`."""
    return sorted(_SCHEMES)


def _scheme(name: str) -> _Scheme:
    if not isinstance(name, str) or name not in _SCHEMES:
        raise ValueError(f'unknown multimodal RoPE scheme {name!r}; fix: use one of {list_schemes()}')
    return _SCHEMES[name]


def scheme_num_axes(scheme: str) -> int:
    """Number ``A`` of position axes (first dim of ``position_ids``): 1, 3 or 4. Raises ValueError if unknown."""
    return len(_scheme(scheme).axis_names)


def scheme_axis_names(scheme: str) -> Tuple[str, ...]:
    """Axis names of ``position_ids`` for ``scheme``: ``('t','h','w')``, ``('p1'..'p4')`` or ``('pos',)``."""
    return _scheme(scheme).axis_names


def _options(spec: _Scheme, kwargs: Mapping[str, Any]) -> Dict[str, Any]:
    unknown = sorted(set(kwargs) - set(spec.defaults))
    if unknown:
        allowed = sorted(spec.defaults) or 'none'
        raise ValueError(f'scheme {spec.name!r} got unknown option(s) {unknown}; fix: its options are {allowed}')
    opts = dict(spec.defaults)
    opts.update(kwargs)
    if spec.kind == 'mrope' and opts['tokens_per_second'] is not None:
        tps = float(opts['tokens_per_second'])
        if not (tps > 0 and math.isfinite(tps)):
            raise ValueError(f'tokens_per_second must be a positive number, got {opts["tokens_per_second"]!r}; '
                             'fix: released Qwen2.5-VL checkpoints use 2')
    if spec.kind == 'mrope_interleave':
        ts = opts['temporal_stride']
        if isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
            raise ValueError(f'temporal_stride must be a non-negative int, got {ts!r}; fix: Qwen3-VL uses 1')
    if spec.kind == 'v2pe':
        opts['delta'] = _v2pe_delta(opts['stride'], opts['delta'], opts['num_image_token'])
    return opts


def _v2pe_delta(stride, delta, num_image_token) -> Fraction:
    """V2PE increment delta as an exact fraction (so that ``ceil(n * delta)`` has no rounding error)."""
    if delta is not None:
        d = Fraction(delta).limit_denominator(1 << 20) if not isinstance(delta, Fraction) else delta
    else:
        if isinstance(num_image_token, bool) or not isinstance(num_image_token, int) or num_image_token <= 0:
            raise ValueError(f'num_image_token must be a positive int, got {num_image_token!r}; fix: InternVL uses 256')
        d = Fraction(stride).limit_denominator(1 << 20) / num_image_token
    if not d > 0:
        raise ValueError(f'V2PE delta must be positive, got stride={stride!r}, delta={delta!r}; '
                         f'fix: pass stride in {V2PE_STRIDES} (delta = stride / 256)')
    return d


def sample_v2pe_stride(generator: Optional[random.Random] = None, strides: Sequence[int] = V2PE_STRIDES) -> int:
    """Draw a V2PE training stride uniformly from ``strides`` (default ``{1, 2, 4, ..., 256}``).

    V2PE trains with a visual increment ``delta = stride / 256`` drawn per sample (Ge et al., Sec. 3.2) so that the
    model sees many increments; at inference one fixed stride is used. Pass the result as ``stride=`` to
    :func:`get_position_ids`.

    Args:
        generator: a ``random.Random`` for reproducibility; the module-level RNG when ``None``.
        strides: candidate strides (positive ints).

    Returns:
        int: the drawn stride.

    Raises:
        ValueError: ``strides`` is empty or holds a non-positive value.
    """
    strides = list(strides)
    if not strides or any(int(s) <= 0 for s in strides):
        raise ValueError(f'strides must be a non-empty list of positive ints, got {strides}; fix: use V2PE_STRIDES')
    rng = generator if generator is not None else random
    return int(rng.choice(strides))


# ---------------------------------------------------------------------------------------------------------------
# Blocks and per-scheme position rules
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Block:
    """A run of tokens: text (``n`` tokens) or one visual grid (``t*h*w`` tokens, merged LLM-side grid)."""
    modality: int
    n: int
    t: int = 1
    h: int = 1
    w: int = 1
    second_per_grid_t: Optional[float] = None


def _check_second_per_grid_t(value, where: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f'second_per_grid_t of {where} must be a number, got {value!r}') from None
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f'second_per_grid_t of {where} must be positive and finite (seconds per temporal patch = '
                         f'temporal_patch_size / fps), got {value!r}; fix: e.g. 2 / 2.0 = 1.0 for 2 fps sampling')
    return v


def _frame_row_col(b: _Block) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    hw = b.h * b.w
    f = torch.arange(b.t, dtype=torch.int64).repeat_interleave(hw)
    r = torch.arange(b.h, dtype=torch.int64).repeat_interleave(b.w).repeat(b.t)
    c = torch.arange(b.w, dtype=torch.int64).repeat(b.t * b.h)
    return f, r, c


def _visual(spec: _Scheme, opts: Mapping[str, Any], s: int, b: _Block) -> Tuple[torch.Tensor, int]:
    """Positions ``(A, n)`` (int64, float64 for V2PE) of visual block ``b`` starting at free position ``s``, and the
    number of positions it uses (the next token starts at ``s + extent``)."""
    kind = spec.kind
    if kind == 'rope1d':
        return (s + torch.arange(b.n, dtype=torch.int64)).unsqueeze(0), b.n
    if kind == 'v2pe':
        delta: Fraction = opts['delta']
        p = s - 1  # position of the token before the block (-1 at the start of a document)
        k = torch.arange(1, b.n + 1, dtype=torch.float64)
        pos = p + k * float(delta)
        extent = -((-b.n * delta.numerator) // delta.denominator)  # ceil(n * delta), exact
        return pos.unsqueeze(0), extent
    f, r, c = _frame_row_col(b)
    if kind == 'vrope':
        span = b.h + b.w - 1
        base = s + f * span
        rr, cc = b.h - 1 - r, b.w - 1 - c
        pos = torch.stack([base + r + c, base + r + cc, base + rr + c, base + rr + cc])
        return pos, b.t * span
    # t/h/w schemes
    if kind == 'mrope':
        tps = opts['tokens_per_second']
        if b.modality == _VIDEO and tps is not None:
            sec = 1.0 if b.second_per_grid_t is None else b.second_per_grid_t
            # float arithmetic first, one cast at the end: tau = floor(f * second_per_grid_t * tokens_per_second)
            tau = (torch.arange(b.t, dtype=torch.float64) * float(sec) * float(tps)).floor().to(torch.int64)
        else:
            tau = torch.arange(b.t, dtype=torch.int64)
        local_t = tau.repeat_interleave(b.h * b.w)
        extent = max(int(tau[-1]), b.h - 1, b.w - 1) + 1
        return torch.stack([s + local_t, s + r, s + c]), extent
    # mrope_interleave
    local_t = f * int(opts['temporal_stride'])
    extent = max((b.t - 1) * int(opts['temporal_stride']), b.h - 1, b.w - 1) + 1
    if opts['spatial_reset']:
        return torch.stack([s + local_t, r, c]), extent
    return torch.stack([s + local_t, s + r, s + c]), extent


def _assemble(spec: _Scheme, opts: Mapping[str, Any], blocks: Sequence[_Block]) -> Tuple[torch.Tensor, int]:
    """Positions ``(A, sum n)`` of one document (starting at 0) and its next free position."""
    a = len(spec.axis_names)
    n_total = sum(b.n for b in blocks)
    dtype = torch.float64 if spec.float_positions else torch.int64
    out = torch.empty(a, n_total, dtype=dtype)
    s, i = 0, 0
    for b in blocks:
        if b.n == 0:
            continue
        if b.modality == _TEXT:
            out[:, i:i + b.n] = (s + torch.arange(b.n, dtype=torch.int64)).to(dtype)
            s += b.n
        else:
            pos, extent = _visual(spec, opts, s, b)
            out[:, i:i + b.n] = pos.to(dtype)
            s += extent
        i += b.n
    return out, s


# ---------------------------------------------------------------------------------------------------------------
# Token ids -> blocks
# ---------------------------------------------------------------------------------------------------------------

def _grid_queue(grid_thw, modality: int, spatial_merge_size: int, split_frames: bool,
                second_per_grid_ts: Optional[List[float]]) -> List[_Block]:
    if grid_thw is None:
        return []
    g = torch.as_tensor(grid_thw)
    if g.numel() == 0:
        return []
    name = _MODALITY_NAME[modality]
    if g.dim() != 2 or g.shape[1] != 3:
        raise ValueError(f'{name}_grid_thw must have shape (num_{name}s, 3) holding pre-merge [t, h, w], '
                         f'got shape {tuple(g.shape)}')
    if torch.is_floating_point(g) and not torch.equal(g, g.round()):
        raise ValueError(f'{name}_grid_thw must hold integers, got {g.tolist()}')
    rows = g.to(torch.int64).tolist()
    if second_per_grid_ts is not None and len(second_per_grid_ts) != len(rows):
        raise ValueError(f'second_per_grid_ts has {len(second_per_grid_ts)} entries but video_grid_thw has '
                         f'{len(rows)} videos; fix: pass one value per video, in batch order')
    out = []
    m = spatial_merge_size
    for idx, (t, h, w) in enumerate(rows):
        if t <= 0 or h <= 0 or w <= 0 or h % m or w % m:
            raise ValueError(f'{name}_grid_thw[{idx}] = {[t, h, w]} is not a positive pre-merge grid divisible by '
                             f'spatial_merge_size={m}; fix: pass [t, h*{m}, w*{m}] as the processor returns it '
                             '(t is the number of temporal patches and is not divided)')
        hh, ww = h // m, w // m
        sec = None if second_per_grid_ts is None else second_per_grid_ts[idx]
        if split_frames and modality == _VIDEO:
            out.extend(_Block(modality, hh * ww, 1, hh, ww, sec) for _ in range(t))
        else:
            out.append(_Block(modality, t * hh * ww, t, hh, ww, sec))
    return out


def _runs(mod: torch.Tensor) -> List[Tuple[int, int, int]]:
    """Maximal runs ``(modality, start, end)`` of a 1-D modality tensor."""
    n = mod.numel()
    if n == 0:
        return []
    change = (mod[1:] != mod[:-1]).nonzero().flatten() + 1
    starts = [0] + change.tolist()
    ends = change.tolist() + [n]
    vals = mod[starts].tolist()
    return list(zip(vals, starts, ends))


def _doc_blocks(mod: torch.Tensor, queues: Dict[int, List[_Block]], cursor: Dict[int, int],
                use_grids: Dict[int, bool], where: str) -> List[_Block]:
    blocks: List[_Block] = []
    for m, a, e in _runs(mod):
        n = e - a
        if m == _TEXT:
            blocks.append(_Block(_TEXT, n))
            continue
        if not use_grids[m]:  # V2PE without grids: each maximal run of visual tokens is one block
            blocks.append(_Block(m, n, 1, 1, n))
            continue
        name = _MODALITY_NAME[m]
        q = queues[m]
        while n > 0:
            if cursor[m] >= len(q):
                raise ValueError(f'{where}: input_ids hold more {name} tokens than {name}_grid_thw describes '
                                 f'({sum(b.n for b in q)} tokens after the {name} grids are merged); fix: pass one '
                                 f'{name}_grid_thw row per {name} in batch order, check {name}_token_id and '
                                 'spatial_merge_size')
            b = q[cursor[m]]
            if b.n > n:
                raise ValueError(f'{where}: {name} grid #{cursor[m]} (merged t*h*w = {b.t}*{b.h}*{b.w} = {b.n} tokens) '
                                 f'does not fit the run of {n} consecutive {name} tokens found at token {a}; fix: '
                                 f'make {name}_grid_thw match the number of {name} tokens in input_ids')
            blocks.append(b)
            cursor[m] += 1
            n -= b.n
            a += b.n
    return blocks


def _as_float_list(second_per_grid_ts) -> Optional[List[float]]:
    if second_per_grid_ts is None:
        return None
    vals = torch.as_tensor(second_per_grid_ts, dtype=torch.float64).flatten().tolist() \
        if not isinstance(second_per_grid_ts, (list, tuple)) else list(second_per_grid_ts)
    return [_check_second_per_grid_t(v, f'video #{i}') for i, v in enumerate(vals)]


def get_position_ids(
    scheme: str,
    input_ids: torch.Tensor,
    image_grid_thw: Optional[torch.Tensor] = None,
    video_grid_thw: Optional[torch.Tensor] = None,
    attention_mask: Optional[torch.Tensor] = None,
    second_per_grid_ts: Optional[Union[torch.Tensor, Sequence[float]]] = None,
    spatial_merge_size: int = 2,
    image_token_id: int = QWEN_TOKEN_IDS['image'],
    video_token_id: int = QWEN_TOKEN_IDS['video'],
    vision_start_token_id: int = QWEN_TOKEN_IDS['vision_start'],
    mm_token_type_ids: Optional[torch.Tensor] = None,
    cu_seqlens: Optional[torch.Tensor] = None,
    **scheme_kwargs: Any,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Position ids of a token batch under a multimodal RoPE scheme (drop-in for Qwen2-VL ``get_rope_index``).

    Visual tokens are the tokens equal to ``image_token_id`` / ``video_token_id`` (or those marked 1 / 2 in
    ``mm_token_type_ids`` when given). Each image (video) grid, in batch order, claims the next ``t*h*w /
    spatial_merge_size**2`` tokens of its modality; a grid must lie inside one run of consecutive visual tokens.
    Every other token (markers included) is text. For ``mrope_interleave`` (Qwen3-VL) a video grid ``[T, H, W]`` is
    given un-split and is split here into ``T`` frame grids ``[1, H, W]`` (each frame block is preceded by its
    timestamp text in a Qwen3-VL prompt). ``v2pe`` needs no grids: without them each maximal run of visual tokens
    is one block (InternVL: pass ``image_token_id=<IMG_CONTEXT> id``).

    Args:
        scheme: one of :func:`list_schemes`.
        input_ids: ``(B, L)`` integer token ids.
        image_grid_thw: ``(num_images, 3)`` integer PRE-merge grids ``[t, h, w]`` in patches (the processor's
            output: ``h`` and ``w`` are ``spatial_merge_size`` times the LLM-side grid), in batch order.
        video_grid_thw: ``(num_videos, 3)`` the same for videos; ``t`` is the number of temporal patches.
        attention_mask: ``(B, L)``; 0 marks padding. Values > 1 mark packed documents: every maximal run of equal
            non-zero values is one document that restarts at position 0. ``None`` means all ones.
        second_per_grid_ts: ``(num_videos,)`` seconds covered by one temporal patch (``temporal_patch_size / fps``);
            used by ``mrope`` with ``tokens_per_second`` (Qwen2.5-VL), defaulting to 1.0 per video when omitted.
            Must be positive.
        spatial_merge_size: the vision merger's spatial factor (2 for the Qwen family).
        image_token_id, video_token_id: ids of the visual placeholder tokens (Qwen defaults).
        vision_start_token_id: accepted for signature compatibility with ``get_rope_index``; markers are plain
            text here, so the value does not change the result.
        mm_token_type_ids: optional ``(B, L)`` with 0 text, 1 image, 2 video (transformers 5.x input); overrides
            the id matching.
        cu_seqlens: optional packed-sequence boundaries for a single row (``B == 1``): ``(num_docs + 1,)`` increasing
            token offsets starting at 0 and ending at ``L`` (flash-attention varlen convention). Equivalent to
            numbering the documents in ``attention_mask``; padded slots stay padded.
        **scheme_kwargs: scheme options. ``mrope``: ``tokens_per_second`` (``None`` = Qwen2-VL, 2 = released
            Qwen2.5-VL). ``mrope_interleave``: ``spatial_reset`` (bool, default False), ``temporal_stride`` (int,
            default 1), ``split_video_frames`` (default True). ``v2pe``: ``stride`` (default 64) or ``delta``
            (overrides stride), ``num_image_token`` (256).

    Returns:
        ``(position_ids, rope_deltas)``:

        * ``position_ids``: ``(A, B, L)``, ``A = 3`` (t, h, w) for the M-RoPE family, 4 for VRoPE, 1 for
          ``rope1d`` / ``v2pe``; ``torch.long`` (``torch.float32`` for V2PE); padded slots hold
          :data:`PAD_POSITION_ID`. On ``input_ids``' device.
        * ``rope_deltas``: ``(B, 1)`` ``torch.long``, ``next_position - L`` (``L`` the padded length), so that the
          token at cache position ``k`` is decoded at ``k + rope_deltas`` (see :func:`decode_position_ids`).

    Raises:
        ValueError: unknown scheme or option; grids that disagree with the number of visual tokens (too many,
            too few, or a grid not fitting a run of visual tokens); a grid not divisible by ``spatial_merge_size``;
            a non-positive ``second_per_grid_t`` or a ``second_per_grid_ts`` length that differs from the number of
            videos; ``second_per_grid_ts`` given to Qwen2-VL M-RoPE (no ``tokens_per_second``); bad shapes or
            ``cu_seqlens``.
    """
    spec = _scheme(scheme)
    opts = _options(spec, scheme_kwargs)
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise ValueError(f'input_ids must be a (B, L) tensor, got {type(input_ids).__name__} '
                         f'{tuple(getattr(input_ids, "shape", ()))}; fix: add a batch dim with input_ids[None]')
    if isinstance(spatial_merge_size, bool) or int(spatial_merge_size) != spatial_merge_size or spatial_merge_size < 1:
        raise ValueError(f'spatial_merge_size must be a positive int, got {spatial_merge_size!r}')
    spatial_merge_size = int(spatial_merge_size)
    device = input_ids.device
    bsz, length = input_ids.shape
    ids = input_ids.detach().cpu()
    if attention_mask is None:
        mask = torch.ones(bsz, length, dtype=torch.int64)
    else:
        if tuple(attention_mask.shape) != (bsz, length):
            raise ValueError(f'attention_mask shape {tuple(attention_mask.shape)} != input_ids shape {(bsz, length)}')
        mask = attention_mask.detach().cpu().to(torch.int64)
    if cu_seqlens is not None:
        cu = torch.as_tensor(cu_seqlens).detach().cpu().to(torch.int64).flatten()
        if bsz != 1 or cu.numel() < 2 or cu[0] != 0 or cu[-1] != length or (cu[1:] <= cu[:-1]).any():
            raise ValueError(f'cu_seqlens must be increasing offsets [0, ..., L={length}] for a single row (B=1), got '
                             f'{cu.tolist()} with B={bsz}; fix: mark documents with numbers in attention_mask instead')
        doc = torch.repeat_interleave(torch.arange(1, cu.numel()), cu[1:] - cu[:-1])
        mask = torch.where(mask[0] != 0, doc, torch.zeros_like(doc)).unsqueeze(0)
    if mm_token_type_ids is not None:
        if tuple(mm_token_type_ids.shape) != (bsz, length):
            raise ValueError(f'mm_token_type_ids shape {tuple(mm_token_type_ids.shape)} != input_ids shape')
        modality = mm_token_type_ids.detach().cpu().to(torch.int64)
    else:
        modality = torch.zeros(bsz, length, dtype=torch.int64)
        modality[ids == image_token_id] = _IMAGE
        modality[ids == video_token_id] = _VIDEO

    secs = _as_float_list(second_per_grid_ts)
    if secs is not None and spec.kind == 'mrope' and opts['tokens_per_second'] is None:
        raise ValueError(f'scheme {scheme!r} is Qwen2-VL M-RoPE (tau = frame index) and ignores second_per_grid_ts; '
                         "fix: pass tokens_per_second=2 or use scheme='qwen2_5_vl' for Qwen2.5-VL temporal scaling")
    split = spec.kind == 'mrope_interleave' and bool(opts['split_video_frames'])
    queues = {_IMAGE: _grid_queue(image_grid_thw, _IMAGE, spatial_merge_size, False, None),
              _VIDEO: _grid_queue(video_grid_thw, _VIDEO, spatial_merge_size, split, secs)}
    # V2PE needs only token counts: without grids, every run of visual tokens is one block.
    use_grids = {m: not (spec.kind == 'v2pe' and (image_grid_thw if m == _IMAGE else video_grid_thw) is None)
                 for m in (_IMAGE, _VIDEO)}
    cursor = {_IMAGE: 0, _VIDEO: 0}

    a = len(spec.axis_names)
    out_dtype = torch.float32 if spec.float_positions else torch.int64
    position_ids = torch.full((a, bsz, length), PAD_POSITION_ID, dtype=torch.float64 if spec.float_positions
                              else torch.int64)
    deltas = torch.zeros(bsz, 1, dtype=torch.int64)
    for row in range(bsz):
        real = (mask[row] != 0).nonzero().flatten()
        nxt = 0
        if real.numel():
            doc_vals = mask[row, real]
            for _, da, de in _runs(doc_vals):
                idx = real[da:de]
                blocks = _doc_blocks(modality[row, idx], queues, cursor, use_grids, f'row {row}')
                pos, nxt = _assemble(spec, opts, blocks)
                position_ids[:, row, idx] = pos
        deltas[row, 0] = nxt - length
    for m in (_IMAGE, _VIDEO):
        if use_grids[m] and cursor[m] != len(queues[m]):
            name = _MODALITY_NAME[m]
            left = queues[m][cursor[m]:]
            raise ValueError(f'{name}_grid_thw describes {len(left)} more {name} grid(s) ({sum(b.n for b in left)} '
                             f'merged tokens) than input_ids hold {name} tokens for (token id '
                             f'{image_token_id if m == _IMAGE else video_token_id}); fix: pass exactly one grid per '
                             f'{name} present in input_ids, and check spatial_merge_size={spatial_merge_size}')
    return position_ids.to(out_dtype).to(device), deltas.to(device)


# ---------------------------------------------------------------------------------------------------------------
# Layouts (segments without token ids)
# ---------------------------------------------------------------------------------------------------------------

_STYLE_OF_KIND = {'mrope_interleave': 'qwen3'}


def _segment_grid(seg: Mapping[str, Any], i: int) -> Tuple[int, int, int, int]:
    typ = seg.get('type')
    if typ not in ('image', 'video'):
        raise ValueError(f'segment #{i} has type {typ!r}; fix: use "text", "image" or "video"')
    t, h, w = int(seg.get('t', 1)), int(seg['h']), int(seg['w'])
    if typ == 'image' and t != 1:
        raise ValueError(f'segment #{i}: an image has t = 1, got t = {t}; fix: use type "video"')
    if min(t, h, w) <= 0:
        raise ValueError(f'segment #{i}: grid t, h, w must be positive, got {(t, h, w)}')
    n = t * h * w
    if 'num_tiles' in seg:  # InternVL: num_tiles * 256 context tokens (h, w only count tokens)
        n = int(seg['num_tiles']) * h * w
    return t, h, w, n


def _layout_blocks(segments: Sequence[Mapping[str, Any]], style: str, markers: bool,
                   timestamp_tokens_per_frame: int) -> Tuple[List[_Block], List[str]]:
    if style not in ('qwen2', 'qwen3', 'internvl'):
        raise ValueError(f'unknown layout style {style!r}; fix: use "qwen2", "qwen3" or "internvl"')
    start, end = ('img_start', 'img_end') if style == 'internvl' else ('vision_start', 'vision_end')
    blocks: List[_Block] = []
    types: List[str] = []

    def text(n: int, typ: str = 'text'):
        if n:
            blocks.append(_Block(_TEXT, n))
            types.extend([typ] * n)

    for i, seg in enumerate(segments):
        if seg.get('type') == 'text':
            n = int(seg['len'])
            if n < 0:
                raise ValueError(f'segment #{i}: text len must be >= 0, got {n}')
            text(n)
            continue
        t, h, w, n = _segment_grid(seg, i)
        mod = _IMAGE if seg['type'] == 'image' else _VIDEO
        sec = seg.get('second_per_grid_t')
        if sec is not None:
            sec = _check_second_per_grid_t(sec, f'segment #{i}')
        vis = 'img_context' if style == 'internvl' else seg['type']
        frames = [(1, n // t)] * t if (style == 'qwen3' and mod == _VIDEO) else [(t, n)]
        for ft, fn in frames:
            if style == 'qwen3' and mod == _VIDEO:
                text(timestamp_tokens_per_frame, 'timestamp')
            if markers:
                text(1, start)
            if 'num_tiles' in seg:
                blocks.append(_Block(mod, fn, 1, 1, fn, sec))
            else:
                blocks.append(_Block(mod, fn, ft, h, w, sec))
            types.extend([vis] * fn)
            if markers:
                text(1, end)
    return blocks, types


def _layout_style(spec: _Scheme, style: Optional[str], segments) -> str:
    if style is not None:
        return style
    if spec.kind == 'v2pe' and any('num_tiles' in s for s in segments):
        return 'internvl'
    return _STYLE_OF_KIND.get(spec.kind, 'qwen2')


def get_layout_position_ids(
    scheme: str,
    segments: Sequence[Mapping[str, Any]],
    *,
    markers: bool = True,
    style: Optional[str] = None,
    timestamp_tokens_per_frame: int = 3,
    **scheme_kwargs: Any,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Position ids of one sequence described by segments instead of token ids (for our own models and tests).

    Segments (LLM-side, i.e. already merged, grids):

    * ``{"type": "text", "len": n}``
    * ``{"type": "image", "t": 1, "h": H, "w": W}`` (optional ``"num_tiles"``: InternVL, ``num_tiles*h*w`` tokens)
    * ``{"type": "video", "t": T, "h": H, "w": W, "second_per_grid_t": s}`` (``second_per_grid_t`` optional)

    The token sequence is built as the family's prompt would be (``style``): ``"qwen2"`` wraps every visual block
    in ``<|vision_start|> ... <|vision_end|>``; ``"qwen3"`` (default for ``mrope_interleave``) does the same for
    images and turns a video into ``T`` frame blocks, each ``timestamp_tokens_per_frame`` timestamp text tokens,
    ``<|vision_start|>``, ``h*w`` tokens, ``<|vision_end|>``; ``"internvl"`` (default for ``v2pe`` when a segment has
    ``num_tiles``) uses ``<img> ... </img>``. Markers count as text; ``markers=False`` drops them.

    Args:
        scheme: one of :func:`list_schemes`.
        segments: the layout, in order.
        markers: insert the start/end marker tokens around every visual block.
        style: ``"qwen2"``, ``"qwen3"`` or ``"internvl"``; per-scheme default when ``None``.
        timestamp_tokens_per_frame: timestamp text tokens before each frame in the ``"qwen3"`` style.
        **scheme_kwargs: as in :func:`get_position_ids`.

    Returns:
        ``(position_ids, rope_deltas)``: ``(A, 1, L)`` long (float32 for V2PE) and ``(1, 1)`` long
        (``next_position - L``), exactly as :func:`get_position_ids` returns for the same tokens.

    Raises:
        ValueError: unknown scheme, option, style or segment type; non-positive grid sizes; an image with ``t != 1``;
            a non-positive ``second_per_grid_t``.
    """
    spec = _scheme(scheme)
    opts = _options(spec, scheme_kwargs)
    st = _layout_style(spec, style, segments)
    blocks, _ = _layout_blocks(segments, st, markers, timestamp_tokens_per_frame)
    if spec.kind == 'mrope_interleave' and not opts['split_video_frames'] and st == 'qwen3':
        raise ValueError('split_video_frames=False needs an un-split video layout; fix: pass style="qwen2"')
    pos, nxt = _assemble(spec, opts, blocks)
    dtype = torch.float32 if spec.float_positions else torch.int64
    return pos.to(dtype).unsqueeze(1), torch.tensor([[nxt - pos.shape[1]]], dtype=torch.int64)


def layout_to_inputs(
    segments: Sequence[Mapping[str, Any]],
    *,
    style: str = 'qwen2',
    markers: bool = True,
    timestamp_tokens_per_frame: int = 3,
    spatial_merge_size: int = 2,
) -> Dict[str, Any]:
    """Build Qwen-style model inputs for a layout (token ids, pre-merge grids), for tests, demos and benchmarks.

    Token ids: text ``1000 + k``, timestamps ``5000 + k``, markers and visual tokens from :data:`QWEN_TOKEN_IDS`
    (``<img>`` / ``</img>`` reuse the vision start / end ids). Videos keep one un-split grid row also in the
    ``"qwen3"`` style, as Qwen3-VL processors return them.

    Args:
        segments: see :func:`get_layout_position_ids`.
        style, markers, timestamp_tokens_per_frame: see :func:`get_layout_position_ids`.
        spatial_merge_size: factor applied to ``h`` and ``w`` in the returned grids.

    Returns:
        dict with ``input_ids`` ``(1, L)`` long, ``attention_mask`` ``(1, L)`` long, ``image_grid_thw`` /
        ``video_grid_thw`` ``(N, 3)`` long or ``None``, ``second_per_grid_ts`` (list of float, one per video) or
        ``None`` when no video segment sets it, and ``token_types`` (list of str, one per token).

    Raises:
        ValueError: as :func:`get_layout_position_ids` for bad segments.
    """
    blocks, types = _layout_blocks(segments, style, markers, timestamp_tokens_per_frame)
    ids, k_text, k_ts = [], 0, 0
    for typ in types:
        if typ == 'text':
            ids.append(1000 + k_text)
            k_text += 1
        elif typ == 'timestamp':
            ids.append(5000 + k_ts)
            k_ts += 1
        elif typ in ('vision_start', 'img_start'):
            ids.append(QWEN_TOKEN_IDS['vision_start'])
        elif typ in ('vision_end', 'img_end'):
            ids.append(QWEN_TOKEN_IDS['vision_end'])
        elif typ == 'video':
            ids.append(QWEN_TOKEN_IDS['video'])
        else:
            ids.append(QWEN_TOKEN_IDS['image'])
    m = spatial_merge_size
    img, vid, secs = [], [], []
    any_sec = False
    for i, seg in enumerate(segments):
        if seg.get('type') == 'text':
            continue
        t, h, w, n = _segment_grid(seg, i)
        if 'num_tiles' in seg:
            h, w = 1, n
        (img if seg['type'] == 'image' else vid).append([t, h * m, w * m])
        if seg['type'] == 'video':
            any_sec |= seg.get('second_per_grid_t') is not None
            secs.append(float(seg.get('second_per_grid_t', 1.0)))
    input_ids = torch.tensor([ids], dtype=torch.int64)
    return {
        'input_ids': input_ids,
        'attention_mask': torch.ones_like(input_ids),
        'image_grid_thw': torch.tensor(img, dtype=torch.int64) if img else None,
        'video_grid_thw': torch.tensor(vid, dtype=torch.int64) if vid else None,
        'second_per_grid_ts': secs if any_sec else None,
        'token_types': types,
    }


# ---------------------------------------------------------------------------------------------------------------
# Frequency allocation and application
# ---------------------------------------------------------------------------------------------------------------

_DEFAULT_SECTIONS = {'mrope': (16, 24, 24), 'mrope_interleave': (24, 20, 20)}


def default_mrope_section(scheme: str, head_dim: int) -> List[int]:
    """The official ``mrope_section`` for head_dim 128 (``[16, 24, 24]`` M-RoPE, ``[24, 20, 20]`` MRoPE-I), scaled
    proportionally to other head dims when that is exact (e.g. ``[8, 12, 12]`` for 64).

    Raises:
        ValueError: the scheme has no section, or the proportional scaling is not exact for ``head_dim``.
    """
    spec = _scheme(scheme)
    if spec.kind not in _DEFAULT_SECTIONS:
        raise ValueError(f'scheme {scheme!r} has no mrope_section')
    base = _DEFAULT_SECTIONS[spec.kind]
    half = head_dim // 2
    if head_dim % 2 or (half * base[0]) % 64 or (half * base[1]) % 64 or (half * base[2]) % 64:
        raise ValueError(f'no exact default mrope_section for scheme {scheme!r} at head_dim={head_dim}; fix: pass '
                         f'mrope_section=[t, h, w] summing to head_dim/2 = {half}')
    return [half * b // 64 for b in base]


def axis_of_pair(scheme: str, head_dim: int, mrope_section: Optional[Sequence[int]] = None) -> torch.Tensor:
    """Which position axis drives each rotary pair.

    Pair ``j`` (``0 <= j < head_dim/2``) rotates with frequency ``theta^(-2j/head_dim)``; in the ``rotate_half``
    layout it is channels ``j`` and ``j + head_dim/2``.

    * ``mrope``: contiguous chunks (Qwen2-VL): the first ``mrope_section[0]`` pairs use t, the next
      ``mrope_section[1]`` use h, the rest w.
    * ``mrope_interleave``: interleaved (Qwen3-VL): pair ``j`` uses h when ``j % 3 == 1`` and ``j < 3 *
      mrope_section[1]``, w when ``j % 3 == 2`` and ``j < 3 * mrope_section[2]``, t otherwise (so the highest
      frequencies... lowest ones beyond the interleaved range stay on t).
    * ``vrope``: round-robin over the four coordinates, pair ``k`` uses ``k % 4``.
    * ``rope1d``, ``v2pe``: every pair uses the single axis 0.

    Args:
        scheme: one of :func:`list_schemes`.
        head_dim: per-head channels (even).
        mrope_section: ``[t, h, w]`` pair counts for the M-RoPE family; must sum to ``head_dim / 2``. Defaults to
            :func:`default_mrope_section`.

    Returns:
        ``(head_dim // 2,)`` ``torch.long`` axis indices into ``position_ids``' first dim.

    Raises:
        ValueError: unknown scheme, odd/non-positive ``head_dim``, or an ``mrope_section`` that is not three
            non-negative ints summing to ``head_dim / 2`` (or, interleaved, with h or w above t's share).
    """
    spec = _scheme(scheme)
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim <= 0 or head_dim % 2:
        raise ValueError(f'head_dim must be a positive even int, got {head_dim!r}')
    half = head_dim // 2
    j = torch.arange(half)
    if spec.kind in ('rope1d', 'v2pe'):
        return torch.zeros(half, dtype=torch.int64)
    if spec.kind == 'vrope':
        return j % 4
    section = default_mrope_section(scheme, head_dim) if mrope_section is None else [int(x) for x in mrope_section]
    if len(section) != 3 or min(section) < 0 or sum(section) != half:
        raise ValueError(f'mrope_section {list(mrope_section) if mrope_section is not None else section} must be '
                         f'three non-negative pair counts [t, h, w] summing to head_dim/2 = {half} (head_dim='
                         f'{head_dim}); fix: e.g. {[half * b // 64 for b in _DEFAULT_SECTIONS[spec.kind]]} '
                         'or adjust head_dim')
    if spec.kind == 'mrope':
        return torch.repeat_interleave(torch.arange(3), torch.tensor(section))
    out = torch.zeros(half, dtype=torch.int64)
    out[(j % 3 == 1) & (j < 3 * section[1])] = 1
    out[(j % 3 == 2) & (j < 3 * section[2])] = 2
    if int((out == 1).sum()) != section[1] or int((out == 2).sum()) != section[2]:
        raise ValueError(f'interleaved mrope_section {section} does not fit head_dim/2 = {half} pairs '
                         '(h and w take every third pair); fix: keep h, w <= t, e.g. [24, 20, 20] for head_dim 128')
    return out


def decode_position_ids(rope_deltas: torch.Tensor, cache_position: torch.Tensor, num_axes: int = 3) -> torch.Tensor:
    """Position ids of decoding steps: ``cache_position + rope_deltas`` on every axis.

    Args:
        rope_deltas: ``(B, 1)`` long, from :func:`get_position_ids`.
        cache_position: ``(n,)`` or ``(B, n)`` integer indices of the new tokens in the padded sequence (the first
            generated token of a prompt of padded length ``L`` is at ``L``).
        num_axes: ``A``, from :func:`scheme_num_axes`.

    Returns:
        ``(A, B, n)`` long position ids (all axes equal, as every scheme treats generated text).

    Raises:
        ValueError: bad shapes.
    """
    rd = torch.as_tensor(rope_deltas)
    if rd.dim() == 1:
        rd = rd[:, None]
    cp = torch.as_tensor(cache_position, device=rd.device)
    if cp.dim() == 1:
        cp = cp[None, :]
    if rd.dim() != 2 or rd.shape[1] != 1 or cp.dim() != 2 or cp.shape[0] not in (1, rd.shape[0]):
        raise ValueError(f'rope_deltas must be (B, 1) and cache_position (n,) or (B, n); got '
                         f'{tuple(rd.shape)} and {tuple(cp.shape)}')
    pos = cp.to(torch.int64) + rd.to(torch.int64)
    return pos.unsqueeze(0).expand(num_axes, -1, -1)


def multimodal_rope_cos_sin(
    position_ids: torch.Tensor,
    head_dim: int,
    scheme: str = 'mrope',
    mrope_section: Optional[Sequence[int]] = None,
    theta: float = 1_000_000.0,
    dtype: torch.dtype = torch.float32,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables, each pair driven by its axis's position (``rotate_half`` layout).

    ``angle[b, l, j] = position_ids[axis_of_pair[j], b, l] * theta^(-2j/head_dim)``; the tables repeat the
    ``head_dim/2`` angles twice (channels ``j`` and ``j + head_dim/2``). Angles are computed in float32.

    Args:
        position_ids: ``(A, B, L)`` (or ``(B, L)`` for one axis), long or float; ``A`` must match the scheme.
        head_dim: per-head channels.
        scheme, mrope_section: see :func:`axis_of_pair`.
        theta: RoPE base (Qwen2/2.5-VL 1e6, Qwen3-VL 5e6).
        dtype: dtype of the returned tables.

    Returns:
        ``(cos, sin)``, each ``(B, L, head_dim)`` of ``dtype`` on ``position_ids``' device.

    Raises:
        ValueError: as :func:`axis_of_pair`, or ``A`` not the scheme's number of axes.
    """
    axes = axis_of_pair(scheme, head_dim, mrope_section).to(position_ids.device)
    pos = position_ids if position_ids.dim() == 3 else position_ids.unsqueeze(0)
    a = scheme_num_axes(scheme)
    if pos.dim() != 3 or pos.shape[0] not in (1, a):
        raise ValueError(f'position_ids must be (A, B, L) with A = {a} for scheme {scheme!r}, got '
                         f'{tuple(position_ids.shape)}')
    if pos.shape[0] == 1 and a > 1:
        pos = pos.expand(a, -1, -1)
    inv_freq = 1.0 / (float(theta) ** (torch.arange(0, head_dim, 2, dtype=torch.float32,
                                                    device=pos.device) / head_dim))
    per_pair = pos.to(torch.float32).index_select(0, axes)          # (half, B, L)
    ang = per_pair.permute(1, 2, 0) * inv_freq                      # (B, L, half)
    cos, sin = ang.cos().to(dtype), ang.sin().to(dtype)
    return torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_multimodal_rope(
    q: torch.Tensor,
    k: torch.Tensor,
    position_ids: Optional[torch.Tensor] = None,
    *,
    scheme: str = 'mrope',
    mrope_section: Optional[Sequence[int]] = None,
    theta: float = 1_000_000.0,
    rope_deltas: Optional[torch.Tensor] = None,
    cache_position: Optional[torch.Tensor] = None,
    unsqueeze_dim: int = 1,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Rotate queries and keys with a multimodal RoPE scheme (``rotate_half`` convention, as HF Qwen models).

    For prefill pass ``position_ids`` from :func:`get_position_ids`; for a decoding step pass ``rope_deltas`` and
    ``cache_position`` instead (positions ``cache_position + rope_deltas`` on every axis). The rotation is computed
    in float32 and cast back, so fp32, bf16 and fp16 inputs are supported and keep their dtype.

    Args:
        q: ``(B, H, L, D)`` when ``unsqueeze_dim == 1`` (``(B, L, H, D)`` when 2), any float dtype.
        k: same layout as ``q`` (its head count may differ, e.g. GQA).
        position_ids: ``(A, B, L)``; ``None`` when decoding from ``rope_deltas`` / ``cache_position``.
        scheme, mrope_section, theta: see :func:`multimodal_rope_cos_sin`.
        rope_deltas: ``(B, 1)`` from :func:`get_position_ids` (decoding only).
        cache_position: ``(L,)`` or ``(B, L)`` padded-sequence indices of the tokens in ``q`` (decoding only).
        unsqueeze_dim: dim of ``q``/``k`` that holds the heads (the tables are broadcast over it).

    Returns:
        ``(q_rot, k_rot)`` with the dtypes and shapes of ``q`` and ``k``.

    Raises:
        ValueError: neither ``position_ids`` nor (``rope_deltas``, ``cache_position``) given; shape mismatches;
            errors of :func:`multimodal_rope_cos_sin`.
    """
    if position_ids is None:
        if rope_deltas is None or cache_position is None:
            raise ValueError('pass position_ids (prefill) or both rope_deltas and cache_position (decoding)')
        position_ids = decode_position_ids(rope_deltas.to(q.device), cache_position.to(q.device),
                                           scheme_num_axes(scheme))
    head_dim = q.shape[-1]
    if k.shape[-1] != head_dim:
        raise ValueError(f'q and k head dims differ: {q.shape[-1]} vs {k.shape[-1]}')
    cos, sin = multimodal_rope_cos_sin(position_ids.to(q.device), head_dim, scheme, mrope_section, theta)
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)

    def rot(x: torch.Tensor) -> torch.Tensor:
        xf = x.to(torch.float32)
        return (xf * cos + _rotate_half(xf) * sin).to(x.dtype)

    return rot(q), rot(k)


# ---------------------------------------------------------------------------------------------------------------
# Demo table (docs/multimodal_rope.md)
# ---------------------------------------------------------------------------------------------------------------

DEMO_LAYOUT = [
    {'type': 'text', 'len': 2},
    {'type': 'image', 't': 1, 'h': 2, 'w': 2},
    {'type': 'text', 'len': 1},
    {'type': 'video', 't': 3, 'h': 2, 'w': 2, 'second_per_grid_t': 1.0},
    {'type': 'text', 'len': 2},
]


def _fmt(col: torch.Tensor) -> str:
    vals = []
    for v in col.tolist():
        vals.append(f'{v:g}' if isinstance(v, float) else str(v))
    return ','.join(vals)


def demo_table(segments: Sequence[Mapping[str, Any]] = tuple(DEMO_LAYOUT)) -> str:
    """Markdown tables of the ids every scheme assigns to one image-plus-video layout.

    Table 1 uses the Qwen2-VL token sequence (rope1d, M-RoPE Qwen2-VL, M-RoPE Qwen2.5-VL with
    ``tokens_per_second=2``, VRoPE, V2PE with stride 64). Table 2 uses the Qwen3-VL sequence (video split into
    frames with timestamp text) for MRoPE-Interleave with and without ``spatial_reset``.
    """
    segments = list(segments)
    types = _layout_blocks(segments, 'qwen2', True, 3)[1]
    cols = [('rope1d', 'rope1d', {}), ('M-RoPE (Qwen2-VL) t,h,w', 'mrope', {}),
            ('M-RoPE (Qwen2.5-VL, tps=2) t,h,w', 'qwen2_5_vl', {}), ('VRoPE p1..p4', 'vrope', {}),
            ('V2PE (stride 64)', 'v2pe', {})]
    ids = [get_layout_position_ids(s, segments, style='qwen2', **kw)[0][:, 0] for _, s, kw in cols]
    lines = ['Qwen2-VL token sequence (V2PE: delta = 64/256 = 0.25 per visual token):', '',
             '| # | token | ' + ' | '.join(c[0] for c in cols) + ' |', '|' + '---|' * (2 + len(cols))]
    for i, typ in enumerate(types):
        lines.append(f'| {i} | {typ} | ' + ' | '.join(_fmt(p[:, i]) for p in ids) + ' |')
    types3 = _layout_blocks(segments, 'qwen3', True, 1)[1]
    ids3 = [get_layout_position_ids('mrope_interleave', segments, timestamp_tokens_per_frame=1,
                                    spatial_reset=sr)[0][:, 0] for sr in (False, True)]
    lines += ['', 'MRoPE-Interleave on the Qwen3-VL sequence of the same layout (video split into frames, '
              '1 timestamp token per frame):', '',
              '| # | token | MRoPE-I t,h,w | MRoPE-I spatial_reset t,h,w |', '|---|---|---|---|']
    for i, typ in enumerate(types3):
        lines.append(f'| {i} | {typ} | {_fmt(ids3[0][:, i])} | {_fmt(ids3[1][:, i])} |')
    return '\n'.join(lines)


def _main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--demo-table', action='store_true', help='print the per-scheme id table (markdown)')
    args = parser.parse_args(argv)
    if args.demo_table:
        print('Layout: ' + ', '.join(
            f"text {s['len']}" if s['type'] == 'text' else f"{s['type']} {s['t']}x{s['h']}x{s['w']}"
            for s in DEMO_LAYOUT) + ' (merged grids; markers are text)\n')
        print(demo_table())
    else:
        parser.print_help()


if __name__ == '__main__':
    _main()
