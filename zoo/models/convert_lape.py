"""Official LaPE checkpoints (DeiT layout) -> the zoo ViT layout.

Source: "LaPE: Layer-adaptive Position Embedding for Vision Transformers with Independent Layer Normalization"
(Yu et al., ICCV 2023, arXiv:2212.13140); official code github.com/Ingrid725/LaPE (``vision_transformer.py``).

The official layout is DeiT's (``cls_token``, ``pos_embed`` ``(1, 1 + N, C)`` with the class row, ``patch_embed.proj.*``,
``blocks.N.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}.*``, ``norm.*``, ``head.*``: the zoo's names) plus one
``blocks.N.pe_norm.{weight,bias}`` per block. The LaPE encoding maps its own tensors
(:meth:`zoo.encodings.LaPE.map_checkpoint`): ``pos_embed`` -> ``pe.base.pos_embed`` (resampled when the grids
differ), ``blocks.N.pe_norm.*`` -> ``pe.norms.N.*``. The official model chains its PE norms, so the target model is
built with ``pe_kwargs=dict(chain_norms=True)``.
"""
from __future__ import annotations

from typing import Dict

import torch
from torch import nn

from .checkpoint_filters import checkpoint_filter_fn

__all__ = ['filter_official_lape']


def filter_official_lape(state_dict: Dict, model: nn.Module) -> Dict[str, torch.Tensor]:
    """Map an official LaPE DeiT state dict onto a zoo ``PEVisionTransformer`` built with ``pe='ape_lape'`` and
    ``pe_kwargs=dict(chain_norms=True)`` (:func:`~zoo.models.checkpoint_filters.checkpoint_filter_fn` with the
    ``'deit_lape'`` layout, which it also detects by itself from ``blocks.N.pe_norm.*``).

    Args:
        state_dict: the official model's ``state_dict()``, or a training checkpoint holding it under ``'model'``.
        model: the target model.

    Returns:
        A state dict ready for ``model.load_state_dict(strict=True)``.

    Raises:
        CheckpointMismatchError (a ValueError): a model without ``chain_norms=True``, or missing, unexpected and
            mis-shaped keys (all listed).
    """
    return checkpoint_filter_fn(state_dict, model, layout='deit_lape')
