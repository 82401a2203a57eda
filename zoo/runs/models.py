"""Build a model by name (a zoo ``pe_vit_*`` model or any timm model), with constructor overrides, and load weights
into it; check that a checkpoint is evaluated as the model and position encoding it was trained as."""
from __future__ import annotations

import difflib
import logging
import os
from typing import Any, Dict, Optional, Sequence, Union

import timm
from torch import nn

from zoo.models import checkpoint_filter_fn  # importing zoo.models registers the pe_vit_* models
from .checkpoints import load_checkpoint

__all__ = ['create_zoo_model', 'load_weights', 'patch_size_of', 'is_zoo_model', 'pe_of', 'check_model_identity',
           'is_video_model', 'video_num_frames', 'model_mean_std', 'run_checkpoint', 'model_sources', 'load_model',
           'load_video_llm', 'is_video_llm', 'unique_labels', 'recorded_model_name']

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
    if is_video_llm(name):
        raise ValueError(f'{name} is a video-LLM, not a classifier: train it with zoo train-vlm and score it with zoo '
                         'eval-video (zoo.create_video_llm builds it in Python)')
    if not timm.is_model(name):
        raise ValueError(f'unknown model {name!r} (`zoo list` shows the registered names){_suggest(name)}')
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
    except (RuntimeError, OSError, AssertionError, ZeroDivisionError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if pretrained and isinstance(e, (RuntimeError, OSError)):
            # no weights registered for the name, or no network / cache: a user-facing problem, not a crash
            raise ValueError(f'cannot load pretrained weights for {name!r}: {type(e).__name__}: {first}') from None
        raise ValueError(f'model {name!r} cannot be built with {_fmt_kwargs(model_kwargs)}: {first}') from None


def _suggest(name: str) -> str:
    """``; did you mean ...?`` for a mistyped model name, or a PE name given where a model name is expected."""
    from zoo.models import PE_OF_MODEL
    by_pe = [m for m, pe in PE_OF_MODEL.items() if pe == name]
    if by_pe:
        tiny = [m for m in by_pe if '_tiny_' in m] or by_pe
        return (f'; {name!r} is a position encoding: models using it are {", ".join(sorted(by_pe)[:4])} '
                f'(e.g. --model {sorted(tiny)[0]})')
    close = difflib.get_close_matches(name, list(PE_OF_MODEL), n=3) or \
        difflib.get_close_matches(name, timm.list_models(), n=3)
    if not close:
        close = sorted(m for m in PE_OF_MODEL if name and name.lower() in m)[:3]
    return f'; did you mean {", ".join(close)}?' if close else ''


def is_zoo_model(model: nn.Module) -> bool:
    """True for a zoo ``pe_vit_*`` model (it has a position-encoding module ``pe`` and a ``pe_name``)."""
    return hasattr(model, 'pe_name') and hasattr(model, 'pe')


def pe_of(model_name: Optional[str]) -> Optional[str]:
    """The registered position encoding of a zoo model name, ``None`` for other (timm) names."""
    from zoo.models import PE_OF_MODEL
    return PE_OF_MODEL.get(model_name or '')


def check_model_identity(path: str, meta: Dict[str, Any], model_name: str, pe: Optional[str], force: bool) -> None:
    """Refuse to use a checkpoint as a model / PE other than the one it records (``force``: warn instead).

    Args:
        path: the checkpoint (for the message).
        meta: its recorded ``meta`` (``model_name``, ``pe``); nothing is checked when it records neither.
        model_name / pe: what it is about to be loaded as.

    Raises:
        zoo.models.CheckpointMismatchError: another model name or PE, without ``force``.
    """
    from zoo.models import CheckpointMismatchError
    rec_name = meta.get('model_name')
    rec_pe = meta.get('pe', pe_of(rec_name)) if rec_name else meta.get('pe')
    problems = []
    if rec_name and rec_name != model_name:
        problems.append(f'it was trained as {rec_name}, not {model_name}')
    if rec_pe != pe and (rec_pe is not None or pe is not None) and (rec_name or 'pe' in meta):
        own = "timm's own"
        problems.append(f'its position encoding is {rec_pe or own}, not {pe or own}')
    if not problems:
        return
    text = f'checkpoint {path!r}: {" and ".join(problems)}'
    if force:
        _logger.warning('%s; loading it anyway (--force)', text)
        return
    raise CheckpointMismatchError(f'{text}; drop --model to use the recorded one, or pass --force to evaluate it as '
                                  f'{model_name} anyway')


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
        if key in _INT_KWARGS and value < (0 if key in ('num_classes', 'reg_tokens') else 1):
            raise ValueError(f'--model-kwargs {key}={value!r}: must be '
                             f'{"0 or more" if key in ("num_classes", "reg_tokens") else "at least 1"}')
        if key in _SIZE_KWARGS and not (_is_int(value) or (isinstance(value, (list, tuple)) and len(value) == 2
                                                           and all(_is_int(v) for v in value))):
            raise ValueError(f'--model-kwargs {key}={value!r}: must be an integer or a pair of integers')
        if key in _SIZE_KWARGS and min(value if isinstance(value, (list, tuple)) else [value]) < 1:
            raise ValueError(f'--model-kwargs {key}={value!r}: must be at least 1 px')
        if key in _FLOAT_KWARGS and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f'--model-kwargs {key}={value!r}: must be a number')
        if key in _FLOAT_KWARGS and key != 'init_values' and not (key == 'mlp_ratio' and value > 0 or
                                                                   key != 'mlp_ratio' and 0 <= value < 1):
            raise ValueError(f'--model-kwargs {key}={value!r}: must be ' +
                             ('positive' if key == 'mlp_ratio' else 'in [0, 1)'))


def load_weights(model: nn.Module, path: str, allow_new_classifier: bool = True, use_ema: bool = False) -> None:
    """Load a checkpoint file into ``model`` (strict): through ``zoo.models.checkpoint_filter_fn`` for a zoo model,
    as is (APE resampled by timm's ``resample_abs_pos_embed``) for a plain timm model.

    ``use_ema`` loads the checkpoint's ``model_ema`` weights (``ValueError`` when it has none).

    An open_clip / OpenAI CLIP checkpoint (ViT visual tower) goes through
    :func:`zoo.integrations.open_clip.convert_clip_visual` (any PE; the model should be a ``clip_pe_vit_*`` tower or
    have the CLIP layout): ``zoo train --initial-checkpoint clip.pt`` fine-tunes a CLIP tower as a classifier.

    Learned APE tables are resampled to the model's grid by the filter. A classifier of another size is kept at the
    model's initialisation when ``allow_new_classifier`` (fine-tuning on a new label set), else reported.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a readable torch checkpoint, or one refused by ``weights_only`` loading.
        zoo.models.CheckpointMismatchError: keys or shapes that do not fit, all listed (the message names ``path``).
    """
    from zoo.models import CheckpointMismatchError
    ckpt = load_checkpoint(path)
    if use_ema:
        if not isinstance(ckpt, dict) or not isinstance(ckpt.get('model_ema'), dict):
            raise ValueError(f'--use-ema: {path!r} holds no EMA weights (the run was trained without --model-ema); '
                             'drop --use-ema to evaluate its raw weights')
        ckpt = ckpt['model_ema']
    try:
        if is_zoo_model(model) and _is_clip(ckpt):  # open_clip / OpenAI CLIP ViT: its visual tower, any PE
            from zoo.integrations.open_clip import convert_clip_visual
            state = convert_clip_visual(ckpt, model, head='')
        elif is_zoo_model(model):
            state = checkpoint_filter_fn(ckpt, model)
        else:
            state = _plain_timm_state(ckpt, model)
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
                                      f'{" ".join(str(e).split())[:600]}') from None


def _is_clip(ckpt: Any) -> bool:
    from zoo.integrations.open_clip import is_clip_visual_state_dict
    return is_clip_visual_state_dict(ckpt)


def _plain_timm_state(ckpt: Dict[str, Any], model: nn.Module) -> Dict[str, Any]:
    """A timm model's own state dict (unwrapped), its ``pos_embed`` resampled to the model's grid."""
    from timm.layers import resample_abs_pos_embed
    from zoo.models import unwrap_state_dict
    state = dict(unwrap_state_dict(ckpt))
    own = model.state_dict()
    pos = state.get('pos_embed')
    if pos is not None and 'pos_embed' in own and pos.shape != own['pos_embed'].shape:
        prefix = 0 if getattr(model, 'no_embed_class', False) else getattr(model, 'num_prefix_tokens', 0)
        state['pos_embed'] = resample_abs_pos_embed(pos, new_size=list(model.patch_embed.grid_size),
                                                    num_prefix_tokens=prefix)
    return state


def patch_size_of(model: nn.Module) -> int:
    """The (square) patch size in px of a zoo / timm ViT, or 1 when the model has no patch embedding."""
    pe = getattr(model, 'patch_embed', None)
    size = getattr(pe, 'patch_size', 1) if pe is not None else 1
    return int(size[0]) if isinstance(size, (tuple, list)) else int(size)


def is_video_model(model: Union[str, nn.Module, None]) -> bool:
    """True for a registered ``pe_video_vit_*`` name, or a module whose ``patch_embed.proj`` is a ``Conv3d``."""
    if model is None:
        return False
    if isinstance(model, str):
        import timm
        from timm.models import model_entrypoint
        name = model.split('.')[0]
        return timm.is_model(name) and model_entrypoint(name).__module__ == 'zoo.models.video_vit'
    return isinstance(getattr(getattr(model, 'patch_embed', None), 'proj', None), nn.Conv3d)


def video_num_frames(model: nn.Module) -> int:
    """The default clip length (frames) of a video model."""
    return int(getattr(model, 'num_frames', None) or model.patch_embed.num_frames)


def model_mean_std(model: nn.Module, mean: Optional[Sequence[float]] = None,
                   std: Optional[Sequence[float]] = None) -> Any:
    """``(mean, std)``: the given values, else the model's pretrained cfg, else ImageNet's."""
    cfg = getattr(model, 'pretrained_cfg', None) or {}
    return (tuple(mean or cfg.get('mean') or (0.485, 0.456, 0.406)),
            tuple(std or cfg.get('std') or (0.229, 0.224, 0.225)))


# ---- one loader for every sweep: run dirs and checkpoints -> models -----------------------------------------------
def run_checkpoint(run: str, command: str = 'zoo train') -> str:
    """The final weights of a run directory: ``checkpoint-last.pth``, else ``model.safetensors``.

    The final weights, not ``checkpoint-best.pth``: that one was selected on the validation split, which is often
    the split a sweep evaluates, so it would report a selected (optimistic) number.

    Raises:
        ValueError: ``run`` is a file. FileNotFoundError: no such directory, or no final weights in it.
    """
    if os.path.isfile(run):
        raise ValueError(f'--run {run!r} is a file; --run takes a {command} output dir (pass a checkpoint file as '
                         '--checkpoint)')
    if not os.path.isdir(run):
        raise FileNotFoundError(f'run dir {run!r} does not exist')
    for name in ('checkpoint-last.pth', 'model.safetensors'):
        path = os.path.join(run, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f'run dir {run!r} has no checkpoint-last.pth (not a finished {command} run?); pass '
                            '--checkpoint PATH instead')


def model_sources(runs: Sequence[str], checkpoints: Sequence[str], models: Sequence[str] = (),
                  command: str = 'zoo train') -> list:
    """``[{'model': name or None, 'checkpoint': path}]`` for ``--run`` dirs, then ``--checkpoint`` files (each with the
    ``--model`` at the same position, when given; ``pretrained`` = timm's weights of that model).

    Raises:
        ValueError: ``--model`` count differs from ``--checkpoint`` count, or nothing given.
        FileNotFoundError: a run dir without final weights.
    """
    if models and len(models) != len(checkpoints):
        raise ValueError(f'{len(models)} --model but {len(checkpoints)} --checkpoint: give one --model per '
                         '--checkpoint (in the same order), or none to take the model names from the checkpoints')
    entries = [dict(model=None, checkpoint=run_checkpoint(r, command)) for r in runs]
    entries += [dict(model=models[i] if models else None, checkpoint=p) for i, p in enumerate(checkpoints)]
    if not entries:
        raise ValueError('no model given: pass --run DIR, --checkpoint PATH, or --model NAME --checkpoint PATH')
    return entries


def _deep_merge(base: Dict[str, Any], over: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_model(entry: Dict[str, Any], model_kwargs: Optional[Dict[str, Any]] = None, use_ema: bool = False,
               force: bool = False) -> tuple:
    """Build the model a checkpoint records (a ``pe_vit_*`` / ``pe_video_vit_*`` / timm classifier, or a
    ``pe_vlm_*`` video-LLM), at its training input, with its weights.

    Args:
        entry: ``{'model': name or None, 'checkpoint': path or 'pretrained'}`` (:func:`model_sources`).
        model_kwargs: constructor overrides over the recorded ``model_kwargs`` (classifiers only).
        use_ema: load the checkpoint's EMA weights.
        force: load a checkpoint as another ``model`` / PE than it records (a warning instead of an error).

    Returns:
        ``(model in eval mode, meta)``: ``meta`` is the checkpoint's record (``model_name``, ``model_kwargs``,
        ``img_size``, ``num_frames``, ``class_names``, ``data_config``, ``args`` ...), ``{}`` for timm weights.

    Raises:
        FileNotFoundError / ValueError: no such file, not a checkpoint, no model name, no EMA weights.
        zoo.models.CheckpointMismatchError: another model or PE than recorded (without ``force``), or weights that
            do not fit.
    """
    from zoo.models import unwrap_state_dict
    from .checkpoints import checkpoint_meta
    cli_kwargs = dict(model_kwargs or {})
    path = entry['checkpoint']
    if path == 'pretrained':
        if not entry['model']:
            raise ValueError('--checkpoint pretrained needs a --model')
        if use_ema:
            raise ValueError('--use-ema applies to zoo train checkpoints; --checkpoint pretrained has no EMA weights')
        return create_zoo_model(entry['model'], cli_kwargs, pretrained=True).eval(), {}
    ckpt = load_checkpoint(path)
    meta = checkpoint_meta(ckpt)
    name = entry['model'] or meta.get('model_name')
    if not name:
        raise ValueError(f'{path!r} records no model name (not a zoo train checkpoint); pass --model NAME before '
                         'its --checkpoint')
    if use_ema and not isinstance(ckpt.get('model_ema'), dict):
        raise ValueError(f'--use-ema: {path!r} holds no EMA weights (the run was trained without --model-ema); drop '
                         '--use-ema to evaluate its raw weights')
    if is_video_llm(name):
        if cli_kwargs:
            raise ValueError('--model-kwargs applies to classifiers; a video-LLM is built as its checkpoint records')
        return _load_video_llm(path, ckpt, meta, name, use_ema), meta
    if entry['model'] and meta:
        pe = cli_kwargs['pe'] if isinstance(cli_kwargs.get('pe'), str) else pe_of(name)
        check_model_identity(path, meta, name, pe, force)
    kwargs = _deep_merge(meta.get('model_kwargs') or {}, cli_kwargs)
    num_classes = meta.get('num_classes')
    if num_classes is None:
        head = unwrap_state_dict(ckpt).get('head.weight')
        num_classes = int(head.shape[0]) if head is not None else None
    frames = {'num_frames': meta['num_frames']} if meta.get('num_frames') else {}  # a video model's training clip
    model = create_zoo_model(name, kwargs, img_size=meta.get('img_size'), num_classes=num_classes, **frames)
    del ckpt
    load_weights(model, path, allow_new_classifier=False, use_ema=use_ema)
    return model.eval(), dict(meta, model_name=name, model_kwargs=kwargs)


def recorded_model_name(path: str) -> Optional[str]:
    """The model name a checkpoint records (``None`` for ``pretrained`` or a file that records none)."""
    from .checkpoints import checkpoint_meta
    if path == 'pretrained':
        return None
    return checkpoint_meta(load_checkpoint(path)).get('model_name')


def is_video_llm(name: Optional[str]) -> bool:
    """True for a video-LLM name (``pe_vlm_<size>_<scheme>``, :func:`zoo.models.vlm.list_video_llms`)."""
    return isinstance(name, str) and name.startswith('pe_vlm_')


def _load_video_llm(path: str, ckpt: Dict[str, Any], meta: Dict[str, Any], name: str, use_ema: bool) -> nn.Module:
    from zoo.models import CheckpointMismatchError, unwrap_state_dict
    from zoo.models.vlm import create_video_llm
    model = create_video_llm(name, **(meta.get('model_kwargs') or {}))
    state = ckpt['model_ema'] if use_ema else unwrap_state_dict(ckpt)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise CheckpointMismatchError(f'{path!r} does not load into {name}: {" ".join(str(e).split())[:600]}') \
            from None
    return model.eval()


def load_video_llm(path: str, use_ema: bool = False) -> tuple:
    """Rebuild a ``zoo train-vlm`` model from its checkpoint (recorded name and options) and load its weights.

    Returns:
        ``(model in eval mode, checkpoint meta)``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a video-LLM checkpoint (the message names the expected layout), or no EMA weights with
            ``use_ema``.
        zoo.models.CheckpointMismatchError: the weights do not fit the recorded model.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f'checkpoint {path!r} does not exist')
    name = recorded_model_name(path)
    if not is_video_llm(name):
        what = f'records the model {name!r}' if name else 'records no model name'
        raise ValueError(f'{path!r} is not a video-LLM checkpoint ({what}); zoo eval-video takes zoo train-vlm '
                         'checkpoints: a dict with "model" weights and "meta" {model_name: pe_vlm_<size>_<scheme>, '
                         'model_kwargs, img_size, num_frames}, e.g. RUN/checkpoint-last.pth of zoo train-vlm')
    return load_model(dict(model=None, checkpoint=path), use_ema=use_ema)


def unique_labels(labels: Sequence[str], seeds: Sequence[Optional[int]]) -> list:
    """Display labels made unique: a repeated label gets ``(seed N)`` from its run's seed, else ``#k``.

    Raises:
        ValueError: still not unique (pass one ``--label`` per model).
    """
    out = list(labels)
    for i, label in enumerate(labels):
        if labels.count(label) > 1:
            out[i] += f' (seed {seeds[i]})' if seeds[i] is not None else f' #{labels[:i].count(label) + 1}'
    if len(set(out)) != len(out):
        raise ValueError(f'model labels are not unique: {out}; pass one --label per model')
    return out
