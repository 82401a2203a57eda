"""Conditional position encoding: CPVT's Position Encoding Generator (PEG), and its 3D form for videos.

"Conditional Positional Encodings for Vision Transformers" (Chu et al., arXiv:2102.10882), Sec. 3.2: a depthwise
3x3 convolution with zero padding over the patch grid, added back to the tokens (residual). Zero padding is what lets
the convolution infer absolute position near the borders. Videos: a depthwise 3x3x3 convolution over (t, h, w), the
dynamic position embedding (DPE) of "UniFormer: Unified Transformer for Efficient Spatiotemporal Representation
Learning" (Li et al., arXiv:2201.04676).
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
from torch import nn

from ._grid import parse_grid_size
from .base import Positions, PosEncoding
from .registry import register_pos_encoding

__all__ = ['PEG']


@register_pos_encoding('peg')
class PEG(PosEncoding):
    """CPVT PEG after the blocks listed in ``after_blocks``; prefix tokens pass through unchanged.

    Args:
        dim: embedding width C.
        after_blocks: 0-based block indices followed by a PEG (CPVT: ``(0,)``; ``peg0to5``: ``(0, 1, 2, 3, 4, 5)``).
        kernel_size: odd convolution size (3 in the paper), zero padding ``kernel_size // 2``.
        grid_size: ``(H, W)`` (images, the default: ``Conv2d``) or ``(T', H', W')`` (videos: depthwise ``Conv3d``
            over (t, h, w), UniFormer's DPE); only its length matters.

    Parameters: ``pegs.<block>.weight`` ``(C, 1, k, k)`` (``(C, 1, k, k, k)`` for videos) and ``pegs.<block>.bias``
    ``(C,)``. A 2D PEG given a video grid ``(T, H, W)`` applies to each frame. More frames or a bigger frame: the
    same convolution runs over the new grid; zero padding at the borders (in time too) is the absolute cue. The
    convolution needs every patch: token subsets are refused.
    """
    family = 'CPE/PEG (conditional)'
    adaptation = 'convolution runs on the new grid unchanged (zero padding gives the absolute cue)'
    supports_subsets = False

    def __init__(self, dim: int, depth: int, after_blocks: Sequence[int] = (0,), kernel_size: int = 3,
                 grid_size: Optional[Tuple[int, ...]] = None):
        super().__init__()
        self.video = grid_size is not None and len(parse_grid_size('peg', grid_size)) == 3
        if isinstance(after_blocks, int):
            after_blocks = (after_blocks,)
        if isinstance(after_blocks, str) or not all(isinstance(b, int) for b in after_blocks):
            raise ValueError(f'PEG after_blocks must be a block index or a sequence of block indices, got '
                             f'{after_blocks!r}; e.g. after_blocks=(0, 1, 2)')
        after_blocks = tuple(after_blocks)
        bad = [b for b in after_blocks if not 0 <= b < depth]
        if bad or kernel_size % 2 == 0:
            raise ValueError(f'PEG needs block indices in [0, {depth}) and an odd kernel_size; got after_blocks='
                             f'{after_blocks}, kernel_size={kernel_size}')
        self.after_blocks = after_blocks
        conv = nn.Conv3d if self.video else nn.Conv2d
        if self.video:
            self.adaptation = 'depthwise 3D convolution runs on the new (t, h, w) grid unchanged (zero padding)'
        self.pegs = nn.ModuleDict({
            str(b): conv(dim, dim, kernel_size, padding=kernel_size // 2, groups=dim) for b in after_blocks})

    def mix(self, x: torch.Tensor, pos: Positions, block_idx: int) -> torch.Tensor:
        if block_idx not in self.after_blocks:
            return x
        pos.require_full_grid('PEG (a convolution over the patch grid)')
        t, h, w = pos.grid
        npt = pos.num_prefix_tokens
        prefix, patches = x[:, :npt], x[:, npt:]
        b, n, c = patches.shape
        if n != t * h * w:
            raise ValueError(f'PEG got {n} patch tokens for a {t}x{h}x{w} grid; pass the grid of the actual tokens')
        if self.video:
            feat = patches.reshape(b, t, h, w, c).permute(0, 4, 1, 2, 3)
            feat = self.pegs[str(block_idx)](feat) + feat
            patches = feat.permute(0, 2, 3, 4, 1).reshape(b, n, c)
        else:
            feat = patches.reshape(b * t, h, w, c).permute(0, 3, 1, 2)
            feat = self.pegs[str(block_idx)](feat) + feat
            patches = feat.permute(0, 2, 3, 1).reshape(b, n, c)
        return torch.cat([prefix, patches], dim=1) if npt else patches

    def inflate_param(self, name: str, image_value: Optional[torch.Tensor], target: torch.Tensor,
                      image_grid: Tuple[int, int], prefix: str = '') -> Optional[torch.Tensor]:
        """A ``k x k`` depthwise kernel becomes the middle time slice of the ``k x k x k`` one (zeros elsewhere), so
        a static clip gets the image convolution; biases are kept. See :meth:`PosEncoding.inflate_param`."""
        if image_value is not None and image_value.ndim == 4 and target.ndim == 5 and \
                target.shape[2] == target.shape[3] == target.shape[4] and \
                tuple(image_value.shape) == (target.shape[0], target.shape[1], target.shape[3], target.shape[4]):
            out = torch.zeros_like(target)
            out[:, :, target.shape[2] // 2] = image_value
            return out
        return super().inflate_param(name, image_value, target, image_grid, prefix)
