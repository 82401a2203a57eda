"""Learnable Fourier features for multi-dimensional positions.

"Learnable Fourier Features for Multi-Dimensional Spatial Positional Encoding" (Li et al., NeurIPS 2021,
arXiv:2106.02795), Algorithm 1, with G = 1 group and M = 2 coordinates (row, col) for images or M = 3
(row, col, t) for videos.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Tuple

import torch
from torch import nn

from ._cache import TableCache, param_key
from ._grid import parse_grid_size
from .absolute import add_to_patches
from .base import Positions, PosEncoding
from .extrapolation import COORDINATE_STRATEGIES, Extrapolation
from .randomized import RandomPositions
from .registry import register_pos_encoding
from .rotation import grid_coords

__all__ = ['LearnableFourierPE']


@register_pos_encoding('fourier')
class LearnableFourierPE(PosEncoding):
    """PE_X = MLP(F_X), with F_X = |F|^-1/2 [cos(X W_r^T) || sin(X W_r^T)] (Li et al. 2021, Algorithm 1).

    Coordinate convention: X = (row, col) of each patch centre in **patch units** (integers: row 0..H-1, col 0..W-1),
    so a larger grid extrapolates to larger coordinates, like axial RoPE. Prefix tokens get no embedding.

    Videos (``grid_size=(T', H', W')``): M = 3, X = (row, col, t) with t the integer tubelet index, so more frames
    or a bigger frame extrapolate to larger coordinates in the same way (nothing is resampled). The time column of
    ``W_r`` comes last: a 2D checkpoint inflates by appending a zero column (each frame then gets the image encoding).

    gamma reading: W_r ~ N(0, gamma^-2), i.e. each entry has standard deviation 1/gamma (radians per patch), so gamma
    is a length scale in patches: larger gamma = smoother encoding.

    Args:
        dim: embedding width C (the MLP output D).
        fourier_dim: |F|, the number of Fourier features (even); W_r has |F|/2 rows.
        hidden_dim: MLP hidden width (defaults to ``dim``).
        gamma: the length scale above, in patches.
        grid_size: ``(H, W)`` (images, the default) or ``(T', H', W')`` (videos: M = 3): the training grid (for
            ``extrapolation='pi'``); its length picks M.
        extrapolation: ``'none'`` (integer coordinates of the new grid, extrapolated) or ``'pi'`` (coordinates times
            training / evaluated grid per axis: a larger grid covers the trained range; see
            :mod:`zoo.encodings.extrapolation`).
        random_positions: ``None``, ``'subset'``, ``'cape'`` or a dict (:mod:`zoo.encodings.randomized`): per-sample
            random coordinates in training; the integer grid in eval.

    Parameters: ``w_r`` ``(|F|/2, M)``, ``mlp.0`` / ``mlp.2`` Linear layers (GELU between).
    """
    family = 'learnable Fourier features'
    adaptation = 'evaluated at the integer patch coordinates of the new grid (extrapolation)'
    extrapolation_strategies = COORDINATE_STRATEGIES

    def __init__(self, dim: int, fourier_dim: int = 256, hidden_dim: int | None = None, gamma: float = 4.0,
                 grid_size: Optional[Tuple[int, ...]] = None, extrapolation: Any = 'none',
                 random_positions: Any = None):
        super().__init__()
        self.random_positions = RandomPositions.parse(random_positions, 'fourier')
        self._extrapolation = Extrapolation.parse(extrapolation, grid_size, self.extrapolation_strategies, 'fourier')
        self.video = grid_size is not None and len(parse_grid_size('fourier', grid_size)) == 3
        if self.video:
            self.adaptation = 'evaluated at the integer (row, col, t) coordinates of the new grid (extrapolation)'

        if fourier_dim % 2 or fourier_dim <= 0:
            raise ValueError(f'fourier_dim must be a positive even number, got {fourier_dim}')
        if gamma <= 0:
            raise ValueError(f'gamma must be > 0 (W_r ~ N(0, gamma^-2)), got {gamma}')
        self.gamma = gamma
        self.w_r = nn.Parameter(torch.empty(fourier_dim // 2, 3 if self.video else 2))
        hidden_dim = hidden_dim or dim
        self.mlp = nn.Sequential(nn.Linear(fourier_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, dim))
        self.scale = 1.0 / math.sqrt(fourier_dim)
        self._cache = TableCache(max_entries=4)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``W_r ~ N(0, gamma^-2)`` (Algorithm 1); the MLP's Linear layers get PyTorch's default init."""
        with torch.no_grad():
            self.w_r.normal_(0.0, 1.0 / self.gamma)
        for m in self.mlp:
            if isinstance(m, nn.Linear):
                m.reset_parameters()

    def table(self, size: Sequence[int], device: torch.device, coords: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Embedding for grid ``size`` (``(H, W)``, or ``(T, H, W)`` for video features), computed in float32:
        ``(1, N, C)`` at the grid's integer coordinates, ``(B, N, C)`` at per-sample ``coords`` ``(B, N, 3)`` (t, row,
        col)."""
        if coords is not None:
            x = coords[..., [1, 2, 0]] if self.video else coords[..., 1:]
        elif self.video:
            x = grid_coords(size, device)[:, [1, 2, 0]]  # (row, col, t)
        else:
            rows = torch.arange(size[0], device=device, dtype=torch.float32)
            cols = torch.arange(size[1], device=device, dtype=torch.float32)
            x = torch.stack(torch.meshgrid(rows, cols, indexing='ij'), dim=-1).reshape(-1, 2)
        if self.extrapolation.active:
            f = self.extrapolation.factors(tuple(size), 'fourier')
            x = self.extrapolation.coords(x, (f[1], f[2], f[0]) if self.video else f)  # (row, col[, t]) order
        proj = x @ self.w_r.float().t()
        feats = torch.cat([proj.cos(), proj.sin()], dim=-1) * self.scale
        out = self.mlp(feats.to(self.mlp[0].weight.dtype))
        return out if coords is not None else out.unsqueeze(0)

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        size = pos.grid_of('fourier', self.video)
        coords = None
        if self.training and self.random_positions.active:  # per-sample random coordinates
            coords = self.random_positions.draw(size if self.video else (1, *size), x.shape[0], x.device)
        if coords is None and not torch.is_grad_enabled():
            # inference: the table depends only on the grid and the parameters (their versions are in the key, so an
            # optimizer step or load_state_dict is always seen): computed once, not every forward
            table = self._cache.get(lambda: (tuple(size), str(x.device), self.extrapolation.key(),
                                             param_key(list(self.parameters()))), lambda: self.table(size, x.device))
        else:
            table = self.table(size, x.device, coords)
        return add_to_patches(x, table.to(x.dtype), pos.num_prefix_tokens)

    def no_weight_decay(self) -> set:
        return {'w_r'}
