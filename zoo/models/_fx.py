"""FX-tracing leaves shared by the backbones (image ViT, video ViT): the position encoding stays opaque to FX.

torchvision's feature extraction and timm's ``FeatureGraphNet`` trace a model with ``torch.fx``, where shapes,
dtypes and devices are symbolic. The position encodings branch on them in Python (grid sizes, cache keys, dtype
choices, input checks with clear errors), so the backbone calls every PE hook through one of the functions below.
They are registered as leaves (``torch.fx.wrap`` and timm's ``register_notrace_function``), as timm does for its own
position-embedding helpers: the traced graph calls them with the real tensors and ``Positions``, so the encoding's
code, caches and errors behave exactly as in eager mode. ``Attention`` is registered as a leaf module
(``register_notrace_module``) because it receives the encoding's ``AttnTerm`` objects, which FX cannot represent, and
so is ``PatchDropoutLeaf`` (timm's patch dropout counts the kept tokens with ``int()``). In eager mode these are plain
calls: nothing changes.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import torch
from timm.layers import PatchDropoutWithIndices, register_notrace_function, register_notrace_module

from zoo.encodings import AttnTerm, Positions, PosEncoding
from .attention import Attention

__all__ = ['pe_embed', 'pe_mix', 'pe_attn_terms', 'pe_has_attn_terms', 'PatchDropoutLeaf']

register_notrace_module(Attention)


@register_notrace_module
class PatchDropoutLeaf(PatchDropoutWithIndices):
    """timm's ``PatchDropoutWithIndices`` (returns ``(tokens, keep_indices)``), as an FX leaf: it sizes the kept subset
    with ``int()`` of the token count. A subclass, so timm's own models are not affected."""


@torch.fx.wrap
@register_notrace_function
def pe_embed(pe: PosEncoding, x: torch.Tensor, pos: Positions) -> torch.Tensor:
    """``pe.embed(x, pos)``: tokens ``(B, L, C)`` with the encoding's additive term."""
    return pe.embed(x, pos)


@torch.fx.wrap
@register_notrace_function
def pe_mix(pe: PosEncoding, x: torch.Tensor, pos: Positions, block_idx: int) -> torch.Tensor:
    """``pe.mix(x, pos, block_idx)``: the encoding's token mixer after block ``block_idx`` (PEG), else ``x``."""
    return pe.mix(x, pos, block_idx)


@torch.fx.wrap
@register_notrace_function
def pe_attn_terms(pe: PosEncoding, pos: Positions, dtype: torch.dtype, device: torch.device,
                  num_layers: int) -> List[Optional[AttnTerm]]:
    """``pe.attn_terms(pos, dtype, device)`` as a list with one entry (an ``AttnTerm`` or None) per layer.

    Always a list (``num_layers`` Nones when the encoding has no term), so that a traced graph can index it.
    """
    terms: Optional[Sequence[Optional[AttnTerm]]] = pe.attn_terms(pos, dtype, device)
    return [None] * num_layers if terms is None else list(terms)


def pe_has_attn_terms(pe: PosEncoding) -> bool:
    """False when the encoding keeps the base class's ``attn_terms`` (always None): the backbone can skip the call,
    which keeps traced graphs of additive encodings free of term plumbing."""
    return type(pe).attn_terms is not PosEncoding.attn_terms
