"""Position ids of token sequences under a multimodal RoPE scheme (Qwen2-VL ``get_rope_index`` conventions).

The walk over a sequence is shared by every scheme: text advances every axis by 1; each visual block is placed by
its scheme (:meth:`Scheme.visual`). Conventions fixed here (the official releases disagree, see
``docs/multimodal_rope.md``):

* Marker tokens (``<|vision_start|>``, ``<|vision_end|>``, ``<img>``, timestamps, ...) are ordinary text tokens.
* After a visual block the next token is at ``s + extent`` (the scheme's extent: ``1 +`` the largest id of the block
  for the M-RoPE family, the original Qwen code and transformers 4.57.1; ``1 +`` the largest t for VideoRoPE/HoPE).
* Padded slots (``attention_mask == 0``) hold :data:`PAD_POSITION_ID` ``= 1`` on every axis.
* ``rope_deltas[b] = next_position[b] - L`` with ``L = input_ids.shape[1]`` the PADDED row length; the token at cache
  position ``k`` decodes at ``k + rope_deltas[b]`` on every axis (:func:`decode_position_ids`). It is returned by
  every call; nothing is cached between ``generate`` calls.
* Positions come from real tokens only, so left padding never changes a real token's ids. Packed rows number their
  documents in ``attention_mask`` (``[1, 1, 2, 2, 2, 0]``); every document restarts at position 0.
"""
from __future__ import annotations

import math
import random
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from .schemes import IMAGE, MODALITY_NAME, TEXT, VIDEO, Block, Scheme, get_scheme, list_schemes

__all__ = ['PAD_POSITION_ID', 'QWEN_TOKEN_IDS', 'scheme_num_axes', 'scheme_axis_names', 'get_position_ids',
           'get_layout_position_ids', 'layout_to_inputs', 'decode_position_ids', 'training_options', 'tiles_refusal']

#: Value written into padded slots (``attention_mask == 0``) of ``position_ids`` for every scheme.
PAD_POSITION_ID = 1

#: Special token ids of the Qwen2-VL / Qwen2.5-VL / Qwen3-VL tokenizers (used as defaults).
QWEN_TOKEN_IDS = {'vision_start': 151652, 'vision_end': 151653, 'image': 151655, 'video': 151656, 'pad': 151643}


def scheme_num_axes(scheme: str) -> int:
    """Number ``A`` of position axes (first dim of ``position_ids``): 1, 3 or 4. Raises ValueError if unknown."""
    return get_scheme(scheme).num_axes


def scheme_axis_names(scheme: str) -> Tuple[str, ...]:
    """Axis names of ``position_ids`` for ``scheme``: ``('t','h','w')``, ``('p1'..'p4')`` or ``('pos',)``."""
    return get_scheme(scheme).axis_names


def training_options(scheme: str, generator=None) -> Dict[str, Any]:
    """Options a training step draws per sample for ``scheme`` (V2PE ``stride``, HoPE ``gamma``; ``{}`` for the
    others), to pass to :func:`get_position_ids`. Evaluation uses the fixed defaults instead.

    Args:
        scheme: a scheme name.
        generator: a ``random.Random`` for reproducibility; the module-level RNG when ``None``.
    """
    return get_scheme(scheme).training_options(generator if generator is not None else random.Random())


def _check_second_per_grid_t(value, where: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f'second_per_grid_t of {where} must be a number, got {value!r}') from None
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f'second_per_grid_t of {where} must be positive and finite (seconds per temporal patch = '
                         f'temporal_patch_size / fps), got {value!r}; fix: e.g. 2 / 2.0 = 1.0 for 2 fps sampling')
    return v


def _assemble(spec: Scheme, opts: Mapping[str, Any], blocks: Sequence[Block]) -> Tuple[torch.Tensor, Any]:
    """Positions ``(A, sum n)`` (int64, float64 for float schemes) of one document starting at 0, and its next free
    position."""
    n_total = sum(b.n for b in blocks)
    dtype = torch.float64 if spec.float_positions else torch.int64
    out = torch.empty(spec.num_axes, n_total, dtype=dtype)
    s, i = 0, 0
    for b in blocks:
        if b.n == 0:
            continue
        if b.modality == TEXT:
            out[:, i:i + b.n] = (s + torch.arange(b.n, dtype=dtype)).to(dtype)
            s += b.n
        else:
            out[:, i:i + b.n] = spec.visual(opts, s, b).to(dtype)
            s += spec.extent(opts, b)
        i += b.n
    return out, s


# ---------------------------------------------------------------------------------------------------------------
# token ids -> blocks
# ---------------------------------------------------------------------------------------------------------------

def _tile_rows(image_tiles, num_images: int) -> Optional[List[Tuple[int, int]]]:
    """``image_tiles`` as ``[(cols, rows)]``, one per image (``None`` when not given)."""
    if image_tiles is None:
        return None
    g = torch.as_tensor(image_tiles)
    if g.dim() != 2 or g.shape[1] != 2 or g.shape[0] != num_images or g.is_floating_point() or \
            (g.numel() and int(g.min()) < 1):
        raise ValueError(f'image_tiles must be ({num_images}, 2): one positive [cols, rows] tile grid per image '
                         f'(1, 1 for an untiled image), in batch order, got {g.tolist()} (shape {tuple(g.shape)})')
    return [(int(c), int(r)) for c, r in g.tolist()]


def tiles_refusal(scheme: str, what: str = 'image_tiles with more than one tile') -> str:
    """The one-line error of a scheme without tile support given a tiled image; it names the schemes that take one."""
    takers = [n for n in list_schemes() if get_scheme(n).takes_tiles]
    return (f'scheme {scheme!r} cannot lay out tiled images ({what}); fix: use one of {takers}, or give the image '
            'untiled (max_tiles=1)')


def _grid_queue(grid_thw, modality: int, spatial_merge_size: int, split_frames: bool,
                second_per_grid_ts: Optional[List[float]], tiles=None) -> List[Block]:
    if grid_thw is None:
        if tiles is not None and len(torch.as_tensor(tiles)):
            raise ValueError('image_tiles given without image_grid_thw; fix: pass both (from VideoLLM.collate)')
        return []
    g = torch.as_tensor(grid_thw)
    if g.numel() == 0:
        return []
    name = MODALITY_NAME[modality]
    if g.dim() != 2 or g.shape[1] != 3:
        raise ValueError(f'{name}_grid_thw must have shape (num_{name}s, 3) holding pre-merge [t, h, w], '
                         f'got shape {tuple(g.shape)}')
    if torch.is_floating_point(g) and not torch.equal(g, g.round()):
        raise ValueError(f'{name}_grid_thw must hold integers, got {g.tolist()}')
    rows = g.to(torch.int64).tolist()
    tile_rows = _tile_rows(tiles, len(rows)) if modality == IMAGE else None
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
        if split_frames and modality == VIDEO:
            out.extend(Block(modality, hh * ww, 1, hh, ww, sec) for _ in range(t))
        elif tile_rows is not None and tile_rows[idx][0] * tile_rows[idx][1] > 1:
            if t != 1:
                raise ValueError(f'image #{idx}: a tiled image has t = 1 per tile, got image_grid_thw {[t, h, w]}')
            cols, rws = tile_rows[idx]  # the tiles, then the thumbnail, each an (hh, ww) grid
            out.append(Block(modality, (cols * rws + 1) * hh * ww, 1, hh, ww, sec, (cols, rws)))
        else:
            out.append(Block(modality, t * hh * ww, t, hh, ww, sec))
    return out


def _runs(mod: torch.Tensor) -> List[Tuple[int, int, int]]:
    """Maximal runs ``(value, start, end)`` of a 1-D tensor."""
    n = mod.numel()
    if n == 0:
        return []
    change = (mod[1:] != mod[:-1]).nonzero().flatten() + 1
    starts = [0] + change.tolist()
    ends = change.tolist() + [n]
    return list(zip(mod[starts].tolist(), starts, ends))


def _doc_blocks(mod: torch.Tensor, queues: Dict[int, List[Block]], cursor: Dict[int, int],
                use_grids: Dict[int, bool], where: str) -> List[Block]:
    blocks: List[Block] = []
    for m, a, e in _runs(mod):
        n = e - a
        if m == TEXT:
            blocks.append(Block(TEXT, n))
            continue
        if not use_grids[m]:  # V2PE without grids: each maximal run of visual tokens is one block
            blocks.append(Block(m, n, 1, 1, n))
            continue
        name = MODALITY_NAME[m]
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
    scheme: Union[str, Scheme],
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
    image_tiles: Optional[torch.Tensor] = None,
    **scheme_kwargs: Any,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Position ids of a token batch under a multimodal RoPE scheme (drop-in for Qwen2-VL ``get_rope_index``).

    Visual tokens are the tokens equal to ``image_token_id`` / ``video_token_id`` (or those marked 1 / 2 in
    ``mm_token_type_ids`` when given). Each image (video) grid, in batch order, claims the next ``t*h*w /
    spatial_merge_size**2`` tokens of its modality; a grid must lie inside one run of consecutive visual tokens.
    Every other token (markers included) is text. For ``mrope_interleave`` / ``mhrope`` (Qwen3-VL) a video grid
    ``[T, H, W]`` is given un-split and is split here into ``T`` frame grids ``[1, H, W]``. ``v2pe`` needs no grids:
    without them each maximal run of visual tokens is one block (InternVL: pass ``image_token_id=<IMG_CONTEXT> id``).

    Args:
        scheme: one of :func:`list_schemes`, or a :class:`Scheme` object.
        input_ids: ``(B, L)`` integer token ids.
        image_grid_thw: ``(num_images, 3)`` integer PRE-merge grids ``[t, h, w]`` in patches (the processor's
            output: ``h`` and ``w`` are ``spatial_merge_size`` times the LLM-side grid), in batch order.
        video_grid_thw: ``(num_videos, 3)`` the same for videos; ``t`` is the number of temporal patches.
        attention_mask: ``(B, L)``; 0 marks padding. Values > 1 mark packed documents: every maximal run of equal
            non-zero values is one document that restarts at position 0. ``None`` means all ones.
        second_per_grid_ts: ``(num_videos,)`` seconds per temporal patch (``temporal_patch_size / fps``), used by
            ``mrope`` with ``tokens_per_second`` (Qwen2.5-VL; 1.0 per video when omitted). Must be positive.
        spatial_merge_size: the vision merger's spatial factor (2 for the Qwen family).
        image_token_id, video_token_id: ids of the visual placeholder tokens (Qwen defaults).
        vision_start_token_id: accepted for signature compatibility with ``get_rope_index``; markers are text.
        mm_token_type_ids: optional ``(B, L)`` with 0 text, 1 image, 2 video (transformers 5.x input); overrides
            the id matching.
        cu_seqlens: optional packed-sequence boundaries for a single row (``B == 1``): ``(num_docs + 1,)`` increasing
            token offsets from 0 to ``L`` (flash-attention varlen convention).
        image_tiles: optional ``(num_images, 2)`` integer AnyRes tile grids ``[cols, rows]``, one per image in batch
            order (``[1, 1]``: untiled). An image with ``cols * rows > 1`` is its tiles (crop order, row-major) then
            its thumbnail, each of grid ``image_grid_thw[i]``: ``(cols * rows + 1) * h * w / spatial_merge_size**2``
            tokens. Only schemes with :attr:`Scheme.takes_tiles` (``rope_dhr``) accept tiled images.
        **scheme_kwargs: scheme options. ``mrope``: ``tokens_per_second`` (``None`` = Qwen2-VL, 2 = Qwen2.5-VL).
            ``mrope_interleave`` / ``mhrope``: ``spatial_reset`` (False), ``temporal_stride`` (1),
            ``split_video_frames`` (True). ``v2pe``: ``stride`` (64) or ``delta``, ``num_image_token`` (256).
            ``videorope``: ``delta`` (temporal scale, 2.0). ``hope``: ``gamma`` (temporal scale, 1.0; draw it per
            sample in training with :func:`sample_hope_gamma`).

    Returns:
        ``(position_ids, rope_deltas)``:

        * ``position_ids``: ``(A, B, L)`` (:func:`scheme_num_axes`); ``torch.long``, or ``torch.float32`` for V2PE,
          VideoRoPE and HoPE; padded slots hold :data:`PAD_POSITION_ID`. On ``input_ids``' device.
        * ``rope_deltas``: ``(B, 1)``, ``next_position - L`` (``L`` the padded length); ``torch.long``, or
          ``torch.float32`` for VideoRoPE / HoPE (fractional with HoPE's gamma).

    Raises:
        ValueError: unknown scheme or option; grids that disagree with the visual tokens (too many, too few, not
            fitting a run); a grid not divisible by ``spatial_merge_size``; a non-positive ``second_per_grid_t`` or a
            ``second_per_grid_ts`` length that differs from the number of videos; ``second_per_grid_ts`` given to
            Qwen2-VL M-RoPE; bad shapes or ``cu_seqlens``.
    """
    spec = get_scheme(scheme)
    opts = spec.options(scheme_kwargs)
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
        modality[ids == image_token_id] = IMAGE
        modality[ids == video_token_id] = VIDEO

    secs = _as_float_list(second_per_grid_ts)
    spec.check_seconds(opts, secs)
    split = spec.split_video_frames(opts)
    queues = {IMAGE: _grid_queue(image_grid_thw, IMAGE, spatial_merge_size, False, None, image_tiles),
              VIDEO: _grid_queue(video_grid_thw, VIDEO, spatial_merge_size, split, secs)}
    if not spec.takes_tiles and any(b.tiles is not None for b in queues[IMAGE]):
        raise ValueError(tiles_refusal(spec.name))
    # schemes that need only token counts (V2PE): without grids, every run of visual tokens is one block
    use_grids = {m: spec.needs_grids or (image_grid_thw if m == IMAGE else video_grid_thw) is not None
                 for m in (IMAGE, VIDEO)}
    cursor = {IMAGE: 0, VIDEO: 0}

    work = torch.float64 if spec.float_positions else torch.int64
    position_ids = torch.full((spec.num_axes, bsz, length), PAD_POSITION_ID, dtype=work)
    deltas = torch.zeros(bsz, 1, dtype=torch.float64 if spec.float_deltas else torch.int64)
    for row in range(bsz):
        real = (mask[row] != 0).nonzero().flatten()
        nxt = 0
        if real.numel():
            for _, da, de in _runs(mask[row, real]):
                idx = real[da:de]
                blocks = _doc_blocks(modality[row, idx], queues, cursor, use_grids, f'row {row}')
                pos, nxt = _assemble(spec, opts, blocks)
                position_ids[:, row, idx] = pos
        deltas[row, 0] = nxt - length
    for m in (IMAGE, VIDEO):
        if use_grids[m] and cursor[m] != len(queues[m]):
            name = MODALITY_NAME[m]
            left = queues[m][cursor[m]:]
            raise ValueError(f'{name}_grid_thw describes {len(left)} more {name} grid(s) ({sum(b.n for b in left)} '
                             f'merged tokens) than input_ids hold {name} tokens for (token id '
                             f'{image_token_id if m == IMAGE else video_token_id}); fix: pass exactly one grid per '
                             f'{name} present in input_ids, and check spatial_merge_size={spatial_merge_size}')
    out_dtype = torch.float32 if spec.float_positions else torch.int64
    return (position_ids.to(out_dtype).to(device),
            deltas.to(torch.float32 if spec.float_deltas else torch.int64).to(device))


# ---------------------------------------------------------------------------------------------------------------
# layouts (segments without token ids)
# ---------------------------------------------------------------------------------------------------------------

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
    if 'tiles' in seg:  # AnyRes tiles [cols, rows] of h x w tokens, then the thumbnail when there are several
        cols, rows = _tile_grid(seg, i)
        n = (cols * rows + (cols * rows > 1)) * h * w
    return t, h, w, n


def _tile_grid(seg: Mapping[str, Any], i: int) -> Tuple[int, int]:
    try:
        cols, rows = (int(x) for x in seg['tiles'])
    except (TypeError, ValueError):
        raise ValueError(f'segment #{i}: tiles must be [cols, rows], got {seg["tiles"]!r}') from None
    if seg.get('type') != 'image' or cols < 1 or rows < 1:
        raise ValueError(f'segment #{i}: tiles [cols, rows] (positive) belong to an image, got {seg["tiles"]!r} on '
                         f'a {seg.get("type")!r} segment')
    return cols, rows


def layout_blocks(segments: Sequence[Mapping[str, Any]], style: str, markers: bool,
                  timestamp_tokens_per_frame: int) -> Tuple[List[Block], List[str]]:
    """Blocks and per-token type names of a layout in a prompt ``style`` (see :func:`get_layout_position_ids`)."""
    if style not in ('qwen2', 'qwen3', 'internvl'):
        raise ValueError(f'unknown layout style {style!r}; fix: use "qwen2", "qwen3" or "internvl"')
    start, end = ('img_start', 'img_end') if style == 'internvl' else ('vision_start', 'vision_end')
    blocks: List[Block] = []
    types: List[str] = []

    def text(n: int, typ: str = 'text'):
        if n:
            blocks.append(Block(TEXT, n))
            types.extend([typ] * n)

    for i, seg in enumerate(segments):
        if seg.get('type') == 'text':
            n = int(seg['len'])
            if n < 0:
                raise ValueError(f'segment #{i}: text len must be >= 0, got {n}')
            text(n)
            continue
        t, h, w, n = _segment_grid(seg, i)
        mod = IMAGE if seg['type'] == 'image' else VIDEO
        sec = seg.get('second_per_grid_t')
        if sec is not None:
            sec = _check_second_per_grid_t(sec, f'segment #{i}')
        vis = 'img_context' if style == 'internvl' else seg['type']
        per_frame = style == 'qwen3' and mod == VIDEO
        for ft, fn in ([(1, n // t)] * t if per_frame else [(t, n)]):
            if per_frame:
                text(timestamp_tokens_per_frame, 'timestamp')
            if markers:
                text(1, start)
            if 'tiles' in seg:
                blocks.append(Block(mod, fn, 1, h, w, sec, _tile_grid(seg, i)))
            else:
                blocks.append(Block(mod, fn, 1, 1, fn, sec) if 'num_tiles' in seg else Block(mod, fn, ft, h, w, sec))
            types.extend([vis] * fn)
            if markers:
                text(1, end)
    return blocks, types


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
    * ``{"type": "image", "t": 1, "h": H, "w": W}`` (optional ``"num_tiles"``: InternVL, ``num_tiles*h*w`` tokens;
      or ``"tiles": [cols, rows]``: an AnyRes grid of ``h x w``-token tiles in crop order, then the thumbnail when
      ``cols * rows > 1``, for schemes that take tiles: ``rope_dhr``)
    * ``{"type": "video", "t": T, "h": H, "w": W, "second_per_grid_t": s}`` (``second_per_grid_t`` optional)

    The token sequence is built as the family's prompt would be (``style``): ``"qwen2"`` wraps every visual block
    in ``<|vision_start|> ... <|vision_end|>``; ``"qwen3"`` (default for ``mrope_interleave`` / ``mhrope``) does the
    same for images and turns a video into ``T`` frame blocks, each ``timestamp_tokens_per_frame`` timestamp text
    tokens, ``<|vision_start|>``, ``h*w`` tokens, ``<|vision_end|>``; ``"internvl"`` (default for ``v2pe`` when a
    segment has ``num_tiles``) uses ``<img> ... </img>``. Markers count as text; ``markers=False`` drops them.

    Args:
        scheme: one of :func:`list_schemes`.
        segments: the layout, in order.
        markers: insert the start/end marker tokens around every visual block.
        style: ``"qwen2"``, ``"qwen3"`` or ``"internvl"``; per-scheme default when ``None``.
        timestamp_tokens_per_frame: timestamp text tokens before each frame in the ``"qwen3"`` style.
        **scheme_kwargs: as in :func:`get_position_ids`.

    Returns:
        ``(position_ids, rope_deltas)``: ``(A, 1, L)`` and ``(1, 1)`` with the dtypes of :func:`get_position_ids`,
        exactly what it returns for the same tokens.

    Raises:
        ValueError: unknown scheme, option, style or segment type; non-positive grid sizes; an image with ``t != 1``;
            a non-positive ``second_per_grid_t``.
    """
    spec = get_scheme(scheme)
    opts = spec.options(scheme_kwargs)
    if style is None:
        style = spec.layout_style(segments)
    spec.check_layout(opts, style)
    blocks, _ = layout_blocks(segments, style, markers, timestamp_tokens_per_frame)
    if not spec.takes_tiles and any(b.tiles is not None for b in blocks):
        raise ValueError(tiles_refusal(spec.name, 'segments with "tiles"'))
    pos, nxt = _assemble(spec, opts, blocks)
    dtype = torch.float32 if spec.float_positions else torch.int64
    ddtype = torch.float32 if spec.float_deltas else torch.int64
    return pos.to(dtype).unsqueeze(1), torch.tensor([[nxt - pos.shape[1]]], dtype=ddtype)


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
    _, types = layout_blocks(segments, style, markers, timestamp_tokens_per_frame)
    special = {'vision_start': 'vision_start', 'img_start': 'vision_start', 'vision_end': 'vision_end',
               'img_end': 'vision_end', 'video': 'video'}
    ids, k_text, k_ts = [], 0, 0
    for typ in types:
        if typ == 'text':
            ids.append(1000 + k_text)
            k_text += 1
        elif typ == 'timestamp':
            ids.append(5000 + k_ts)
            k_ts += 1
        else:
            ids.append(QWEN_TOKEN_IDS[special.get(typ, 'image')])
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


def decode_position_ids(rope_deltas: torch.Tensor, cache_position: torch.Tensor, num_axes: int = 3) -> torch.Tensor:
    """Position ids of decoding steps: ``cache_position + rope_deltas`` on every axis.

    Args:
        rope_deltas: ``(B, 1)`` from :func:`get_position_ids` (long, or float32 for VideoRoPE / HoPE).
        cache_position: ``(n,)`` or ``(B, n)`` integer indices of the new tokens in the padded sequence (the first
            generated token of a prompt of padded length ``L`` is at ``L``).
        num_axes: ``A``, from :func:`scheme_num_axes`.

    Returns:
        ``(A, B, n)`` position ids, long (float32 when ``rope_deltas`` is floating), all axes equal, as every scheme
        treats generated text.

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
    if rd.is_floating_point():
        pos = cp.to(torch.float64) + rd.to(torch.float64)
        pos = pos.to(torch.float32)
    else:
        pos = cp.to(torch.int64) + rd.to(torch.int64)
    return pos.unsqueeze(0).expand(num_axes, -1, -1)
