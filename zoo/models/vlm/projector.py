"""The projector from tower patches to decoder tokens: Qwen2-VL's 2x2 spatial merge and MLP ("Qwen2-VL: Enhancing
Vision-Language Model's Perception of the World at Any Resolution", Wang et al., arXiv:2409.12191, Sec. 2.1).

Each patch is layer-normalised, the ``merge x merge`` neighbours of a cell are concatenated (row-major inside the
cell) and a two-layer GELU MLP maps them to the decoder width. Merged tokens come out t-major, then row-major over the
merged grid: the order in which :func:`zoo.encodings.multimodal_rope.get_position_ids` lays out a visual block.
"""
from __future__ import annotations

import torch
from torch import nn

from timm.layers import Mlp

__all__ = ['PatchMerger']


class PatchMerger(nn.Module):
    """LayerNorm per patch, ``merge x merge`` concatenation, MLP ``(m*m*C -> m*m*C -> dim)``.

    Args:
        in_features: channels per grid cell ``C`` (the tower's ``out_features``).
        out_features: decoder width.
        merge: spatial merge factor (2 in the Qwen-VL family).
    """

    def __init__(self, in_features: int, out_features: int, merge: int = 2):
        super().__init__()
        if merge < 1:
            raise ValueError(f'merge must be >= 1, got {merge}')
        self.merge = merge
        hidden = in_features * merge * merge
        self.norm = nn.LayerNorm(in_features, eps=1e-6)
        self.mlp = Mlp(hidden, hidden, out_features, act_layer=nn.GELU)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Patch features ``(t, h, w, C)`` -> merged tokens ``(t * h/m * w/m, out_features)``.

        Raises:
            ValueError: ``h`` or ``w`` not divisible by the merge factor (named with the grid).
        """
        t, h, w, c = x.shape
        m = self.merge
        if h % m or w % m:
            raise ValueError(f'a {h}x{w} patch grid does not allow the projector\'s {m}x{m} merge; fix: use frames '
                             f'whose patch grid is a multiple of {m} on each side')
        x = self.norm(x).reshape(t, h // m, m, w // m, m, c).permute(0, 1, 3, 2, 4, 5)
        return self.mlp(x.reshape(t * (h // m) * (w // m), m * m * c))
