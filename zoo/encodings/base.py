"""The position-encoding interface shared by every backbone.

A backbone builds one :class:`Positions` per forward from the patch grid (never from the token count) and asks its
encoding for up to four contributions (hooks):

* ``embed(x, pos)``: add to the tokens after patch embedding (APE, sin-cos, Fourier features).
* ``mix(x, pos, block_idx)``: a token mixer after a block (CPVT's PEG).
* ``attn_terms(pos, dtype, device)``: one :class:`AttnTerm` (or ``None``) per layer, computed once per forward.
  An :class:`AttnTerm` may rotate q and k (RoPE family), add an additive attention bias that can depend on q and k
  (iRPE bias / contextual modes), and add a value term computed from the attention weights (iRPE on v).

The attention layer (``zoo.models.vit.Attention``) contains no per-encoding branches: it only asks the term what it
contributes. ``F.scaled_dot_product_attention`` is used unless the term declares ``needs_attn_weights``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import torch
from torch import nn

__all__ = ['Positions', 'AttnTerm', 'PosEncoding']


@dataclass(frozen=True)
class Positions:
    """Where the tokens of one forward pass are.

    Token layout: ``[prefix tokens (class, registers), patch tokens in row-major (t, h, w) order]``.

    Attributes:
        grid: patch grid ``(T, H, W)`` in patches; a 2D image is ``(1, H, W)``. ``None`` for sequences that only carry
            explicit ids.
        num_prefix_tokens: number of leading non-patch tokens (class token + registers).
        num_class_tokens: how many of the prefix tokens are class tokens (they come first). Registers follow.
        ids: optional explicit per-token position ids ``(A, B, L)`` (M-RoPE style, A axes), float or long.
    """
    grid: Optional[Tuple[int, int, int]]
    num_prefix_tokens: int = 0
    num_class_tokens: int = 0
    ids: Optional[torch.Tensor] = None

    @classmethod
    def from_hw(cls, hw: Tuple[int, int], num_prefix_tokens: int = 0, num_class_tokens: int = 0) -> 'Positions':
        return cls((1, int(hw[0]), int(hw[1])), num_prefix_tokens, num_class_tokens)

    @property
    def hw(self) -> Tuple[int, int]:
        """The spatial grid ``(H, W)`` in patches."""
        if self.grid is None:
            raise ValueError('These positions carry explicit ids, not a patch grid; a 2D encoding needs a grid.')
        return self.grid[1], self.grid[2]

    def hw_2d(self, encoding: str) -> Tuple[int, int]:
        """``(H, W)`` of a single-frame grid; ValueError naming ``encoding`` for video grids or explicit ids."""
        if self.grid is None or self.grid[0] != 1:
            raise ValueError(f'{encoding} is a 2D encoding and needs a (1, H, W) patch grid, got grid={self.grid}')
        return self.grid[1], self.grid[2]

    @property
    def num_patches(self) -> int:
        t, h, w = self.grid
        return t * h * w

    @property
    def num_tokens(self) -> int:
        return self.num_prefix_tokens + self.num_patches


class AttnTerm:
    """What an encoding contributes inside one attention layer.

    All tensors are ``(B, num_heads, L, head_dim)`` with ``L = num_prefix_tokens + num_patches``. Subclasses override
    only what they need; the defaults contribute nothing.
    """
    needs_attn_weights: bool = False  # True only when value_term needs the post-softmax weights (iRPE on v)

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Return rotated ``(q, k)``, out of place. Prefix tokens are handled by the term (identity rows)."""
        return q, k

    def bias(self, q: torch.Tensor, k: torch.Tensor, scale: float) -> Optional[torch.Tensor]:
        """Additive attention logits ``(B or 1, heads or 1, L, L)`` added to ``scale * q @ k^T``, or ``None``."""
        return None

    def value_term(self, attn: torch.Tensor) -> Optional[torch.Tensor]:
        """Extra output ``(B, heads, L, head_dim)`` from post-softmax weights ``attn`` ``(B, heads, L, L)``."""
        return None


class PosEncoding(nn.Module):
    """Base class for every position encoding. Subclasses override the hooks they use.

    Class attributes:
        family: human-readable PE family name used by ``zoo list`` and reports.
        adaptation: how the encoding adapts to a new grid, stated in resolution reports.
    """
    family: str = 'none'
    adaptation: str = 'nothing to adapt'

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        """Add absolute position information to tokens ``x`` ``(B, L, C)`` laid out as described in Positions."""
        return x

    def mix(self, x: torch.Tensor, pos: Positions, block_idx: int) -> torch.Tensor:
        """Token mixer applied after block ``block_idx`` (identity unless the encoding has one there)."""
        return x

    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Optional[Sequence[Optional[AttnTerm]]]:
        """One :class:`AttnTerm` (or None) per layer, or ``None`` when the encoding has no attention term."""
        return None

    def set_grid_size(self, grid_size: Tuple[int, int]) -> None:
        """Called by ``set_input_size``: resample learned tables to a new default grid ``(H, W)`` in patches."""

    def no_weight_decay(self) -> set:
        """Names of parameters (relative to this module) that must not get weight decay."""
        return set()
