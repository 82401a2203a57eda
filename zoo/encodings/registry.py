"""One factory for every position encoding: ``create_pos_encoding(kind, **kwargs)``.

Backbones never name concrete encoding classes. An encoding module registers its classes with
``@register_pos_encoding('name')``; the name is the ``{pe}`` part of model names and of ``zoo list``.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, List, Type


__all__ = ['register_pos_encoding', 'create_pos_encoding', 'list_pos_encodings', 'get_pos_encoding_class',
           'pos_encoding_name', 'takers', 'FAMILY_OPTIONS']

_REGISTRY: Dict[str, Type] = {}


def register_pos_encoding(name: str) -> Callable[[Type], Type]:
    """Class decorator registering an encoding under ``name``. Raises ValueError on a duplicate name."""
    def _register(cls: Type) -> Type:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f'position encoding {name!r} is already registered by {_REGISTRY[name].__name__}')
        _REGISTRY[name] = cls
        return cls
    return _register


def list_pos_encodings() -> List[str]:
    """Every registered encoding name, sorted."""
    return sorted(_REGISTRY)


def get_pos_encoding_class(kind: str) -> Type:
    """The class registered as ``kind`` (its ``family`` and ``adaptation`` describe it without building it).

    Raises:
        ValueError: ``kind`` is not registered, naming the registered ones.
    """
    if kind not in _REGISTRY:
        raise ValueError(f'unknown position encoding {kind!r}; choose one of {list_pos_encodings()}')
    return _REGISTRY[kind]


def pos_encoding_name(encoding: Any) -> str:
    """The name an encoding class (or an instance's class) is registered under; its class name when unregistered."""
    cls = encoding if isinstance(encoding, type) else type(encoding)
    return next((k for k, v in _REGISTRY.items() if v is cls), cls.__name__)


GEOMETRY_KEYS = ('dim', 'num_heads', 'depth', 'grid_size', 'num_prefix_tokens', 'num_class_tokens')

#: Options that a family of encodings shares (each taker has the argument), with what they are: given to an encoding
#: without it, they are refused in one line naming the encodings that take them.
FAMILY_OPTIONS = {
    'p_rope': 'p-RoPE (only the highest-frequency fraction p of the rotary pairs rotates)',
    'random_positions': 'randomized positions (per-sample random coordinates in training, the grid in eval)',
}


def takers(option: str) -> List[str]:
    """The registered encodings whose constructor takes ``option`` (e.g. ``'p_rope'``), sorted."""
    return [n for n, c in sorted(_REGISTRY.items()) if option in inspect.signature(c.__init__).parameters]


def _takes_strategies(cls: Type) -> bool:
    """Whether an encoding class takes extrapolation strategies (its ``extrapolation_strategies``, see
    ``PosEncoding.supported_extrapolations``; the constructors of those that do have an ``extrapolation`` option)."""
    return tuple(getattr(cls, 'extrapolation_strategies', ('none',))) != ('none',)


def _refuse_extrapolation(kind: str, cls: Type, pe_kwargs: dict) -> None:
    """Drop ``extrapolation='none'``; ValueError for another strategy on an encoding that takes none."""
    value = pe_kwargs['extrapolation']
    strategy = value.get('strategy', 'none') if isinstance(value, dict) else value
    if strategy in (None, 'none'):
        pe_kwargs.pop('extrapolation')
        return
    known = sorted({s for c in _REGISTRY.values() for s in getattr(c, 'extrapolation_strategies', ('none',))})
    if strategy not in known:  # the strategies some registered encoding takes (zoo.encodings.extrapolation)
        raise ValueError(f'unknown extrapolation strategy {strategy!r}; choose one of {known}')
    takers = [n for n, c in sorted(_REGISTRY.items()) if _takes_strategies(c)]
    raise ValueError(f'extrapolation {strategy!r} does not apply to the {kind!r} encoding '
                     f'({getattr(cls, "family", kind)}), which adapts to a new grid by: '
                     f'{getattr(cls, "adaptation", "?")}; extrapolation strategies apply to {takers}')


def create_pos_encoding(kind: str, geometry: dict, pe_kwargs: dict | None = None):
    """Build the encoding registered as ``kind``.

    Args:
        kind: registered name, e.g. ``'rope_mixed'``.
        geometry: backbone geometry, keys from ``GEOMETRY_KEYS``: ``dim`` (embedding width), ``num_heads``, ``depth``,
            ``grid_size`` ``(H, W)`` in patches, ``num_prefix_tokens`` and ``num_class_tokens``. Each encoding gets
            the keys its constructor names.
        pe_kwargs: the encoding's own options (a model's ``pe_kwargs``).

    Raises:
        ValueError: ``kind`` is not registered, or ``pe_kwargs`` has an option the encoding does not know.
    """
    cls = get_pos_encoding_class(kind)
    if pe_kwargs is not None and not isinstance(pe_kwargs, dict):
        raise ValueError(f'pe_kwargs must be a dict of options, got {type(pe_kwargs).__name__}: {pe_kwargs!r}')
    pe_kwargs = dict(pe_kwargs or {})
    params = inspect.signature(cls.__init__).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    geometry = {k: v for k, v in geometry.items() if takes_any or k in params}
    if 'extrapolation' in pe_kwargs and not _takes_strategies(cls):
        _refuse_extrapolation(kind, cls, pe_kwargs)  # 'none' is dropped: it is every encoding's behaviour
    unknown = [k for k in pe_kwargs if not takes_any and k not in params]
    family = [k for k in unknown if k in FAMILY_OPTIONS]
    if family:
        opt = family[0]
        raise ValueError(f'{opt}={pe_kwargs[opt]!r} does not apply to the {kind!r} encoding; {opt} is '
                         f'{FAMILY_OPTIONS[opt]}, an option of {takers(opt)}')
    if unknown:
        options = [k for k in params if k not in ('self',) + GEOMETRY_KEYS]
        raise ValueError(f'unknown pe_kwargs {unknown} for position encoding {kind!r}; its options are {options}')
    return cls(**geometry, **pe_kwargs)
