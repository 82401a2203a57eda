"""The model catalog behind ``zoo list``: every registered ``pe_vit_*`` name with its PE family, size and weights."""
from __future__ import annotations

from typing import Dict, List

import timm
import torch
from timm.models import get_pretrained_cfg

from zoo.encodings.registry import _REGISTRY
from .vit import PE_OF_MODEL

__all__ = ['model_catalog']


def model_catalog(pattern: str = 'pe_vit_*') -> List[Dict]:
    """One row per registered model: ``name``, ``pe``, ``family``, ``params`` (count), ``pretrained`` (tags).

    Models are built on the meta device, so no memory is allocated and no weights are read.
    """
    rows = []
    for name in timm.list_models(pattern):
        with torch.device('meta'):
            model = timm.create_model(name)
        tags = [n.split('.', 1)[1] for n in timm.list_models(name, pretrained=True) if '.' in n]
        tags = [t for t in tags if get_pretrained_cfg(f'{name}.{t}').has_weights]
        pe = PE_OF_MODEL[name]
        rows.append(dict(name=name, pe=pe, family=_REGISTRY[pe].family,
                         params=sum(p.numel() for p in model.parameters()), pretrained=tags))
    return rows
