"""One factory for every position encoding: ``create_pos_encoding(kind, **kwargs)``.

Backbones never name concrete encoding classes. An encoding module registers its classes with
``@register_pos_encoding('name')``; the name is the ``{pe}`` part of model names and of ``zoo list``.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Type

__all__ = ['register_pos_encoding', 'create_pos_encoding', 'list_pos_encodings']

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
    return sorted(_REGISTRY)


def create_pos_encoding(kind: str, **kwargs):
    """Build the encoding registered as ``kind``.

    Every encoding receives the backbone geometry as keyword arguments: ``dim`` (embedding width), ``num_heads``,
    ``depth``, ``grid_size`` ``(H, W)`` in patches, ``num_prefix_tokens`` and ``num_class_tokens``, plus its own
    options (the model's ``pe_kwargs``).

    Raises:
        ValueError: ``kind`` is not registered (the message lists the known names).
    """
    if kind not in _REGISTRY:
        raise ValueError(f'unknown position encoding {kind!r}; choose one of {list_pos_encodings()}')
    return _REGISTRY[kind](**kwargs)
