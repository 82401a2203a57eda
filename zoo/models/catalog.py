"""The model catalog behind ``zoo list``: registered zoo models (``pe_vit_*``, ``pe_video_vit_*``, ``clip_pe_vit_*``
and the video-LLMs ``pe_vlm_*``) with their PE, family, size and weights."""
from __future__ import annotations

import fnmatch
import re
from typing import Dict, List, Sequence, Union

import timm
import torch
from timm.models import get_pretrained_cfg

from zoo.encodings.registry import get_pos_encoding_class, list_pos_encodings
from .vit import PE_OF_MODEL
from .vlm import VLM_SIZES, create_video_llm, list_video_llms, vlm_schemes

__all__ = ['model_catalog', 'list_pe_names']


def list_pe_names() -> List[str]:
    """The position-encoding names used by registered models: the encodings of the ViTs (the ``{pe}`` part of
    ``pe_vit_*_{pe}_224``) and the multimodal RoPE schemes of the video-LLMs (``pe_vlm_{size}_{scheme}``)."""
    return sorted(set(PE_OF_MODEL.values()) | set(vlm_schemes()))


_VARIANT = re.compile(r'(?:clip_)?pe_(?:video_)?vit_[a-z]+_patch\d+_(.+)_\d+')


def _matches(patterns: Sequence[str], name: str, pe: str) -> bool:
    """timm-style (fnmatch) wildcards, case-insensitive, against the model name, its encoding or the PE part of its
    name (``comrope_ap``, ``irpe_qkv``: the ``{pe}`` of ``pe_vit_*_patch16_{pe}_224``)."""
    m = _VARIANT.fullmatch(name)
    names = [name, pe] + ([m.group(1)] if m else [])
    return any(fnmatch.fnmatch(n.lower(), p.lower()) for p in patterns for n in names)


def _vit_row(name: str, pe: str) -> Dict:
    # weight_init='skip': the count needs the parameters, not their initialisation (the slow part on the meta device)
    with torch.device('meta'):
        model = timm.create_model(name, weight_init='skip')
    tags = [n.split('.', 1)[1] for n in timm.list_models(name, pretrained=True) if '.' in n]
    tags = [t for t in tags if get_pretrained_cfg(f'{name}.{t}').has_weights]
    family = get_pos_encoding_class(pe).family if pe in list_pos_encodings() else pe
    return dict(name=name, pe=pe, family=family, params=sum(p.numel() for p in model.parameters()), pretrained=tags)


def _vlm_row(name: str) -> Dict:
    size, _, scheme = name[len('pe_vlm_'):].partition('_')
    tower = VLM_SIZES[size].get('vision_tower')
    options = dict(tower_kwargs=dict(weight_init='skip')) if tower in PE_OF_MODEL else {}
    with torch.device('meta'):
        model = create_video_llm(name, **options)
    family = get_pos_encoding_class('multimodal_rope').family
    return dict(name=name, pe=scheme, family=family, params=sum(p.numel() for p in model.parameters()),
                pretrained=[])


def model_catalog(pattern: Union[str, Sequence[str]] = '*') -> List[Dict]:
    """One row per registered zoo model matching ``pattern``, sorted by name: ``name``, ``pe``, ``family``,
    ``params`` (count), ``pretrained`` (tags).

    Args:
        pattern: one or more timm-style wildcards, each matched against the model name and the PE name
            (``'rope_mixed'``, ``'*tiny*'``, ``'pe_vit_small_*'``, ``'pe_vlm*'``, ``'mrope'``, ``'*'``). Only zoo
            models are listed: the image, video and CLIP-tower ViTs (PE = their encoding) and the video-LLMs
            (``pe_vlm_{size}_{scheme}``: PE = the multimodal RoPE scheme, no pretrained tags).

    Models are built on the meta device without weight initialisation, so no memory is allocated and no weights
    are read.
    """
    patterns = [pattern] if isinstance(pattern, str) else list(pattern) or ['*']
    rows = [_vit_row(name, pe) for name, pe in PE_OF_MODEL.items() if _matches(patterns, name, pe)]
    for name in list_video_llms():
        if _matches(patterns, name, name[len('pe_vlm_'):].partition('_')[2]):
            rows.append(_vlm_row(name))
    return sorted(rows, key=lambda r: r['name'])
