"""A small keyed cache for tables that depend only on (grid, dtype, device, parameter versions)."""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable

import torch

__all__ = ['TableCache', 'caching_allowed', 'param_key']


def caching_allowed() -> bool:
    """Tables are not cached while tracing or compiling (the graph owns them there)."""
    if torch.jit.is_tracing() or torch.jit.is_scripting() or torch.fx._symbolic_trace.is_fx_symbolic_tracing():
        return False
    compiler = getattr(torch, 'compiler', None)
    if compiler is None:
        return True
    exporting = getattr(compiler, 'is_exporting', lambda: False)
    return not (compiler.is_compiling() or exporting())


class Uncacheable(Exception):
    """Raised by :func:`param_key` for parameters that carry no version counter: :meth:`TableCache.get` then builds
    the value without caching it."""


#: the parameters' tensors the key being evaluated by :meth:`TableCache.get` depends on (see :func:`param_key`)
_anchors: list = []


def param_key(params) -> tuple:
    """Cache-key part for tables derived from learned parameters: identity, version counter (bumped by optimizer
    steps, ``load_state_dict`` and any in-place write), storage address (a new ``.data``: ``vector_to_parameters``,
    a dtype round trip such as ``model.half().float()``), dtype and device of each. The cache entry keeps the keyed
    storages alive (:meth:`TableCache.get`), so a new storage can never reuse a keyed address. Evaluated only where
    caching is allowed (never while tracing or exporting). Writes through ``p.data`` in place bypass the version
    counter, as they bypass autograd, and are not seen.

    Raises:
        Uncacheable: a parameter is an inference tensor (a model built under ``torch.inference_mode``): it has no
            version counter, so an in-place write could not be seen; such models recompute their tables.
    """
    params = list(params)
    if any(p.is_inference() for p in params):
        raise Uncacheable
    _anchors.extend(p.detach() for p in params)
    return tuple((id(p), p._version, p.data_ptr(), p.dtype, p.device) for p in params)


class TableCache:
    """LRU dict of derived tensors. Never part of a state_dict; keys must include everything the value depends on."""

    def __init__(self, max_entries: int = 8):
        self.max_entries = max_entries
        self._store: 'OrderedDict[Hashable, object]' = OrderedDict()

    def get(self, key, build: Callable[[], object]):
        """The cached value for ``key`` (a hashable, or a callable returning one, evaluated only when caching is
        allowed, so keys may read tensor metadata that tracing forbids), building it on a miss."""
        if not caching_allowed():
            return build()
        anchors = []
        if callable(key):
            _anchors.clear()
            try:
                key = key()
            except Uncacheable:
                return build()
            finally:
                anchors, _anchors[:] = list(_anchors), []
        inference = torch.is_inference_mode_enabled()
        if key in self._store:
            value, made_in_inference, _ = self._store[key]
            # tensors made under torch.inference_mode cannot be saved for backward: rebuilt outside it
            if inference or not made_in_inference:
                self._store.move_to_end(key)
                return value
        value = build()
        self._store[key] = (value, inference, anchors)  # anchors: the keyed storages stay alive with the entry
        self._store.move_to_end(key)
        if len(self._store) > self.max_entries:
            self._store.popitem(last=False)
        return value

    def clear(self) -> None:
        self._store.clear()
