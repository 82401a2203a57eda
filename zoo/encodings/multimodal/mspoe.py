"""Ms-PoE: multi-scale positional encoding, a training-free per-head position scale for the rotary decoder.

Zhang et al. 2024, "Found in the Middle: How Language Models Use Long Contexts Better via Plug-and-Play Positional
Encoding" (arXiv:2403.04797), Sec. 3. Head ``n`` rotates with positions ``m / r_n`` instead of ``m``; the ratios run
from ``ratio_min`` to ``ratio_max`` (1.2 to 1.8 in the paper) and are assigned to heads by a head order:

* ``'normal'``: head ``n`` of ``h`` gets ratio index ``h - 1 - n`` (the first head compresses most);
* ``'outlier'``: heads are sorted by how position-aware they are, measured on the prompt: for the last (real) query,
  the share of keys whose attention weight (from un-rotated q and k, causal and padding masks applied) exceeds 3x
  the mean weight. The head with the largest share gets the smallest ratio (the paper's intent: head ``order[m]``
  gets ``r[m]``). The order is decided at the prefill and kept for the decoding steps of that prompt (through the
  KV cache's term state), per batch row;
* an explicit permutation ``order`` (head ``order[m]`` gets ``r[m]``).

Defaults fix the official code's bugs (VITA-Group/Ms-PoE, ``utils/modify_arch/llama.py``; ``docs/mspoe.md``):

* ratios ``r[m] = min + (max - min) m / (h - 1)`` reach ``max`` (official: ``/ h``, so ``max`` is never used);
* ratios are per **key** head: under GQA every query head of a group uses its group's ratio, so ``q . k`` depends on
  relative positions only (official: query head ``n`` uses its own ratio and the keys the first query head's of
  their group, which breaks relative positions for the other heads);
* the head order is the inverse of the official permutation (official: head ``n`` gets ``r[order[n]]``);
* the order is computed per batch row and prompt, with padding masked (official: from the first call only, batch 1,
  masks ignored).

``official=True`` reproduces the official numbers where they are well defined (ratios over ``h`` query heads with the
``/ h`` spacing, query-head ratios ``r[order[n]]``, key heads the first query head's ratio of their group); the order
is still decided per prompt and row (the official first-call cache is a state bug, pass ``head_order=order`` to
reuse an order).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Tuple

import torch

from ..rotation import rope_frequencies, rope_sin_cos

__all__ = ['check_mspoe_options', 'mspoe_ratios', 'mspoe_head_order', 'mspoe_head_ratios', 'mspoe_cos_sin']

OUTLIER_FACTOR = 3.0


def check_mspoe_options(opts: Mapping[str, Any], encoding: str = 'multimodal_rope') -> Tuple[Tuple[str, Any], ...]:
    """Ms-PoE's options (every key of ``zoo.encodings.extrapolation.MSPOE_OPTIONS``, defaults filled in by the
    caller), validated, as sorted ``(key, value)`` pairs (hashable).

    Options: ``ratio_min`` (1.2), ``ratio_max`` (1.8), ``head_order`` (``'normal'``, ``'outlier'`` or a permutation
    of the ratio indices), ``layers`` (``None``: every layer; else the 0-based layers that take Ms-PoE, the others
    keep plain RoPE; the paper's scripts skip layers 0 and 1), ``official`` (False), ``axes`` (``None``: every axis
    is compressed; else the axes whose positions are divided by the head's ratio: id axes of the scheme for the
    video-LLM, grid axes for a ViT encoding).

    Raises:
        ValueError: a bad ratio range, head order, layer list or flag.
    """
    o = dict(opts)
    lo, hi = o['ratio_min'], o['ratio_max']
    try:
        lo, hi = float(lo), float(hi)
        ok = 0 < lo <= hi < float('inf')
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f'{encoding}: mspoe needs 0 < ratio_min <= ratio_max, got ratio_min={o["ratio_min"]!r}, '
                         f'ratio_max={o["ratio_max"]!r}; fix: the paper uses 1.2 and 1.8')
    order = o['head_order']
    if isinstance(order, str):
        if order not in ('normal', 'outlier'):
            raise ValueError(f"{encoding}: mspoe head_order must be 'normal', 'outlier' or a permutation of the ratio "
                             f'indices, got {order!r}')
    else:
        try:
            order = tuple(int(i) for i in order)
        except TypeError:
            raise ValueError(f"{encoding}: mspoe head_order must be 'normal', 'outlier' or a permutation, got "
                             f'{order!r}') from None
        if sorted(order) != list(range(len(order))):
            raise ValueError(f'{encoding}: mspoe head_order {list(order)} is not a permutation of 0..{len(order) - 1}')
    layers = o['layers']
    if layers is not None:
        try:
            layers = tuple(sorted({int(i) for i in layers}))
        except TypeError:
            raise ValueError(f'{encoding}: mspoe layers must be None or a list of layer indices, got {layers!r}') \
                from None
        if layers and layers[0] < 0:
            raise ValueError(f'{encoding}: mspoe layers must be >= 0, got {list(layers)}')
    if not isinstance(o['official'], bool):
        raise ValueError(f'{encoding}: mspoe official must be True or False, got {o["official"]!r}')
    axes = o.get('axes')
    if axes is not None:
        try:
            axes = tuple(sorted({int(i) for i in axes}))
        except TypeError:
            raise ValueError(f'{encoding}: mspoe axes must be None (every axis) or a list of axis indices, got '
                             f'{axes!r}') from None
        if not axes or axes[0] < 0:
            raise ValueError(f'{encoding}: mspoe axes must be non-empty indices >= 0, got {o["axes"]!r}')
    o.update(ratio_min=lo, ratio_max=hi, head_order=order, layers=layers, axes=axes)
    return tuple(sorted(o.items()))


def mspoe_ratios(num_heads: int, ratio_min: float = 1.2, ratio_max: float = 1.8,
                 official: bool = False) -> torch.Tensor:
    """Compression ratios by ratio index ``m``: ``min + (max - min) m / (h - 1)`` (``/ h`` with ``official``, so
    ``max`` is never reached; one head gets ``min``). ``(num_heads,)`` float32."""
    m = torch.arange(num_heads, dtype=torch.float32)
    den = num_heads if official else max(num_heads - 1, 1)
    return ratio_min + (ratio_max - ratio_min) * (m / den)


def mspoe_head_order(q: torch.Tensor, k: torch.Tensor, key_mask: Optional[torch.Tensor] = None,
                     num_groups: Optional[int] = None) -> torch.Tensor:
    """Heads sorted by their share of outlier attention weights, largest first (Ms-PoE's ``'outlier'`` order).

    For the last real query of each row: ``w = softmax(q k^T / sqrt(d))`` over the real keys (un-rotated q, k);
    a key is an outlier when its weight exceeds 3x the mean weight of the row. Ties keep the lower head index first.

    Args:
        q: ``(B, Hq, L, d)`` un-rotated queries (the query being the last one that is real).
        k: ``(B, Hk, L, d)`` un-rotated keys (``Hk`` divides ``Hq``; keys are shared by their query group).
        key_mask: ``(B, L)`` bool, True for real tokens (left or right padding), or ``None``.
        num_groups: score per group of ``Hq / num_groups`` consecutive query heads (the mean share), e.g. the key
            heads under GQA; ``None``: per query head.

    Returns:
        ``(B, H)`` int64, ``H = num_groups or Hq``: ``order[b, 0]`` is the most position-aware head (group).
    """
    b, hq, n, d = q.shape
    k = k.repeat_interleave(hq // k.shape[1], dim=1)
    if key_mask is None:
        key_mask = torch.ones(b, n, dtype=torch.bool, device=q.device)
    key_mask = key_mask[:, -n:].bool()
    last = (torch.arange(n, device=q.device) * key_mask).argmax(-1)                              # last real token
    ql = q.float()[torch.arange(b, device=q.device), :, last]                                    # (B, Hq, d)
    logits = torch.einsum('bhd,bhld->bhl', ql, k.float()) / d ** 0.5
    allowed = key_mask & (torch.arange(n, device=q.device)[None] <= last[:, None])              # causal, real
    w = logits.masked_fill(~allowed[:, None], float('-inf')).softmax(-1)
    count = allowed.sum(-1, keepdim=True)[:, None].float()                                       # (B, 1, 1)
    share = ((w > OUTLIER_FACTOR * w.sum(-1, keepdim=True) / count) & allowed[:, None]).sum(-1) / count[..., 0]
    if num_groups is not None:
        share = share.view(b, num_groups, hq // num_groups).mean(-1)
    return torch.sort(-share, dim=-1, stable=True).indices


def mspoe_head_ratios(order: torch.Tensor, ratios: torch.Tensor, official: bool = False) -> torch.Tensor:
    """Ratio of each head from a head order ``(B, H)`` and the ratios by index ``(H,)``: head ``order[m]`` gets
    ``r[m]`` (the paper's intent), or head ``n`` gets ``r[order[n]]`` with ``official`` (the two agree only when the
    order is its own inverse, e.g. ``'normal'``). ``(B, H)`` float32."""
    r = ratios.to(order.device).expand(order.shape)
    if official:
        return r.gather(-1, order)
    return torch.empty_like(r).scatter_(-1, order, r)


def mspoe_cos_sin(positions: torch.Tensor, ratios: torch.Tensor, head_dim: int,
                  theta: float = 10000.0) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per-ratio rotary tables, Hugging Face ``rotate_half`` layout: ``cos(cat(f, f))`` with ``f = (m / r) theta^(-2i
    / head_dim)`` (the division first, as the official code).

    Args:
        positions: ``(L,)`` positions ``m``.
        ratios: ``(H,)`` compression ratios.
        head_dim: channels per head (even).
        theta: RoPE base.

    Returns:
        ``(cos, sin)``, each ``(H, L, head_dim)`` float32.
    """
    inv_freq = rope_frequencies(head_dim // 2, theta, device=positions.device)
    t = positions.float()[None, :] / ratios.float().to(positions.device)[:, None]                 # (H, L)
    sin, cos = rope_sin_cos(t[..., None] * inv_freq, 'half')
    return cos, sin
