"""Multimodal RoPE tables and the registered encoding ``multimodal_rope``.

Angles: ``angle[b, h, l, j] = position_ids[axis[h, j], b, l] * theta^(-2j/head_dim)`` with the scheme's allocation
``axis`` (:meth:`Scheme.allocation`; a pair with axis ``-1`` gets angle 0, i.e. is not rotated). Tables are built by
:func:`zoo.encodings.rotation.rope_sin_cos` in the ``half`` (rotate-half, Hugging Face Qwen) layout and applied by
the zoo's one rotation kernel :func:`zoo.encodings.rotation.apply_rope` through :class:`RotaryTerm`. Angles, sin and
cos are float32; rotated tensors keep their dtype.
"""
from __future__ import annotations

import math
import random
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from .._cache import TableCache, caching_allowed
from ..base import AttnTerm, Positions, PosEncoding
from ..extrapolation import ROTARY_STRATEGIES, Extrapolation, ntk_exponents
from ..registry import register_pos_encoding
from ..rotary import RotaryTerm
from ..rotation import apply_rope, check_p_rope, p_rope_mask, rope_frequencies, rope_sin_cos
from .ids import decode_position_ids, get_position_ids
from .cope import cope_bias
from .mspoe import mspoe_head_order, mspoe_head_ratios, mspoe_ratios
from .schemes import FRAME_INDEX, IMAGE, VIDEO, Block, get_scheme

__all__ = ['MsPoETerm', 'FrameMaskTerm', 'CoPETerm', 'VistaTerm', 'image_block_mask', 'image_block_mask_rows',
           'axis_of_pair', 'axis_table',
           'default_mrope_section', 'head_frequencies', 'harpe_bases', 'multimodal_rope_tables',
           'multimodal_rope_cos_sin',
           'apply_multimodal_rope', 'MultimodalRoPE']

LAYOUT = 'half'


def default_mrope_section(scheme: str, head_dim: int, num_kv_heads: int = 8) -> list:
    """The published ``mrope_section`` scaled to ``head_dim`` (pairs) or, for ``mhrope``, to ``num_kv_heads`` (key
    heads), when the scaling is exact: ``[16, 24, 24]`` M-RoPE / VideoRoPE / HoPE and ``[24, 20, 20]`` MRoPE-I at
    head_dim 128 (``[8, 12, 12]`` at 64), ``[2, 3, 3]`` MHRoPE at 8 key heads.

    Raises:
        ValueError: the scheme has no section, or the proportional scaling is not exact.
    """
    spec = get_scheme(scheme)
    if spec.default_section is None:
        raise ValueError(f'scheme {scheme!r} has no mrope_section (all pairs share its one position rule)')
    return spec.section(head_dim, num_kv_heads, None)


def axis_table(scheme: str, head_dim: int, num_kv_heads: int = 1,
               mrope_section: Optional[Sequence[int]] = None) -> torch.Tensor:
    """The scheme's frequency allocation: which axis of ``position_ids`` drives each rotary pair of each key head.

    Args:
        scheme: a scheme name.
        head_dim: per-head channels (even).
        num_kv_heads: key heads (only per-head schemes, ``mhrope``, depend on it).
        mrope_section: ``[t, h, w]`` counts of the scheme's unit (rotary pairs summing to ``head_dim / 2``; key
            heads summing to ``num_kv_heads`` for ``mhrope``); the published split scaled when ``None``.

    Returns:
        ``(1, head_dim // 2)`` int64 (same for every head) or ``(num_kv_heads, head_dim // 2)`` (``mhrope``);
        ``-1`` marks a pair that is not rotated (HoPE's temporal pairs).

    Raises:
        ValueError: unknown scheme, bad geometry or section.
    """
    return get_scheme(scheme).allocation(head_dim, num_kv_heads, mrope_section)


def axis_of_pair(scheme: str, head_dim: int, mrope_section: Optional[Sequence[int]] = None) -> torch.Tensor:
    """Per-pair allocation ``(head_dim // 2,)`` int64 of a scheme that treats every head alike (see
    :func:`axis_table`): chunked ``[t, h, w]`` (M-RoPE), interleaved t, h, w (MRoPE-I), ``k % 4`` (VRoPE), h/w
    alternating then t on the lowest frequencies (VideoRoPE; ``-1`` there for HoPE), all 0 (rope1d, V2PE).

    Raises:
        ValueError: unknown scheme, bad geometry or section, or a per-head scheme (``mhrope``: use
            :func:`axis_table` with ``num_kv_heads``).
    """
    spec = get_scheme(scheme)
    if spec.per_head:
        raise ValueError(f'scheme {scheme!r} allocates frequencies per key head, not per pair; fix: use '
                         f'axis_table({scheme!r}, head_dim, num_kv_heads=...)')
    return spec.allocation(head_dim, 1, mrope_section)[0]


def _as_axes(position_ids: torch.Tensor, num_axes: int, scheme: str) -> torch.Tensor:
    pos = position_ids if position_ids.dim() == 3 else position_ids.unsqueeze(0)
    if pos.dim() != 3 or pos.shape[0] not in (1, num_axes):
        names = ', '.join(get_scheme(scheme).axis_names)
        raise ValueError(f'position ids must be (A, B, L) with A = {num_axes} ({names}) '
                         f'for scheme {scheme!r}, got shape {tuple(position_ids.shape)}; fix: build them with '
                         f'get_position_ids({scheme!r}, ...) (A = 1 is accepted for text: every axis equal)')
    return pos.expand(num_axes, -1, -1) if pos.shape[0] != num_axes else pos


def head_frequencies(head_dim: int, theta: Union[float, Sequence[float]],
                     device: Optional[torch.device] = None) -> torch.Tensor:
    """``theta^(-2j / head_dim)`` ``(1, head_dim // 2)`` float32 for one base, or ``(H, head_dim // 2)`` for
    per-key-head bases (HARPE: head ``h`` uses base ``theta[h]``)."""
    if isinstance(theta, (int, float)):
        return rope_frequencies(head_dim // 2, float(theta), device=device)[None]
    return torch.stack([rope_frequencies(head_dim // 2, float(t), device=device) for t in theta])


def harpe_bases(num_heads: int, theta_min: float = 1e4, theta_max: float = 1e6) -> List[float]:
    """Per-head RoPE bases on a geometric ladder ``theta_min (theta_max / theta_min)^(h / (H - 1))``, ``h < H``
    (the zoo's default schedule for HARPE-style per-head bases; pass the list as ``theta``).

    Raises:
        ValueError: ``num_heads < 1`` or not ``0 < theta_min <= theta_max``.
    """
    if num_heads < 1 or not 0 < theta_min <= theta_max:
        raise ValueError(f'harpe_bases needs num_heads >= 1 and 0 < theta_min <= theta_max, got {num_heads}, '
                         f'{theta_min}, {theta_max}')
    if num_heads == 1:
        return [float(theta_min)]
    return [float(theta_min * (theta_max / theta_min) ** (h / (num_heads - 1))) for h in range(num_heads)]


def _tables(pos: torch.Tensor, axes: torch.Tensor, head_dim: int, theta: Union[float, Sequence[float]],
            ext: Optional[Extrapolation] = None, p_rope: float = 1.0) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(sin, cos)`` ``(B, H|1, L, head_dim)`` float32 for ids ``pos`` ``(A, B, L)`` and allocation ``axes``.

    ``ext``: an extrapolation strategy; each pair's frequency scales with the factor of its axis (the span of the
    ids on that axis against ``ext.train_grid``), NTK exponents ``2j / (head_dim - 2)``; YaRN's temperature uses the
    largest axis factor; LongRoPE divides the positions of pair ``j`` from ``n_hat`` on by ``lambda_j`` (its axis's
    list, when that axis is extended). ``p_rope``: p-RoPE, only the ``round(p * head_dim / 2)`` highest frequencies
    ``theta^(-2j / head_dim)`` rotate, whichever axis the scheme gives them. ``theta``: one base, or one per key head
    (HARPE; ``H`` is then the key-head count).
    """
    half = head_dim // 2
    axes = axes.to(pos.device)
    inv_freq = head_frequencies(head_dim, theta, pos.device)                              # (1 or Hk, half)
    if inv_freq.shape[0] != axes.shape[0]:  # per-head bases and/or a per-head allocation
        h = max(inv_freq.shape[0], axes.shape[0])
        axes, inv_freq = axes.expand(h, half), inv_freq.expand(h, half)
    scale, factors = 1.0, None
    if ext is not None and ext.active and ext.strategy != 'mspoe':  # Ms-PoE: per head, in MsPoETerm
        span = (pos.flatten(1).amax(1) - pos.flatten(1).amin(1) + 1).tolist()           # per id axis
        factors = ext.factors(span, 'multimodal_rope')
        e = ntk_exponents(half, pos.device)
        per_axis = torch.stack([ext.frequencies(inv_freq, f, n, e) for f, n in zip(factors, ext.train_grid)])
        inv_freq = per_axis.gather(0, axes.clamp(min=0)[None])[0]                          # (H, half)
        scale = ext.attention_scale(max(factors))
    freq = torch.where(axes >= 0, inv_freq, torch.zeros_like(inv_freq))                   # (H, half)
    if p_rope < 1.0:
        freq = freq * p_rope_mask(torch.arange(half, device=pos.device), half, p_rope)
    b, n = pos.shape[1:]
    per_pair = pos.to(torch.float32).permute(1, 2, 0).index_select(-1, axes.clamp(min=0).flatten())  # (B, L, H*half)
    per_pair = per_pair.view(b, n, *axes.shape).transpose(1, 2)                          # (B, H, L, half)
    if factors is not None and ext.strategy == 'longrope' and max(factors) > 1.0:
        ones = torch.ones(half, device=pos.device)
        lam = torch.stack([ext.lambdas(a, half, pos.device) if f > 1.0 else ones for a, f in enumerate(factors)])
        n_hat = torch.tensor([ext.n_hat(a) if f > 1.0 else float('inf') for a, f in enumerate(factors)],
                             device=pos.device)
        ax = axes.clamp(min=0)
        lam, n_hat = lam.gather(0, ax), n_hat[ax]                                         # (H, half)
        per_pair = torch.where(per_pair >= n_hat[:, None, :], per_pair / lam[:, None, :], per_pair)
    sin, cos = rope_sin_cos(per_pair * freq[None, :, None, :], LAYOUT)
    return (sin * scale, cos * scale) if scale != 1.0 else (sin, cos)


def multimodal_rope_tables(position_ids: torch.Tensor, head_dim: int, scheme: str = 'mrope',
                           mrope_section: Optional[Sequence[int]] = None, theta: float = 1_000_000.0,
                           num_kv_heads: int = 1) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(sin, cos)`` for :class:`RotaryTerm` (``half`` layout), each ``(B, H, L, head_dim)`` float32 with ``H = 1``
    (or ``num_kv_heads`` for per-head schemes). See :func:`multimodal_rope_cos_sin` for the arguments."""
    spec = get_scheme(scheme)
    if not (float(theta) > 0):
        raise ValueError(f'theta must be > 0, got {theta}; fix: Qwen2/2.5-VL use 1e6, Qwen3-VL 5e6')
    axes = spec.allocation(head_dim, num_kv_heads, mrope_section)
    return _tables(_as_axes(position_ids, spec.num_axes, scheme), axes, head_dim, theta)


def multimodal_rope_cos_sin(
    position_ids: torch.Tensor,
    head_dim: int,
    scheme: str = 'mrope',
    mrope_section: Optional[Sequence[int]] = None,
    theta: float = 1_000_000.0,
    dtype: torch.dtype = torch.float32,
    num_kv_heads: int = 1,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables, each pair driven by its axis's position (``rotate_half`` layout, as Hugging Face Qwen).

    Args:
        position_ids: ``(A, B, L)`` (or ``(B, L)`` for one axis), long or float; ``A`` must match the scheme
            (``A = 1`` broadcasts, e.g. decode positions of text).
        head_dim: per-head channels.
        scheme, mrope_section: see :func:`axis_table`.
        theta: RoPE base (Qwen2/2.5-VL 1e6, Qwen3-VL 5e6).
        dtype: dtype of the returned tables (computed in float32).
        num_kv_heads: key heads (per-head schemes only).

    Returns:
        ``(cos, sin)``, each ``(B, L, head_dim)`` (``(B, num_kv_heads, L, head_dim)`` for ``mhrope``) of ``dtype`` on
        ``position_ids``' device.

    Raises:
        ValueError: as :func:`axis_table`, ``theta <= 0``, or ``A`` not the scheme's number of axes.
    """
    sin, cos = multimodal_rope_tables(position_ids, head_dim, scheme, mrope_section, theta, num_kv_heads)
    if not get_scheme(scheme).per_head:
        sin, cos = sin[:, 0], cos[:, 0]
    return cos.to(dtype), sin.to(dtype)


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
    ``cache_position`` instead (positions ``cache_position + rope_deltas`` on every axis). Uses the zoo's one
    rotation kernel; fp32, bf16 and fp16 inputs keep their dtype (arithmetic in float32).

    Args:
        q: ``(B, H, L, D)`` when ``unsqueeze_dim == 1`` (``(B, L, H, D)`` when 2), any float dtype.
        k: same layout as ``q``; its head count may be smaller (GQA: query heads follow their key group, which is
            what the per-head ``mhrope`` allocation is defined on).
        position_ids: ``(A, B, L)``; ``None`` when decoding from ``rope_deltas`` / ``cache_position``.
        scheme, mrope_section, theta: see :func:`multimodal_rope_cos_sin`.
        rope_deltas: ``(B, 1)`` from :func:`get_position_ids` (decoding only).
        cache_position: ``(L,)`` or ``(B, L)`` padded-sequence indices of the tokens in ``q`` (decoding only).
        unsqueeze_dim: dim of ``q``/``k`` that holds the heads (1 or 2).

    Returns:
        ``(q_rot, k_rot)`` with the dtypes and shapes of ``q`` and ``k``.

    Raises:
        ValueError: neither ``position_ids`` nor (``rope_deltas``, ``cache_position``) given; head dims or head
            counts that do not fit; errors of :func:`multimodal_rope_cos_sin`.
    """
    spec = get_scheme(scheme)
    if position_ids is None:
        if rope_deltas is None or cache_position is None:
            raise ValueError('pass position_ids (prefill) or both rope_deltas and cache_position (decoding)')
        position_ids = decode_position_ids(rope_deltas.to(q.device), cache_position.to(q.device), spec.num_axes)
    if unsqueeze_dim not in (1, 2):
        raise ValueError(f'unsqueeze_dim must be 1 ((B, H, L, D) inputs) or 2 ((B, L, H, D)), got {unsqueeze_dim}')
    if unsqueeze_dim == 2:
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    head_dim, hq, hk = q.shape[-1], q.shape[1], k.shape[1]
    if k.shape[-1] != head_dim:
        raise ValueError(f'q and k head dims differ: {q.shape[-1]} vs {k.shape[-1]}')
    if hq % hk:
        raise ValueError(f'query heads ({hq}) must be a multiple of key heads ({hk}) (grouped-query attention)')
    sin, cos = multimodal_rope_tables(position_ids.to(q.device), head_dim, scheme, mrope_section, theta, hk)
    q, k = RotaryTerm(sin, cos, LAYOUT).rotate(q, k)
    if unsqueeze_dim == 2:
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    return q, k


class MsPoETerm(AttnTerm):
    """The rotation of one layer under Ms-PoE: positions divided per head by that head's ratio, then RoPE.

    The head order (and so the ratios) is settled when q and k are known (``'outlier'``: from the un-rotated q and k
    of the prompt), and kept in :attr:`state` for the decoding steps that follow (the decoder binds one state dict per
    layer from its KV cache).

    Args:
        pos: ``(A, B, L)`` float32 position ids (A: the scheme's axes).
        axes: ``(1 or Hk, head_dim / 2)`` int64 axis of each rotary pair (``-1``: not rotated).
        inv_freq: ``(head_dim / 2,)`` or ``(1 or Hk, head_dim / 2)`` float32 frequencies (radians per position;
            per key head with HARPE's bases).
        options: Ms-PoE's options (:func:`check_mspoe_options`).
        key_mask: ``(B, L_keys)`` bool, True for real keys (``'outlier'`` order), or ``None``.
    """

    def __init__(self, pos: torch.Tensor, axes: torch.Tensor, inv_freq: torch.Tensor, options: Mapping[str, Any],
                 key_mask: Optional[torch.Tensor] = None):
        self.pos, self.axes, self.inv_freq = pos, axes, inv_freq
        self.options = dict(options)
        self.key_mask = key_mask
        self.state: Dict[str, Any] = {}

    def ratios(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Ratios ``(B, Hq)`` of the query heads and ``(B, Hk)`` of the key heads (settling the head order)."""
        o = self.options
        b, hq, hk = q.shape[0], q.shape[1], k.shape[1]
        official = o['official']
        n = hq if official else hk
        order = self.state.get('order')
        if order is None:
            mode = o['head_order']
            if mode == 'normal':
                order = torch.arange(n - 1, -1, -1, device=q.device).expand(b, n)
            elif mode == 'outlier':
                order = mspoe_head_order(q, k, self.key_mask, None if official else hk)
            else:
                if len(mode) != n:
                    what = 'query' if official else 'key'
                    raise ValueError(f'mspoe head_order {list(mode)} has {len(mode)} entries but the layer has {n} '
                                     f'{what} heads; fix: pass a permutation of 0..{n - 1}')
                order = torch.tensor(mode, device=q.device).expand(b, n)
            self.state['order'] = order
        r = mspoe_ratios(n, o['ratio_min'], o['ratio_max'], official).to(q.device)
        heads = mspoe_head_ratios(order, r, official)
        if official:
            return heads, heads[:, ::hq // hk]
        return heads.repeat_interleave(hq // hk, dim=1), heads

    def _rot(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        h = x.shape[1]
        axes = self.axes.to(x.device)
        if axes.shape[0] != 1:
            axes = axes.repeat_interleave(h // axes.shape[0], dim=0)
        pos = self.pos.to(x.device).float()                                                       # (A, B, L)
        per_pair = pos.permute(1, 2, 0)[..., axes.clamp(min=0)]                                    # (B, L, H', half)
        per_pair = per_pair.permute(0, 2, 1, 3)                                                    # (B, H', L, half)
        inv_freq = self.inv_freq.to(x.device)
        if inv_freq.dim() == 2 and inv_freq.shape[0] not in (1, h):  # per-key-head bases: queries follow their group
            inv_freq = inv_freq.repeat_interleave(h // inv_freq.shape[0], dim=0)
        freq = torch.where(axes >= 0, inv_freq, torch.zeros_like(inv_freq))
        r = r[:, :, None, None]
        if self.options.get('axes') is not None:  # per axis: pairs of the other axes keep ratio 1
            on = torch.isin(axes, torch.tensor(self.options['axes'], device=x.device))        # (H', half)
            r = torch.where(on[None, :, None, :], r, torch.ones_like(r))
        angles = (per_pair / r) * freq[None, :, None, :]
        sin, cos = rope_sin_cos(angles, 'half')
        return apply_rope(x, sin, cos, 'half')

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        rq, rk = self.ratios(q, k)
        return self._rot(q, rq), self._rot(k, rk)


#: Above this many tokens (eager mode) PyPE's pattern and CoPE's term are computed per block of queries.
BLOCK_ABOVE = 2048
FRAME_MASK_QUERY_BLOCK = 512
COPE_QUERY_BLOCK = 128


def _long_prompt_block(n, block: int) -> Optional[int]:
    """``block`` (queries per block of the blocked attention path) for a prompt of ``n`` tokens above
    :data:`BLOCK_ABOVE` in eager mode, else None (one SDPA call; never while tracing, where ``n`` may be symbolic)."""
    return block if isinstance(n, int) and n > BLOCK_ABOVE and caching_allowed() else None


def image_block_mask(positions: torch.Tensor, frames: torch.Tensor) -> Optional[torch.Tensor]:
    """Attention inside visual frames for a per-layer scheme (PyPE): query ``i`` may attend key ``j`` iff both lie in
    the same frame and ``level[j] <= level[i]`` (within a frame the level is the position minus the frame's start, so
    this is ``pos[j] <= pos[i]``); any other pair is causal (``j <= i``).

    Args:
        positions: ``(B, L)`` ids of one layer.
        frames: ``(B, L)`` int64 visual frame index of each token (equal within one frame), -1 for text.

    Returns:
        ``(B, L, L)`` bool (True = may attend; rows are queries), or ``None`` when no two tokens share a frame (plain
        causal attention).
    """
    visual = frames.sort(-1).values
    if not bool(((visual[:, 1:] == visual[:, :-1]) & (visual[:, 1:] >= 0)).any()):  # no frame holds two tokens
        return None
    return image_block_mask_rows(positions, frames, 0, frames.shape[-1])


def image_block_mask_rows(positions: torch.Tensor, frames: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """Rows ``start:stop`` (queries) of :func:`image_block_mask` against every key, ``(B, stop - start, L)`` bool;
    plain causal rows where no two tokens share a frame (what ``None`` means there). Memory ``O((stop - start) L)``:
    the blocked attention path asks for one block of queries at a time."""
    n = frames.shape[-1]
    fq, pq = frames[:, start:stop, None], positions[:, start:stop, None]
    same = (fq == frames[:, None, :]) & (fq >= 0)  # the diagonal: pos_i <= pos_i and i <= i agree
    causal = torch.arange(n, device=frames.device)[None, :] <= torch.arange(start, stop, device=frames.device)[:, None]
    return torch.where(same, positions[:, None, :] <= pq, causal)


class FrameMaskTerm(RotaryTerm):
    """A rotation plus an attention pattern given whole (PyPE's level rule inside visual frames): ``bias`` is 0 where
    :func:`image_block_mask` allows and ``-inf`` elsewhere, built when the layer asks for it (one layer's ``(B, L, L)``
    pattern at a time), and :attr:`causal` is False so that the attention applies the pattern instead of its own
    causal mask (key padding is still merged). Without visual tokens (decoding steps, text only) it is a plain
    rotation and the attention stays causal.

    Args:
        sin, cos: as :class:`RotaryTerm` (``half`` layout).
        positions: ``(B, L)`` this layer's ids.
        frames: ``(B, L)`` int64 visual frame index of every token, -1 for text.
    """

    def __init__(self, sin: torch.Tensor, cos: torch.Tensor, positions: torch.Tensor, frames: torch.Tensor):
        super().__init__(sin, cos, LAYOUT)
        self.positions, self.frames = positions, frames
        self.causal = not bool((frames >= 0).any())
        # long prompts: the pattern per block of queries, never (B, L, L) whole (1 GB of bool at 32k tokens)
        self.query_block = None if self.causal else _long_prompt_block(frames.shape[-1], FRAME_MASK_QUERY_BLOCK)

    @property
    def allowed(self) -> Optional[torch.Tensor]:
        """``(B, L, L)`` bool pattern (rows are queries), or ``None`` for plain causal attention."""
        if self.causal:
            return None
        allowed = image_block_mask(self.positions, self.frames)
        n = self.frames.shape[-1]
        return allowed if allowed is not None else \
            torch.ones(n, n, dtype=torch.bool, device=self.frames.device).tril().expand(self.frames.shape[0], n, n)

    def bias(self, q: torch.Tensor, k: torch.Tensor, scale: float) -> Optional[torch.Tensor]:
        if self.causal:
            return None
        if self.frames.shape[-1] != q.shape[-2] or q.shape[-2] != k.shape[-2]:
            raise ValueError(f'the visual-frame attention pattern covers {self.frames.shape[-1]} tokens but the layer '
                             f'has {q.shape[-2]} queries and {k.shape[-2]} keys; fix: prefill the whole prompt in one '
                             'call (a per-layer scheme decodes text one token at a time)')
        zero = torch.zeros((), dtype=q.dtype, device=q.device)
        return torch.where(self.allowed.to(q.device)[:, None], zero, float('-inf'))

    def bias_rows(self, q: torch.Tensor, k: torch.Tensor, scale: float, start: int, stop: int) -> torch.Tensor:
        """Rows ``start:stop`` of :meth:`bias` ``(B, 1, stop - start, L)`` (the blocked path of a long prefill)."""
        if self.frames.shape[-1] != k.shape[-2]:
            raise ValueError(f'the visual-frame attention pattern covers {self.frames.shape[-1]} tokens but the layer '
                             f'has {k.shape[-2]} keys; fix: prefill the whole prompt in one call')
        allowed = image_block_mask_rows(self.positions.to(q.device), self.frames.to(q.device), start, stop)
        zero = torch.zeros((), dtype=q.dtype, device=q.device)
        return torch.where(allowed[:, None], zero, float('-inf'))


class CoPETerm(RotaryTerm):
    """A rotation (identity for CoPE alone) plus CoPE's contextual position logits as the attention bias
    (:func:`zoo.encodings.multimodal.cope.cope_bias`), so the attention stays one SDPA call.

    The gates see the keys a query may attend: causal (the queries are the last ``Lq`` keys, so a decoding step
    counts over the whole cache) and not padding. With RoPE (``cope_rope``) the gates use the rotated q and k
    (relative), and the position logits ``q . E`` the un-rotated query, so no absolute phase enters the CoPE term.

    Args:
        sin, cos: as :class:`RotaryTerm` (``half`` layout).
        pos_emb: ``(head_dim, npos)`` this layer's table.
        divide: the official ``/ sqrt(d)`` on the position term.
        key_mask: ``(B, L_keys)`` bool (True = real key) or ``None``.
    """
    tensor_fields = ('sin', 'cos', 'pos_emb')

    def __init__(self, sin: torch.Tensor, cos: torch.Tensor, pos_emb: torch.Tensor, divide: bool = False,
                 key_mask: Optional[torch.Tensor] = None):
        super().__init__(sin, cos, LAYOUT)
        self.pos_emb, self.divide, self.key_mask = pos_emb, divide, key_mask
        # long prompts: gates, positions and logits per block of queries (each row counts over its own keys), never
        # (B, heads, L, L) whole (32 GB of float32 per tensor at 32k tokens and 8 heads)
        self.query_block = _long_prompt_block(sin.shape[-2], COPE_QUERY_BLOCK)

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        self._query = q  # the un-rotated query for q . E (the attention calls rotate, then bias, on this layer's term)
        return super().rotate(q, k)

    def bias(self, q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
        return self.bias_rows(q, k, scale, k.shape[-2] - q.shape[-2], k.shape[-2])  # the queries are the last keys

    def bias_rows(self, q: torch.Tensor, k: torch.Tensor, scale: float, start: int, stop: int) -> torch.Tensor:
        """Rows ``start:stop`` (query indices in the key sequence) of :meth:`bias`, ``(B, heads, stop - start, L)``,
        for the queries ``q`` of that block: each row's gates and positions depend on its own query only."""
        nk = k.shape[-2]
        allowed = torch.arange(nk, device=q.device)[None, :] <= torch.arange(start, stop, device=q.device)[:, None]
        if self.key_mask is not None:
            allowed = allowed & self.key_mask[:, -nk:].to(q.device, torch.bool)[:, None, None, :]
        query = getattr(self, '_query', None)
        if query is not None:
            off = nk - query.shape[-2]
            query = query[:, :, start - off:stop - off]
            query = query if query.shape == q.shape else None
        return cope_bias(q, k, self.pos_emb, allowed, self.divide, query).to(q.dtype)


class VistaTerm(RotaryTerm):
    """Vista-LLaMA's attention in one SDPA call: q and k are widened to four blocks of channels,

    ``q' = [R q * t, R q * v, q * t, q * v]`` and ``k' = [R k * t, R k * v, k * v, k * t]``

    (``R``: the rotation, ``t`` / ``v``: 1 for a text / visual token), so ``q'_i . k'_j`` is ``(R q_i) . (R k_j)`` for
    two tokens of the same modality and ``q_i . k_j`` across modalities. The attention keeps the head dim's logit
    scale; the KV cache holds the widened keys (4x the key memory; values are unchanged).

    Args:
        sin, cos: as :class:`RotaryTerm` (``half`` layout).
        visual: ``(B, L)`` bool, True for visual tokens of this call's tokens.
    """

    def __init__(self, sin: torch.Tensor, cos: torch.Tensor, visual: torch.Tensor):
        super().__init__(sin, cos, LAYOUT)
        self.visual = visual

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        qr, kr = super().rotate(q, k)
        vq = self.visual[:, -q.shape[-2]:].to(q.device, q.dtype)[:, None, :, None]
        vk = self.visual[:, -k.shape[-2]:].to(k.device, k.dtype)[:, None, :, None]
        q2 = torch.cat([qr * (1 - vq), qr * vq, q * (1 - vq), q * vq], dim=-1)
        k2 = torch.cat([kr * (1 - vk), kr * vk, k * vk, k * (1 - vk)], dim=-1)
        return q2, k2


@register_pos_encoding('multimodal_rope')
class MultimodalRoPE(PosEncoding):
    """Multimodal RoPE for video-LLM decoders (and any backbone): one scheme's frequency allocation applied to
    per-token position ids, one rotation shared by every layer.

    Positions: explicit ids ``Positions.ids`` ``(A, B, L)`` (from :func:`get_position_ids` for a prefill, from
    :func:`decode_position_ids` for cached decoding steps). Without ids, a patch grid is laid out as the scheme lays
    out one visual block after the prefix tokens (which count as text), so the encoding also works in an image or
    video ViT (token subsets included). Tables (float32, ``half`` layout, Hugging Face Qwen convention) are built
    once per forward; grid tables are cached per (grid, prefix, device).

    Args:
        dim: model width; ``head_dim = dim // num_heads`` unless ``head_dim`` is given.
        num_heads: query heads.
        depth: layers (every layer gets the same term).
        num_kv_heads: key/value heads (GQA); default ``num_heads``. Per-head schemes (``mhrope``) allocate over them.
        scheme: a scheme name (:func:`list_schemes`), e.g. ``'mrope'``, ``'qwen3_vl'``, ``'videorope'``, ``'hope'``.
        theta: RoPE base (1e6 Qwen2/2.5-VL, 5e6 Qwen3-VL), or one base per key head (HARPE-style per-head bases, a
            training-time choice: key head ``h`` and its query group rotate with ``theta[h]^(-2j / head_dim)``;
            :func:`harpe_bases` gives a geometric ladder; ``docs/harpe.md``).
        mrope_section: the scheme's ``[t, h, w]`` split (pairs, or key heads for ``mhrope``); published split scaled
            when ``None``.
        head_dim: per-head width when it is not ``dim // num_heads``.
        scheme_options: the scheme's evaluation options (e.g. ``{'gamma': 1.0}``), used by :meth:`position_ids` and
            when ids are derived from a grid; training draws its own per sample (:meth:`draw_training_options`).
        extrapolation: ``'none'`` or a dict ``{'strategy': 'pi' | 'ntk' | 'yarn', 'train_grid': (...)}`` whose
            ``train_grid`` is the span of position ids per id axis seen in training (scheme axis order, e.g.
            ``(t, h, w)``; text: the context length on every axis); see :mod:`zoo.encodings.extrapolation`. Or
            ``{'strategy': 'mspoe', ...}`` (Ms-PoE, per key head, :mod:`zoo.encodings.multimodal.mspoe`; explicit ids
            only), or ``'longrope=FILE'`` / ``{'strategy': 'longrope', 'factors': [...], 'n_hat': ...}`` (LongRoPE,
            per pair ``j``, :mod:`zoo.encodings.longrope`).
        p_rope: p-RoPE (Barbero et al., arXiv:2410.06205): the fraction of rotary pairs, the highest frequencies
            ``theta^(-2j / head_dim)``, that rotate; the others get zero frequency whichever axis the scheme gives
            them (so a scheme that puts t on the lowest frequencies, VideoRoPE, loses t first). 1 = the scheme as is.

    Attributes:
        spec: the :class:`~zoo.encodings.multimodal.schemes.Scheme` object, resolved once here; the encoding owns it,
            so a model asks the encoding for ids (:meth:`position_ids`, :meth:`draw_training_options`,
            :meth:`decode_position_ids`) instead of resolving the scheme by name again.
        scheme: the scheme name as given.
        scheme_options: the evaluation options.

    Raises:
        ValueError: unknown scheme or option, odd ``head_dim``, a section that does not fit the geometry,
            ``num_kv_heads`` not dividing ``num_heads``, ``theta <= 0``; at forward, ids with the wrong number of
            axes or tokens; a patch grid for a scheme that works inside the attention (CoPE, Vista) or for Ms-PoE;
            Ms-PoE with a scheme whose term is more than a rotation (PyPE, CoPE, Vista).
    """
    family = 'Multimodal RoPE'
    extrapolation_strategies = ROTARY_STRATEGIES
    adaptation = 'positions from explicit per-token ids (or the grid laid out as one visual block); nothing learned'

    def __init__(self, dim: int, num_heads: int, depth: int, num_kv_heads: Optional[int] = None,
                 scheme: str = 'mrope', theta: Union[float, Sequence[float]] = 1_000_000.0,
                 mrope_section: Optional[Sequence[int]] = None,
                 head_dim: Optional[int] = None, scheme_options: Optional[Mapping[str, Any]] = None,
                 extrapolation: Any = 'none', p_rope: float = 1.0):
        super().__init__()
        self.p_rope = check_p_rope(p_rope, 'multimodal_rope')
        self._extrapolation = Extrapolation.parse(extrapolation, None, self.extrapolation_strategies, 'multimodal_rope')
        self.spec = get_scheme(scheme)
        self.scheme = scheme
        self.scheme_options: Dict[str, Any] = dict(scheme_options or {})
        self.spec.options(self.scheme_options)  # validate early
        self.depth = depth
        self.num_kv_heads = num_heads if num_kv_heads is None else int(num_kv_heads)
        if self.num_kv_heads < 1 or num_heads % self.num_kv_heads:
            raise ValueError(f'num_kv_heads={num_kv_heads} must divide num_heads={num_heads}')
        if head_dim is None and dim % num_heads:
            raise ValueError(f'dim {dim} is not divisible by num_heads {num_heads}; fix: pass head_dim')
        self.head_dim = int(head_dim or dim // num_heads)
        self.head_bases: Optional[Tuple[float, ...]] = None
        if isinstance(theta, (list, tuple)):  # HARPE: one base per key head
            try:
                bases = tuple(float(t) for t in theta)
            except (TypeError, ValueError):
                bases = ()
            if len(bases) != self.num_kv_heads or not all(b > 0 and b < float('inf') for b in bases):
                raise ValueError(f'theta as per-head bases (HARPE) needs {self.num_kv_heads} positive bases, one per '
                                 f'key head, got {list(theta)!r}; fix: theta=harpe_bases({self.num_kv_heads}) or '
                                 'one float')
            self.head_bases = bases
            theta = math.exp(sum(math.log(b) for b in bases) / len(bases))  # geometric mean, for reports only
        if not float(theta) > 0:
            raise ValueError(f'theta must be > 0, got {theta}; fix: Qwen2/2.5-VL use 1e6, Qwen3-VL 5e6')
        self.theta = float(theta)
        self.mrope_section = None if mrope_section is None else [int(x) for x in mrope_section]
        with torch.device('cpu'):  # a constant of the geometry, also when the model is built on the meta device
            self.axes = self.spec.allocation(self.head_dim, self.num_kv_heads, self.mrope_section)  # (H|1, half)
        self._cache = TableCache()
        self.cope_pos_emb = None
        if self.spec.contextual:  # CoPE: one learned (head_dim, npos) table per layer
            npos = self.spec.options(self.scheme_options)['npos']
            self.cope_pos_emb = nn.Parameter(torch.empty(depth, self.head_dim, npos))
            self.reset_parameters()

    @property
    def bases(self) -> Union[float, Tuple[float, ...]]:
        """The RoPE base, or the per-key-head bases (HARPE) when ``theta`` was given as a list."""
        return self.head_bases if self.head_bases else self.theta

    def reset_parameters(self) -> None:
        """CoPE's tables: normal(0, 0.02), as the decoder's other weights."""
        if self.cope_pos_emb is not None:
            nn.init.normal_(self.cope_pos_emb, std=0.02)

    def no_weight_decay(self) -> set:
        return {'cope_pos_emb'} if self.cope_pos_emb is not None else set()

    def extra_repr(self) -> str:
        base = f'head_bases={list(self.head_bases)}' if self.head_bases else f'theta={self.theta:g}'
        return f'scheme={self.scheme!r}, {base}, head_dim={self.head_dim}, axes={tuple(self.axes.shape)}'

    # ----------------------------------------------------------------------------------------- position ids
    def position_ids(self, input_ids: torch.Tensor, image_grid_thw: Optional[torch.Tensor] = None,
                     video_grid_thw: Optional[torch.Tensor] = None, attention_mask: Optional[torch.Tensor] = None,
                     second_per_grid_ts: Optional[Union[torch.Tensor, Sequence[float]]] = None,
                     scheme_options: Optional[Mapping[str, Any]] = None,
                     **token_kwargs: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        """Position ids of a token batch under this encoding's scheme (:func:`get_position_ids` with :attr:`spec`).

        Args:
            input_ids: ``(B, L)`` integer token ids.
            image_grid_thw, video_grid_thw: ``(N, 3)`` pre-merge grids, in batch order (see :func:`get_position_ids`).
            attention_mask: ``(B, L)``, 0 for padding (values > 1 number packed documents).
            second_per_grid_ts: seconds per temporal patch per video; used when the scheme's ids depend on them
                (:meth:`Scheme.uses_seconds`, Qwen2.5-VL), ignored otherwise, so a model can always pass its clips'
                timing.
            scheme_options: the scheme's options for this call; :attr:`scheme_options` (evaluation) when ``None``.
            **token_kwargs: the token conventions of :func:`get_position_ids` (``spatial_merge_size``,
                ``image_token_id``, ``video_token_id``, ``vision_start_token_id``, ``mm_token_type_ids``,
                ``cu_seqlens``).

        Returns:
            ``(position_ids (A, B, L), rope_deltas (B, 1))`` as :func:`get_position_ids`; for a per-layer scheme
            (PyPE) ``((depth + 1, A, B, L), (depth, B, 1))``: every layer's ids, then the visual frame index of every
            token (-1 for text), and one ``rope_deltas`` per layer.

        Raises:
            ValueError: see :func:`get_position_ids` (grids that do not match the visual tokens, unknown options).
        """
        opts = dict(self.scheme_options if scheme_options is None else scheme_options)
        secs = second_per_grid_ts if self.spec.uses_seconds(opts) else None
        if self.spec.per_layer:
            return self._layer_position_ids(input_ids, image_grid_thw, video_grid_thw, attention_mask, secs, opts,
                                            token_kwargs)
        return get_position_ids(self.spec, input_ids, image_grid_thw, video_grid_thw, attention_mask, secs,
                                **token_kwargs, **opts)

    def _layer_position_ids(self, input_ids, image_grid_thw, video_grid_thw, attention_mask, secs, opts,
                            token_kwargs) -> Tuple[torch.Tensor, torch.Tensor]:
        """Ids ``(depth + 1, A, B, L)`` (each layer's, then the visual frame index, -1 for text) and ``rope_deltas``
        ``(depth, B, 1)`` of a per-layer scheme."""
        if attention_mask is not None and bool((attention_mask > 1).any()):
            raise ValueError(f'scheme {self.scheme!r} lays out ids per layer and masks attention inside visual frames, '
                             'which packed documents (attention_mask values > 1) would cross; fix: one document per '
                             'row')
        layers = []
        for layer in range(self.depth):
            o = dict(opts, layer=layer)
            layers.append((get_position_ids(self.spec, input_ids, image_grid_thw, video_grid_thw, attention_mask, secs,
                                            **token_kwargs, **o), self.spec.decode_shift(self.spec.options(o))))
        frame_kwargs = {k: v for k, v in token_kwargs.items() if k != 'cu_seqlens'}
        frame, _ = get_position_ids(FRAME_INDEX, input_ids, image_grid_thw, video_grid_thw, attention_mask,
                                    **frame_kwargs)
        types = token_kwargs.get('mm_token_type_ids')
        if types is None:
            from .ids import QWEN_TOKEN_IDS
            vis = (input_ids == token_kwargs.get('image_token_id', QWEN_TOKEN_IDS['image'])) | \
                (input_ids == token_kwargs.get('video_token_id', QWEN_TOKEN_IDS['video']))
        else:
            vis = types != 0
        if attention_mask is not None:
            vis = vis & (attention_mask != 0)
        ids = torch.stack([i for (i, _), _ in layers])
        frames = torch.where(vis, frame[0], torch.full_like(frame[0], -1)).to(ids.dtype)
        has_visual = vis.any(-1, keepdim=True).to(torch.int64)                    # the shift only follows an image
        deltas = torch.stack([d + shift * has_visual.to(d.device) for (_, d), shift in layers])
        return torch.cat([ids, frames.expand(1, self.spec.num_axes, -1, -1)]), deltas

    def draw_training_options(self, batch_size: int,
                              generator: Optional[random.Random] = None) -> Optional[List[Dict[str, Any]]]:
        """Per-sample options a training step uses (V2PE's stride, HoPE's gamma, drawn by the scheme), each merged
        into :attr:`scheme_options`; ``None`` when the scheme draws nothing (its evaluation options apply).

        Args:
            batch_size: rows of the batch.
            generator: a ``random.Random``; by default one seeded from torch's CPU generator (one draw, also when
                the scheme draws nothing), so ``torch.manual_seed`` makes training reproducible.

        Returns:
            One options dict per row for :meth:`position_ids`, or ``None``.
        """
        rng = generator if generator is not None else random.Random(int(torch.randint(0, 2 ** 62, (), device='cpu')))
        drawn = [self.spec.training_options(rng) for _ in range(batch_size)]
        return [dict(self.scheme_options, **d) for d in drawn] if any(drawn) else None

    def decode_position_ids(self, rope_deltas: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        """Ids ``(A, B, n)`` of decoding steps, ``cache_position + rope_deltas`` on each of the scheme's ``A`` axes
        (:func:`decode_position_ids`); per-layer schemes: ``(depth + 1, A, B, n)`` from ``(depth, B, 1)`` deltas, the
        frame index -1 (generated tokens are text)."""
        if self.spec.per_layer:
            ids = torch.stack([decode_position_ids(d, cache_position, self.spec.num_axes) for d in rope_deltas])
            return torch.cat([ids, torch.full_like(ids[:1], -1)])
        return decode_position_ids(rope_deltas, cache_position, self.spec.num_axes)

    def grid_position_ids(self, grid: Tuple[int, int, int], num_prefix_tokens: int = 0) -> torch.Tensor:
        """Ids ``(A, 1, num_prefix_tokens + T*H*W)`` (int64, float64 for float schemes) of a patch grid: prefix tokens
        as text, then the grid as one visual block (an image when ``T == 1``, else one un-split video block) laid out
        by the scheme at ``s = num_prefix_tokens``, without marker tokens."""
        t, h, w = grid
        npt = num_prefix_tokens
        spec = self.spec
        dtype = torch.float64 if spec.float_positions else torch.int64
        block = Block(VIDEO if t != 1 else IMAGE, t * h * w, t, h, w)
        vis = spec.visual(spec.options(self.scheme_options), npt, block).to(dtype)
        prefix = torch.arange(npt, dtype=dtype).expand(spec.num_axes, npt)
        return torch.cat([prefix, vis], dim=1).unsqueeze(1)

    def term(self, position_ids: torch.Tensor, device: torch.device) -> RotaryTerm:
        """The rotation for ids ``(A, B, L)`` (``A = 1`` broadcasts to every axis)."""
        pos = _as_axes(position_ids.to(device), self.spec.num_axes, self.scheme)
        return RotaryTerm(*_tables(pos, self.axes, self.head_dim, self.bases, self.extrapolation, self.p_rope),
                          layout=LAYOUT)

    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Sequence[Optional[AttnTerm]]:
        if pos.ids is not None and self.spec.per_layer:
            return self._layer_terms(pos.ids, device)
        if pos.ids is not None:
            ids = pos.ids
            if ids.dim() != 3 or ids.shape[0] not in (1, self.spec.num_axes):
                raise ValueError(f'Positions.ids must be (A, B, L) with A = {self.spec.num_axes} '
                                 f'({", ".join(self.spec.axis_names)}) for scheme {self.scheme!r}, got shape '
                                 f'{tuple(ids.shape)}; fix: build them with get_position_ids({self.scheme!r}, ...)')
            if self.extrapolation.strategy == 'mspoe':
                if self.spec.contextual or self.spec.split_modalities:
                    raise ValueError(f"scheme {self.scheme!r} does not take extrapolation 'mspoe' (its attention "
                                     'term is more than a rotation); fix: use rope1d or another rotary scheme')
                return self._mspoe_terms(ids, pos.attn_mask, device)
            term = self.term(ids, device)
            if self.spec.split_modalities:
                visual = (ids[1] < 0) if ids.shape[0] > 1 else torch.zeros_like(ids[0], dtype=torch.bool)
                return [VistaTerm(term.sin, term.cos, visual.to(device))] * self.depth
            if self.spec.contextual:
                divide = self.spec.options(self.scheme_options)['divide']
                return [CoPETerm(term.sin, term.cos, self.cope_pos_emb[i], divide, pos.attn_mask)
                        for i in range(self.depth)]
        elif pos.grid is not None:
            if self.spec.contextual or self.spec.split_modalities:
                raise ValueError(f'scheme {self.scheme!r} works inside the attention of a token sequence and needs '
                                 'explicit position ids (the video-LLM decoder), not a patch grid')
            if self.extrapolation.strategy == 'mspoe':
                raise ValueError("multimodal_rope: extrapolation 'mspoe' needs explicit position ids (the video-LLM "
                                 'decoder), not a patch grid; fix: use none, pi, ntk or yarn for a ViT')
            grid, npt = pos.grid, pos.num_prefix_tokens  # no int(): sizes stay symbolic under export / compile
            term = self._cache.get(lambda: (tuple(int(x) for x in grid), npt, str(device), self.extrapolation.key()),
                                   lambda: self.term(self.grid_position_ids(grid, npt), device)).select(pos)
        else:
            raise ValueError('multimodal_rope needs Positions.ids (A, B, L) or a patch grid; fix: pass '
                             'Positions(grid=None, ids=get_position_ids(...)[0])')
        return [term] * self.depth

    def _layer_terms(self, ids: torch.Tensor, device: torch.device) -> List[AttnTerm]:
        """One :class:`FrameMaskTerm` per layer from per-layer ids ``(depth + 1, A, B, L)``."""
        if ids.dim() != 4 or ids.shape[0] != self.depth + 1:
            raise ValueError(f'scheme {self.scheme!r} has ids per layer: Positions.ids must be (depth + 1, A, B, L) = '
                             f'({self.depth + 1}, {self.spec.num_axes}, B, L) (each layer, then the visual frame '
                             f'index), got {tuple(ids.shape)}; fix: build them with the encoding\'s position_ids')
        if self.extrapolation.strategy == 'mspoe':
            raise ValueError(f"scheme {self.scheme!r} (per-layer ids) does not take extrapolation 'mspoe'; fix: use a "
                             'scheme with one id set for all layers')
        ids = ids.to(device)
        frames = ids[-1, 0].to(torch.int64)
        terms: List[AttnTerm] = []
        for layer in range(self.depth):
            rot = self.term(ids[layer], device)
            terms.append(FrameMaskTerm(rot.sin, rot.cos, ids[layer, 0], frames))
        return terms

    def _mspoe_terms(self, ids: torch.Tensor, key_mask: Optional[torch.Tensor],
                     device: torch.device) -> List[AttnTerm]:
        """One :class:`MsPoETerm` per Ms-PoE layer (each settles its own head order), plain RoPE elsewhere."""
        opts = dict(self.extrapolation.mspoe)
        pos = _as_axes(ids.to(device), self.spec.num_axes, self.scheme).to(torch.float32)
        inv_freq = head_frequencies(self.head_dim, self.bases, device)                    # (1 or Hk, half)
        if self.p_rope < 1.0:
            half = self.head_dim // 2
            inv_freq = inv_freq * p_rope_mask(torch.arange(half, device=device), half, self.p_rope)
        layers = opts['layers']
        plain = None
        terms: List[AttnTerm] = []
        for i in range(self.depth):
            if layers is None or i in layers:
                terms.append(MsPoETerm(pos, self.axes, inv_freq, opts, key_mask))
            else:
                plain = plain or RotaryTerm(*_tables(pos, self.axes, self.head_dim, self.bases, None, self.p_rope),
                                            layout=LAYOUT)
                terms.append(plain)
        return terms
