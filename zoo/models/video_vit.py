"""Video Vision Transformer: the zoo ViT with a Conv3d tubelet embedding in front of the same blocks and PEs.

``PEVideoTransformer`` is :class:`~zoo.models.vit.PEVisionTransformer` with another patch embedding (timm's
``embed_layer`` argument) and a 5D input check: the attention, the blocks, the PE hooks, token subsets, pooling and
the timm contract are the image backbone's own code. Clips ``(B, C, T, H, W)`` become tubelets of
``tubelet_size x patch x patch`` pixels; tokens are ordered t-major, then row-major (token ``n`` is at
``t = n // (H'W')``, ``h = (n % (H'W')) // W'``, ``w = n % W'``), as in VideoMAE and V-JEPA 2. The PE gets the
3D grid ``(T', H', W')`` in tubelets and patches.

Defaults follow VideoMAE: 16 frames, tubelet 2, no class token, mean pooling with ``fc_norm``. V-JEPA 2 encoders
normalise every token with the final ``norm`` instead: build them with ``fc_norm=False`` (see
:func:`~zoo.models.checkpoint_filters.video_checkpoint_filter_fn`).

Registered models ``pe_video_vit_{tiny,small,base}_patch16_{pe}_224``: one ``@register_model`` function each, at the
end of this file (:data:`VIDEO_PE_MODELS` maps the ``{pe}`` part to its encoding).

Papers: ViViT (arXiv:2103.15691), VideoMAE (arXiv:2203.12602), TimeSformer (arXiv:2102.05095), V-JEPA
(arXiv:2404.08471), V-JEPA 2 (arXiv:2506.09985), UniFormer (arXiv:2201.04676), and the encodings' papers (see
``zoo.models.vit``).
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.layers import register_notrace_function, resample_patch_embed, to_2tuple
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model

from .checkpoint_filters import video_checkpoint_filter_fn
from .vit import PE_OF_MODEL, PEVisionTransformer, take_pe_kwargs

__all__ = ['PEVideoTransformer', 'TubeletEmbed', 'VIDEO_PE_MODELS']


class TubeletEmbed(nn.Module):
    """Conv3d tubelet embedding (ViViT's tubelet embedding, VideoMAE's ``PatchEmbed``) with timm's ``PatchEmbed``
    interface.

    Args:
        img_size: frame size ``(H, W)`` in pixels (the default input size).
        patch_size: spatial patch size in pixels.
        in_chans: input channels.
        embed_dim: token width.
        num_frames: frames of the default input.
        tubelet_size: frames per tubelet (the Conv3d stride on time).
        bias: Conv3d bias.
        dynamic_img_pad: pad frames on the bottom / right to a multiple of the patch size (never pads time).
        strict_img_size, output_fmt: accepted for timm's ``PatchEmbed`` interface; the size check is the backbone's
            and the output is always ``(B, T', H', W', C)``.

    Attributes:
        num_frames: frames of the default input; this module is its only home (the model's ``num_frames`` reads it,
            ``set_input_size(num_frames=...)`` changes it).
        grid_size: default grid ``(T', H', W')`` = ``(num_frames / tubelet, H / patch, W / patch)``, derived.
    """

    def __init__(self, img_size: Union[int, Tuple[int, int]] = 224, patch_size: Union[int, Tuple[int, int]] = 16,
                 in_chans: int = 3, embed_dim: int = 768, num_frames: int = 16, tubelet_size: int = 2,
                 bias: bool = True, dynamic_img_pad: bool = False, strict_img_size: bool = True,
                 output_fmt: Optional[str] = None):
        super().__init__()
        self.patch_size = to_2tuple(patch_size)
        self.tubelet_size = int(tubelet_size)
        self.dynamic_img_pad = dynamic_img_pad
        self.proj = nn.Conv3d(in_chans, embed_dim, kernel_size=(self.tubelet_size, *self.patch_size),
                              stride=(self.tubelet_size, *self.patch_size), bias=bias)
        self.set_input_size(img_size=img_size, num_frames=num_frames)

    def set_input_size(self, img_size: Optional[Union[int, Tuple[int, int]]] = None,
                       patch_size: Optional[Union[int, Tuple[int, int]]] = None,
                       num_frames: Optional[int] = None) -> None:
        """New default frame size / frame count; a new ``patch_size`` resamples the kernel over (h, w) (FlexiViT's
        pseudo-inverse resize, timm's ``resample_patch_embed``, applied to every tubelet frame)."""
        if patch_size is not None and to_2tuple(patch_size) != self.patch_size:
            new = to_2tuple(patch_size)
            w = self.proj.weight  # (C, I, t, ph, pw)
            c, i, t = w.shape[:3]
            with torch.no_grad():
                w2 = resample_patch_embed(w.reshape(c, i * t, *w.shape[-2:]), list(new), verbose=False)
            proj = nn.Conv3d(i, c, kernel_size=(t, *new), stride=(t, *new), bias=self.proj.bias is not None)
            proj = proj.to(device=w.device, dtype=w.dtype)
            proj.weight = nn.Parameter(w2.reshape(c, i, t, *new))
            if self.proj.bias is not None:
                proj.bias = self.proj.bias
            self.proj, self.patch_size = proj, new
        if img_size is not None:
            self.img_size = to_2tuple(img_size)
        if num_frames is not None:
            self.num_frames = int(num_frames)
        self.grid_size = (self.num_frames // self.tubelet_size, self.img_size[0] // self.patch_size[0],
                          self.img_size[1] // self.patch_size[1])
        self.num_patches = self.grid_size[0] * self.grid_size[1] * self.grid_size[2]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Clips ``(B, C, T, H, W)`` -> tubelet features ``(B, T', H', W', embed_dim)``."""
        if self.dynamic_img_pad:
            ph, pw = self.patch_size
            pad_h, pad_w = (ph - x.shape[-2] % ph) % ph, (pw - x.shape[-1] % pw) % pw
            x = F.pad(x, (0, pad_w, 0, pad_h))
        return self.proj(x).permute(0, 2, 3, 4, 1)


@torch.fx.wrap
@register_notrace_function
def _checked_clips(x: torch.Tensor, in_chans: int, num_frames: int, tubelet_size: int, img_size: Tuple[int, int],
                   patch_size: Tuple[int, int], dynamic_img_size: bool, dynamic_img_pad: bool) -> torch.Tensor:
    """Return clips ``x`` ``(B, in_chans, T, H, W)`` unchanged, or raise ValueError naming the sizes and the fix.

    An FX leaf (as ``_checked_images`` in ``vit.py``): the checks run on real shapes when a traced graph runs.
    """
    if x.ndim != 5 or x.shape[1] != in_chans:
        hint = ('; an image batch (B, C, H, W) goes to a pe_vit_* model, or becomes a clip with '
                f'x.unsqueeze(2).expand(-1, -1, {num_frames}, -1, -1)') if x.ndim == 4 else ''
        raise ValueError(f'expected video clips (B, {in_chans}, T, H, W), got a tensor of shape {tuple(x.shape)}'
                         f'{hint}; pass in_chans=... when building the model for other channel counts')
    if not x.is_floating_point():
        raise ValueError(f'expected floating-point clips, got {x.dtype}; convert with x.float() (and normalise)')
    T, H, W = x.shape[-3:]
    ph, pw = patch_size
    if T % tubelet_size:
        raise ValueError(f'{T} frames are not divisible by the tubelet size {tubelet_size}; sample a multiple of '
                         f'{tubelet_size} frames')
    if not dynamic_img_size:
        if T != num_frames or (H, W) != tuple(img_size):
            raise ValueError(f'input clip of {T} frames of {H}x{W} px differs from the model input ({num_frames} '
                             f'frames of {img_size[0]}x{img_size[1]} px); build the model with dynamic_img_size=True '
                             f'or call set_input_size(img_size=({H}, {W}), num_frames={T})')
    elif not dynamic_img_pad and (H % ph or W % pw):
        raise ValueError(f'frame size {H}x{W} px is not divisible by the patch size {ph}x{pw}; resize or crop to a '
                         f'multiple of the patch size, or build the model with dynamic_img_pad=True')
    return x


class PEVideoTransformer(PEVisionTransformer):
    """Video ViT with a pluggable 3D position encoding: clips ``(B, C, T, H, W)`` -> tokens / logits.

    Every argument of :class:`~zoo.models.vit.PEVisionTransformer` (timm's ViT arguments, ``pe``, ``pe_kwargs``),
    with VideoMAE's defaults (``class_token=False``, ``global_pool='avg'``), plus:

    Args:
        num_frames: frames of the default input (``T``).
        tubelet_size: frames per tubelet (Conv3d stride on time); ``T`` must be divisible by it.

    Input: float clips ``(B, in_chans, T, H, W)`` in pixels. Without ``dynamic_img_size``, ``T`` must equal
    ``num_frames`` and ``(H, W)`` the ``img_size`` (or call :meth:`set_input_size`); with it, any ``T`` divisible by
    ``tubelet_size`` and any ``H, W`` divisible by the patch size run.

    ``forward_features(x, keep_indices=idx)`` runs only the patch tokens ``idx`` ``(B, K)`` (sorted indices into the
    t-major, row-major grid of ``T' H' W'`` tubelets), each at its own position (MAE / V-JEPA masking).
    ``forward_intermediates(output_fmt='NCHW')`` returns ``(B, C, T', H', W')`` maps.

    Attributes:
        num_frames, tubelet_size: read-only views of the tubelet embed's (``patch_embed``) values; change the frame
            count with :meth:`set_input_size`.

    Raises:
        ValueError: everything the image ViT raises; ``num_frames`` or ``tubelet_size`` below 1 or not dividing;
            at forward: a tensor that is not a 5D clip, ``T`` not divisible by the tubelet, a size the model cannot
            take (the message names the sizes and the fix), bad ``keep_indices``, token subsets with PEG.
    """

    def __init__(self, img_size: Union[int, Tuple[int, int]] = 224, patch_size: Union[int, Tuple[int, int]] = 16,
                 num_frames: int = 16, tubelet_size: int = 2, class_token: bool = False, global_pool: str = 'avg',
                 embed_layer: Optional[Callable] = None, **kwargs):
        if isinstance(num_frames, bool) or not isinstance(num_frames, int) or \
                isinstance(tubelet_size, bool) or not isinstance(tubelet_size, int):
            raise ValueError(f'num_frames and tubelet_size must be integers, got num_frames={num_frames!r}, '
                             f'tubelet_size={tubelet_size!r}')
        if tubelet_size < 1 or num_frames < 1 or num_frames % tubelet_size:
            raise ValueError(f'num_frames={num_frames} must be a positive multiple of tubelet_size={tubelet_size} '
                             f'(frames per tubelet); e.g. num_frames=16, tubelet_size=2')
        if embed_layer is None:
            embed_layer = _tubelet_layer(num_frames, tubelet_size)
        super().__init__(img_size=img_size, patch_size=patch_size, class_token=class_token, global_pool=global_pool,
                         embed_layer=embed_layer, **kwargs)

    @property
    def num_frames(self) -> int:
        """Frames of the default input; the tubelet embed owns it (change it with :meth:`set_input_size`)."""
        return self.patch_embed.num_frames

    @property
    def tubelet_size(self) -> int:
        """Frames per tubelet (the tubelet embed's Conv3d stride on time)."""
        return self.patch_embed.tubelet_size

    def set_input_size(self, img_size: Optional[Union[int, Tuple[int, int]]] = None,
                       patch_size: Optional[Union[int, Tuple[int, int]]] = None,
                       num_frames: Optional[int] = None) -> None:
        """Change the default input (frame size in pixels, frame count): the tubelet embed and the PE's learned tables
        follow (each PE resamples its tables to the new ``(T', H', W')`` grid as it defines).

        Raises:
            ValueError: ``num_frames`` not a positive multiple of the tubelet size, or a frame size the patch grid
                cannot take.
        """
        if num_frames is not None:
            if isinstance(num_frames, bool) or not isinstance(num_frames, int) or num_frames < 1 or \
                    num_frames % self.tubelet_size:
                raise ValueError(f'num_frames={num_frames!r} must be a positive multiple of the tubelet size '
                                 f'{self.tubelet_size}')
            self.patch_embed.set_input_size(num_frames=num_frames)
        super().set_input_size(img_size=img_size, patch_size=patch_size)

    def _check_input(self, x: torch.Tensor) -> torch.Tensor:
        pe = self.patch_embed
        return _checked_clips(x, pe.proj.in_channels, pe.num_frames, pe.tubelet_size, tuple(pe.img_size),
                              tuple(pe.patch_size), self.dynamic_img_size, self.dynamic_img_pad)

    def _patch_tokens(self, x: torch.Tensor) -> Tuple[torch.Tensor, Tuple[int, int, int]]:
        """Checked clips -> tokens ``(B, T' H' W', C)`` (t-major, row-major) and the grid ``(T', H', W')``."""
        x = self.patch_embed(self._check_input(x))
        if self.dynamic_img_size:
            B, T, H, W, C = x.shape
        else:
            B, C = x.shape[0], x.shape[-1]
            T, H, W = self.patch_embed.grid_size
        return x.reshape(B, T * H * W, C), (T, H, W)

    def _to_map(self, x: torch.Tensor, grid: Tuple[int, int, int]) -> torch.Tensor:
        """Patch tokens ``(B, N, C)`` -> feature map ``(B, C, T', H', W')``."""
        return x.reshape(x.shape[0], grid[0], grid[1], grid[2], -1).permute(0, 4, 1, 2, 3).contiguous()


def _tubelet_layer(num_frames: int, tubelet_size: int) -> Callable:
    def layer(**kwargs) -> TubeletEmbed:
        return TubeletEmbed(num_frames=num_frames, tubelet_size=tubelet_size, **kwargs)
    return layer


# --------------------------------------------------------------------------------------------------- builders
def _create_pe_video_vit(variant: str, pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    if kwargs.get('features_only'):
        kwargs.setdefault('feature_cls', 'getter')
    return build_model_with_cfg(PEVideoTransformer, variant, pretrained,
                                pretrained_filter_fn=video_checkpoint_filter_fn, **kwargs)


def _cfg(url: str = '', **kwargs) -> Dict:
    # timm's cfg holds (C, H, W) only (its builder asserts it): the frame count is the model's num_frames (16)
    return {
        'url': url, 'num_classes': 400, 'input_size': (3, 224, 224), 'pool_size': None, 'crop_pct': 1.0,
        'interpolation': 'bicubic', 'fixed_input_size': True, 'mean': IMAGENET_DEFAULT_MEAN,
        'std': IMAGENET_DEFAULT_STD, 'first_conv': 'patch_embed.proj', 'classifier': 'head',
        'notes': ('input clips (B, 3, 16, 224, 224): 16 frames (the model\'s num_frames), tubelet 2',), **kwargs,
    }


# ------------------------------------------------------------------------------------------- registered models
# Sizes as the image models (DeiT tiny/small/base, patch 16), 16 frames, tubelet 2 (VideoMAE).
default_cfgs = generate_default_cfgs({
    'pe_video_vit_tiny_patch16_ape_224': _cfg(),
    'pe_video_vit_small_patch16_ape_224': _cfg(),
    'pe_video_vit_base_patch16_ape_224': _cfg(),
    'pe_video_vit_tiny_patch16_st_ape_224': _cfg(),
    'pe_video_vit_small_patch16_st_ape_224': _cfg(),
    'pe_video_vit_base_patch16_st_ape_224': _cfg(),
    'pe_video_vit_tiny_patch16_sincos_224': _cfg(),
    'pe_video_vit_small_patch16_sincos_224': _cfg(),
    'pe_video_vit_base_patch16_sincos_224': _cfg(),
    'pe_video_vit_tiny_patch16_sincos3d_224': _cfg(),
    'pe_video_vit_small_patch16_sincos3d_224': _cfg(),
    'pe_video_vit_base_patch16_sincos3d_224': _cfg(),
    'pe_video_vit_tiny_patch16_nope_224': _cfg(),
    'pe_video_vit_small_patch16_nope_224': _cfg(),
    'pe_video_vit_base_patch16_nope_224': _cfg(),
    'pe_video_vit_tiny_patch16_peg_224': _cfg(),
    'pe_video_vit_small_patch16_peg_224': _cfg(),
    'pe_video_vit_base_patch16_peg_224': _cfg(),
    'pe_video_vit_tiny_patch16_fourier_224': _cfg(),
    'pe_video_vit_small_patch16_fourier_224': _cfg(),
    'pe_video_vit_base_patch16_fourier_224': _cfg(),
    'pe_video_vit_tiny_patch16_rope3d_224': _cfg(),
    'pe_video_vit_small_patch16_rope3d_224': _cfg(),
    'pe_video_vit_base_patch16_rope3d_224': _cfg(),
    'pe_video_vit_tiny_patch16_rope_mixed_224': _cfg(),
    'pe_video_vit_small_patch16_rope_mixed_224': _cfg(),
    'pe_video_vit_base_patch16_rope_mixed_224': _cfg(),
    'pe_video_vit_tiny_patch16_comrope_ap_224': _cfg(),
    'pe_video_vit_small_patch16_comrope_ap_224': _cfg(),
    'pe_video_vit_base_patch16_comrope_ap_224': _cfg(),
    'pe_video_vit_tiny_patch16_comrope_ld_224': _cfg(),
    'pe_video_vit_small_patch16_comrope_ld_224': _cfg(),
    'pe_video_vit_base_patch16_comrope_ld_224': _cfg(),
    'pe_video_vit_tiny_patch16_liere_224': _cfg(),
    'pe_video_vit_small_patch16_liere_224': _cfg(),
    'pe_video_vit_base_patch16_liere_224': _cfg(),
    'pe_video_vit_tiny_patch16_irpe_k_224': _cfg(),
    'pe_video_vit_small_patch16_irpe_k_224': _cfg(),
    'pe_video_vit_base_patch16_irpe_k_224': _cfg(),
    'pe_video_vit_tiny_patch16_alibi_224': _cfg(),
    'pe_video_vit_small_patch16_alibi_224': _cfg(),
    'pe_video_vit_base_patch16_alibi_224': _cfg(),
    'pe_video_vit_tiny_patch16_kerple_log_224': _cfg(),
    'pe_video_vit_small_patch16_kerple_log_224': _cfg(),
    'pe_video_vit_base_patch16_kerple_log_224': _cfg(),
    'pe_video_vit_tiny_patch16_kerple_power_224': _cfg(),
    'pe_video_vit_small_patch16_kerple_power_224': _cfg(),
    'pe_video_vit_base_patch16_kerple_power_224': _cfg(),
    'pe_video_vit_tiny_patch16_fire_224': _cfg(),
    'pe_video_vit_small_patch16_fire_224': _cfg(),
    'pe_video_vit_base_patch16_fire_224': _cfg(),
    'pe_video_vit_tiny_patch16_ape_lape_224': _cfg(),
    'pe_video_vit_small_patch16_ape_lape_224': _cfg(),
    'pe_video_vit_base_patch16_ape_lape_224': _cfg(),
    'pe_video_vit_tiny_patch16_st_ape_lape_224': _cfg(),
    'pe_video_vit_small_patch16_st_ape_lape_224': _cfg(),
    'pe_video_vit_base_patch16_st_ape_lape_224': _cfg(),
    'pe_video_vit_tiny_patch16_sincos3d_lape_224': _cfg(),
    'pe_video_vit_small_patch16_sincos3d_lape_224': _cfg(),
    'pe_video_vit_base_patch16_sincos3d_lape_224': _cfg(),
    'pe_video_vit_tiny_patch16_fourier_lape_224': _cfg(),
    'pe_video_vit_small_patch16_fourier_lape_224': _cfg(),
    'pe_video_vit_base_patch16_fourier_lape_224': _cfg(),
    'pe_video_vit_tiny_patch16_gta_224': _cfg(),
    'pe_video_vit_small_patch16_gta_224': _cfg(),
    'pe_video_vit_base_patch16_gta_224': _cfg(),
    'pe_video_vit_tiny_patch16_seqpe_224': _cfg(),
    'pe_video_vit_small_patch16_seqpe_224': _cfg(),
    'pe_video_vit_base_patch16_seqpe_224': _cfg(),
})

#: The ``{pe}`` part of a video model name -> its registered encoding (``zoo.encodings.list_pos_encodings()``).
VIDEO_PE_MODELS: Dict[str, str] = {
    'ape': 'ape', 'st_ape': 'st_ape', 'sincos': 'sincos1d', 'sincos3d': 'sincos3d', 'nope': 'nope', 'peg': 'peg',
    'fourier': 'fourier', 'rope3d': 'rope3d', 'rope_mixed': 'rope_mixed', 'comrope_ap': 'comrope',
    'comrope_ld': 'comrope', 'liere': 'liere', 'irpe_k': 'irpe', 'alibi': 'alibi', 'kerple_log': 'kerple_log',
    'kerple_power': 'kerple_power', 'fire': 'fire',
    'gta': 'gta',
    'ape_lape': 'ape_lape', 'st_ape_lape': 'st_ape_lape', 'sincos3d_lape': 'sincos3d_lape',
    'fourier_lape': 'fourier_lape',
    'seqpe': 'seqpe',
}
PE_OF_MODEL.update({
    name: VIDEO_PE_MODELS[name[len('pe_video_vit_'):-len('_224')].split('_', 2)[2]] for name in default_cfgs})


@register_model
def pe_video_vit_tiny_patch16_ape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), one learned (T, H, W) table (ViViT, arXiv:2103.15691)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='ape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_ape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), one learned (T, H, W) table (ViViT, arXiv:2103.15691)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='ape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_ape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), one learned (T, H, W) table (ViViT, arXiv:2103.15691)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='ape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_st_ape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), learned space + time tables (TimeSformer, arXiv:2102.05095)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='st_ape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_st_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_st_ape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), learned space + time tables (TimeSformer, arXiv:2102.05095)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='st_ape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_st_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_st_ape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), learned space + time tables (TimeSformer, arXiv:2102.05095)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='st_ape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_st_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_sincos_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), 1D sin-cos over the token index (VideoMAE, arXiv:2203.12602)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='sincos1d', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_sincos_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_sincos_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), 1D sin-cos over the token index (VideoMAE, arXiv:2203.12602)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='sincos1d', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_sincos_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_sincos_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), 1D sin-cos over the token index (VideoMAE, arXiv:2203.12602)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='sincos1d', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_sincos_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_sincos3d_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), factorised 3D sin-cos (V-JEPA, arXiv:2404.08471)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='sincos3d', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_sincos3d_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_sincos3d_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), factorised 3D sin-cos (V-JEPA, arXiv:2404.08471)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='sincos3d', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_sincos3d_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_sincos3d_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), factorised 3D sin-cos (V-JEPA, arXiv:2404.08471)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='sincos3d', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_sincos3d_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_nope_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), no position encoding (NoPE, arXiv:2305.19466)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='nope', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_nope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_nope_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), no position encoding (NoPE, arXiv:2305.19466)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='nope', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_nope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_nope_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), no position encoding (NoPE, arXiv:2305.19466)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='nope', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_nope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_peg_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), a 3D PEG after block 0 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='peg', pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0,)))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_peg_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_peg_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), a 3D PEG after block 0 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='peg', pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0,)))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_peg_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_peg_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), a 3D PEG after block 0 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='peg', pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0,)))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_peg_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_fourier_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), learnable Fourier features over (t, h, w) (arXiv:2106.02795)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='fourier', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_fourier_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_fourier_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), learnable Fourier features over (t, h, w) (arXiv:2106.02795)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='fourier', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_fourier_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_fourier_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), learnable Fourier features over (t, h, w) (arXiv:2106.02795)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='fourier', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_fourier_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_rope3d_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), V-JEPA 2's 3D RoPE (arXiv:2506.09985)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='rope3d', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_rope3d_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_rope3d_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), V-JEPA 2's 3D RoPE (arXiv:2506.09985)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='rope3d', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_rope3d_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_rope3d_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), V-JEPA 2's 3D RoPE (arXiv:2506.09985)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='rope3d', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_rope3d_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_rope_mixed_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), RoPE-Mixed over (x, y, t) (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='rope_mixed', pe_kwargs=take_pe_kwargs(kwargs, theta=10.0))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_rope_mixed_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_rope_mixed_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), RoPE-Mixed over (x, y, t) (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='rope_mixed', pe_kwargs=take_pe_kwargs(kwargs, theta=10.0))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_rope_mixed_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_rope_mixed_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), RoPE-Mixed over (x, y, t) (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='rope_mixed', pe_kwargs=take_pe_kwargs(kwargs, theta=10.0))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_rope_mixed_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_comrope_ap_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), ComRoPE-AP (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='comrope', pe_kwargs=take_pe_kwargs(kwargs, variant='ap'))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_comrope_ap_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_comrope_ap_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), ComRoPE-AP (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='comrope', pe_kwargs=take_pe_kwargs(kwargs, variant='ap'))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_comrope_ap_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_comrope_ap_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), ComRoPE-AP (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='comrope', pe_kwargs=take_pe_kwargs(kwargs, variant='ap'))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_comrope_ap_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_comrope_ld_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), ComRoPE-LD (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='comrope', pe_kwargs=take_pe_kwargs(kwargs, variant='ld'))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_comrope_ld_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_comrope_ld_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), ComRoPE-LD (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='comrope', pe_kwargs=take_pe_kwargs(kwargs, variant='ld'))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_comrope_ld_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_comrope_ld_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), ComRoPE-LD (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='comrope', pe_kwargs=take_pe_kwargs(kwargs, variant='ld'))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_comrope_ld_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_liere_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), LieRE rotations (LieRE, arXiv:2406.10322)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='liere', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_liere_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_liere_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), LieRE rotations (LieRE, arXiv:2406.10322)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='liere', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_liere_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_liere_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), LieRE rotations (LieRE, arXiv:2406.10322)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='liere', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_liere_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_irpe_k_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), 3D contextual product iRPE on keys (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=0, ape=True, rpe_on='k'))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_irpe_k_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_irpe_k_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), 3D contextual product iRPE on keys (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=0, ape=True, rpe_on='k'))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_irpe_k_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_irpe_k_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), 3D contextual product iRPE on keys (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=0, ape=True, rpe_on='k'))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_irpe_k_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_alibi_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), ALiBi linear distance biases over (t, h, w) (ALiBi, arXiv:2108.12409)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='alibi', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_alibi_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_alibi_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), ALiBi linear distance biases over (t, h, w) (ALiBi, arXiv:2108.12409)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='alibi', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_alibi_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_alibi_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), ALiBi linear distance biases over (t, h, w) (ALiBi, arXiv:2108.12409)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='alibi', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_alibi_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_kerple_log_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), KERPLE logarithmic distance biases (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='kerple_log', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_kerple_log_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_kerple_log_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), KERPLE logarithmic distance biases (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='kerple_log', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_kerple_log_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_kerple_log_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), KERPLE logarithmic distance biases (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='kerple_log', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_kerple_log_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_kerple_power_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), KERPLE power distance biases (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='kerple_power', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_kerple_power_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_kerple_power_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), KERPLE power distance biases over (t, h, w) (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='kerple_power', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_kerple_power_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_kerple_power_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), KERPLE power distance biases over (t, h, w) (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='kerple_power', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_kerple_power_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_fire_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), FIRE learned distance biases over (t, h, w) (FIRE, arXiv:2310.04418)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='fire', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_fire_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_fire_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), FIRE learned distance biases over (t, h, w) (FIRE, arXiv:2310.04418)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='fire', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_fire_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_fire_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), FIRE learned distance biases over (t, h, w) (FIRE, arXiv:2310.04418)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='fire', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_fire_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_gta_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), GTA on (row, col, t): q, k, v, output transformed (arXiv:2310.10375)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='gta', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_gta_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_gta_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), GTA on (row, col, t): q, k, v, output transformed (arXiv:2310.10375)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='gta', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_gta_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_gta_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), GTA on (row, col, t): q, k, v, output transformed (arXiv:2310.10375)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='gta', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_gta_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_ape_lape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), LaPE over the learned (T, H, W) table (LaPE, arXiv:2212.13140)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3,
                      mlp_ratio=4, qkv_bias=True, pe='ape_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_ape_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_ape_lape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), LaPE over the learned (T, H, W) table (LaPE, arXiv:2212.13140)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6,
                      mlp_ratio=4, qkv_bias=True, pe='ape_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_ape_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_ape_lape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), LaPE over the learned (T, H, W) table (LaPE, arXiv:2212.13140)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12,
                      mlp_ratio=4, qkv_bias=True, pe='ape_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_ape_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_st_ape_lape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), LaPE over the space + time tables (LaPE, arXiv:2212.13140)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3,
                      mlp_ratio=4, qkv_bias=True, pe='st_ape_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_st_ape_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_st_ape_lape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), LaPE over the space + time tables (LaPE, arXiv:2212.13140)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6,
                      mlp_ratio=4, qkv_bias=True, pe='st_ape_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_st_ape_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_st_ape_lape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), LaPE over the space + time tables (LaPE, arXiv:2212.13140)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12,
                      mlp_ratio=4, qkv_bias=True, pe='st_ape_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_st_ape_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_sincos3d_lape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), LaPE over the 3D sin-cos table (LaPE, arXiv:2212.13140)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3,
                      mlp_ratio=4, qkv_bias=True, pe='sincos3d_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_sincos3d_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_sincos3d_lape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), LaPE over the 3D sin-cos table (LaPE, arXiv:2212.13140)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6,
                      mlp_ratio=4, qkv_bias=True, pe='sincos3d_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_sincos3d_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_sincos3d_lape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), LaPE over the 3D sin-cos table (LaPE, arXiv:2212.13140)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12,
                      mlp_ratio=4, qkv_bias=True, pe='sincos3d_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_sincos3d_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_fourier_lape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), LaPE over 3D learnable Fourier features (LaPE, arXiv:2212.13140)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3,
                      mlp_ratio=4, qkv_bias=True, pe='fourier_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_fourier_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_fourier_lape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), LaPE over 3D learnable Fourier features (LaPE, arXiv:2212.13140)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6,
                      mlp_ratio=4, qkv_bias=True, pe='fourier_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_fourier_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_fourier_lape_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), LaPE over 3D learnable Fourier features (LaPE, arXiv:2212.13140)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12,
                      mlp_ratio=4, qkv_bias=True, pe='fourier_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_fourier_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_tiny_patch16_seqpe_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-Ti/16 (16 frames, tubelet 2), SeqPE over the digits of (row, col, t) (arXiv:2506.13277)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4,
                      qkv_bias=True, pe='seqpe', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_tiny_patch16_seqpe_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_small_patch16_seqpe_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-S/16 (16 frames, tubelet 2), SeqPE over the digits of (row, col, t) (arXiv:2506.13277)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4,
                      qkv_bias=True, pe='seqpe', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_small_patch16_seqpe_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_video_vit_base_patch16_seqpe_224(pretrained: bool = False, **kwargs) -> PEVideoTransformer:
    """Video ViT-B/16 (16 frames, tubelet 2), SeqPE over the digits of (row, col, t) (arXiv:2506.13277)."""
    model_args = dict(patch_size=16, num_frames=16, tubelet_size=2, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4,
                      qkv_bias=True, pe='seqpe', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_video_vit(
        'pe_video_vit_base_patch16_seqpe_224', pretrained=pretrained, **dict(model_args, **kwargs))
