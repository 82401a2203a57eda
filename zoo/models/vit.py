"""One Vision Transformer backbone for every position encoding (PE).

The backbone follows the DeiT / timm ``VisionTransformer`` layout and key names (patch embed, class token, optional
registers, pre-norm blocks with optional LayerScale, token or average pooling), and consults a single PE object built
by ``zoo.encodings.create_pos_encoding`` through four hooks (embed, mix, attention terms, grid resize). There are no
per-encoding branches here; see ``zoo/encodings/base.py``.

Registered models ``pe_vit_{tiny,small,base}_patch16_{pe}_224``: one ``@register_model`` function each, at the end of
this file (the ``{pe}`` part names the encoding and its options; :data:`PE_OF_MODEL` maps a name to its encoding).

Papers: ViT (arXiv:2010.11929), DeiT (arXiv:2012.12877), RoPE-ViT (arXiv:2403.13298), CPVT (arXiv:2102.10882),
Learnable Fourier Features (arXiv:2106.02795), iRPE (arXiv:2107.14222), ComRoPE (arXiv:2506.03737), LieRE
(arXiv:2406.10322), MoCo v3 (2D sin-cos, arXiv:2104.02057), NoPE (arXiv:2305.19466).
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn
from torch.jit import Final

from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD, IMAGENET_INCEPTION_MEAN, IMAGENET_INCEPTION_STD
from timm.layers import (PatchEmbed, calculate_drop_path_rates, get_act_layer, get_norm_layer, global_pool_nlc,
                         register_notrace_function, to_2tuple)
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model
from timm.models._features import feature_take_indices
from timm.models._manipulate import checkpoint, named_apply
from timm.models.vision_transformer import init_weights_vit_timm

import zoo.encodings  # noqa: F401  (registers the encodings)
from zoo.encodings import Positions, check_keep_indices, create_pos_encoding
from ._fx import PatchDropoutLeaf, pe_attn_terms, pe_embed, pe_has_attn_terms, pe_mix
from .attention import Attention, Block
from .checkpoint_filters import checkpoint_filter_fn

__all__ = ['PEVisionTransformer', 'Attention', 'Block', 'PE_OF_MODEL', 'take_pe_kwargs']


def _check_geometry(img_size, patch_size, dynamic_img_size: bool, dynamic_img_pad: bool) -> None:
    """Raise ValueError for a patch size or input size (pixels) that the patch grid cannot take."""
    img_size, patch_size = to_2tuple(img_size), to_2tuple(patch_size)
    if min(patch_size) < 1 or min(img_size) < 1:
        raise ValueError(f'img_size and patch_size must be positive, got img_size={img_size}, patch_size={patch_size}')
    if dynamic_img_pad and not dynamic_img_size:
        raise ValueError('dynamic_img_pad=True pads inputs to a multiple of the patch size and needs '
                         'dynamic_img_size=True too; pass both')
    if not dynamic_img_pad and (img_size[0] % patch_size[0] or img_size[1] % patch_size[1]):
        raise ValueError(f'input size {img_size[0]}x{img_size[1]} px is not divisible by the patch size '
                         f'{patch_size[0]}x{patch_size[1]}; use a multiple of the patch size, or pass '
                         f'dynamic_img_size=True, dynamic_img_pad=True')


@torch.fx.wrap
@register_notrace_function
def _checked_images(x: torch.Tensor, in_chans: int, img_size: Tuple[int, int], patch_size: Tuple[int, int],
                    dynamic_img_size: bool, dynamic_img_pad: bool) -> torch.Tensor:
    """Return the images ``x`` ``(B, in_chans, H, W)`` unchanged, or raise ValueError naming the problem and the fix.

    A leaf for FX tracing (timm's notrace registry, ``torch.fx.wrap``): the checks run on real shapes when the traced
    graph runs, and ``x`` passes through them so that graph pruning keeps them.
    """
    if x.ndim != 4 or x.shape[1] != in_chans:
        raise ValueError(f'expected images (B, {in_chans}, H, W), got a tensor of shape {tuple(x.shape)}; pass '
                         f'in_chans=... when building the model for other channel counts (video clips '
                         f'(B, C, T, H, W) go to a pe_video_vit_* model)')
    if not x.is_floating_point():
        raise ValueError(f'expected floating-point images, got {x.dtype}; convert with x.float() (and normalise)')
    H, W = x.shape[-2:]
    ph, pw = patch_size
    if not dynamic_img_size:
        if (H, W) != tuple(img_size):
            raise ValueError(f'input size {H}x{W} px differs from the model input size {img_size[0]}x{img_size[1]} '
                             f'px; build the model with dynamic_img_size=True or call set_input_size(({H}, {W}))')
    elif not dynamic_img_pad and (H % ph or W % pw):
        raise ValueError(f'input size {H}x{W} px is not divisible by the patch size {ph}x{pw}; resize or crop to '
                         f'a multiple of the patch size, or build the model with dynamic_img_pad=True')
    return x


class PEVisionTransformer(nn.Module):
    """ViT whose position encoding is pluggable (``pe`` + ``pe_kwargs``).

    Input ``(B, in_chans, H, W)`` float images in pixels; ``H``, ``W`` must equal ``img_size`` unless
    ``dynamic_img_size=True``, and must be divisible by ``patch_size`` unless ``dynamic_img_pad=True``.

    Args mirror timm's ``VisionTransformer`` (same meaning), plus:
        pe: registered encoding name (see ``zoo.encodings.list_pos_encodings()``).
        pe_kwargs: options passed to the encoding.
        embed_layer: patch embedding class (timm's ``PatchEmbed`` interface); its ``grid_size`` is the PE's
            default grid (the video ViT passes a Conv3d tubelet embedding with a ``(T, H, W)`` grid).

    Raises:
        ValueError: unknown ``pe`` or ``pe_kwargs``; bad ``global_pool``; an input size that the model cannot take
            (the message names the size, the patch size and the fix).
    """
    dynamic_img_size: Final[bool]

    def __init__(
            self,
            img_size: Union[int, Tuple[int, int]] = 224,
            patch_size: Union[int, Tuple[int, int]] = 16,
            in_chans: int = 3,
            num_classes: int = 1000,
            global_pool: str = 'token',
            embed_dim: int = 768,
            depth: int = 12,
            num_heads: int = 12,
            mlp_ratio: float = 4.,
            qkv_bias: bool = True,
            qk_norm: bool = False,
            init_values: Optional[float] = None,
            class_token: bool = True,
            reg_tokens: int = 0,
            pre_norm: bool = False,
            final_norm: bool = True,
            fc_norm: Optional[bool] = None,
            dynamic_img_size: bool = False,
            dynamic_img_pad: bool = False,
            drop_rate: float = 0.,
            pos_drop_rate: float = 0.,
            patch_drop_rate: float = 0.,
            proj_drop_rate: float = 0.,
            attn_drop_rate: float = 0.,
            drop_path_rate: float = 0.,
            weight_init: str = '',
            norm_layer: Optional[Union[str, Callable]] = None,
            act_layer: Optional[Union[str, Callable]] = None,
            pe: str = 'ape',
            pe_kwargs: Optional[Dict] = None,
            embed_layer: Callable = PatchEmbed,
    ):
        super().__init__()
        if global_pool not in ('', 'avg', 'token'):
            raise ValueError(f"global_pool must be '', 'avg' or 'token', got {global_pool!r}")
        if global_pool == 'token' and not class_token:
            raise ValueError("global_pool='token' needs class_token=True; use global_pool='avg' instead")
        _check_geometry(img_size, patch_size, dynamic_img_size, dynamic_img_pad)
        if reg_tokens < 0 or depth < 1 or num_heads < 1:
            raise ValueError(f'need reg_tokens >= 0, depth >= 1 and num_heads >= 1; got reg_tokens={reg_tokens}, '
                             f'depth={depth}, num_heads={num_heads}')
        if not 0 <= drop_path_rate < 1:
            raise ValueError(f'drop_path_rate must be in [0, 1), got {drop_path_rate}')
        norm_layer = get_norm_layer(norm_layer) or partial(nn.LayerNorm, eps=1e-6)
        act_layer = get_act_layer(act_layer) or nn.GELU
        use_fc_norm = global_pool == 'avg' if fc_norm is None else fc_norm

        self.num_classes = num_classes
        self.global_pool = global_pool
        self.num_features = self.head_hidden_size = self.embed_dim = embed_dim
        self.num_class_tokens = 1 if class_token else 0
        self.num_reg_tokens = reg_tokens
        self.num_prefix_tokens = self.num_class_tokens + reg_tokens
        self.has_class_token = class_token
        self.dynamic_img_size = dynamic_img_size
        self.dynamic_img_pad = dynamic_img_pad
        self.grad_checkpointing = False
        self.pe_name = pe

        embed_args = dict(strict_img_size=False, output_fmt='NHWC') if dynamic_img_size else {}
        self.patch_embed = embed_layer(img_size=img_size, patch_size=patch_size, in_chans=in_chans,
                                       embed_dim=embed_dim, bias=not pre_norm, dynamic_img_pad=dynamic_img_pad,
                                       **embed_args)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim)) if class_token else None
        self.reg_token = nn.Parameter(torch.zeros(1, reg_tokens, embed_dim)) if reg_tokens else None
        self.pe = create_pos_encoding(pe, dict(
            dim=embed_dim, num_heads=num_heads, depth=depth, grid_size=tuple(self.patch_embed.grid_size),
            num_prefix_tokens=self.num_prefix_tokens, num_class_tokens=self.num_class_tokens), pe_kwargs)
        self.pos_drop = nn.Dropout(p=pos_drop_rate)
        if patch_drop_rate > 0:
            if not self.pe.supports_subsets:
                raise ValueError(f'patch_drop_rate > 0 drops tokens from the patch grid, which the {pe!r} encoding '
                                 'needs intact (a convolution over the grid); use patch_drop_rate=0 with it')
            self.patch_drop = PatchDropoutLeaf(patch_drop_rate, num_prefix_tokens=self.num_prefix_tokens, ordered=True)
        else:
            self.patch_drop = None
        self.norm_pre = norm_layer(embed_dim) if pre_norm else nn.Identity()

        dpr = calculate_drop_path_rates(drop_path_rate, depth)  # stochastic depth decay rule (timm)
        self.blocks = nn.Sequential(*[
            Block(embed_dim, num_heads, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, qk_norm=qk_norm,
                  proj_drop=proj_drop_rate, attn_drop=attn_drop_rate, init_values=init_values, drop_path=dpr[i],
                  act_layer=act_layer, norm_layer=norm_layer)
            for i in range(depth)])
        self.feature_info = [dict(module=f'blocks.{i}', num_chs=embed_dim, reduction=self.patch_embed.patch_size[0])
                             for i in range(depth)]
        self.norm = norm_layer(embed_dim) if final_norm and not use_fc_norm else nn.Identity()
        self.fc_norm = norm_layer(embed_dim) if final_norm and use_fc_norm else nn.Identity()
        self.head_drop = nn.Dropout(drop_rate)
        self.head = nn.Linear(embed_dim, num_classes) if num_classes > 0 else nn.Identity()

        if weight_init != 'skip':
            self.init_weights(needs_reset=False)

    def init_weights(self, needs_reset: bool = True) -> None:
        """timm's ViT init for everything but the PE, which owns its own initialisation.

        Args:
            needs_reset: also re-initialise modules that initialise themselves at construction (norms, patch
                embed, the PE's parameters and tables): what a model built on the meta device needs after
                ``to_empty(device=...)``. The constructor passes False, as timm's ViT does.
        """
        if self.cls_token is not None:
            nn.init.normal_(self.cls_token, std=1e-6)
        if self.reg_token is not None:
            nn.init.normal_(self.reg_token, std=1e-6)
        for name, child in self.named_children():
            if name != 'pe':
                named_apply(partial(init_weights_vit_timm, needs_reset=needs_reset), child, name, include_root=True)
        if needs_reset:
            self.pe.reset_parameters()

    # ----------------------------------------------------------------------------------------------- timm contract
    @torch.jit.ignore
    def no_weight_decay(self) -> set:
        return {'cls_token', 'reg_token'} | {f'pe.{n}' for n in self.pe.no_weight_decay()}

    @torch.jit.ignore
    def group_matcher(self, coarse: bool = False) -> Dict:
        return dict(stem=r'^cls_token|^reg_token|^pe\.|^patch_embed',
                    blocks=[(r'^blocks\.(\d+)', None), (r'^norm', (99999,))])

    @torch.jit.ignore
    def set_grad_checkpointing(self, enable: bool = True) -> None:
        self.grad_checkpointing = enable

    @torch.jit.ignore
    def get_classifier(self) -> nn.Module:
        return self.head

    def reset_classifier(self, num_classes: int, global_pool: Optional[str] = None) -> None:
        self.num_classes = num_classes
        if global_pool is not None:
            if global_pool not in ('', 'avg', 'token'):
                raise ValueError(f"global_pool must be '', 'avg' or 'token', got {global_pool!r}")
            if global_pool == 'token' and not self.has_class_token:
                raise ValueError("global_pool='token' needs a class token; this model has none, use 'avg'")
            self.global_pool = global_pool
        self.head = nn.Linear(self.embed_dim, num_classes) if num_classes > 0 else nn.Identity()

    def set_input_size(self, img_size: Optional[Union[int, Tuple[int, int]]] = None,
                       patch_size: Optional[Union[int, Tuple[int, int]]] = None) -> None:
        """Change the default input size (pixels): the patch embed and the PE's learned tables follow."""
        _check_geometry(img_size if img_size is not None else self.patch_embed.img_size,
                        patch_size if patch_size is not None else self.patch_embed.patch_size,
                        self.dynamic_img_size, self.dynamic_img_pad)
        self.patch_embed.set_input_size(img_size=img_size, patch_size=patch_size)
        self.pe.set_grid_size(tuple(self.patch_embed.grid_size))

    # ----------------------------------------------------------------------------------------------- forward
    def _check_input(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` unchanged, or ValueError for a bad input (see ``_checked_images``)."""
        return _checked_images(x, self.patch_embed.proj.in_channels, tuple(self.patch_embed.img_size),
                               tuple(self.patch_embed.patch_size), self.dynamic_img_size, self.dynamic_img_pad)

    def _embed(self, x: torch.Tensor, keep_indices: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, Positions]:
        """Patch embed, prefix tokens, the PE's embed hook (on the full grid), then the token subset (``keep_indices``
        or patch dropout). Returns tokens ``(B, L, C)`` and their positions."""
        images = x
        x, grid = self._patch_tokens(x)
        prefix = []
        if self.cls_token is not None:
            prefix.append(self.cls_token.expand(x.shape[0], -1, -1).to(x.dtype))
        if self.reg_token is not None:
            prefix.append(self.reg_token.expand(x.shape[0], -1, -1).to(x.dtype))
        if prefix:
            x = torch.cat(prefix + [x], dim=1)
        pos = Positions(grid, self.num_prefix_tokens, self.num_class_tokens, batch_size=x.shape[0], images=images)
        x = self.pos_drop(pe_embed(self.pe, x, pos))
        return self._take_subset(x, pos, keep_indices)

    def _patch_tokens(self, x: torch.Tensor) -> Tuple[torch.Tensor, Tuple[int, int, int]]:
        """Checked input -> patch tokens ``(B, N, C)`` (row-major) and their grid ``(1, H, W)`` in patches."""
        x = self.patch_embed(self._check_input(x))
        if self.dynamic_img_size:
            B, H, W, C = x.shape
            return x.reshape(B, H * W, C), (1, H, W)
        H, W = self.patch_embed.grid_size
        return x, (1, H, W)

    def _to_map(self, x: torch.Tensor, grid: Tuple[int, int, int]) -> torch.Tensor:
        """Patch tokens ``(B, N, C)`` -> feature map ``(B, C, H, W)`` (``forward_intermediates`` ``NCHW``)."""
        return x.reshape(x.shape[0], grid[1], grid[2], -1).permute(0, 3, 1, 2).contiguous()

    def _take_subset(self, x: torch.Tensor, pos: Positions,
                     keep_indices: Optional[torch.Tensor]) -> Tuple[torch.Tensor, Positions]:
        """Keep the patch tokens ``keep_indices`` ``(B, K)`` (sorted, into the flattened grid) or, in training with
        ``patch_drop_rate > 0``, a random subset (timm's keep-indices convention). Prefix tokens are always kept."""
        if keep_indices is not None:
            if not self.pe.supports_subsets:
                pos.require_full_grid(f'the {self.pe_name!r} encoding')
            check_keep_indices(keep_indices, x.shape[0], pos.grid_patches)
            npt = self.num_prefix_tokens
            patches = x[:, npt:].gather(1, keep_indices.long().unsqueeze(-1).expand(-1, -1, x.shape[-1]))
            x = torch.cat([x[:, :npt], patches], dim=1) if npt else patches
        elif self.patch_drop is not None:
            x, keep_indices = self.patch_drop(x)
        if keep_indices is None:
            return x, pos
        return x, Positions(pos.grid, pos.num_prefix_tokens, pos.num_class_tokens, keep_indices=keep_indices,
                            batch_size=pos.batch_size)

    def _blocks(self, x: torch.Tensor, pos: Positions, blocks: Sequence[nn.Module], take: Sequence[int] = (),
                norm: bool = False) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        # PE hooks are FX leaves (zoo/models/_fx.py): traced graphs run the encoding's own code on real values
        terms = pe_attn_terms(self.pe, pos, x.dtype, x.device, len(self.blocks)) if pe_has_attn_terms(self.pe) else None
        intermediates = []
        for i, blk in enumerate(blocks):
            term = terms[i] if terms is not None else None
            if self.grad_checkpointing and not torch.jit.is_scripting():
                x = _checkpoint_block(blk, x, term)
            else:
                x = blk(x, term)
            x = pe_mix(self.pe, x, pos, i)
            if i in take:
                intermediates.append(self.norm(x) if norm else x)
        return x, intermediates

    def forward_embed(self, x: torch.Tensor, keep_indices: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The token sequence that enters block 0 ``(B, L, C)``: patch embedding, prefix tokens, additive PE (and the
        optional pre-norm), then the token subset ``keep_indices`` (as in :meth:`forward_features`)."""
        x, _ = self._embed(x, keep_indices)
        return self.norm_pre(x)

    def forward_features(self, x: torch.Tensor, keep_indices: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Images ``(B, C, H, W)`` -> normalised tokens ``(B, num_prefix_tokens + N, C)``.

        Args:
            x: images in pixels.
            keep_indices: optional ``(B, K)`` long, sorted indices into the row-major patch grid: only those patches
                run (each at its own position); ``N = K``.

        Raises:
            ValueError: bad input size or channels; bad ``keep_indices``; a subset with an encoding that needs the
                full grid (PEG).
        """
        x, pos = self._embed(x, keep_indices)
        x = self.norm_pre(x)
        x, _ = self._blocks(x, pos, self.blocks)
        return self.norm(x)

    def pool(self, x: torch.Tensor, pool_type: Optional[str] = None) -> torch.Tensor:
        pool_type = self.global_pool if pool_type is None else pool_type
        return global_pool_nlc(x, pool_type=pool_type, num_prefix_tokens=self.num_prefix_tokens)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = self.fc_norm(self.pool(x))
        x = self.head_drop(x)
        return x if pre_logits else self.head(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))

    def forward_intermediates(
            self,
            x: torch.Tensor,
            indices: Optional[Union[int, List[int]]] = None,
            return_prefix_tokens: bool = False,
            norm: bool = False,
            stop_early: bool = False,
            output_fmt: str = 'NCHW',
            intermediates_only: bool = False,
    ) -> Union[List[torch.Tensor], Tuple[torch.Tensor, List[torch.Tensor]]]:
        """Features of selected blocks, as timm's ViT: ``NCHW`` ``(B, C, H/p, W/p)`` or ``NLC`` ``(B, N, C)``."""
        if output_fmt not in ('NCHW', 'NLC'):
            raise ValueError(f"output_fmt must be 'NCHW' or 'NLC', got {output_fmt!r}")
        take_indices, max_index = feature_take_indices(len(self.blocks), indices)
        x, pos = self._embed(x)
        x = self.norm_pre(x)
        blocks = self.blocks[:max_index + 1] if stop_early else self.blocks
        x, intermediates = self._blocks(x, pos, blocks, take=take_indices, norm=norm)
        prefix = [y[:, :self.num_prefix_tokens] for y in intermediates]
        intermediates = [y[:, self.num_prefix_tokens:] for y in intermediates]
        if output_fmt == 'NCHW':
            intermediates = [self._to_map(y, pos.grid) for y in intermediates]
        if return_prefix_tokens:
            intermediates = list(zip(intermediates, prefix))
        if intermediates_only:
            return intermediates
        return self.norm(x), intermediates

    def prune_intermediate_layers(self, indices: Union[int, List[int]] = 1, prune_norm: bool = False,
                                  prune_head: bool = True) -> List[int]:
        take_indices, max_index = feature_take_indices(len(self.blocks), indices)
        self.blocks = self.blocks[:max_index + 1]
        if prune_norm:
            self.norm = nn.Identity()
        if prune_head:
            self.fc_norm = nn.Identity()
            self.reset_classifier(0, '')
        return take_indices


def _checkpoint_block(blk: nn.Module, x: torch.Tensor, term) -> torch.Tensor:
    """Gradient-checkpoint one block with the term's tensors as explicit inputs, so both checkpoint modes (timm's
    ``TIMM_REENTRANT_CKPT``) save the same tensors and send gradients to learned frequencies."""
    if term is None:
        return checkpoint(blk, x)
    tensors = term.tensors()
    return checkpoint(lambda y, *ts: blk(y, term.with_tensors(ts)), x, *tensors)


# --------------------------------------------------------------------------------------------------- builders
def _create_pe_vit(variant: str, pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    if kwargs.get('features_only'):
        kwargs.setdefault('feature_cls', 'getter')
    return build_model_with_cfg(PEVisionTransformer, variant, pretrained, pretrained_filter_fn=checkpoint_filter_fn,
                                **kwargs)


def take_pe_kwargs(kwargs: Dict, **defaults) -> Dict:
    """A registered variant's encoding options ``defaults`` updated by the caller's ``pe_kwargs``, which is removed
    from ``kwargs``: ``create_model('pe_vit_small_patch16_rope_axial_224', pe_kwargs=dict(extrapolation='yarn'))``
    keeps the variant's ``theta=100``.

    Raises:
        ValueError: ``pe_kwargs`` is not a dict.
    """
    user = kwargs.pop('pe_kwargs', None) or {}
    if not isinstance(user, dict):
        raise ValueError(f'pe_kwargs must be a dict of options, got {type(user).__name__}')
    return dict(defaults, **user)


def _cfg(url: str = '', **kwargs) -> Dict:
    return {
        'url': url, 'num_classes': 1000, 'input_size': (3, 224, 224), 'pool_size': None, 'crop_pct': 0.9,
        'interpolation': 'bicubic', 'fixed_input_size': True, 'mean': IMAGENET_DEFAULT_MEAN,
        'std': IMAGENET_DEFAULT_STD, 'first_conv': 'patch_embed.proj', 'classifier': 'head', **kwargs,
    }


# ------------------------------------------------------------------------------------------- registered models
# Every model is the same backbone; only the PE differs. Sizes follow DeiT (tiny/small/base, patch 16, 224 px).
# Weights: timm's ViT (AugReg) and RoPE-ViT (naver) checkpoints and the official DeiT-iRPE releases, each converted by
# checkpoint_filter_fn.
_IRPE_ZOO = 'https://github.com/wkcn/iRPE-model-zoo/releases/download/1.0/'

default_cfgs = generate_default_cfgs({
    'pe_vit_tiny_patch16_ape_224.augreg_in21k_ft_in1k': _cfg(
        hf_hub_id='timm/vit_tiny_patch16_224.augreg_in21k_ft_in1k',
        mean=IMAGENET_INCEPTION_MEAN, std=IMAGENET_INCEPTION_STD),
    'pe_vit_small_patch16_ape_224.augreg_in21k_ft_in1k': _cfg(
        hf_hub_id='timm/vit_small_patch16_224.augreg_in21k_ft_in1k',
        mean=IMAGENET_INCEPTION_MEAN, std=IMAGENET_INCEPTION_STD),
    'pe_vit_base_patch16_ape_224.augreg_in21k_ft_in1k': _cfg(
        hf_hub_id='timm/vit_base_patch16_224.augreg_in21k_ft_in1k',
        mean=IMAGENET_INCEPTION_MEAN, std=IMAGENET_INCEPTION_STD),
    'pe_vit_tiny_patch16_sincos_224': _cfg(),
    'pe_vit_small_patch16_sincos_224': _cfg(),
    'pe_vit_base_patch16_sincos_224': _cfg(),
    'pe_vit_tiny_patch16_nope_224': _cfg(),
    'pe_vit_small_patch16_nope_224': _cfg(),
    'pe_vit_base_patch16_nope_224': _cfg(),
    'pe_vit_tiny_patch16_peg_224': _cfg(),
    'pe_vit_small_patch16_peg_224': _cfg(),
    'pe_vit_base_patch16_peg_224': _cfg(),
    'pe_vit_tiny_patch16_peg0to5_224': _cfg(),
    'pe_vit_small_patch16_peg0to5_224': _cfg(),
    'pe_vit_base_patch16_peg0to5_224': _cfg(),
    'pe_vit_tiny_patch16_fourier_224': _cfg(),
    'pe_vit_small_patch16_fourier_224': _cfg(),
    'pe_vit_base_patch16_fourier_224': _cfg(),
    'pe_vit_tiny_patch16_rope_axial_224': _cfg(),
    'pe_vit_small_patch16_rope_axial_224.naver_in1k': _cfg(
        hf_hub_id='timm/vit_small_patch16_rope_224.naver_in1k'),
    'pe_vit_base_patch16_rope_axial_224.naver_in1k': _cfg(
        hf_hub_id='timm/vit_base_patch16_rope_224.naver_in1k'),
    'pe_vit_tiny_patch16_rope_mixed_224': _cfg(),
    'pe_vit_small_patch16_rope_mixed_224.naver_in1k': _cfg(
        hf_hub_id='timm/vit_small_patch16_rope_mixed_224.naver_in1k'),
    'pe_vit_base_patch16_rope_mixed_224.naver_in1k': _cfg(
        hf_hub_id='timm/vit_base_patch16_rope_mixed_224.naver_in1k'),
    'pe_vit_tiny_patch16_rope_mixed_ape_224': _cfg(),
    'pe_vit_small_patch16_rope_mixed_ape_224.naver_in1k': _cfg(
        hf_hub_id='timm/vit_small_patch16_rope_mixed_ape_224.naver_in1k'),
    'pe_vit_base_patch16_rope_mixed_ape_224.naver_in1k': _cfg(
        hf_hub_id='timm/vit_base_patch16_rope_mixed_ape_224.naver_in1k'),
    'pe_vit_tiny_patch16_irpe_k_224.official_in1k': _cfg(
        url=_IRPE_ZOO + 'deit_tiny_patch16_224_ctx_product_50_shared_k.pth'),
    'pe_vit_small_patch16_irpe_k_224.official_in1k': _cfg(
        url=_IRPE_ZOO + 'deit_small_patch16_224_ctx_product_50_shared_k.pth'),
    'pe_vit_base_patch16_irpe_k_224.official_in1k': _cfg(
        url=_IRPE_ZOO + 'deit_base_patch16_224_ctx_product_50_shared_k.pth'),
    'pe_vit_small_patch16_irpe_qk_224.official_in1k': _cfg(
        url=_IRPE_ZOO + 'deit_small_patch16_224_ctx_product_50_shared_qk.pth'),
    'pe_vit_small_patch16_irpe_qkv_224.official_in1k': _cfg(
        url=_IRPE_ZOO + 'deit_small_patch16_224_ctx_product_50_shared_qkv.pth'),
    'pe_vit_base_patch16_irpe_qkv_224.official_in1k': _cfg(
        url=_IRPE_ZOO + 'deit_base_patch16_224_ctx_product_50_shared_qkv.pth'),
    'pe_vit_tiny_patch16_comrope_ap_224': _cfg(),
    'pe_vit_small_patch16_comrope_ap_224': _cfg(),
    'pe_vit_base_patch16_comrope_ap_224': _cfg(),
    'pe_vit_tiny_patch16_comrope_ld_224': _cfg(),
    'pe_vit_small_patch16_comrope_ld_224': _cfg(),
    'pe_vit_base_patch16_comrope_ld_224': _cfg(),
    'pe_vit_tiny_patch16_liere_224': _cfg(),
    'pe_vit_small_patch16_liere_224': _cfg(),
    'pe_vit_base_patch16_liere_224': _cfg(),
    'pe_vit_tiny_patch16_alibi_224': _cfg(),
    'pe_vit_small_patch16_alibi_224': _cfg(),
    'pe_vit_base_patch16_alibi_224': _cfg(),
    'pe_vit_tiny_patch16_kerple_log_224': _cfg(),
    'pe_vit_small_patch16_kerple_log_224': _cfg(),
    'pe_vit_base_patch16_kerple_log_224': _cfg(),
    'pe_vit_tiny_patch16_kerple_power_224': _cfg(),
    'pe_vit_small_patch16_kerple_power_224': _cfg(),
    'pe_vit_base_patch16_kerple_power_224': _cfg(),
    'pe_vit_tiny_patch16_fire_224': _cfg(),
    'pe_vit_small_patch16_fire_224': _cfg(),
    'pe_vit_base_patch16_fire_224': _cfg(),
    'pe_vit_tiny_patch16_ape_lape_224': _cfg(),
    'pe_vit_small_patch16_ape_lape_224': _cfg(),
    'pe_vit_base_patch16_ape_lape_224': _cfg(),
    'pe_vit_tiny_patch16_sincos_lape_224': _cfg(),
    'pe_vit_small_patch16_sincos_lape_224': _cfg(),
    'pe_vit_base_patch16_sincos_lape_224': _cfg(),
    'pe_vit_tiny_patch16_fourier_lape_224': _cfg(),
    'pe_vit_small_patch16_fourier_lape_224': _cfg(),
    'pe_vit_base_patch16_fourier_lape_224': _cfg(),
    'pe_vit_tiny_patch16_urpe_224': _cfg(),
    'pe_vit_small_patch16_urpe_224': _cfg(),
    'pe_vit_base_patch16_urpe_224': _cfg(),
    'pe_vit_tiny_patch16_loope_224': _cfg(),
    'pe_vit_small_patch16_loope_224': _cfg(),
    'pe_vit_base_patch16_loope_224': _cfg(),
    'pe_vit_tiny_patch16_seqpe_224': _cfg(),
    'pe_vit_small_patch16_seqpe_224': _cfg(),
    'pe_vit_base_patch16_seqpe_224': _cfg(),
    'pe_vit_tiny_patch16_gta_224': _cfg(),
    'pe_vit_small_patch16_gta_224': _cfg(),
    'pe_vit_base_patch16_gta_224': _cfg(),
})

# the ``{pe}`` part of a model name -> its registered encoding (``zoo.encodings.list_pos_encodings()``)
_ENCODING_OF_SUFFIX = {
    'ape': 'ape', 'sincos': 'sincos', 'nope': 'nope', 'peg': 'peg', 'peg0to5': 'peg', 'fourier': 'fourier',
    'rope_axial': 'rope_axial', 'rope_mixed': 'rope_mixed', 'rope_mixed_ape': 'rope_mixed_ape', 'irpe_k': 'irpe',
    'irpe_qk': 'irpe', 'irpe_qkv': 'irpe', 'comrope_ap': 'comrope', 'comrope_ld': 'comrope', 'liere': 'liere',
    'alibi': 'alibi', 'kerple_log': 'kerple_log', 'kerple_power': 'kerple_power', 'fire': 'fire',
    'ape_lape': 'ape_lape', 'sincos_lape': 'sincos_lape', 'fourier_lape': 'fourier_lape', 'urpe': 'urpe',
    'gta': 'gta', 'loope': 'loope', 'seqpe': 'seqpe',
}

#: Model name -> registered encoding name of every zoo model (``zoo list``, reports, checkpoint identity checks);
#: ``video_vit`` and ``zoo.integrations.open_clip`` add their models.
PE_OF_MODEL: Dict[str, str] = {
    name: _ENCODING_OF_SUFFIX[name[len('pe_vit_'):-len('_224')].split('_', 2)[2]] for name in default_cfgs}


@register_model
def pe_vit_tiny_patch16_ape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with a learned absolute position embedding (ViT, arXiv:2010.11929)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='ape',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_ape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with a learned absolute position embedding (ViT, arXiv:2010.11929)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='ape',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_ape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with a learned absolute position embedding (ViT, arXiv:2010.11929)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='ape',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_sincos_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with fixed 2D sin-cos position embeddings (MoCo v3, arXiv:2104.02057)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='sincos',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_sincos_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_sincos_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with fixed 2D sin-cos position embeddings (MoCo v3, arXiv:2104.02057)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='sincos',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_sincos_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_sincos_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with fixed 2D sin-cos position embeddings (MoCo v3, arXiv:2104.02057)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='sincos',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_sincos_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_nope_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with no position encoding (NoPE, arXiv:2305.19466)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='nope',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_nope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_nope_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with no position encoding (NoPE, arXiv:2305.19466)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='nope',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_nope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_nope_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with no position encoding (NoPE, arXiv:2305.19466)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='nope',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_nope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_peg_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with a PEG after block 0 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='peg',
                      pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0,)))
    return _create_pe_vit('pe_vit_tiny_patch16_peg_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_peg_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with a PEG after block 0 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='peg',
                      pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0,)))
    return _create_pe_vit('pe_vit_small_patch16_peg_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_peg_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with a PEG after block 0 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='peg',
                      pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0,)))
    return _create_pe_vit('pe_vit_base_patch16_peg_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_peg0to5_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with PEGs after blocks 0-5 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='peg',
                      pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0, 1, 2, 3, 4, 5)))
    return _create_pe_vit('pe_vit_tiny_patch16_peg0to5_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_peg0to5_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with PEGs after blocks 0-5 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='peg',
                      pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0, 1, 2, 3, 4, 5)))
    return _create_pe_vit('pe_vit_small_patch16_peg0to5_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_peg0to5_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with PEGs after blocks 0-5 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='peg',
                      pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0, 1, 2, 3, 4, 5)))
    return _create_pe_vit('pe_vit_base_patch16_peg0to5_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_fourier_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with learnable Fourier features (Li et al., arXiv:2106.02795)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='fourier',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_fourier_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_fourier_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with learnable Fourier features (Li et al., arXiv:2106.02795)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='fourier',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_fourier_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_fourier_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with learnable Fourier features (Li et al., arXiv:2106.02795)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='fourier',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_fourier_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_rope_axial_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with axial 2D RoPE (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='rope_axial',
                      pe_kwargs=take_pe_kwargs(kwargs, theta=100.0))
    return _create_pe_vit('pe_vit_tiny_patch16_rope_axial_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_rope_axial_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with axial 2D RoPE (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='rope_axial',
                      pe_kwargs=take_pe_kwargs(kwargs, theta=100.0))
    return _create_pe_vit('pe_vit_small_patch16_rope_axial_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_rope_axial_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with axial 2D RoPE (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='rope_axial',
                      pe_kwargs=take_pe_kwargs(kwargs, theta=100.0))
    return _create_pe_vit('pe_vit_base_patch16_rope_axial_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_rope_mixed_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with RoPE-Mixed (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='rope_mixed',
                      pe_kwargs=take_pe_kwargs(kwargs, theta=10.0))
    return _create_pe_vit('pe_vit_tiny_patch16_rope_mixed_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_rope_mixed_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with RoPE-Mixed (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='rope_mixed',
                      pe_kwargs=take_pe_kwargs(kwargs, theta=10.0))
    return _create_pe_vit('pe_vit_small_patch16_rope_mixed_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_rope_mixed_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with RoPE-Mixed (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='rope_mixed',
                      pe_kwargs=take_pe_kwargs(kwargs, theta=10.0))
    return _create_pe_vit('pe_vit_base_patch16_rope_mixed_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_rope_mixed_ape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with RoPE-Mixed + learned APE (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='rope_mixed_ape', pe_kwargs=take_pe_kwargs(kwargs, theta=10.0))
    return _create_pe_vit('pe_vit_tiny_patch16_rope_mixed_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_rope_mixed_ape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with RoPE-Mixed + learned APE (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='rope_mixed_ape', pe_kwargs=take_pe_kwargs(kwargs, theta=10.0))
    return _create_pe_vit(
        'pe_vit_small_patch16_rope_mixed_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_rope_mixed_ape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with RoPE-Mixed + learned APE (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='rope_mixed_ape', pe_kwargs=take_pe_kwargs(kwargs, theta=10.0))
    return _create_pe_vit('pe_vit_base_patch16_rope_mixed_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_irpe_k_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with contextual product iRPE on keys (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=1, ape=True, rpe_on='k'))
    return _create_pe_vit('pe_vit_tiny_patch16_irpe_k_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_irpe_k_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with contextual product iRPE on keys (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=1, ape=True, rpe_on='k'))
    return _create_pe_vit('pe_vit_small_patch16_irpe_k_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_irpe_k_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with contextual product iRPE on keys (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=1, ape=True, rpe_on='k'))
    return _create_pe_vit('pe_vit_base_patch16_irpe_k_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_irpe_qk_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with contextual product iRPE on queries and keys (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=1, ape=True, rpe_on='qk'))
    return _create_pe_vit('pe_vit_small_patch16_irpe_qk_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_irpe_qkv_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with contextual product iRPE on queries, keys and values (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=1, ape=True, rpe_on='qkv'))
    return _create_pe_vit('pe_vit_small_patch16_irpe_qkv_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_irpe_qkv_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with contextual product iRPE on queries, keys and values (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=1, ape=True, rpe_on='qkv'))
    return _create_pe_vit('pe_vit_base_patch16_irpe_qkv_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_comrope_ap_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with ComRoPE-AP (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='comrope',
                      pe_kwargs=take_pe_kwargs(kwargs, variant='ap'))
    return _create_pe_vit('pe_vit_tiny_patch16_comrope_ap_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_comrope_ap_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with ComRoPE-AP (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='comrope',
                      pe_kwargs=take_pe_kwargs(kwargs, variant='ap'))
    return _create_pe_vit('pe_vit_small_patch16_comrope_ap_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_comrope_ap_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with ComRoPE-AP (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='comrope',
                      pe_kwargs=take_pe_kwargs(kwargs, variant='ap'))
    return _create_pe_vit('pe_vit_base_patch16_comrope_ap_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_comrope_ld_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with ComRoPE-LD (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='comrope',
                      pe_kwargs=take_pe_kwargs(kwargs, variant='ld'))
    return _create_pe_vit('pe_vit_tiny_patch16_comrope_ld_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_comrope_ld_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with ComRoPE-LD (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='comrope',
                      pe_kwargs=take_pe_kwargs(kwargs, variant='ld'))
    return _create_pe_vit('pe_vit_small_patch16_comrope_ld_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_comrope_ld_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with ComRoPE-LD (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='comrope',
                      pe_kwargs=take_pe_kwargs(kwargs, variant='ld'))
    return _create_pe_vit('pe_vit_base_patch16_comrope_ld_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_liere_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with LieRE rotations (LieRE, arXiv:2406.10322)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='liere',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_liere_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_liere_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with LieRE rotations (LieRE, arXiv:2406.10322)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='liere',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_liere_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_liere_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with LieRE rotations (LieRE, arXiv:2406.10322)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='liere',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_liere_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_alibi_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with ALiBi linear distance biases over the patch grid (ALiBi, arXiv:2108.12409)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='alibi',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_alibi_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_alibi_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with ALiBi linear distance biases over the patch grid (ALiBi, arXiv:2108.12409)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='alibi',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_alibi_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_alibi_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with ALiBi linear distance biases over the patch grid (ALiBi, arXiv:2108.12409)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='alibi',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_alibi_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_kerple_log_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with KERPLE logarithmic distance biases over the patch grid (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='kerple_log',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_kerple_log_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_kerple_log_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with KERPLE logarithmic distance biases over the patch grid (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='kerple_log',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_kerple_log_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_kerple_log_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with KERPLE logarithmic distance biases over the patch grid (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='kerple_log',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_kerple_log_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_kerple_power_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with KERPLE power distance biases over the patch grid (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='kerple_power', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_kerple_power_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_kerple_power_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with KERPLE power distance biases over the patch grid (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='kerple_power', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_kerple_power_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_kerple_power_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with KERPLE power distance biases over the patch grid (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='kerple_power', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_kerple_power_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_fire_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with FIRE learned distance biases over the patch grid (FIRE, arXiv:2310.04418)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='fire',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_fire_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_fire_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with FIRE learned distance biases over the patch grid (FIRE, arXiv:2310.04418)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='fire',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_fire_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_fire_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with FIRE learned distance biases over the patch grid (FIRE, arXiv:2310.04418)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='fire',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_fire_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_gta_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16 with GTA: q, k, v and the output transformed by each token's SO(2) group element (arXiv:2310.10375)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='gta',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_gta_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_gta_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16 with GTA: q, k, v and the output transformed by each token's SO(2) group element (arXiv:2310.10375)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='gta',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_gta_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_gta_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16 with GTA: q, k, v and the output transformed by each token's SO(2) group element (arXiv:2310.10375)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='gta',
                      pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_gta_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_ape_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16, LaPE over the learned APE: a per-block norm of it in the attention input (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='ape_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_ape_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_ape_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16, LaPE over the learned APE: a per-block norm of it in the attention input (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='ape_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_ape_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_ape_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16, LaPE over the learned APE: a per-block norm of it in the attention input (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='ape_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_ape_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_sincos_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16, LaPE over the 2D sin-cos table: a per-block norm of it in the attention input (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='sincos_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_sincos_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_sincos_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16, LaPE over the 2D sin-cos table: a per-block norm of it in the attention input (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='sincos_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_sincos_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_sincos_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16, LaPE over the 2D sin-cos table: a per-block norm of it in the attention input (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='sincos_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_sincos_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_fourier_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16, LaPE over Fourier features: a per-block norm of them in the attention input (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='fourier_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_fourier_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_fourier_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16, LaPE over Fourier features: a per-block norm of them in the attention input (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='fourier_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_fourier_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_fourier_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16, LaPE over Fourier features: a per-block norm of them in the attention input (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='fourier_lape', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_fourier_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_urpe_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16, URPE: learned post-softmax multiplier and bias per (drow, dcol) and head (arXiv:2205.13401)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='urpe', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_urpe_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_urpe_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16, URPE: learned post-softmax multiplier and bias per (drow, dcol) and head (arXiv:2205.13401)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='urpe', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_urpe_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_urpe_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16, URPE: learned post-softmax multiplier and bias per (drow, dcol) and head (arXiv:2205.13401)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='urpe', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_urpe_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_loope_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16, LOOPE: sin-cos over the Gilbert-curve patch order plus a learned offset (arXiv:2504.14386)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='loope', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_loope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_loope_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16, LOOPE: sin-cos over the Gilbert-curve patch order plus a learned offset (arXiv:2504.14386)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='loope', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_loope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_loope_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16, LOOPE: sin-cos over the Gilbert-curve patch order plus a learned offset (arXiv:2504.14386)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='loope', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_loope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_tiny_patch16_seqpe_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-Ti/16, SeqPE: a small transformer over each position's digits gives its embedding (arXiv:2506.13277)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='seqpe', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_tiny_patch16_seqpe_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_small_patch16_seqpe_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-S/16, SeqPE: a small transformer over each position's digits gives its embedding (arXiv:2506.13277)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='seqpe', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_small_patch16_seqpe_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def pe_vit_base_patch16_seqpe_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """ViT-B/16, SeqPE: a small transformer over each position's digits gives its embedding (arXiv:2506.13277)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='seqpe', pe_kwargs=take_pe_kwargs(kwargs))
    return _create_pe_vit('pe_vit_base_patch16_seqpe_224', pretrained=pretrained, **dict(model_args, **kwargs))
