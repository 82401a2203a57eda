"""Ms-PoE per head and per axis for the image / video RoPE encodings (``rope_axial``, ``rope_mixed``, ``rope3d``).

Zhang et al. 2024, "Found in the Middle: How Language Models Use Long Contexts Better via Plug-and-Play Positional
Encoding" (arXiv:2403.04797), Sec. 3, carried to grids: head ``n`` reads the coordinates ``c_a / r_n`` on every
compressed axis ``a`` (option ``axes``: grid axes in the encoding's order, rows/cols or t/rows/cols; ``None`` = all)
and ``c_a`` on the others, with the ratios ``r`` from ``ratio_min`` to ``ratio_max`` assigned by the head order
(``'normal'``: head ``n`` gets ratio index ``h - 1 - n``; or an explicit permutation, head ``order[m]`` gets
``r[m]``). The ``'outlier'`` order ranks heads by the last query of a causal prompt and has no meaning in a
bidirectional ViT, so it is refused here. Training-free; the rotation is the encoding's own (its public ``angles`` /
``sin_cos`` at the scaled coordinates), so RoPE-Mixed's learned frequencies and RoPE-3D's pairing are kept. Each
head's scores depend on coordinate differences only (``(c_i - c_j) / r_n``).

The head count is known only in the attention, so the per-head tables are built when the first layer rotates (once
per forward and head count, shared by the layers).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from .base import AttnTerm, Positions
from .rotation import apply_rope, grid_coords

__all__ = ['AxisMsPoETerm', 'axis_ratios', 'attn_terms']


def axis_ratios(num_heads: int, num_axes: int, options: Dict[str, Any], encoding: str = 'this encoding') \
        -> torch.Tensor:
    """Per-head, per-axis position ratios ``(num_heads, num_axes)`` float32 (1 on axes that are not compressed).

    Raises:
        ValueError: the ``'outlier'`` order, a permutation of another length, or an axis out of range.
    """
    from .multimodal.mspoe import mspoe_head_ratios, mspoe_ratios
    order = options['head_order']
    if order == 'outlier':
        raise ValueError(f"{encoding}: mspoe head_order 'outlier' ranks heads by the last query of a causal prompt, "
                         "which a ViT does not have; fix: use head_order='normal' or a permutation of the heads")
    if order == 'normal':
        order = torch.arange(num_heads - 1, -1, -1)
    else:
        if len(order) != num_heads:
            raise ValueError(f'{encoding}: mspoe head_order {list(order)} has {len(order)} entries but the attention '
                             f'has {num_heads} heads; fix: pass a permutation of 0..{num_heads - 1}')
        order = torch.tensor(order)
    r = mspoe_ratios(num_heads, options['ratio_min'], options['ratio_max'], options['official'])
    heads = mspoe_head_ratios(order[None], r, options['official'])[0]                    # (H,)
    axes = options.get('axes')
    if axes is not None and any(a >= num_axes for a in axes):
        raise ValueError(f'{encoding}: mspoe axes {list(axes)} out of range for its {num_axes} grid axes (0..'
                         f'{num_axes - 1}: {"t, rows, cols" if num_axes == 3 else "rows, cols"})')
    on = torch.tensor([axes is None or a in axes for a in range(num_axes)])
    return torch.where(on[None, :], heads[:, None], torch.ones(num_heads, num_axes))


class AxisMsPoETerm(AttnTerm):
    """One layer's rotation under per-axis Ms-PoE: per-head tables from ``build(ratios)``, built on the first rotate
    of the forward (the head count is known there) and shared by the layers through ``shared``.

    Args:
        build: ``build(ratios (num_axes,)) -> list`` of ``(sin, cos)`` per layer (one entry when every layer has the
            same rotation), each ``(B or 1, heads or 1, N, head_dim)``, for coordinates divided by ``ratios``.
        layer: this layer's index into ``build``'s list.
        num_axes: grid axes.
        options: Ms-PoE's options (:func:`zoo.encodings.multimodal.mspoe.check_mspoe_options`).
        pos: the forward's positions (token subsets select rows).
        layout: the kernel's pair layout.
        shared: a dict shared by the layers of one forward (tables per head count).
        encoding: name for messages.
    """

    def __init__(self, build: Callable[[torch.Tensor], List[Tuple[torch.Tensor, torch.Tensor]]], layer: int,
                 num_axes: int, options: Dict[str, Any], pos: Positions, layout: str, shared: Dict[Any, Any],
                 encoding: str):
        self.build, self.layer, self.num_axes, self.options = build, layer, num_axes, options
        self.pos, self.layout, self.shared, self.encoding = pos, layout, shared, encoding

    def tables(self, num_heads: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(sin, cos)`` ``(B or 1, num_heads, N, head_dim)`` of this layer."""
        if num_heads not in self.shared:
            ratios = axis_ratios(num_heads, self.num_axes, self.options, self.encoding)
            per_head = [self.build(ratios[h]) for h in range(num_heads)]              # [head][layer] (sin, cos)
            layers = []
            for i in range(len(per_head[0])):
                sin = torch.cat([_head(per_head[h][i][0], h) for h in range(num_heads)], dim=1)
                cos = torch.cat([_head(per_head[h][i][1], h) for h in range(num_heads)], dim=1)
                if self.pos.is_subset:
                    sin, cos = self.pos.select(sin, -2), self.pos.select(cos, -2)
                layers.append((sin, cos))
            self.shared[num_heads] = layers
        layers = self.shared[num_heads]
        return layers[self.layer if len(layers) > 1 else 0]

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        sin, cos = self.tables(q.shape[1])
        if k.shape[1] != q.shape[1]:  # grouped keys: each key head takes its group's first query head's table
            step = q.shape[1] // k.shape[1]
            ks, kc = sin[:, ::step], cos[:, ::step]
        else:
            ks, kc = sin, cos
        return apply_rope(q, sin, cos, self.layout), apply_rope(k, ks, kc, self.layout)


def _head(t: torch.Tensor, h: int) -> torch.Tensor:
    """Head ``h`` of a table ``(B, heads or 1, N, D)`` (a shared table stands for every head)."""
    return t[:, h:h + 1] if t.shape[1] > 1 else t


def attn_terms(enc: Any, pos: Positions, dtype: torch.dtype, device: torch.device, RotaryTerm: Any,
               patch_coords: Callable) -> Sequence[Optional[AttnTerm]]:
    """The per-layer terms of ``enc`` (a ``rope_axial``, ``rope_mixed`` or ``rope3d`` holding extrapolation
    ``'mspoe'``) for ``pos``: :class:`AxisMsPoETerm` on the Ms-PoE layers (option ``layers``), the plain rotation
    (ratios 1) on the others. ``RotaryTerm`` and ``patch_coords`` are :mod:`zoo.encodings.rotary`'s (passed in by
    the encoding, so that this module does not import the one that imports it).

    Raises:
        ValueError: see :func:`axis_ratios`; the encoding's own errors for positions it cannot take.
    """
    from .registry import pos_encoding_name
    name = pos_encoding_name(enc)
    opts = dict(enc.extrapolation.mspoe)
    npt = pos.num_prefix_tokens
    if name == 'rope_axial':
        hw = pos.hw_2d('rope_axial')
        x, y = patch_coords(hw, device)
        num_axes, depth, layout = 2, enc.depth, 'interleaved'

        def build(r):
            t = RotaryTerm.from_angles(enc.angles(x / r[1], y / r[0]).unsqueeze(0), npt)
            return [(t.sin, t.cos)]
    elif name == 'rope3d':
        num_axes, depth, layout = 3, enc.depth, 'interleaved'
        if pos.ids is not None:
            coords = pos.ids.to(device).permute(1, 2, 0).float()                          # (B, L, 3)
            lead = (slice(None), None)
        elif pos.grid is None:
            raise ValueError('rope3d needs a patch grid (Positions.grid) or (3, B, L) ids (Positions.ids)')
        else:
            coords = grid_coords(tuple(pos.grid), device)
            coords = torch.cat([coords.new_zeros(npt, 3), coords])
            lead = (None, None)

        def build(r):
            sin, cos = enc.sin_cos(coords / r.to(coords.device), dtype)
            return [(sin[lead], cos[lead])]
    else:  # rope_mixed(_ape)
        grid = pos.grid_of('rope_mixed', enc.video)
        coords = grid_coords(grid if enc.video else (1, *grid), device)                  # (N, 3): t, row, col
        num_axes, depth, layout = len(grid), enc.freqs.shape[1], 'interleaved'

        def build(r):
            t = coords[:, 0] / r[0] if enc.video else None
            angles = enc.angles(coords[:, 2] / r[-1], coords[:, 1] / r[-2], t).unsqueeze(0)
            terms = [RotaryTerm.from_angles(a, npt) for a in angles.unbind(1)]
            return [(t.sin, t.cos) for t in terms]
    layers = opts['layers']
    shared: Dict[Any, Any] = {}
    plain: Dict[Any, Any] = {}
    one = dict(opts, ratio_min=1.0, ratio_max=1.0, head_order='normal')
    return [AxisMsPoETerm(build, i, num_axes, opts if layers is None or i in layers else one, pos, layout,
                          shared if layers is None or i in layers else plain, name) for i in range(depth)]
