"""A small keyed cache for tables that depend only on (grid, dtype, device, parameter versions)."""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable

import torch

__all__ = ['TableCache', 'caching_allowed']


def caching_allowed() -> bool:
    """Tables are not cached while tracing or compiling (the graph owns them there)."""
    if torch.jit.is_tracing() or torch.jit.is_scripting():
        return False
    compiler = getattr(torch, 'compiler', None)
    return not (compiler is not None and compiler.is_compiling())


class TableCache:
    """LRU dict of derived tensors. Never part of a state_dict; keys must include everything the value depends on."""

    def __init__(self, max_entries: int = 8):
        self.max_entries = max_entries
        self._store: 'OrderedDict[Hashable, object]' = OrderedDict()

    def get(self, key: Hashable, build: Callable[[], object]):
        if not caching_allowed():
            return build()
        if key in self._store:
            self._store.move_to_end(key)
            return self._store[key]
        value = build()
        self._store[key] = value
        if len(self._store) > self.max_entries:
            self._store.popitem(last=False)
        return value

    def clear(self) -> None:
        self._store.clear()
