"""The model catalog behind ``zoo list``: registered ``pe_vit_*`` models with their PE, family, size and weights."""
from __future__ import annotations

import fnmatch
from typing import Dict, List, Sequence, Union

import timm
import torch
from timm.models import get_pretrained_cfg

from zoo.encodings.registry import _REGISTRY
from .vit import PE_OF_MODEL

__all__ = ['model_catalog', 'list_pe_names']


def list_pe_names() -> List[str]:
    """The position-encoding names used by registered models (the ``{pe}`` part of ``pe_vit_*_{pe}_224``)."""
    return sorted(set(PE_OF_MODEL.values()))


def _matches(patterns: Sequence[str], name: str, pe: str) -> bool:
    """timm-style (fnmatch) wildcards, case-insensitive, against the model name or its PE name."""
    return any(fnmatch.fnmatch(name.lower(), p.lower()) or fnmatch.fnmatch(pe.lower(), p.lower()) for p in patterns)


def model_catalog(pattern: Union[str, Sequence[str]] = '*') -> List[Dict]:
    """One row per registered zoo model matching ``pattern``: ``name``, ``pe``, ``family``, ``params`` (count),
    ``pretrained`` (tags).

    Args:
        pattern: one or more timm-style wildcards, each matched against the model name and the PE name
            (``'rope_mixed'``, ``'*tiny*'``, ``'pe_vit_small_*'``, ``'*'``). Only zoo models are listed.

    Models are built on the meta device, so no memory is allocated and no weights are read.
    """
    patterns = [pattern] if isinstance(pattern, str) else list(pattern) or ['*']
    rows = []
    for name in sorted(PE_OF_MODEL):
        pe = PE_OF_MODEL[name]
        if not _matches(patterns, name, pe):
            continue
        with torch.device('meta'):
            model = timm.create_model(name)
        tags = [n.split('.', 1)[1] for n in timm.list_models(name, pretrained=True) if '.' in n]
        tags = [t for t in tags if get_pretrained_cfg(f'{name}.{t}').has_weights]
        family = getattr(_REGISTRY.get(pe), 'family', pe)
        rows.append(dict(name=name, pe=pe, family=family, params=sum(p.numel() for p in model.parameters()),
                         pretrained=tags))
    return rows
