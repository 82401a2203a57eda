"""Randomized positions: a training-time option of the coordinate-based encodings.

Two modes, both drawn per sample and per forward in training only (an encoding in ``eval()`` always uses the
ordinary integer grid, so evaluation is deterministic):

* ``'subset'``: "Randomized Positional Encodings Boost Length Generalization of Transformers" (Ruoss et al., ACL 2023,
  arXiv:2305.16843), Sec. 3, applied per grid axis: an axis of ``n`` cells takes a sorted random subset of ``n``
  distinct integers from ``[0, R)`` with ``R = ceil(range_factor * n)``, so training sees the positions a grid up to
  ``range_factor`` times larger uses at evaluation, while keeping the order of the cells.
* ``'cape'``: "CAPE: Encoding Relative Positions with Continuous Augmented Positional Embeddings" (Likhomanenko et
  al., NeurIPS 2021, arXiv:2106.03143), Sec. 3, global augmentations only: the grid is scaled by ``lambda`` about its
  centre (``log lambda ~ U(-log max_scale, log max_scale)``, one factor for every axis) and shifted by ``Delta_a ~
  U(-max_shift, max_shift)`` patches per axis. A shift alone changes nothing for relative encodings (RoPE, distance
  biases); the scale does.

An encoding that takes the option has a ``random_positions`` argument (``None`` / ``'none'`` = off, ``'subset'``,
``'cape'``, or a dict with ``mode`` and the mode's options); :func:`zoo.encodings.create_pos_encoding` refuses it for
the others with the list of encodings that take it. Coordinates come out as ``(B, T*H*W, 3)`` float32 ``(t, row,
col)``, t-major then row-major like :func:`zoo.encodings.rotation.grid_coords`; how many samples are drawn is
``Positions.draw_batch``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import torch

__all__ = ['RANDOM_MODES', 'RandomPositions']

RANDOM_MODES = ('none', 'subset', 'cape')
_OPTIONS = {'subset': ('range_factor',), 'cape': ('max_shift', 'max_scale'), 'none': ()}


@dataclass(frozen=True)
class RandomPositions:
    """One randomized-positions setting, as held by an encoding.

    Attributes:
        mode: ``'none'``, ``'subset'`` or ``'cape'``.
        range_factor: ``'subset'``: positions of an ``n``-cell axis come from ``[0, ceil(range_factor * n))``; >= 1.
        max_shift: ``'cape'``: largest global shift per axis, in patches (tubelets for t); >= 0.
        max_scale: ``'cape'``: largest global scale factor ``lambda`` (its inverse is the smallest); >= 1.
    """
    mode: str = 'none'
    range_factor: float = 2.0
    max_shift: float = 2.0
    max_scale: float = 1.4

    @classmethod
    def parse(cls, value: Union[None, bool, str, Mapping[str, Any], 'RandomPositions'],
              encoding: str = 'this encoding') -> 'RandomPositions':
        """Build from an encoding option: ``None`` / ``False`` / ``'none'``, ``'subset'``, ``'cape'``, a dict
        ``{'mode': ..., <the mode's options>}`` or a :class:`RandomPositions`.

        Raises:
            ValueError: an unknown mode or option, or an option out of range, naming ``encoding``.
        """
        if isinstance(value, RandomPositions):
            return value
        if value is None or value is False:
            return cls()
        if isinstance(value, str):
            opts = {'mode': value}
        elif isinstance(value, Mapping):
            opts = dict(value)
        else:
            raise ValueError(f'{encoding}: random_positions must be a mode {RANDOM_MODES} or a dict with mode, got '
                             f'{type(value).__name__}')
        mode = opts.pop('mode', 'subset')
        if mode not in RANDOM_MODES:
            raise ValueError(f'{encoding}: unknown random_positions mode {mode!r}; choose one of {RANDOM_MODES}')
        unknown = sorted(set(opts) - set(_OPTIONS[mode]))
        if unknown:
            raise ValueError(f'{encoding}: random_positions mode {mode!r} takes {list(_OPTIONS[mode])}, got '
                             f'unknown options {unknown}')
        out = cls(mode, **{k: float(v) for k, v in opts.items()})
        if out.range_factor < 1 or out.max_shift < 0 or out.max_scale < 1:
            raise ValueError(f'{encoding}: random_positions needs range_factor >= 1, max_shift >= 0 and '
                             f'max_scale >= 1, got {out}')
        return out

    @property
    def active(self) -> bool:
        return self.mode != 'none'

    def key(self) -> tuple:
        """Cache-key part (tables of the ordinary grid do not depend on it; kept for completeness)."""
        return (self.mode, self.range_factor, self.max_shift, self.max_scale)

    def describe(self) -> str:
        """One line for reports."""
        if self.mode == 'subset':
            return f'randomized positions (sorted subsets of {self.range_factor:g}x the axis length, training only)'
        if self.mode == 'cape':
            return (f'CAPE global shift <= {self.max_shift:g} and scale <= {self.max_scale:g}x (training only)')
        return 'none'

    def draw_axes(self, grid: Sequence[int], batch: int,
                  device: Optional[torch.device] = None) -> Tuple[List[torch.Tensor], Tuple[float, ...]]:
        """Per-sample positions of each axis of a ``(T, H, W)`` grid (every line along an axis gets the same ones).

        Args:
            grid: ``(T, H, W)`` in tubelets / patches.
            batch: samples to draw (``Positions.draw_batch``).
            device: where to draw (torch's generator of that device).

        Returns:
            ``([t, row, col], span)``: each ``(batch, n)`` float32 in cells, and the length of the range each axis
            was drawn from (``ceil(range_factor * n)`` for ``'subset'``, ``n`` otherwise); encodings with
            normalised coordinates (ComRoPE, LieRE, GTA) divide by it, so a subset is one of a finer grid's.
        """
        sizes = [int(n) for n in grid]
        if self.mode == 'subset':
            axes, span = [], []
            for n in sizes:
                r = max(n, math.ceil(self.range_factor * n))
                pick = torch.rand(batch, r, device=device).argsort(dim=-1)[:, :n]
                axes.append(pick.sort(dim=-1).values.float())
                span.append(float(r))
            return axes, tuple(span)
        axes = [torch.arange(n, device=device, dtype=torch.float32).expand(batch, -1) for n in sizes]
        if self.mode == 'cape':
            log_scale = (torch.rand(batch, 1, device=device) * 2 - 1) * math.log(self.max_scale)
            shift = (torch.rand(batch, 3, device=device) * 2 - 1) * self.max_shift
            axes = [(n - 1) / 2 + (a - (n - 1) / 2) * log_scale.exp() + shift[:, i:i + 1]
                    for i, (a, n) in enumerate(zip(axes, sizes))]
        return axes, tuple(float(n) for n in sizes)

    def draw_with_span(self, grid: Sequence[int], batch: int,
                       device: Optional[torch.device] = None) -> Tuple[torch.Tensor, Tuple[float, ...]]:
        """:meth:`draw` and the per-axis span of :meth:`draw_axes`."""
        axes, span = self.draw_axes(grid, batch, device)
        t, h, w = (a.shape[1] for a in axes)
        coords = torch.stack([axes[0][:, :, None, None].expand(-1, t, h, w),
                              axes[1][:, None, :, None].expand(-1, t, h, w),
                              axes[2][:, None, None, :].expand(-1, t, h, w)], dim=-1).reshape(batch, t * h * w, 3)
        return coords, span

    def draw(self, grid: Sequence[int], batch: int, device: Optional[torch.device] = None) -> torch.Tensor:
        """Per-sample coordinates of a ``(T, H, W)`` grid.

        Args:
            grid: ``(T, H, W)`` in tubelets / patches.
            batch: samples to draw (``Positions.draw_batch``).
            device: where to draw (torch's generator of that device).

        Returns:
            ``(batch, T*H*W, 3)`` float32 ``(t, row, col)``.
        """
        return self.draw_with_span(grid, batch, device)[0]
