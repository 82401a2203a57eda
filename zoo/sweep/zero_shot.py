"""CLIP zero-shot classification for ``zoo eval-resolution --zero-shot``: an open_clip model + a checkpoint file ->
an image classifier whose weights are open_clip's zero-shot classifier (``open_clip.build_zero_shot_classifier`` over
class names and prompt templates, tokenised by open_clip's bundled tokenizer).

Models: an open_clip config with a zoo tower (``zoo-ViT-B-16-rope_mixed``: the tower changes size with its PE), or a
stock open_clip ViT config (``ViT-B-16``), whose visual tower is converted to a zoo ``ape`` tower (the same image
features at the training size; the APE is resampled at other sizes, which open_clip's own tower cannot do).
Nothing is downloaded: the checkpoint is a local file (open_clip / OpenAI CLIP state dict, or one saved from a
``zoo-*`` open_clip model).
"""
from __future__ import annotations

import logging
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

__all__ = ['load_templates', 'class_prompts_names', 'load_zero_shot_model', 'TEMPLATE_SETS']

_logger = logging.getLogger('zoo.eval')
TEMPLATE_SETS = ('openai', 'simple')


def _open_clip():
    from zoo.errors import require
    return require('open_clip', '--zero-shot (CLIP zero-shot evaluation)')


def load_templates(spec: str) -> List[Any]:
    """Prompt templates: ``'openai'`` (open_clip's 80 OpenAI ImageNet templates), ``'simple'`` (its 2 simple ones),
    or a text file with one template per line, ``{}`` standing for the class name.

    Raises:
        ValueError / FileNotFoundError: an unknown set, a missing file, or a file line without ``{}``.
    """
    if spec in TEMPLATE_SETS:
        _open_clip()
        from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES, SIMPLE_IMAGENET_TEMPLATES
        return list(OPENAI_IMAGENET_TEMPLATES if spec == 'openai' else SIMPLE_IMAGENET_TEMPLATES)
    if not os.path.isfile(spec):
        raise FileNotFoundError(f'--templates {spec!r}: neither {" nor ".join(TEMPLATE_SETS)} nor an existing file')
    with open(spec) as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    bad = [ln for ln in lines if '{}' not in ln]
    if not lines or bad:
        raise ValueError(f'--templates {spec!r}: every line must contain {{}} for the class name '
                         f'(e.g. "a photo of a {{}}."); ' + (f'bad lines: {bad[:3]}' if bad else 'the file is empty'))
    return lines


def class_prompts_names(classes: Sequence[str], path: Optional[str] = None) -> List[str]:
    """Class names for the prompts: from ``path`` (one per line, in class-folder order) or the folder names with
    ``_`` as spaces.

    Raises:
        ValueError: the file lists another number of names than there are classes.
    """
    if path is None:
        return [c.replace('_', ' ') for c in classes]
    with open(path) as f:
        names = [ln.strip() for ln in f if ln.strip()]
    if len(names) != len(classes):
        raise ValueError(f'--class-names {path!r} lists {len(names)} names but the data has {len(classes)} class '
                         'folders; give one name per folder, in sorted folder order')
    return names


def load_zero_shot_model(name: str, checkpoint: str, classnames: Sequence[str], templates: Sequence[Any],
                         quick_gelu: bool = False, device: str = 'cpu') -> Tuple[torch.nn.Module, Dict[str, Any]]:
    """An open_clip model as a zero-shot classifier (:class:`zoo.integrations.open_clip.ZeroShotClassifier`).

    Args:
        name: an open_clip config name (``zoo-ViT-B-16-<pe>`` or a stock ViT config such as ``ViT-B-16``).
        checkpoint: local weights (open_clip / OpenAI CLIP state dict, or saved from the same ``zoo-*`` model).
        classnames: one prompt name per class.
        templates: prompt templates (strings with ``{}`` or callables).
        quick_gelu: OpenAI weights (QuickGELU activations).
        device: where the classifier weights are computed.

    Returns:
        ``(model, meta)``: meta has ``model_name``, ``img_size`` (px) and ``data_config`` (open_clip's mean/std and
        interpolation; ``crop_pct`` 1.0 = resize the shorter side, then center crop, as open_clip).

    Raises:
        ValueError: unknown config, missing checkpoint, a tokenizer that needs a download, a non-ViT tower.
        zoo.models.CheckpointMismatchError: weights that do not fit.
    """
    oc = _open_clip()
    from open_clip.model import set_model_preprocess_cfg
    from zoo.integrations.open_clip import (ZeroShotClassifier, load_clip_checkpoint, read_clip_state_dict,
                                           zoo_tower_from_clip)
    if name not in oc.list_models():
        raise ValueError(f'unknown open_clip model {name!r}; zoo towers are named like zoo-ViT-B-16-rope_mixed '
                         '(open_clip.list_models() lists them)')
    if not os.path.isfile(checkpoint):
        raise FileNotFoundError(f'--checkpoint {checkpoint!r} does not exist (--zero-shot takes a local CLIP weights '
                                'file; nothing is downloaded)')
    state = read_clip_state_dict(checkpoint)
    if name.startswith('zoo-'):
        model = oc.create_model(name, pretrained=None)
        if any(k.startswith('visual.trunk.') for k in state):  # saved from this zoo-* model: open_clip's strict load
            model.load_state_dict(state, strict=True)
            if quick_gelu:
                from zoo.integrations.open_clip import set_quick_gelu
                set_quick_gelu(model.visual.trunk)
        else:
            load_clip_checkpoint(model, state, quick_gelu=quick_gelu)
    else:
        model = oc.create_model(name, pretrained=None, force_quick_gelu=quick_gelu)
        oc.load_checkpoint(model, checkpoint, strict=True)
        visual = {f'visual.{k}': v for k, v in model.visual.state_dict().items()}
        cfg = getattr(model.visual, 'preprocess_cfg', None)
        model.visual = zoo_tower_from_clip(visual, pe='ape', quick_gelu=quick_gelu)
        if cfg:
            set_model_preprocess_cfg(model, cfg)
    model.eval()
    try:
        tokenizer = oc.get_tokenizer(name)
    except Exception as e:
        raise ValueError(f'cannot build the tokenizer of {name!r} offline: {type(e).__name__}: {e}') from None
    weights = oc.build_zero_shot_classifier(model, tokenizer, list(classnames), list(templates), device=device)
    cfg = dict(getattr(model.visual, 'preprocess_cfg', {}) or {})
    size = int(model.visual.image_size[0])
    data_cfg = dict(crop_pct=1.0, interpolation=cfg.get('interpolation', 'bicubic'),
                    mean=tuple(cfg.get('mean', (0.48145466, 0.4578275, 0.40821073))),
                    std=tuple(cfg.get('std', (0.26862954, 0.26130258, 0.27577711))))
    _logger.info('%s: zero-shot classifier over %d classes x %d templates', name, len(classnames), len(templates))
    return ZeroShotClassifier(model, weights.cpu()).eval(), dict(model_name=name, img_size=size, data_config=data_cfg)
