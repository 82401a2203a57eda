"""The one rotation kernel of the zoo, plus the frequency-band and coordinate-grid helpers every RoPE shares.

Every rotary encoding (RoPE-Axial / -Mixed, 3D RoPE, ComRoPE's ``b = 2`` path, the multimodal video-LLM schemes)
turns channel pairs of q and k by per-token angles through :func:`apply_rope`, which is timm's ``apply_rot_embed``:

* pair layouts: ``interleaved`` (channels ``2i, 2i+1``; timm / RoPE-ViT weights) or ``half`` (channels ``i`` and
  ``i + D/2``, "rotate half"; Hugging Face Qwen / LLaMA weights);
* precision policy, stated once: angles, sin and cos are float32 (float64 for float64 inputs); the product is
  formed in that precision and the result is cast back to the input dtype. No complex-number ops (inductor does not
  generate code for them), so the kernel compiles and exports.

Source: RoFormer (Su et al., arXiv:2104.09864), Eq. 34; RoPE-ViT (Heo et al., arXiv:2403.13298), Sec. 3.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
from timm.layers import apply_rot_embed

__all__ = ['apply_rope', 'rope_sin_cos', 'rope_frequencies', 'grid_coords', 'LAYOUTS', 'check_p_rope', 'p_rope_mask']

LAYOUTS = ('interleaved', 'half')


def rope_frequencies(num_bands: int, theta: float, device: Optional[torch.device] = None,
                     step: float = 1.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Frequency bands ``theta^(-step * i / num_bands)`` for ``i < num_bands``, radians per position unit.

    ``step=1`` gives RoPE-ViT's axial bands (``num_bands = head_dim / 4``); for 1D RoPE over ``D`` channels,
    ``theta^(-2i/D)`` is ``rope_frequencies(D // 2, theta)``.

    Args:
        dtype: float32 (the default and the zoo's precision policy) or float64 (for float64 inputs).

    Raises:
        ValueError: ``num_bands < 1`` or ``theta <= 0``.
    """
    if num_bands < 1 or not theta > 0:
        raise ValueError(f'need num_bands >= 1 and theta > 0, got num_bands={num_bands}, theta={theta}')
    # divide (as timm's freq_bands, Hugging Face and V-JEPA 2 do): i * (1 / n) is off by an ulp when n is no power of 2
    exponent = torch.arange(num_bands, dtype=dtype, device=device) * step / num_bands
    return 1.0 / (float(theta) ** exponent)


def rope_sin_cos(angles: torch.Tensor, layout: str = 'interleaved') -> Tuple[torch.Tensor, torch.Tensor]:
    """Full-width ``(sin, cos)`` tables for :func:`apply_rope` from per-pair angles.

    Args:
        angles: ``(..., D/2)`` radians, any float dtype; computed in float32 (float64 stays float64).
        layout: ``'interleaved'`` (each angle repeated for channels ``2i, 2i+1``) or ``'half'`` (angles tiled twice).

    Returns:
        ``(sin, cos)``, each ``(..., D)`` float32 (or float64).

    Raises:
        ValueError: unknown layout.
    """
    if layout not in LAYOUTS:
        raise ValueError(f'unknown RoPE pair layout {layout!r}; choose one of {LAYOUTS}')
    if angles.dtype != torch.float64:
        angles = angles.float()
    sin, cos = angles.sin(), angles.cos()
    if layout == 'interleaved':
        return sin.repeat_interleave(2, dim=-1), cos.repeat_interleave(2, dim=-1)
    return torch.cat([sin, sin], dim=-1), torch.cat([cos, cos], dim=-1)


def apply_rope(x: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor, layout: str = 'interleaved') -> torch.Tensor:
    """Rotate ``x`` ``(..., L, D)`` by tables from :func:`rope_sin_cos` (broadcast against ``x``), out of place.

    Pair ``(a, b)`` becomes ``(a cos - b sin, b cos + a sin)``. The result has ``x``'s dtype; the arithmetic runs in
    the tables' precision (float32), see the module docstring. A strided ``x`` (q, k, v split from the fused ``qkv``
    projection) is made contiguous first: the same numbers, faster on CPU than rotating the strided view.
    """
    return apply_rot_embed(x.contiguous(), sin, cos, half=layout == 'half')


def grid_coords(grid: Sequence[int], device: Optional[torch.device] = None, normalized: bool = False) -> torch.Tensor:
    """Coordinates ``(t, row, col)`` of every cell of a ``(T, H, W)`` patch grid, t-major then row-major.

    Args:
        grid: ``(T, H, W)`` in patches (a 2D image is ``(1, H, W)``).
        device: where to build the result.
        normalized: ``False`` gives integer patch indices; ``True`` gives patch centres ``(i + 0.5) / n`` per axis,
            in ``[0, 1]`` (ComRoPE / LieRE convention).

    Returns:
        ``(T * H * W, 3)`` float32.
    """
    axes = []
    for n in grid:  # no int(): sizes stay symbolic under torch.export
        a = torch.arange(n, device=device, dtype=torch.float32)
        axes.append((a + 0.5) / n if normalized else a)
    mesh = torch.meshgrid(*axes, indexing='ij')
    return torch.stack([m.reshape(-1) for m in mesh], dim=-1)


def check_p_rope(p: float, encoding: str = 'this encoding') -> float:
    """Validate p-RoPE's ``p`` (the fraction of rotary pairs that keep their frequency): a float in ``[0, 1]``.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``, naming ``encoding``.
    """
    try:
        p = float(p)
    except (TypeError, ValueError):
        raise ValueError(f'{encoding}: p_rope must be a fraction in [0, 1], got {p!r}') from None
    if not 0.0 <= p <= 1.0:
        raise ValueError(f'{encoding}: p_rope must be a fraction in [0, 1] (1 = plain RoPE, 0 = no rotation), got {p}')
    return p


def p_rope_mask(band: torch.Tensor, num_bands: int, p: float) -> torch.Tensor:
    """p-RoPE ("Round and Round We Go! What makes Rotary Positional Encodings useful?", Barbero et al., ICLR 2025,
    arXiv:2410.06205, Sec. 6): keep the ``round(p * num_bands)`` highest frequencies of a ladder and set the others
    to zero frequency (those pairs are not rotated: position-free "semantic" channels).

    Args:
        band: ``(n,)`` each pair's index in its frequency ladder, 0 = the highest frequency.
        num_bands: the ladder's length.
        p: the fraction kept (:func:`check_p_rope`).

    Returns:
        ``(n,)`` float32 multipliers of the frequencies: 1 for kept pairs, 0 for the lowest-frequency rest.
    """
    keep = int(round(p * num_bands))
    return (band < keep).to(torch.float32)
