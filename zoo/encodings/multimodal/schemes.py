"""Multimodal RoPE schemes: one object per scheme, in one registry.

A scheme owns three things and nothing else:

* its **options** and their defaults (``options``), validated with a clear error;
* its **id layout for a visual block** (``visual``): the positions ``(A, n)`` of a merged ``t x h x w`` grid that
  starts at the free 1-D position ``s``, and how far the next token moves (text is the same for every scheme: the
  next position on every axis);
* its **frequency allocation** (``allocation``): which position axis drives each rotary pair of each key head
  (``-1``: the pair is not rotated).

The sequence walk (token ids or layouts to blocks, padding, packing, ``rope_deltas``) lives in
:mod:`zoo.encodings.multimodal.ids`; the tables and the encoding in :mod:`zoo.encodings.multimodal.encoding`.

Schemes and their sources:

* ``rope1d``: RoFormer (Su et al., arXiv:2104.09864).
* ``mrope`` (= ``qwen2_vl``), ``qwen2_5_vl``: M-RoPE, Qwen2-VL (Wang et al., arXiv:2409.12191, Sec. 2.1) and the
  absolute-time variant of Qwen2.5-VL (Bai et al., arXiv:2502.13923, Sec. 2.1.3).
* ``mrope_interleave`` (= ``mrope_i``, ``qwen3_vl``): MRoPE-Interleave ("Revisiting Multimodal Positional Encoding in
  Vision-Language Models", Huang et al., arXiv:2510.23095; Qwen3-VL).
* ``mhrope``: Multi-Head RoPE of the same paper: MRoPE-Interleave's ids, each key head rotates with one axis.
* ``vrope``: VRoPE (Liu et al., arXiv:2502.11664).
* ``v2pe``: V2PE (Ge et al., arXiv:2412.09616).
* ``videorope``: VideoRoPE ("VideoRoPE: What Makes for Good Video Rotary Position Embedding?", Wei et al.,
  arXiv:2502.05173): diagonal layout, low-frequency temporal allocation, temporal scaling ``delta``.
* ``hope``: HoPE ("HoPE: Hybrid of Position Embedding for Length Generalization in Vision-Language Models", Li et
  al., arXiv:2505.20444): VideoRoPE's layout with dynamic temporal scaling ``gamma`` and the temporal pairs left
  unrotated (zero frequency, NoPE).
* ``pype``: PyPE, pyramid-descent visual position encoding (Chen et al., "Advancing General Multimodal Capability of
  Vision-language Models with Pyramid-descent Visual Position Encoding", arXiv:2501.10967): visual tokens numbered
  from the border ring to the centre, rings merged every ``jump`` layers. The first **per-layer** scheme
  (:attr:`Scheme.per_layer`): its ids depend on the layer, and inside each visual frame the attention follows the
  levels (:func:`zoo.encodings.multimodal.encoding.image_block_mask`); ``docs/pype.md``.
* ``cope``, ``cope_rope``: CoPE, contextual position encoding (Golovneva et al., "Contextual Position Encoding:
  Learning to Count What's Important", arXiv:2405.18719): positions counted by gates on ``q . k`` inside the causal
  attention, a learned table per layer (:attr:`Scheme.contextual`); alone, or on top of 1-D RoPE; ``docs/cope.md``.
* ``rope_dhr``: RoPE-DHR of CoMemo (Liu et al., "CoMemo: LVLMs Need Image Context with Image Memory",
  arXiv:2506.06279): every token of a high-resolution tile takes the position of the thumbnail token it lies on, so a
  tiled image occupies the thumbnail's positions only (:attr:`Scheme.takes_tiles`); ``docs/rope_dhr.md``.
* ``vista``: Vista-LLaMA's equal distance to visual tokens (Ma et al., "Vista-LLaMA: Reducing Hallucination in Video
  Language Models via Equal Distance to Visual Tokens", arXiv:2312.08870): 1-D RoPE within each modality, no
  rotation between a visual and a text token (:attr:`Scheme.split_modalities`); ``docs/vista.md``.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

__all__ = ['Scheme', 'Block', 'TEXT', 'IMAGE', 'VIDEO', 'V2PE_STRIDES', 'HOPE_GAMMAS', 'get_scheme', 'list_schemes',
           'register_scheme', 'sample_v2pe_stride', 'sample_hope_gamma']

TEXT, IMAGE, VIDEO = 0, 1, 2
MODALITY_NAME = {IMAGE: 'image', VIDEO: 'video'}

#: V2PE training-time strides (delta = stride / 256), Ge et al., Sec. 3.2.
V2PE_STRIDES = (1, 2, 4, 8, 16, 32, 64, 128, 256)

#: HoPE training-time temporal scales gamma (Li et al., Sec. 4.2, dynamic temporal scaling).
HOPE_GAMMAS = (0.5, 0.75, 1.0, 1.25, 1.5)


@dataclass(frozen=True)
class Block:
    """A run of tokens: text (``n`` tokens) or one visual grid (``t*h*w`` tokens, merged LLM-side grid).

    ``tiles = (cols, rows)``: a tiled image (InternVL / CoMemo AnyRes): ``cols * rows`` tiles of ``h x w`` tokens in
    crop order (row-major), then, when there is more than one tile, the ``h x w`` thumbnail of the whole image."""
    modality: int
    n: int
    t: int = 1
    h: int = 1
    w: int = 1
    second_per_grid_t: Optional[float] = None
    tiles: Optional[Tuple[int, int]] = None


def frame_row_col(b: Block) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Frame, row and column ``(n,)`` int64 of every token of a visual block (frame-major, then raster order)."""
    # broadcast + reshape, not repeat_interleave with a symbolic count (wrong length in ONNX Runtime after export)
    def along(axis: int, size: int) -> torch.Tensor:
        shape = [1, 1, 1]
        shape[axis] = size
        return torch.arange(size, dtype=torch.int64).view(shape).expand(b.t, b.h, b.w).reshape(-1)
    return along(0, b.t), along(1, b.h), along(2, b.w)


def _check_head_dim(head_dim) -> int:
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim <= 0 or head_dim % 2:
        raise ValueError(f'head_dim must be a positive even int, got {head_dim!r}')
    return head_dim // 2


def _scaled_section(name: str, base: Sequence[int], total: int, unit: str) -> List[int]:
    """``base`` (summing to ``sum(base)``) scaled to ``total``; ValueError when the scaling is not exact."""
    ref = sum(base)
    if any((total * b) % ref for b in base):
        raise ValueError(f'no exact default mrope_section for scheme {name!r} with {unit} = {total} (the published '
                         f'split is {list(base)} of {ref}); fix: pass mrope_section=[t, h, w] summing to {total}')
    return [total * b // ref for b in base]


class Scheme:
    """One multimodal RoPE scheme. Subclasses override the parts that differ.

    Attributes:
        name: canonical name (aliases map to the same object).
        axis_names: names of the position axes, first dim ``A`` of ``position_ids``.
        defaults: the scheme's options and their default values.
        float_positions: positions are float32 (otherwise int64).
        float_deltas: ``rope_deltas`` are float32 (fractional next positions), otherwise int64.
        style: default token sequence of :func:`get_layout_position_ids` (``'qwen2'``, ``'qwen3'``).
        needs_grids: visual runs need ``*_grid_thw`` (False: each run of visual tokens is one block).
        default_section: published ``[t, h, w]`` split of the allocation unit, or ``None``.
        per_head: the allocation is per key head (MHRoPE) instead of per rotary pair.
        per_layer: the ids depend on the decoder layer (PyPE): the scheme has a ``layer`` option, and the encoding
            lays the sequence out once per layer (ids ``(depth + 1, A, B, L)``: one slice per layer, then the visual
            frame index of every token, -1 for text) and restricts attention inside each visual frame
            (:func:`zoo.encodings.multimodal.encoding.image_block_mask`).
        contextual: positions also come from the attention itself (CoPE): the encoding holds a learned table per
            layer (options ``npos``, ``divide``) and adds the contextual term to the attention logits.
        split_modalities: rotation only between tokens of the same modality (Vista-LLaMA): the second id axis holds
            -1 on visual tokens, and the attention gets split q/k channels
            (:class:`zoo.encodings.multimodal.encoding.VistaTerm`).
        takes_tiles: visual blocks may be tiled images (``Block.tiles``); the other schemes refuse a tiled layout.
        in_video_llm: the scheme has ``pe_vlm_*`` models (False for a scheme whose input the video-LLM lacks).
        hf_refusal: why ``zoo.hf.patch_rope_index`` cannot put the scheme into a Hugging Face model (it replaces one
            id set shared by every layer), or ``None`` when it can.
        paper: title and arXiv id.
    """
    name: str = ''
    axis_names: Tuple[str, ...] = ('pos',)
    defaults: Mapping[str, Any] = {}
    float_positions: bool = False
    float_deltas: bool = False
    style: str = 'qwen2'
    needs_grids: bool = True
    default_section: Optional[Tuple[int, int, int]] = None
    per_head: bool = False
    per_layer: bool = False
    contextual: bool = False
    split_modalities: bool = False
    takes_tiles: bool = False
    in_video_llm: bool = True
    hf_refusal: Optional[str] = None
    paper: str = ''

    def __init__(self, name: str, **defaults: Any):
        self.name = name
        self.defaults = {**type(self).defaults, **defaults}

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.name!r}, {dict(self.defaults)})'

    @property
    def num_axes(self) -> int:
        return len(self.axis_names)

    # -- options ------------------------------------------------------------------------------------------------
    def options(self, kwargs: Mapping[str, Any]) -> Dict[str, Any]:
        """Defaults updated by ``kwargs``, validated. Raises ValueError for unknown or bad options."""
        unknown = sorted(set(kwargs) - set(self.defaults))
        if unknown:
            allowed = sorted(self.defaults) or 'none'
            raise ValueError(f'scheme {self.name!r} got unknown option(s) {unknown}; fix: its options are {allowed}')
        opts = dict(self.defaults)
        opts.update(kwargs)
        return self.check_options(opts)

    def check_options(self, opts: Dict[str, Any]) -> Dict[str, Any]:
        return opts

    def check_seconds(self, opts: Mapping[str, Any], seconds: Optional[List[float]]) -> None:
        """Raise when ``second_per_grid_ts`` is given to a scheme that would silently ignore it on purpose."""

    def split_video_frames(self, opts: Mapping[str, Any]) -> bool:
        """A video grid ``[T, h, w]`` becomes ``T`` frame blocks (Qwen3-VL puts timestamp text before each)."""
        return False

    def check_layout(self, opts: Mapping[str, Any], style: str) -> None:
        """Raise for option/style combinations that cannot describe one token sequence."""

    def training_options(self, rng: random.Random) -> Dict[str, Any]:
        """Options drawn per sample in training (V2PE stride, HoPE gamma); empty for the other schemes."""
        return {}

    def uses_seconds(self, opts: Mapping[str, Any]) -> bool:
        """Whether video ids depend on ``second_per_grid_ts`` under options ``opts`` (defaults for the options
        ``opts`` leaves out): Qwen2.5-VL's absolute time (``tokens_per_second``). False for the other schemes, which
        ignore the clip timing (a caller passes it only when this is True)."""
        return False

    def layout_style(self, segments: Sequence[Mapping[str, Any]]) -> str:
        """The prompt style of a layout (:func:`get_layout_position_ids` without ``style``): :attr:`style`."""
        return self.style

    def fit_kv_heads(self, num_kv_heads: int) -> int:
        """The smallest key-head count ``>= num_kv_heads`` whose frequency allocation the scheme can make with its
        published split: ``num_kv_heads`` itself unless the allocation is per key head (MHRoPE)."""
        return num_kv_heads

    # -- ids ----------------------------------------------------------------------------------------------------
    def visual(self, opts: Mapping[str, Any], s, b: Block) -> torch.Tensor:
        """Positions ``(A, n)`` (int64, or float64 for float schemes) of visual block ``b`` that starts at the free
        position ``s``. Pure tensor arithmetic on the block's sizes (no reads of tensor values)."""
        return (s + torch.arange(b.n, dtype=torch.int64)).unsqueeze(0)

    def extent(self, opts: Mapping[str, Any], b: Block):
        """How far visual block ``b`` moves the next free position (the next token starts at ``s + extent``)."""
        return b.n

    # -- frequencies --------------------------------------------------------------------------------------------
    def section(self, head_dim: int, num_kv_heads: int, mrope_section: Optional[Sequence[int]]) -> List[int]:
        """The ``[t, h, w]`` split in the allocation unit (pairs, or key heads when ``per_head``)."""
        total = num_kv_heads if self.per_head else head_dim // 2
        unit = 'num_kv_heads' if self.per_head else 'head_dim/2'
        if mrope_section is None:
            return _scaled_section(self.name, self.default_section, total, unit)
        sec = [int(x) for x in mrope_section]
        if len(sec) != 3 or min(sec) < 0 or sum(sec) != total:
            what = 'key-head' if self.per_head else 'pair'
            raise ValueError(f'mrope_section {list(mrope_section)} must be three non-negative {what} counts [t, h, w] '
                             f'summing to {unit} = {total} for scheme {self.name!r} (head_dim={head_dim}, '
                             f'num_kv_heads={num_kv_heads}); fix: e.g. {self._example(total)} or adjust the geometry')
        return sec

    def _example(self, total: int) -> List[int]:
        base = self.default_section
        ref = sum(base)
        ex = [total * b // ref for b in base]
        ex[0] += total - sum(ex)
        return ex

    def pair_axes(self, half: int, section: Optional[List[int]]) -> torch.Tensor:
        """``(half,)`` int64 axis of each rotary pair (``-1``: not rotated). Default: every pair on axis 0."""
        return torch.zeros(half, dtype=torch.int64)

    def allocation(self, head_dim: int, num_kv_heads: int = 1,
                   mrope_section: Optional[Sequence[int]] = None) -> torch.Tensor:
        """Which position axis drives each rotary pair of each key head.

        Pair ``j`` rotates with frequency ``theta^(-2j/head_dim)``; in the ``half`` (rotate-half) layout it is
        channels ``j`` and ``j + head_dim/2``.

        Returns:
            ``(1, head_dim // 2)`` int64 (the same for every head), or ``(num_kv_heads, head_dim // 2)`` for per-head
            schemes; ``-1`` marks a pair that is not rotated.

        Raises:
            ValueError: odd/non-positive ``head_dim``, bad ``num_kv_heads``, or a section that does not fit.
        """
        half = _check_head_dim(head_dim)
        if isinstance(num_kv_heads, bool) or not isinstance(num_kv_heads, int) or num_kv_heads < 1:
            raise ValueError(f'num_kv_heads must be a positive int, got {num_kv_heads!r}')
        section = None if self.default_section is None else self.section(head_dim, num_kv_heads, mrope_section)
        return self.pair_axes(half, section).unsqueeze(0)


# ---------------------------------------------------------------------------------------------------------------
# the schemes
# ---------------------------------------------------------------------------------------------------------------

class Rope1D(Scheme):
    """Vanilla 1-D RoPE: every token, visual or not, advances the one position by 1."""
    paper = 'RoFormer: Enhanced Transformer with Rotary Position Embedding (Su et al., arXiv:2104.09864)'


class MRoPE(Scheme):
    """M-RoPE (Qwen2-VL): a block starting at ``s`` puts frame ``f``, row ``r``, column ``c`` at ``(s + tau(f), s + r,
    s + c)``; ``tau(f) = f`` (Qwen2-VL) or ``floor(f * second_per_grid_t * tokens_per_second)`` (Qwen2.5-VL, in
    float64, one cast at the end). The next token is at ``1 +`` the largest id of the block. Pairs in contiguous
    chunks ``mrope_section = [16, 24, 24]`` (head_dim 128)."""
    axis_names = ('t', 'h', 'w')
    defaults = {'tokens_per_second': None}
    default_section = (16, 24, 24)
    paper = ('Qwen2-VL (Wang et al., arXiv:2409.12191), Sec. 2.1; Qwen2.5-VL (Bai et al., arXiv:2502.13923), '
             'Sec. 2.1.3')

    def check_options(self, opts):
        if opts['tokens_per_second'] is not None:
            tps = float(opts['tokens_per_second'])
            if not (tps > 0 and math.isfinite(tps)):
                raise ValueError(f'tokens_per_second must be a positive number, got {opts["tokens_per_second"]!r}; '
                                 'fix: released Qwen2.5-VL checkpoints use 2')
        return opts

    def uses_seconds(self, opts):
        return opts.get('tokens_per_second', self.defaults['tokens_per_second']) is not None

    def check_seconds(self, opts, seconds):
        if seconds is not None and opts['tokens_per_second'] is None:
            raise ValueError(f'scheme {self.name!r} is Qwen2-VL M-RoPE (tau = frame index) and ignores '
                             "second_per_grid_ts; fix: pass tokens_per_second=2 or use scheme='qwen2_5_vl' for "
                             'Qwen2.5-VL temporal scaling')

    def tau(self, opts, b: Block) -> torch.Tensor:
        tps = opts['tokens_per_second']
        if b.modality == VIDEO and tps is not None:
            sec = 1.0 if b.second_per_grid_t is None else b.second_per_grid_t
            return (torch.arange(b.t, dtype=torch.float64) * float(sec) * float(tps)).floor().to(torch.int64)
        return torch.arange(b.t, dtype=torch.int64)

    def visual(self, opts, s, b):
        f, r, c = frame_row_col(b)
        return torch.stack([s + self.tau(opts, b)[f], s + r, s + c])

    def extent(self, opts, b):
        tps = opts['tokens_per_second']
        if b.modality == VIDEO and tps is not None:  # the same float64 product as tau(), in Python
            sec = 1.0 if b.second_per_grid_t is None else b.second_per_grid_t
            last = math.floor(float(b.t - 1) * float(sec) * float(tps))
        else:
            last = b.t - 1
        return max(last, b.h - 1, b.w - 1) + 1

    def pair_axes(self, half, section):
        return torch.repeat_interleave(torch.arange(3), torch.tensor(section))


class MRoPEInterleave(MRoPE):
    """MRoPE-Interleave (Qwen3-VL): M-RoPE ids on per-frame video blocks (``tau = f * temporal_stride``;
    ``spatial_reset`` makes h/w local to the block), pairs interleaved t, h, w, t, h, w, ... with
    ``mrope_section = [24, 20, 20]``: pair ``j`` uses h when ``j % 3 == 1`` and ``j < 3 * h``, w when ``j % 3 == 2``
    and ``j < 3 * w``, t otherwise."""
    defaults = {'spatial_reset': False, 'temporal_stride': 1, 'split_video_frames': True}
    default_section = (24, 20, 20)
    style = 'qwen3'
    paper = ('Revisiting Multimodal Positional Encoding in Vision-Language Models (Huang et al., arXiv:2510.23095); '
             'Qwen3-VL')

    def check_options(self, opts):
        ts = opts['temporal_stride']
        if isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
            raise ValueError(f'temporal_stride must be a non-negative int, got {ts!r}; fix: Qwen3-VL uses 1')
        return opts

    def check_seconds(self, opts, seconds):
        pass

    def uses_seconds(self, opts):
        return False

    def split_video_frames(self, opts):
        return bool(opts['split_video_frames'])

    def check_layout(self, opts, style):
        if not opts['split_video_frames'] and style == 'qwen3':
            raise ValueError('split_video_frames=False needs an un-split video layout; fix: pass style="qwen2"')

    def visual(self, opts, s, b):
        f, r, c = frame_row_col(b)
        base = 0 if opts['spatial_reset'] else s
        return torch.stack([s + f * int(opts['temporal_stride']), base + r, base + c])

    def extent(self, opts, b):
        return max((b.t - 1) * int(opts['temporal_stride']), b.h - 1, b.w - 1) + 1

    def pair_axes(self, half, section):
        j = torch.arange(half)
        out = torch.zeros(half, dtype=torch.int64)
        out[(j % 3 == 1) & (j < 3 * section[1])] = 1
        out[(j % 3 == 2) & (j < 3 * section[2])] = 2
        if int((out == 1).sum()) != section[1] or int((out == 2).sum()) != section[2]:
            raise ValueError(f'interleaved mrope_section {section} does not fit head_dim/2 = {half} pairs (h and w '
                             'take every third pair); fix: keep h, w <= t, e.g. [24, 20, 20] for head_dim 128')
        return out


class MHRoPE(MRoPEInterleave):
    """MHRoPE (Huang et al., arXiv:2510.23095): MRoPE-Interleave's ids; each key head rotates all its pairs (the full
    frequency range) with one axis: ``mrope_section = [t, h, w]`` key-head counts, published ``[2, 3, 3]`` of 8
    heads, scaled proportionally for other head counts. Query heads follow their key group (GQA)."""
    default_section = (2, 3, 3)
    per_head = True

    def fit_kv_heads(self, num_kv_heads):
        """A multiple of the published split's head count (8 for ``[2, 3, 3]``), at least ``num_kv_heads``."""
        unit = sum(self.default_section)
        return -(-num_kv_heads // unit) * unit

    def allocation(self, head_dim, num_kv_heads=1, mrope_section=None):
        half = _check_head_dim(head_dim)
        if isinstance(num_kv_heads, bool) or not isinstance(num_kv_heads, int) or num_kv_heads < 1:
            raise ValueError(f'num_kv_heads must be a positive int, got {num_kv_heads!r}')
        section = self.section(head_dim, num_kv_heads, mrope_section)
        heads = torch.repeat_interleave(torch.arange(3), torch.tensor(section))
        return heads[:, None].expand(num_kv_heads, half).clone()


class VRoPE(Scheme):
    """VRoPE: four coordinates; frame ``f`` of an ``H x W`` block at ``s``: row ``i``, column ``j`` at ``base + (i + j,
    i + W-1-j, H-1-i + j, H-1-i + W-1-j)``, ``base = s + f (H + W - 1)``; the block uses ``T (H + W - 1)`` ids. Pair
    ``k`` uses coordinate ``k % 4`` (the official code forces the temporal-centre share to 0; followed)."""
    axis_names = ('p1', 'p2', 'p3', 'p4')
    paper = 'VRoPE: Rotary Position Embedding for Video Large Language Models (Liu et al., arXiv:2502.11664)'

    def visual(self, opts, s, b):
        f, r, c = frame_row_col(b)
        span = b.h + b.w - 1
        base = s + f * span
        rr, cc = b.h - 1 - r, b.w - 1 - c
        return torch.stack([base + r + c, base + r + cc, base + rr + c, base + rr + cc])

    def extent(self, opts, b):
        return b.t * (b.h + b.w - 1)

    def pair_axes(self, half, section):
        return torch.arange(half) % 4


class V2PE(Scheme):
    """V2PE (``v2pe_fix``): one float position; visual token ``k = 1..n`` of a block gets ``p + k * delta`` (``p`` the
    position of the token before it, ``delta = stride / 256``); the next token is at ``ceil(p + n * delta) + 1``."""
    defaults = {'stride': 64, 'delta': None, 'num_image_token': 256}
    float_positions = True
    needs_grids = False
    paper = 'V2PE: Improving Multimodal Long-Context Capability of VLMs (Ge et al., arXiv:2412.09616)'

    def check_options(self, opts):
        stride, delta, nit = opts['stride'], opts['delta'], opts['num_image_token']
        if delta is not None:
            d = delta if isinstance(delta, Fraction) else Fraction(delta).limit_denominator(1 << 20)
        else:
            if isinstance(nit, bool) or not isinstance(nit, int) or nit <= 0:
                raise ValueError(f'num_image_token must be a positive int, got {nit!r}; fix: InternVL uses 256')
            d = Fraction(stride).limit_denominator(1 << 20) / nit
        if not d > 0:
            raise ValueError(f'V2PE delta must be positive, got stride={stride!r}, delta={delta!r}; '
                             f'fix: pass stride in {V2PE_STRIDES} (delta = stride / 256)')
        opts['delta'] = d  # exact fraction, so that ceil(n * delta) has no rounding error
        return opts

    def training_options(self, rng):
        return {'stride': sample_v2pe_stride(rng)}

    def layout_style(self, segments):
        """``'internvl'`` (``<img> ... </img>``) when a segment has ``num_tiles`` (InternVL tiles), else ``'qwen2'``."""
        return 'internvl' if any('num_tiles' in s for s in segments) else self.style

    def visual(self, opts, s, b):
        k = torch.arange(1, b.n + 1, dtype=torch.float64)
        return ((s - 1) + k * float(opts['delta'])).unsqueeze(0)

    def extent(self, opts, b):
        delta: Fraction = opts['delta']
        return -((-b.n * delta.numerator) // delta.denominator)  # ceil(n * delta), exact


class VideoRoPE(Scheme):
    """VideoRoPE: diagonal layout; a block at ``s`` puts frame ``f``, row ``r``, column ``c`` at ``t = s + delta * f``,
    ``h = t + r - floor((H-1)/2)``, ``w = t + c - floor((W-1)/2)``; the next token is at ``s + delta (T-1) + 1`` (only
    t counts). Low-frequency temporal allocation: the first ``2 * h`` pairs alternate h (even) and w (odd), the last
    ``t`` (lowest frequencies) use t; ``mrope_section = [16, 24, 24]`` at head_dim 128."""
    axis_names = ('t', 'h', 'w')
    defaults = {'delta': 2.0}
    default_section = (16, 24, 24)
    float_positions = True
    float_deltas = True
    paper = 'VideoRoPE: What Makes for Good Video Rotary Position Embedding? (Wei et al., arXiv:2502.05173)'
    scale_key = 'delta'

    def check_options(self, opts):
        v = opts[self.scale_key]
        try:
            ok = not isinstance(v, bool) and float(v) > 0 and math.isfinite(float(v))
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(f'{self.name} temporal scale {self.scale_key} must be a positive number, got {v!r}; '
                             f'fix: e.g. {self.scale_key}={self.defaults[self.scale_key]}')
        opts[self.scale_key] = float(v)
        return opts

    def visual(self, opts, s, b):
        f, r, c = frame_row_col(b)
        scale = opts[self.scale_key]
        t = s + scale * f.to(torch.float64)
        return torch.stack([t, t + (r - (b.h - 1) // 2), t + (c - (b.w - 1) // 2)])

    def extent(self, opts, b):
        return opts[self.scale_key] * (b.t - 1) + 1

    def section(self, head_dim, num_kv_heads, mrope_section):
        sec = super().section(head_dim, num_kv_heads, mrope_section)
        if sec[1] != sec[2]:
            raise ValueError(f'{self.name} alternates h and w pairs, so mrope_section needs equal h and w shares, got '
                             f'{sec}; fix: e.g. {self._example(head_dim // 2)}')
        return sec

    def pair_axes(self, half, section):
        spatial = 2 * section[1]
        j = torch.arange(half)
        return torch.where(j < spatial, 1 + (j % 2), torch.zeros_like(j))


class HoPE(VideoRoPE):
    """HoPE: VideoRoPE's layout with temporal scale ``gamma`` (drawn per sample in training from
    :data:`HOPE_GAMMAS`, fixed at inference; default 1.0), the lowest-frequency ``t`` pairs set to zero frequency
    (cos 1, sin 0: no rotation, NoPE), the other pairs alternating h/w as in VideoRoPE."""
    defaults = {'gamma': 1.0}
    paper = ('HoPE: Hybrid of Position Embedding for Length Generalization in Vision-Language Models (Li et al., '
             'arXiv:2505.20444)')
    scale_key = 'gamma'

    def training_options(self, rng):
        return {'gamma': sample_hope_gamma(rng)}

    def pair_axes(self, half, section):
        out = super().pair_axes(half, section)
        out[out == 0] = -1
        return out


class PyPE(Scheme):
    """PyPE: one 1-D position; at layer ``l`` a visual frame (``h x w`` merged tokens) starting at ``s`` puts the token
    of ring ``p = min(r, c, h-1-r, w-1-c)`` (Chebyshev distance to the border) at ``s + min(p, n_lev(l) - 1)``, with
    ``n_lev(l) = max(R - l // jump, 1)`` and ``R = ceil(min(h, w) / 2)`` rings: the border is level 0, the centre the
    highest level (next to the text that follows), and every ``jump`` layers the innermost two levels merge. The next
    token is at ``s + n_lev(l)``; the frames of a video follow one another (frame ``f`` at ``s + f * n_lev(l)``).
    Inside a frame, query ``i`` attends key ``j`` iff ``level[j] <= level[i]`` (not raster-causal); elsewhere the
    attention is causal.

    ``official=True`` uses ``R = floor(min(h, w) / 2)``: the official code's odd grids lose their centre ring (5x5 has
    levels 0 and 1 at layer 0), and decoding reads the cache length of layer 0 in every layer, so after layer 0 each
    decoding step sits one position too far (``rope_deltas`` + 1 there).
    """
    defaults = {'jump': 1, 'layer': 0, 'official': False}
    per_layer = True
    hf_refusal = ('PyPE gives every decoder layer its own ids and restricts attention inside each image, while '
                  'get_rope_index returns one id set for all layers')
    paper = ('Advancing General Multimodal Capability of Vision-language Models with Pyramid-descent Visual Position '
             'Encoding (Chen et al., arXiv:2501.10967)')

    def check_options(self, opts):
        for key, low in (('jump', 1), ('layer', 0)):
            v = opts[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f'pype {key} must be an int >= {low}, got {v!r}; fix: e.g. jump=1 (rings merge every '
                                 'layer) or 2')
        if not isinstance(opts['official'], bool):
            raise ValueError(f'pype official must be True or False, got {opts["official"]!r}')
        return opts

    def num_levels(self, opts, h: int, w: int) -> int:
        """``n_lev`` of an ``h x w`` frame at ``opts['layer']``."""
        rings = min(h, w) // 2 if opts['official'] else (min(h, w) + 1) // 2
        return max(rings - opts['layer'] // opts['jump'], 1)

    def visual(self, opts, s, b):
        f, r, c = frame_row_col(b)
        ring = torch.minimum(torch.minimum(r, c), torch.minimum(b.h - 1 - r, b.w - 1 - c))
        n = self.num_levels(opts, b.h, b.w)
        return (s + f * n + ring.clamp(max=n - 1)).unsqueeze(0)

    def extent(self, opts, b):
        return b.t * self.num_levels(opts, b.h, b.w)

    def decode_shift(self, opts) -> int:
        """Added to ``rope_deltas`` of layer ``opts['layer']`` of a row that holds a visual block: 1 after layer 0
        with ``official`` (the official decoding bug), else 0."""
        return int(opts['official'] and opts['layer'] > 0)


class CoPE(Scheme):
    """CoPE: 1-D ids as ``rope1d`` (text and visual tokens advance by 1), plus contextual positions inside the causal
    attention (:mod:`zoo.encodings.multimodal.cope`): gates ``sigmoid(q . k / sqrt(d))`` summed back from the query,
    clamped to ``npos - 1``, and a learned table of ``npos`` embeddings per layer. ``cope`` rotates nothing (CoPE
    alone); ``cope_rope`` also rotates every pair with 1-D RoPE (the gates then see rotated q and k).

    Options (fixed at construction, they shape the table): ``npos`` (64) and ``divide`` (False: the paper's
    ``q.k / sqrt(d) + pos_logit``; True: the official default ``(q.k + pos_logit) / sqrt(d)``).
    """
    defaults = {'npos': 64, 'divide': False}
    contextual = True
    hf_refusal = ("CoPE's positions are computed inside the attention from q . k and a learned table per layer, "
                  'not given by position ids')
    paper = ("Contextual Position Encoding: Learning to Count What's Important (Golovneva et al., "
             'arXiv:2405.18719)')

    def __init__(self, name: str, rotate: bool = False, **defaults: Any):
        super().__init__(name, **defaults)
        self.rotate = rotate

    def check_options(self, opts):
        n = opts['npos']
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ValueError(f'cope npos (the size of the position table) must be an int >= 2, got {n!r}; fix: e.g. '
                             'npos=64 (contextual positions clamp at npos - 1)')
        if not isinstance(opts['divide'], bool):
            raise ValueError(f'cope divide must be True or False, got {opts["divide"]!r}')
        return opts

    def pair_axes(self, half, section):
        return torch.zeros(half, dtype=torch.int64) if self.rotate else torch.full((half,), -1, dtype=torch.int64)


class Vista(Scheme):
    """Vista-LLaMA: 1-D positions as ``rope1d`` (axis ``pos``); the attention logit of a query and a key of the same
    modality is the rotated ``q . k``, of a visual and a text token the un-rotated ``q . k`` (equal distance: a text
    token sees every visual token as if at distance 0, however long the text grows). The second axis ``text`` is the
    position on text tokens and -1 on visual tokens; it marks the modality for the attention and is never rotated.
    """
    axis_names = ('pos', 'text')
    split_modalities = True
    hf_refusal = ('Vista removes the rotation between visual and text tokens inside the attention, which a position '
                  'id set cannot express')
    paper = ('Vista-LLaMA: Reducing Hallucination in Video Language Models via Equal Distance to Visual Tokens (Ma et '
             'al., arXiv:2312.08870)')

    def visual(self, opts, s, b):
        pos = s + torch.arange(b.n, dtype=torch.int64)
        return torch.stack([pos, torch.full_like(pos, -1)])


class RoPEDHR(Scheme):
    """RoPE-DHR (CoMemo): 1-D positions; a tiled image (``Block.tiles = (cols, rows)``, tiles of ``h x w`` tokens
    then the ``h x w`` thumbnail) starting at ``s`` gives thumbnail token ``(R, C)`` the position ``s + w R + C`` and
    every tile token the position of the thumbnail token its centre lies on: tile ``(row j, col i)`` token ``(a, c)``
    maps to ``R = floor((h j + a + 1/2) / rows)``, ``C = floor((w i + c + 1/2) / cols)``. The image moves the next
    position by ``h * w`` however many tiles it has. An untiled block (or one tile) is numbered as ``rope1d``.

    ``official=True`` reproduces LALBJ/CoMemo: tiles are numbered column by column (``for i in cols: for j in rows``)
    while they are cropped row by row, so on grids with more than one row and column a tile takes another region's
    positions; and ``R = int(linspace(j sh, (j+1) sh, h)[a])`` with ``sh = h / rows - 1e-6`` (likewise ``C``), which
    starts every tile after the first one thumbnail row/column early.
    """
    defaults = {'official': False}
    takes_tiles = True
    hf_refusal = ("RoPE-DHR numbers the tiles of InternVL-style tiled images, which Qwen-VL's get_rope_index "
                  'inputs do not have')
    paper = 'CoMemo: LVLMs Need Image Context with Image Memory (Liu et al., arXiv:2506.06279)'

    def check_options(self, opts):
        if not isinstance(opts['official'], bool):
            raise ValueError(f'rope_dhr official must be True or False, got {opts["official"]!r}')
        return opts

    def layout_style(self, segments):
        """``'internvl'`` (``<img> ... </img>``, as CoMemo's chat format) when a segment has tiles."""
        return 'internvl' if any('tiles' in s or 'num_tiles' in s for s in segments) else self.style

    @staticmethod
    def _official_axis(k: int, parts: int, size: int) -> torch.Tensor:
        """``int(linspace(k * step, (k + 1) * step, size))`` with ``step = size / parts - 1e-6`` (float64)."""
        step = size / parts - 1e-6
        lo, hi = k * step, (k + 1) * step
        v = lo + torch.arange(size, dtype=torch.float64) * ((hi - lo) / (size - 1))
        v[-1] = hi
        return v.floor().to(torch.int64)

    def tile_positions(self, opts, b: Block) -> torch.Tensor:
        """Thumbnail index ``w R + C`` ``(cols * rows * h * w,)`` int64 of every tile token, in sequence order."""
        cols, rows = b.tiles
        out = []
        a = torch.arange(b.h, dtype=torch.int64)
        c = torch.arange(b.w, dtype=torch.int64)
        for t in range(cols * rows):
            if opts['official']:
                i, j = t // rows, t % rows
                rr, cc = self._official_axis(j, rows, b.h), self._official_axis(i, cols, b.w)
            else:
                j, i = t // cols, t % cols
                rr = (2 * (b.h * j + a) + 1) // (2 * rows)
                cc = (2 * (b.w * i + c) + 1) // (2 * cols)
            out.append((b.w * rr[:, None] + cc[None, :]).flatten())
        return torch.cat(out)

    def visual(self, opts, s, b):
        thumb = torch.arange(b.h * b.w, dtype=torch.int64)
        if b.tiles is None or b.tiles[0] * b.tiles[1] == 1:
            return (s + torch.arange(b.n, dtype=torch.int64)).unsqueeze(0)
        return (s + torch.cat([self.tile_positions(opts, b), thumb])).unsqueeze(0)

    def extent(self, opts, b):
        return b.n if b.tiles is None else b.h * b.w


class _FrameIndex(Scheme):
    """Internal: every token of visual frame ``f`` of a block at ``s`` gets ``s + f`` (text advances by 1), so equal
    ids of visual tokens of one document mean one frame."""

    def visual(self, opts, s, b):
        f, _, _ = frame_row_col(b)
        return (s + f).unsqueeze(0)

    def extent(self, opts, b):
        return b.t


FRAME_INDEX = _FrameIndex('_frame_index')


# ---------------------------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------------------------

_SCHEMES: Dict[str, Scheme] = {}


def register_scheme(scheme: Scheme, *aliases: str) -> Scheme:
    """Add ``scheme`` under its name and ``aliases`` (the same object). Raises ValueError on a taken name."""
    for n in (scheme.name, *aliases):
        if n in _SCHEMES and _SCHEMES[n] is not scheme:
            raise ValueError(f'multimodal RoPE scheme name {n!r} is already registered')
        _SCHEMES[n] = scheme
    return scheme


register_scheme(Rope1D('rope1d'))
register_scheme(MRoPE('mrope'), 'qwen2_vl')
register_scheme(MRoPE('qwen2_5_vl', tokens_per_second=2))
register_scheme(MRoPEInterleave('mrope_interleave'), 'mrope_i', 'qwen3_vl')
register_scheme(MHRoPE('mhrope'))
register_scheme(VRoPE('vrope'))
register_scheme(V2PE('v2pe'))
register_scheme(VideoRoPE('videorope'))
register_scheme(HoPE('hope'))
register_scheme(PyPE('pype'))
register_scheme(CoPE('cope'))
register_scheme(CoPE('cope_rope', rotate=True))
register_scheme(Vista('vista'))
register_scheme(RoPEDHR('rope_dhr'))


def list_schemes() -> List[str]:
    """Every accepted scheme name, aliases included."""
    return sorted(_SCHEMES)


def get_scheme(name: Union[str, Scheme]) -> Scheme:
    """The scheme object registered as ``name`` (a :class:`Scheme` is returned as it is). Raises ValueError naming
    the accepted names."""
    if isinstance(name, Scheme):
        return name
    if not isinstance(name, str) or name not in _SCHEMES:
        raise ValueError(f'unknown multimodal RoPE scheme {name!r}; fix: use one of {list_schemes()}')
    return _SCHEMES[name]


def _draw(generator: Optional[random.Random], values: Sequence, what: str, fix: str):
    values = list(values)
    if not values or any(not float(v) > 0 for v in values):
        raise ValueError(f'{what} must be a non-empty list of positive numbers, got {values}; fix: use {fix}')
    rng = generator if generator is not None else random
    return rng.choice(values)


def sample_v2pe_stride(generator: Optional[random.Random] = None, strides: Sequence[int] = V2PE_STRIDES) -> int:
    """Draw a V2PE training stride uniformly from ``strides`` (default ``{1, 2, 4, ..., 256}``).

    V2PE trains with a visual increment ``delta = stride / 256`` drawn per sample (Ge et al., Sec. 3.2); inference
    uses one fixed stride. Pass the result as ``stride=`` to ``get_position_ids``.

    Args:
        generator: a ``random.Random`` for reproducibility; the module-level RNG when ``None``.
        strides: candidate strides (positive ints).

    Raises:
        ValueError: ``strides`` is empty or holds a non-positive value.
    """
    return int(_draw(generator, strides, 'strides', 'V2PE_STRIDES'))


def sample_hope_gamma(generator: Optional[random.Random] = None, gammas: Sequence[float] = HOPE_GAMMAS) -> float:
    """Draw a HoPE training temporal scale uniformly from ``gammas`` (default ``{0.5, 0.75, 1, 1.25, 1.5}``).

    HoPE's dynamic temporal scaling trains with a scale drawn per sample and evaluates with one fixed scale
    (Li et al., arXiv:2505.20444, Sec. 4.2). Pass the result as ``gamma=`` to ``get_position_ids``.

    Raises:
        ValueError: ``gammas`` is empty or holds a non-positive value.
    """
    return float(_draw(generator, gammas, 'gammas', 'HOPE_GAMMAS'))
