"""Build a zoo model by name, with constructor overrides, and load weights into it."""
from __future__ import annotations

import difflib
import logging
from typing import Any, Dict, Optional

import timm
from torch import nn

import zoo.models  # noqa: F401  (registers the pe_vit_* models)
from zoo.models import checkpoint_filter_fn
from .checkpoint import load_checkpoint

__all__ = ['create_zoo_model', 'load_weights', 'patch_size_of']

_logger = logging.getLogger(__name__)


def create_zoo_model(name: str, model_kwargs: Optional[Dict[str, Any]] = None, img_size: Optional[int] = None,
                     num_classes: Optional[int] = None, pretrained: bool = False, **extra: Any) -> nn.Module:
    """``timm.create_model(name, **model_kwargs)`` with a clear error for an unknown name.

    Args:
        name: a timm model name, e.g. ``pe_vit_tiny_patch16_rope_mixed_224``.
        model_kwargs: constructor overrides (``patch_size``, ``embed_dim``, ``pe_kwargs`` ...).
        img_size: input size in px; must not contradict ``model_kwargs['img_size']``.
        num_classes: classifier size; ``None`` keeps the model's default.
        pretrained: load timm's pretrained weights for ``name``.
        extra: further keyword arguments for ``timm.create_model`` (e.g. ``drop_path_rate``).

    Raises:
        ValueError: unknown model name, contradicting sizes, or options the model rejects.
    """
    if not timm.is_model(name):
        close = difflib.get_close_matches(name, timm.list_models('pe_vit_*') or timm.list_models(), n=3)
        hint = f'; did you mean {", ".join(close)}?' if close else ''
        raise ValueError(f'unknown model {name!r} (`zoo list` shows the registered names){hint}')
    kwargs = dict(model_kwargs or {})
    if img_size is not None:
        if kwargs.get('img_size') not in (None, img_size):
            raise ValueError(f'--img-size {img_size} contradicts --model-kwargs img_size={kwargs["img_size"]}')
        kwargs['img_size'] = img_size
    if num_classes is not None:
        kwargs['num_classes'] = num_classes
    kwargs.update(extra)
    _check_kwarg_types(kwargs)
    try:
        return timm.create_model(name, pretrained=pretrained, **kwargs)
    except TypeError as e:  # an override the constructor does not take, or a value of the wrong type
        raise ValueError(f'model {name!r} rejects the given options {_fmt_kwargs(model_kwargs)}: {e}') from None
    except (RuntimeError, OSError) as e:
        if not pretrained:
            raise
        # no weights registered for the name, or no network / cache: a user-facing problem, not a crash
        raise ValueError(f'cannot load pretrained weights for {name!r}: {type(e).__name__}: '
                         f'{str(e).splitlines()[0] if str(e) else ""}') from None


# Constructor options with a known type: a wrong value is reported by name instead of failing deep in the model.
_INT_KWARGS = ('embed_dim', 'depth', 'num_heads', 'num_classes', 'reg_tokens', 'in_chans')
_SIZE_KWARGS = ('img_size', 'patch_size')
_FLOAT_KWARGS = ('mlp_ratio', 'drop_rate', 'pos_drop_rate', 'patch_drop_rate', 'proj_drop_rate', 'attn_drop_rate',
                 'drop_path_rate', 'init_values')


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _fmt_kwargs(kwargs: Optional[Dict[str, Any]]) -> str:
    return ' '.join(f'{k}={v!r}' for k, v in (kwargs or {}).items()) or '(none)'


def _check_kwarg_types(kwargs: Dict[str, Any]) -> None:
    """``ValueError`` naming the option for an integer / size / number option given another type."""
    for key, value in kwargs.items():
        if value is None:
            continue
        if key in _INT_KWARGS and not _is_int(value):
            raise ValueError(f'--model-kwargs {key}={value!r}: must be an integer')
        if key in _SIZE_KWARGS and not (_is_int(value) or (isinstance(value, (list, tuple)) and len(value) == 2
                                                           and all(_is_int(v) for v in value))):
            raise ValueError(f'--model-kwargs {key}={value!r}: must be an integer or a pair of integers')
        if key in _FLOAT_KWARGS and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f'--model-kwargs {key}={value!r}: must be a number')


def load_weights(model: nn.Module, path: str, allow_new_classifier: bool = True) -> None:
    """Load a checkpoint file into ``model`` through ``zoo.models.checkpoint_filter_fn`` (strict).

    Learned APE tables are resampled to the model's grid by the filter. A classifier of another size is kept at the
    model's initialisation when ``allow_new_classifier`` (fine-tuning on a new label set), else reported.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a readable torch checkpoint, or one refused by ``weights_only`` loading.
        zoo.models.CheckpointMismatchError: keys or shapes that do not fit, all listed (the message names ``path``).
    """
    from zoo.models import CheckpointMismatchError
    try:
        state = checkpoint_filter_fn(load_checkpoint(path), model)
    except CheckpointMismatchError as e:
        raise CheckpointMismatchError(f'{path!r}: {e}') from None
    own = model.state_dict()
    for key in ('head.weight', 'head.bias'):
        if key in state and key in own and state[key].shape != own[key].shape:
            if not allow_new_classifier:
                raise CheckpointMismatchError(
                    f'checkpoint {path!r} has a classifier {key} of shape {tuple(state[key].shape)}, the model '
                    f'{tuple(own[key].shape)}: the checkpoint was trained on another number of classes')
            _logger.info('classifier %s re-initialised: checkpoint %s vs model %s', key, tuple(state[key].shape),
                         tuple(own[key].shape))
            state[key] = own[key]
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise CheckpointMismatchError(f'{path!r} does not load into {type(model).__name__}: '
                                      f'{str(e).strip().splitlines()[0]}') from None


def patch_size_of(model: nn.Module) -> int:
    """The (square) patch size in px of a zoo / timm ViT, or 1 when the model has no patch embedding."""
    pe = getattr(model, 'patch_embed', None)
    size = getattr(pe, 'patch_size', 1) if pe is not None else 1
    return int(size[0]) if isinstance(size, (tuple, list)) else int(size)
