"""zoo image models as open_clip image towers, and CLIP visual towers converted into zoo models of any PE.

Three pieces, all on the libraries' own seams:

* **CLIP-layout timm towers** ``clip_pe_vit_{tiny,small,base}_patch16_{pe}_224``: the zoo ViT with the layout of
  CLIP's visual transformer (Radford et al. 2021, "Learning Transferable Visual Models From Natural Language
  Supervision", arXiv:2103.00020): a bias-free patch embedding, ``ln_pre`` (``pre_norm=True``), LayerNorm eps 1e-5,
  the class token pooled after the final norm (``ln_post``). Same entrypoint options as ``pe_vit_*`` (``pe_kwargs``,
  ``act_layer='quick_gelu'`` for OpenAI weights, ...). Registered with timm at ``import zoo``.
* **open_clip configs** ``zoo-ViT-{Ti,S,B}-16-{pe}`` (one per zoo image model, JSON files in ``open_clip_configs/``,
  added with ``open_clip.add_model_config`` at ``import zoo``): ``vision_cfg.timm_model_name`` names the tower above,
  so open_clip builds it with its own ``TimmModel`` adapter (class-token pooling, bias-free linear projection); the
  text tower, losses and tokenizer are open_clip's, unchanged (text tower of open_clip's ViT-B-16 / ViT-S-16). The
  image size changes after creation with ``model.visual.set_input_size(s)`` (or ``force_image_size=s``).
* **Converter** :func:`convert_clip_visual`: an open_clip ``VisionTransformer`` / OpenAI CLIP visual state dict
  (``conv1``, ``class_embedding``, ``positional_embedding``, ``ln_pre``, ``transformer.resblocks.N.*``, ``ln_post``,
  ``proj``) into a zoo model of any PE. The learned APE is kept (``ape``), resampled to the model's grid, given to the
  encoding's own APE (``rope_mixed_ape``: patch rows only) or dropped; the class token's position row is folded into
  the class token whenever the encoding has no class-token entry (exact for that token). The encoding's own
  parameters (RoPE frequencies, PEG convolution, iRPE tables, ...) keep their initialisation, to be fine-tuned.

Example (offline; weights from a local file)::

    import open_clip, zoo
    model, _, preprocess = open_clip.create_model_and_transforms('zoo-ViT-B-16-rope_mixed')
    zoo.integrations.open_clip.load_clip_checkpoint(model, 'ViT-B-16-openai.pt', quick_gelu=True)
    model.visual.set_input_size(320)                        # RoPE extrapolates; APE would be resampled
"""
from __future__ import annotations

import json
import logging
import os
import re
from functools import partial
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from torch import nn
from timm.layers import QuickGELU, resample_abs_pos_embed
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model

from zoo.models import CheckpointMismatchError, PE_OF_MODEL, checkpoint_filter_fn, unwrap_state_dict
from zoo.models.vit import PEVisionTransformer, take_pe_kwargs

__all__ = ['CLIP_MEAN', 'CLIP_STD', 'clip_tower_name', 'clip_config_name', 'clip_configs', 'write_clip_configs',
           'register_open_clip_configs', 'is_clip_visual_state_dict', 'clip_visual_state_dict', 'clip_visual_geometry',
           'convert_clip_visual', 'create_model_from_clip', 'load_clip_checkpoint', 'zoo_tower_from_clip',
           'set_quick_gelu', 'ZeroShotClassifier', 'CONFIG_DIR', 'read_clip_state_dict']

_logger = logging.getLogger(__name__)

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)  # open_clip.constants.OPENAI_DATASET_MEAN
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)  # open_clip.constants.OPENAI_DATASET_STD
CONFIG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'open_clip_configs')

# zoo size -> (open_clip size tag, open_clip config whose text tower and embed_dim the tower pairs with)
_SIZE_TAGS = {'tiny': ('Ti', 'ViT-S-16'), 'small': ('S', 'ViT-S-16'), 'base': ('B', 'ViT-B-16')}
_IMAGE_MODEL = re.compile(r'^pe_vit_(?P<size>[a-z]+)_patch(?P<patch>\d+)_(?P<suffix>.+)_(?P<img>\d+)$')

# CLIP's visual transformer layout (open_clip VisionTransformer, OpenAI CLIP), as zoo ViT constructor options.
CLIP_LAYOUT = dict(pre_norm=True, global_pool='token', class_token=True, final_norm=True, fc_norm=False,
                   norm_layer=partial(nn.LayerNorm, eps=1e-5))


# ------------------------------------------------------------------------------------------- timm tower entrypoints
def _image_models() -> Dict[str, Dict[str, str]]:
    """``{pe_vit name: parts}`` for the registered 2D zoo image models (``pe_vit_{size}_patch{p}_{suffix}_{img}``)."""
    out = {}
    for name in sorted(PE_OF_MODEL):
        m = _IMAGE_MODEL.match(name)
        if m and m['size'] in _SIZE_TAGS:
            out[name] = m.groupdict()
    return out


def clip_tower_name(image_model: str) -> str:
    """``pe_vit_base_patch16_rope_mixed_224`` -> ``clip_pe_vit_base_patch16_rope_mixed_224`` (the CLIP-layout tower)."""
    return 'clip_' + image_model


def clip_config_name(image_model: str) -> str:
    """``pe_vit_base_patch16_rope_mixed_224`` -> ``zoo-ViT-B-16-rope_mixed`` (the open_clip config name)."""
    p = _IMAGE_MODEL.match(image_model)
    if p is None or p['size'] not in _SIZE_TAGS:
        raise ValueError(f'{image_model!r} is not a zoo image model name '
                         '(pe_vit_{tiny,small,base}_patch16_{pe}_224)')
    return f'zoo-ViT-{_SIZE_TAGS[p["size"]][0]}-{p["patch"]}-{p["suffix"]}'


def _create_clip_tower(variant: str, pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """timm builder of a CLIP-layout tower: the zoo ViT, whose weights load through :func:`_tower_filter_fn` (CLIP
    layouts converted, zoo layouts as ``pe_vit_*``)."""
    if kwargs.get('features_only'):
        kwargs.setdefault('feature_cls', 'getter')
    return build_model_with_cfg(PEVisionTransformer, variant, pretrained, pretrained_filter_fn=_tower_filter_fn,
                                **kwargs)


def _tower_filter_fn(state_dict: Dict, model: nn.Module) -> Dict[str, torch.Tensor]:
    """timm ``pretrained_filter_fn``: CLIP layouts through :func:`convert_clip_visual`, others as ``pe_vit_*``."""
    if is_clip_visual_state_dict(state_dict):
        return convert_clip_visual(state_dict, model, allow_new_pe_params=False)
    return checkpoint_filter_fn(state_dict, model)


def _tower_cfg(url: str = '') -> Dict[str, Any]:
    return {'url': url, 'num_classes': 1000, 'input_size': (3, 224, 224), 'pool_size': None, 'crop_pct': 1.0,
            'interpolation': 'bicubic', 'fixed_input_size': True, 'mean': CLIP_MEAN, 'std': CLIP_STD,
            'first_conv': 'patch_embed.proj', 'classifier': 'head'}


# One tower per zoo image model (pe_vit_{size}_patch16_{pe}_224): the same geometry and PE options plus CLIP_LAYOUT.
default_cfgs = generate_default_cfgs({
    'clip_pe_vit_tiny_patch16_ape_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_ape_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_ape_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_sincos_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_sincos_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_sincos_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_nope_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_nope_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_nope_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_peg_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_peg_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_peg_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_peg0to5_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_peg0to5_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_peg0to5_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_fourier_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_fourier_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_fourier_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_rope_axial_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_rope_axial_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_rope_axial_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_rope_mixed_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_rope_mixed_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_rope_mixed_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_rope_mixed_ape_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_rope_mixed_ape_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_rope_mixed_ape_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_irpe_k_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_irpe_k_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_irpe_k_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_irpe_qk_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_irpe_qkv_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_irpe_qkv_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_comrope_ap_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_comrope_ap_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_comrope_ap_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_comrope_ld_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_comrope_ld_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_comrope_ld_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_liere_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_liere_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_liere_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_alibi_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_alibi_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_alibi_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_kerple_log_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_kerple_log_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_kerple_log_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_kerple_power_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_kerple_power_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_kerple_power_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_fire_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_fire_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_fire_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_ape_lape_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_ape_lape_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_ape_lape_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_sincos_lape_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_sincos_lape_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_sincos_lape_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_fourier_lape_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_fourier_lape_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_fourier_lape_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_urpe_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_urpe_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_urpe_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_gta_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_gta_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_gta_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_loope_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_loope_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_loope_224': _tower_cfg(),
    'clip_pe_vit_tiny_patch16_seqpe_224': _tower_cfg(),
    'clip_pe_vit_small_patch16_seqpe_224': _tower_cfg(),
    'clip_pe_vit_base_patch16_seqpe_224': _tower_cfg(),
})

_TOWERS = {name: name[len('clip_'):] for name in default_cfgs}  # tower -> its pe_vit_* image model
PE_OF_MODEL.update({name: PE_OF_MODEL[image_model] for name, image_model in _TOWERS.items()})


@register_model
def clip_pe_vit_tiny_patch16_ape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with a learned absolute position embedding (ViT, arXiv:2010.11929)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='ape',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_tiny_patch16_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_ape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with a learned absolute position embedding (ViT, arXiv:2010.11929)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='ape',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_small_patch16_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_ape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with a learned absolute position embedding (ViT, arXiv:2010.11929)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='ape',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_base_patch16_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_sincos_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with fixed 2D sin-cos position embeddings (MoCo v3, arXiv:2104.02057)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='sincos',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_sincos_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_sincos_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with fixed 2D sin-cos position embeddings (MoCo v3, arXiv:2104.02057)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='sincos',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_sincos_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_sincos_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with fixed 2D sin-cos position embeddings (MoCo v3, arXiv:2104.02057)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='sincos',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_sincos_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_nope_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with no position encoding (NoPE, arXiv:2305.19466)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='nope',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_tiny_patch16_nope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_nope_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with no position encoding (NoPE, arXiv:2305.19466)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='nope',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_small_patch16_nope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_nope_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with no position encoding (NoPE, arXiv:2305.19466)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='nope',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_base_patch16_nope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_peg_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with a PEG after block 0 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='peg',
                      pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0,)), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_tiny_patch16_peg_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_peg_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with a PEG after block 0 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='peg',
                      pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0,)), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_small_patch16_peg_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_peg_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with a PEG after block 0 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='peg',
                      pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0,)), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_base_patch16_peg_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_peg0to5_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with PEGs after blocks 0-5 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='peg',
                      pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0, 1, 2, 3, 4, 5)), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_peg0to5_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_peg0to5_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with PEGs after blocks 0-5 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='peg',
                      pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0, 1, 2, 3, 4, 5)), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_peg0to5_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_peg0to5_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with PEGs after blocks 0-5 (CPVT, arXiv:2102.10882)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='peg',
                      pe_kwargs=take_pe_kwargs(kwargs, after_blocks=(0, 1, 2, 3, 4, 5)), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_peg0to5_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_fourier_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with learnable Fourier features (Li et al., arXiv:2106.02795)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='fourier',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_fourier_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_fourier_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with learnable Fourier features (Li et al., arXiv:2106.02795)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='fourier',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_fourier_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_fourier_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with learnable Fourier features (Li et al., arXiv:2106.02795)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='fourier',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_fourier_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_rope_axial_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with axial 2D RoPE (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='rope_axial',
                      pe_kwargs=take_pe_kwargs(kwargs, theta=100.0), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_rope_axial_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_rope_axial_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with axial 2D RoPE (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='rope_axial',
                      pe_kwargs=take_pe_kwargs(kwargs, theta=100.0), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_rope_axial_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_rope_axial_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with axial 2D RoPE (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='rope_axial',
                      pe_kwargs=take_pe_kwargs(kwargs, theta=100.0), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_rope_axial_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_rope_mixed_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with RoPE-Mixed (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='rope_mixed',
                      pe_kwargs=take_pe_kwargs(kwargs, theta=10.0), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_rope_mixed_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_rope_mixed_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with RoPE-Mixed (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='rope_mixed',
                      pe_kwargs=take_pe_kwargs(kwargs, theta=10.0), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_rope_mixed_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_rope_mixed_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with RoPE-Mixed (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='rope_mixed',
                      pe_kwargs=take_pe_kwargs(kwargs, theta=10.0), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_rope_mixed_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_rope_mixed_ape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with RoPE-Mixed + learned APE (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='rope_mixed_ape', pe_kwargs=take_pe_kwargs(kwargs, theta=10.0), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_rope_mixed_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_rope_mixed_ape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with RoPE-Mixed + learned APE (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='rope_mixed_ape', pe_kwargs=take_pe_kwargs(kwargs, theta=10.0), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_rope_mixed_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_rope_mixed_ape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with RoPE-Mixed + learned APE (RoPE-ViT, arXiv:2403.13298)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='rope_mixed_ape', pe_kwargs=take_pe_kwargs(kwargs, theta=10.0), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_rope_mixed_ape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_irpe_k_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with contextual product iRPE on keys (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=1, ape=True, rpe_on='k'), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_irpe_k_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_irpe_k_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with contextual product iRPE on keys (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=1, ape=True, rpe_on='k'), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_irpe_k_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_irpe_k_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with contextual product iRPE on keys (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=1, ape=True, rpe_on='k'), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_irpe_k_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_irpe_qk_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with contextual product iRPE on queries and keys (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=1, ape=True, rpe_on='qk'), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_irpe_qk_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_irpe_qkv_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with contextual product iRPE on queries, keys and values (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=1, ape=True, rpe_on='qkv'), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_irpe_qkv_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_irpe_qkv_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with contextual product iRPE on queries, keys and values (iRPE, arXiv:2107.14222)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='irpe',
                      pe_kwargs=take_pe_kwargs(kwargs, ratio=1.9, method='product', mode='contextual', shared_head=True,
                                               skip=1, ape=True, rpe_on='qkv'), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_irpe_qkv_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_comrope_ap_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with ComRoPE-AP (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='comrope',
                      pe_kwargs=take_pe_kwargs(kwargs, variant='ap'), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_comrope_ap_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_comrope_ap_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with ComRoPE-AP (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='comrope',
                      pe_kwargs=take_pe_kwargs(kwargs, variant='ap'), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_comrope_ap_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_comrope_ap_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with ComRoPE-AP (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='comrope',
                      pe_kwargs=take_pe_kwargs(kwargs, variant='ap'), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_comrope_ap_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_comrope_ld_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with ComRoPE-LD (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='comrope',
                      pe_kwargs=take_pe_kwargs(kwargs, variant='ld'), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_comrope_ld_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_comrope_ld_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with ComRoPE-LD (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='comrope',
                      pe_kwargs=take_pe_kwargs(kwargs, variant='ld'), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_comrope_ld_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_comrope_ld_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with ComRoPE-LD (ComRoPE, arXiv:2506.03737)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='comrope',
                      pe_kwargs=take_pe_kwargs(kwargs, variant='ld'), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_comrope_ld_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_liere_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with LieRE rotations (LieRE, arXiv:2406.10322)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='liere',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_tiny_patch16_liere_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_liere_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with LieRE rotations (LieRE, arXiv:2406.10322)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='liere',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_liere_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_liere_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with LieRE rotations (LieRE, arXiv:2406.10322)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='liere',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_base_patch16_liere_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_alibi_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with ALiBi linear distance biases over the patch grid (ALiBi, arXiv:2108.12409)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='alibi',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_tiny_patch16_alibi_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_alibi_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with ALiBi linear distance biases over the patch grid (ALiBi, arXiv:2108.12409)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='alibi',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_alibi_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_alibi_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with ALiBi linear distance biases over the patch grid (ALiBi, arXiv:2108.12409)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='alibi',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_base_patch16_alibi_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_kerple_log_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with KERPLE logarithmic distance biases over the patch grid (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='kerple_log',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_kerple_log_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_kerple_log_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with KERPLE logarithmic distance biases over the patch grid (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='kerple_log',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_kerple_log_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_kerple_log_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with KERPLE logarithmic distance biases over the patch grid (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='kerple_log',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_kerple_log_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_kerple_power_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with KERPLE power distance biases over the patch grid (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='kerple_power', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_kerple_power_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_kerple_power_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with KERPLE power distance biases over the patch grid (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='kerple_power', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_kerple_power_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_kerple_power_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with KERPLE power distance biases over the patch grid (KERPLE, arXiv:2205.09921)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='kerple_power', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_kerple_power_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_fire_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with FIRE learned distance biases over the patch grid (FIRE, arXiv:2310.04418)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='fire',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_tiny_patch16_fire_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_fire_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with FIRE learned distance biases over the patch grid (FIRE, arXiv:2310.04418)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='fire',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_small_patch16_fire_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_fire_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with FIRE learned distance biases over the patch grid (FIRE, arXiv:2310.04418)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='fire',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_base_patch16_fire_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_gta_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with GTA: q, k, v and the output transformed per token (arXiv:2310.10375)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True, pe='gta',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_tiny_patch16_gta_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_gta_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with GTA: q, k, v and the output transformed per token (arXiv:2310.10375)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True, pe='gta',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_small_patch16_gta_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_gta_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with GTA: q, k, v and the output transformed per token (arXiv:2310.10375)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True, pe='gta',
                      pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower('clip_pe_vit_base_patch16_gta_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_ape_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with LaPE over the learned APE (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='ape_lape', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_ape_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_ape_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with LaPE over the learned APE (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='ape_lape', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_ape_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_ape_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with LaPE over the learned APE (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='ape_lape', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_ape_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_sincos_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with LaPE over the 2D sin-cos table (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='sincos_lape', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_sincos_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_sincos_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with LaPE over the 2D sin-cos table (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='sincos_lape', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_sincos_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_sincos_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with LaPE over the 2D sin-cos table (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='sincos_lape', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_sincos_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_fourier_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with LaPE over Fourier features (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='fourier_lape', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_fourier_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_fourier_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with LaPE over Fourier features (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='fourier_lape', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_fourier_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_fourier_lape_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with LaPE over Fourier features (arXiv:2212.13140)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='fourier_lape', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_fourier_lape_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_urpe_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with URPE: post-softmax multiplier and bias per offset (arXiv:2205.13401)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='urpe', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_urpe_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_urpe_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with URPE: post-softmax multiplier and bias per offset (arXiv:2205.13401)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='urpe', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_urpe_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_urpe_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with URPE: post-softmax multiplier and bias per offset (arXiv:2205.13401)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='urpe', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_urpe_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_loope_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with LOOPE: Gilbert-order sin-cos plus a learned offset (arXiv:2504.14386)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='loope', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_loope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_loope_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with LOOPE: Gilbert-order sin-cos plus a learned offset (arXiv:2504.14386)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='loope', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_loope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_loope_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with LOOPE: Gilbert-order sin-cos plus a learned offset (arXiv:2504.14386)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='loope', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_loope_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_tiny_patch16_seqpe_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-Ti/16 with SeqPE: a small transformer over position digits (arXiv:2506.13277)."""
    model_args = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3, mlp_ratio=4, qkv_bias=True,
                      pe='seqpe', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_tiny_patch16_seqpe_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_small_patch16_seqpe_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-S/16 with SeqPE: a small transformer over position digits (arXiv:2506.13277)."""
    model_args = dict(patch_size=16, embed_dim=384, depth=12, num_heads=6, mlp_ratio=4, qkv_bias=True,
                      pe='seqpe', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_small_patch16_seqpe_224', pretrained=pretrained, **dict(model_args, **kwargs))


@register_model
def clip_pe_vit_base_patch16_seqpe_224(pretrained: bool = False, **kwargs) -> PEVisionTransformer:
    """CLIP-layout ViT-B/16 with SeqPE: a small transformer over position digits (arXiv:2506.13277)."""
    model_args = dict(patch_size=16, embed_dim=768, depth=12, num_heads=12, mlp_ratio=4, qkv_bias=True,
                      pe='seqpe', pe_kwargs=take_pe_kwargs(kwargs), **CLIP_LAYOUT)
    return _create_clip_tower(
        'clip_pe_vit_base_patch16_seqpe_224', pretrained=pretrained, **dict(model_args, **kwargs))


# -------------------------------------------------------------------------------------------------- open_clip configs
def clip_configs() -> Dict[str, Dict[str, Any]]:
    """``{config name: open_clip model config}`` for every zoo image model.

    Each config pairs the CLIP-layout tower (``timm_model_name``, class-token pooling, bias-free linear projection)
    with the text tower and ``embed_dim`` of open_clip's ViT-B-16 (base) or ViT-S-16 (small, tiny) config.
    """
    import open_clip
    out = {}
    for image_model, parts in _image_models().items():
        ref = open_clip.get_model_config(_SIZE_TAGS[parts['size']][1])
        out[clip_config_name(image_model)] = dict(
            embed_dim=ref['embed_dim'],
            vision_cfg=dict(image_size=int(parts['img']), timm_model_name=clip_tower_name(image_model),
                            timm_model_pretrained=False, timm_pool='token', timm_proj='linear', timm_proj_bias=False),
            text_cfg=ref['text_cfg'])
    return out


def write_clip_configs(folder: str = CONFIG_DIR) -> List[str]:
    """(Re)write one ``<config name>.json`` per zoo image model into ``folder``; returns the paths.

    Run ``python -m zoo.integrations`` after adding an image PE (a test checks the files are current).
    """
    from zoo.datasets.files import write_text_atomic
    os.makedirs(folder, exist_ok=True)
    paths = []
    for name, cfg in clip_configs().items():
        path = os.path.join(folder, f'{name}.json')
        write_text_atomic(path, json.dumps(cfg, indent=2) + '\n')  # a killed writer leaves no half-written config
        paths.append(path)
    return paths


def register_open_clip_configs() -> bool:
    """Add the shipped configs to open_clip's registry (``open_clip.add_model_config``); False without open_clip."""
    try:
        import open_clip
    except ImportError:
        return False
    if os.path.isdir(CONFIG_DIR):
        open_clip.add_model_config(CONFIG_DIR)
    return True


# -------------------------------------------------------------------------------------------------------- converter
_BLOCK_KEYS = {  # open_clip ResidualAttentionBlock -> zoo Block
    'ln_1': 'norm1', 'attn.in_proj_weight': 'attn.qkv.weight', 'attn.in_proj_bias': 'attn.qkv.bias',
    'attn.out_proj': 'attn.proj', 'ln_2': 'norm2', 'mlp.c_fc': 'mlp.fc1', 'mlp.c_proj': 'mlp.fc2',
    'ls_1.gamma': 'ls1.gamma', 'ls_2.gamma': 'ls2.gamma',
}
_REQUIRED = ('conv1.weight', 'class_embedding', 'positional_embedding', 'transformer.resblocks.0.attn.in_proj_weight')


def _strip(sd: Dict[str, Any]) -> Dict[str, Any]:
    for prefix in ('module.', '_orig_mod.'):
        if sd and all(k.startswith(prefix) for k in sd):
            sd = {k[len(prefix):]: v for k, v in sd.items()}
    return sd


def clip_visual_state_dict(state_dict: Dict[str, Any]) -> Dict[str, torch.Tensor]:
    """The visual-tower tensors (keys without ``visual.``) of a full open_clip / OpenAI CLIP state dict, a wrapper
    (``{'state_dict': ...}``, ``module.`` prefixes) or a visual-only dict.

    Raises:
        CheckpointMismatchError: not the open_clip ``VisionTransformer`` layout (the message names what it found and
            what is expected).
    """
    if not isinstance(state_dict, dict):
        raise CheckpointMismatchError(f'expected a CLIP state dict, got {type(state_dict).__name__}')
    sd = _strip(unwrap_state_dict(state_dict) if 'state_dict' in state_dict or 'model' in state_dict else state_dict)
    if any(k.startswith('visual.') for k in sd):
        sd = {k[len('visual.'):]: v for k, v in sd.items() if k.startswith('visual.')}
    missing = [k for k in _REQUIRED if k not in sd]
    if missing:
        if any(k.startswith('trunk.') for k in sd):
            found = 'an open_clip timm tower (visual.trunk.*): load it with open_clip itself'
        elif any(k.startswith(('layer1.', 'attnpool.')) for k in sd):
            found = 'a ModifiedResNet CLIP tower (RN50 ...), which has no ViT position encoding'
        elif 'pos_embed' in sd or 'cls_token' in sd:
            found = ('a timm ViT (pos_embed/cls_token): load it with timm.create_model(..., pretrained=True) or '
                     'zoo load_weights')
        else:
            found = f'keys such as {sorted(sd)[:4]}'
        raise CheckpointMismatchError(
            f'not an open_clip / OpenAI CLIP ViT visual tower: missing {missing}; found {found}. Expected the '
            'open_clip VisionTransformer layout (conv1, class_embedding, positional_embedding, ln_pre, '
            'transformer.resblocks.N.attn.in_proj_weight, ..., ln_post, proj), optionally under visual.')
    return sd


def is_clip_visual_state_dict(state_dict: Any) -> bool:
    """True when ``state_dict`` (any wrapper) holds an open_clip / OpenAI CLIP ViT visual tower."""
    try:
        clip_visual_state_dict(state_dict)
        return True
    except CheckpointMismatchError:
        return False


def clip_visual_geometry(state_dict: Dict[str, Any], head_width: int = 64) -> Dict[str, Any]:
    """zoo ViT constructor options of a CLIP visual tower: ``patch_size``, ``embed_dim``, ``depth``, ``num_heads``
    (``embed_dim // head_width``; 64 in OpenAI CLIP and open_clip), ``mlp_ratio``, ``img_size`` (px, from the APE
    grid), ``num_classes`` (the projection width; 0 without ``proj``), ``init_values`` (LayerScale) and
    ``qkv_bias``."""
    sd = clip_visual_state_dict(state_dict)
    width, _, patch, _ = sd['conv1.weight'].shape
    depth = 1 + max(int(k.split('.')[2]) for k in sd if k.startswith('transformer.resblocks.'))
    n = sd['positional_embedding'].shape[0] - 1
    grid = int(round(n ** 0.5))
    if grid * grid != n:
        raise CheckpointMismatchError(f'CLIP positional_embedding has {n} patch rows, not a square grid; pass the '
                                      'grid with img_size=(H, W) px')
    if width % head_width:
        raise ValueError(f'CLIP width {width} is not a multiple of head_width {head_width}; pass head_width')
    hidden = sd['transformer.resblocks.0.mlp.c_fc.weight'].shape[0]
    proj = sd.get('proj')
    return dict(patch_size=int(patch), embed_dim=int(width), depth=depth, num_heads=int(width) // head_width,
                mlp_ratio=hidden / width, img_size=grid * int(patch),
                num_classes=int(proj.shape[1]) if proj is not None else 0,
                init_values=1e-5 if 'transformer.resblocks.0.ls_1.gamma' in sd else None,
                qkv_bias='transformer.resblocks.0.attn.in_proj_bias' in sd)


def _ape_keys(model: nn.Module) -> List[str]:
    return [k for k in model.state_dict() if k.startswith('pe.') and k.endswith('pos_embed')]


def convert_clip_visual(state_dict: Dict[str, Any], model: nn.Module, head: str = 'head',
                        allow_new_pe_params: bool = True) -> Dict[str, torch.Tensor]:
    """Convert a CLIP visual tower into the state dict of ``model`` (a zoo ViT of any PE in the CLIP layout).

    Mapping: ``conv1`` -> ``patch_embed.proj`` (no bias); ``class_embedding`` -> ``cls_token``; ``ln_pre`` ->
    ``norm_pre``; ``resblocks.N.{ln_1, attn.in_proj_*, attn.out_proj, ln_2, mlp.c_fc, mlp.c_proj, ls_*}`` ->
    ``blocks.N.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2, ls*}``; ``ln_post`` -> ``norm``; ``proj``
    ``(C, D)`` -> ``head.weight`` ``(D, C)`` with a zero bias (``head=''`` leaves the model's head alone).
    ``positional_embedding`` ``(1 + N, C)``: into an APE table with a class entry (``ape``, iRPE's APE) as is, into
    one without (``rope_mixed_ape``) its patch rows; resampled bicubically (timm ``resample_abs_pos_embed``) when the
    grids differ; the class row is added to ``cls_token`` whenever the table has no class entry or the encoding has
    no APE (exact: the class token's input is constant).

    Args:
        state_dict: the CLIP weights (see :func:`clip_visual_state_dict`).
        model: a :class:`zoo.models.PEVisionTransformer` with ``pre_norm=True``, ``global_pool='token'`` and one class
            token (the ``clip_pe_vit_*`` towers or :func:`create_model_from_clip`).
        head: ``'head'``: map ``proj`` to the model's classifier; ``''``: leave the classifier out of the result.
        allow_new_pe_params: leave parameters that CLIP has no counterpart for (the encoding's own frequencies,
            PEG convolution, iRPE tables) at the model's values; False: report them as missing.

    Returns:
        A complete state dict for ``model.load_state_dict(strict=True)``.

    Raises:
        CheckpointMismatchError: another layout, width, depth, patch size or MLP width, a CLIP variant the zoo ViT
            does not have (attentional pooler, custom blocks, no ``ln_pre``), or a model not in the CLIP layout.
    """
    sd = clip_visual_state_dict(state_dict)
    own = model.state_dict()
    geo = clip_visual_geometry(sd)
    problems = []
    if not hasattr(model, 'pe_name'):
        raise CheckpointMismatchError(f'convert_clip_visual needs a zoo ViT, got {type(model).__name__}')
    width = own['patch_embed.proj.weight'].shape[0]
    if width != geo['embed_dim']:
        problems.append(f'width: CLIP {geo["embed_dim"]} vs model embed_dim {width}')
    depth = len(model.blocks)
    if depth != geo['depth']:
        problems.append(f'depth: CLIP {geo["depth"]} blocks vs model {depth}')
    patch = tuple(own['patch_embed.proj.weight'].shape[-2:])
    if width == geo['embed_dim'] and patch != tuple(sd['conv1.weight'].shape[-2:]):
        problems.append(f'patch size: CLIP {tuple(sd["conv1.weight"].shape[-2:])} vs model {patch}')
    if 'blocks.0.mlp.fc1.weight' in own and own['blocks.0.mlp.fc1.weight'].shape != \
            sd['transformer.resblocks.0.mlp.c_fc.weight'].shape and width == geo['embed_dim']:
        problems.append(f'MLP width: CLIP {sd["transformer.resblocks.0.mlp.c_fc.weight"].shape[0]} vs model '
                        f'{own["blocks.0.mlp.fc1.weight"].shape[0]}')
    if 'ln_pre.weight' not in sd:
        problems.append('the CLIP tower has no ln_pre (no_ln_pre=True), which the zoo CLIP layout needs')
    if not isinstance(model.norm_pre, nn.LayerNorm):
        problems.append('the model has no pre-norm: build it with pre_norm=True (the clip_pe_vit_* towers do)')
    if model.num_class_tokens != 1 or model.num_reg_tokens:
        problems.append('the model must have exactly one class token and no register tokens (CLIP has one class token)')
    if 'patch_embed.proj.bias' in own:
        problems.append('the model has a patch-embedding bias; CLIP has none (pre_norm=True removes it)')
    unknown = sorted(k for k in sd if not (
        k in ('conv1.weight', 'class_embedding', 'positional_embedding', 'proj')
        or k.startswith(('ln_pre.', 'ln_post.'))
        or re.match(r'transformer\.resblocks\.\d+\.(' + '|'.join(re.escape(b) for b in _BLOCK_KEYS) + r')', k)))
    if unknown:
        problems.append(f'CLIP keys the zoo ViT has no place for (attentional pooler, qk-norm or scaled attention '
                        f'blocks?): {unknown[:6]}')
    if problems:
        raise CheckpointMismatchError('CLIP visual tower does not fit the zoo model '
                                      f'(pe={getattr(model, "pe_name", "?")!r}): ' + '; '.join(problems) +
                                      '. Fix: build the model with create_model_from_clip(state_dict, pe=...), which '
                                      'reads the geometry from the checkpoint.')

    out: Dict[str, torch.Tensor] = {'patch_embed.proj.weight': sd['conv1.weight'],
                                    'norm_pre.weight': sd['ln_pre.weight'], 'norm_pre.bias': sd['ln_pre.bias'],
                                    'norm.weight': sd['ln_post.weight'], 'norm.bias': sd['ln_post.bias']}
    for k, v in sd.items():
        m = re.match(r'transformer\.resblocks\.(\d+)\.(.+)$', k)
        if not m:
            continue
        rest = m[2]
        for src, dst in _BLOCK_KEYS.items():
            if rest == src or rest.startswith(src + '.'):
                out[f'blocks.{m[1]}.{dst}{rest[len(src):]}'] = v
                break
    # class token and APE
    pos = sd['positional_embedding'].reshape(1, -1, width).float()
    cls = sd['class_embedding'].reshape(1, 1, width).float()
    grid = [geo['img_size'] // geo['patch_size']] * 2
    cls_row_used = False
    for key in _ape_keys(model):
        target = own[key]
        prefix = target.shape[1] - model.patch_embed.grid_size[0] * model.patch_embed.grid_size[1]
        if prefix not in (0, 1):
            raise CheckpointMismatchError(f'{key} has {prefix} prefix rows; CLIP has one class row')
        table = pos if prefix == 1 else pos[:, 1:]
        if list(model.patch_embed.grid_size) != grid:
            table = resample_abs_pos_embed(table, new_size=list(model.patch_embed.grid_size), old_size=grid,
                                           num_prefix_tokens=prefix)
        out[key] = table.to(target.dtype)
        cls_row_used |= prefix == 1
    out['cls_token'] = (cls if cls_row_used else cls + pos[:, :1]).to(own['cls_token'].dtype)
    if head == 'head' and 'proj' in sd:
        if own['head.weight'].shape != sd['proj'].t().shape:
            raise CheckpointMismatchError(f'CLIP proj {tuple(sd["proj"].shape)} does not fit head.weight '
                                          f'{tuple(own["head.weight"].shape)}: build the model with '
                                          f'num_classes={sd["proj"].shape[1]}, or pass head=""')
        out['head.weight'] = sd['proj'].t()
        if 'head.bias' in own:
            out['head.bias'] = torch.zeros_like(own['head.bias'])
    mapped = set(out)
    left = [k for k in own if k not in mapped]
    pe_own = [k for k in left if k.startswith('pe.')]
    other = [k for k in left if not k.startswith('pe.') and not (head != 'head' and k.startswith('head.'))]
    if other or (pe_own and not allow_new_pe_params):
        raise CheckpointMismatchError(f'CLIP visual tower leaves model parameters unset: {sorted(other + pe_own)[:8]}'
                                      + ('' if other else ' (the encoding\'s own parameters; pass '
                                         'allow_new_pe_params=True to keep their initialisation)'))
    for k in pe_own:
        out[k] = own[k]
    if head != 'head':
        for k in left:
            if k.startswith('head.'):
                out[k] = own[k]
    if pe_own:
        _logger.info('CLIP -> %s: %d encoding parameter(s) keep their initialisation (%s)', model.pe_name,
                     len(pe_own), ', '.join(pe_own[:4]))
    return {k: v.to(own[k].dtype) for k, v in out.items()}


def _zoo_name_for(width: int, pe: str) -> str:
    """The ``clip_pe_vit_*`` tower closest in width (sizes only set defaults: the geometry is overridden)."""
    size = {192: 'tiny', 384: 'small'}.get(width, 'base')
    name = f'clip_pe_vit_{size}_patch16_{pe}_224'
    if name not in _TOWERS:
        name = next((n for n in _TOWERS if n.endswith(f'_patch16_{pe}_224')), None)
        if name is None:
            pes = sorted({p['suffix'] for p in _image_models().values()})
            raise ValueError(f'unknown position encoding {pe!r} for a CLIP tower; choose one of {pes}')
    return name


def create_model_from_clip(state_dict: Union[str, Dict[str, Any]], pe: str = 'ape', quick_gelu: bool = False,
                           head_width: int = 64, img_size: Optional[int] = None, **kwargs) -> nn.Module:
    """A zoo ViT with position encoding ``pe`` and the CLIP visual tower's weights (geometry read from them).

    Args:
        state_dict: a CLIP state dict or the path of one (``torch.load(weights_only=True)`` or safetensors).
        pe: the ``{pe}`` part of a zoo model name (``ape``, ``rope_mixed``, ``comrope_ap``, ...).
        quick_gelu: OpenAI CLIP weights were trained with QuickGELU (``x * sigmoid(1.702 x)``); open_clip's
            LAION models with GELU.
        head_width: channels per head (64 in CLIP).
        img_size: build at this input size (px) instead of the checkpoint's (the APE is resampled).
        kwargs: further constructor options (``pe_kwargs``, ``num_classes`` ...).

    Returns:
        The model (``clip_pe_vit_*``, ``head`` = CLIP's projection unless ``num_classes`` is given), in eval mode.
    """
    sd = read_clip_state_dict(state_dict) if isinstance(state_dict, str) else state_dict
    geo = clip_visual_geometry(sd, head_width=head_width)
    new_head = 'num_classes' in kwargs and kwargs['num_classes'] != geo['num_classes']
    args = dict(geo, **kwargs)
    if img_size is not None:
        args['img_size'] = img_size
    if quick_gelu:
        args['act_layer'] = 'quick_gelu'
    import timm
    model = timm.create_model(_zoo_name_for(geo['embed_dim'], pe), **args)
    model.load_state_dict(convert_clip_visual(sd, model, head='' if new_head else 'head'), strict=True)
    return model.eval()


def read_clip_state_dict(path: str) -> Dict[str, torch.Tensor]:
    """Tensors of a checkpoint file: safetensors or a torch state dict (``weights_only=True``). OpenAI's TorchScript
    archives are not read (no code is loaded); save ``open_clip.load_openai_model(p).state_dict()`` once instead."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f'CLIP checkpoint {path!r} does not exist')
    if path.endswith('.safetensors'):
        from safetensors.torch import load_file
        return load_file(path)
    try:
        return torch.load(path, map_location='cpu', weights_only=True)
    except Exception as e:  # a TorchScript archive, a pickle with code, a damaged file
        raise ValueError(f'cannot read {path!r} as a state dict ({type(e).__name__}: {str(e).splitlines()[0][:200]}); '
                         'for an OpenAI TorchScript archive save open_clip.load_openai_model(path).state_dict() with '
                         'torch.save first') from None


def set_quick_gelu(module: nn.Module) -> int:
    """Replace every ``nn.GELU`` inside ``module`` by timm's ``QuickGELU`` (OpenAI CLIP weights); returns the count.

    open_clip builds timm towers with GELU whatever the config's ``quick_gelu`` says; this matches OpenAI weights.
    """
    count = 0
    for name, child in list(module.named_modules()):
        for attr, sub in list(child.named_children()):
            if isinstance(sub, nn.GELU):
                setattr(child, attr, QuickGELU())
                count += 1
    return count


def load_clip_checkpoint(clip_model: nn.Module, checkpoint: Union[str, Dict[str, Any]], quick_gelu: bool = False,
                         strict: bool = True) -> nn.Module:
    """Load an open_clip / OpenAI CLIP checkpoint (ViT tower in the open_clip layout) into an open_clip model
    created from a ``zoo-*`` config: text tower, ``logit_scale`` (and ``logit_bias``) as they are, the visual tower
    through :func:`convert_clip_visual` (its ``proj`` into ``visual.head.proj``).

    Args:
        clip_model: ``open_clip.create_model('zoo-ViT-B-16-<pe>')`` (any zoo PE).
        checkpoint: state dict or path (see :func:`create_model_from_clip`).
        quick_gelu: switch the tower's activations to QuickGELU (OpenAI weights; see :func:`set_quick_gelu`).
        strict: refuse text-tower keys that do not fit.

    Returns:
        ``clip_model``, loaded.

    Raises:
        CheckpointMismatchError: the visual tower does not fit (layout, width, depth, patch size), or the model is
            not an open_clip model with a zoo tower.
    """
    trunk = getattr(getattr(clip_model, 'visual', None), 'trunk', None)
    if trunk is None or not hasattr(trunk, 'pe_name'):
        raise CheckpointMismatchError('load_clip_checkpoint needs an open_clip model built from a zoo-* config '
                                      '(open_clip.create_model("zoo-ViT-B-16-ape")); got '
                                      f'{type(getattr(clip_model, "visual", clip_model)).__name__} as its visual tower')
    sd = read_clip_state_dict(checkpoint) if isinstance(checkpoint, str) else checkpoint
    sd = _strip(unwrap_state_dict(sd) if 'state_dict' in sd else sd)
    for key in ('input_resolution', 'context_length', 'vocab_size'):  # OpenAI archive metadata
        sd.pop(key, None)
    visual = convert_clip_visual(sd, trunk, head='')
    out = {f'visual.trunk.{k}': v for k, v in visual.items()}
    head = clip_model.visual.head
    if 'proj' in getattr(head, '_modules', {}) and 'visual.proj' in sd:
        if head.proj.weight.shape != sd['visual.proj'].t().shape:
            raise CheckpointMismatchError(f'CLIP visual.proj {tuple(sd["visual.proj"].shape)} does not fit the '
                                          f'tower projection {tuple(head.proj.weight.shape)} (another embed_dim)')
        out['visual.head.proj.weight'] = sd['visual.proj'].t()
    out.update({k: v for k, v in sd.items() if not k.startswith('visual.')})
    own = clip_model.state_dict()
    if 'logit_scale' in out and own['logit_scale'].shape != out['logit_scale'].shape:
        out['logit_scale'] = out['logit_scale'].reshape(own['logit_scale'].shape)
    result = clip_model.load_state_dict(out, strict=False)
    missing = [k for k in result.missing_keys if k != 'logit_bias' and not k.startswith('visual.head.')]
    if strict and (missing or result.unexpected_keys):
        raise CheckpointMismatchError(f'CLIP checkpoint does not fit the open_clip model: missing {missing[:6]}, '
                                      f'unexpected {result.unexpected_keys[:6]} (another text tower or embed_dim?)')
    if quick_gelu:
        set_quick_gelu(trunk)
    return clip_model


def zoo_tower_from_clip(visual_state: Dict[str, Any], pe: str = 'ape', quick_gelu: bool = False,
                        image_size: Optional[int] = None) -> nn.Module:
    """An open_clip ``TimmModel`` tower (class-token pooling, bias-free projection) whose trunk is a zoo ViT made
    from a CLIP visual tower: drop it in as ``clip_model.visual`` to run a stock open_clip ViT at other sizes (``ape``
    gives the same image features at the training size).
    """
    from open_clip.timm_model import TimmModel
    sd = clip_visual_state_dict(visual_state)
    trunk = create_model_from_clip(sd, pe=pe, quick_gelu=quick_gelu, num_classes=0)
    geo = clip_visual_geometry(sd)
    tower = TimmModel(_zoo_name_for(geo['embed_dim'], pe), embed_dim=geo['num_classes'], image_size=geo['img_size'],
                      pool='token', proj='linear', proj_bias=False)
    tower.trunk = trunk
    tower.head.proj = nn.Linear(geo['embed_dim'], geo['num_classes'], bias=False)
    with torch.no_grad():
        tower.head.proj.weight.copy_(sd['proj'].t())
    if image_size is not None:
        tower.set_input_size(image_size)
    return tower.eval()


class ZeroShotClassifier(nn.Module):
    """Images -> class logits of an open_clip model with a zero-shot classifier (``build_zero_shot_classifier``).

    ``logits = logit_scale.exp() * normalize(encode_image(x)) @ weights`` with ``weights`` ``(embed_dim, classes)``
    (normalised class embeddings). Exposes the tower's zoo trunk (``pe``, ``pe_name``, ``patch_embed``) and
    ``set_input_size`` so resolution sweeps treat it as a zoo classifier.
    """

    def __init__(self, clip_model: nn.Module, weights: torch.Tensor):
        super().__init__()
        self.clip = clip_model
        self.register_buffer('weights', weights.detach().clone(), persistent=False)
        trunk = clip_model.visual.trunk
        self.num_classes = int(weights.shape[1])
        self.pe_name, self.patch_embed = trunk.pe_name, trunk.patch_embed

    @property
    def pe(self) -> nn.Module:
        return self.clip.visual.trunk.pe

    def set_input_size(self, img_size: Union[int, Tuple[int, int]], **_: Any) -> None:
        self.clip.visual.set_input_size(img_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = self.clip.encode_image(x, normalize=True)
        return self.clip.logit_scale.exp() * feats @ self.weights.to(feats.dtype)


register_open_clip_configs()
