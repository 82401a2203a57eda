"""The import floors of ``zoo`` (DESIGN.md, "Layers"; STYLE.md 1), checked on the source with the AST: every import
statement counts, also those inside functions, so a late import cannot hide a cycle or a floor violation.

Floors: ``zoo.errors`` (floor 0, allowed everywhere) < ``zoo.encodings`` < ``zoo.models``; ``zoo.datasets`` beside
them imports nothing of the project but ``zoo.errors``; the application (``runs``, ``tasks``, ``train``, ``sweep``,
``eval``, ``common``, ``cli``, ...) sits above. No two modules anywhere import each other.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / 'zoo'

#: Mutual imports above the library floors that exist today (sorted module pairs); whoever removes one deletes its
#: entry. The library floors (encodings, models, datasets) have none and may not get any.
_APPLICATION_FLOOR_TODO: Set[Tuple[str, str]] = set()

#: What each library floor may import from the project (itself included).
FLOORS = {
    'zoo.encodings': ('zoo.encodings', 'zoo.errors'),
    'zoo.models': ('zoo.models', 'zoo.encodings', 'zoo.errors'),
    'zoo.datasets': ('zoo.datasets', 'zoo.errors'),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


MODULES: Dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob('*.py'))}


def _imported(name: str, path: Path) -> Iterator[Tuple[str, int]]:
    """``(module, line)`` of every project module ``name`` imports (a ``from pkg import sub`` of a submodule counts as
    ``pkg.sub``; other names as their module)."""
    package = name if path.name == '__init__.py' else name.rpartition('.')[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split('.')[:len(package.split('.')) - node.level + 1]
                module = '.'.join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ''
            targets = [module] + [f'{module}.{a.name}' for a in node.names if f'{module}.{a.name}' in MODULES]
        else:
            continue
        for target in targets:
            if target == 'zoo' or target.startswith('zoo.'):
                while target not in MODULES and '.' in target:
                    target = target.rpartition('.')[0]
                if target in MODULES and target != name:
                    yield target, node.lineno


GRAPH: Dict[str, Dict[str, int]] = {}
for _name, _path in MODULES.items():
    GRAPH[_name] = {}
    for _target, _line in _imported(_name, _path):
        GRAPH[_name].setdefault(_target, _line)


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + '.')


def _mutual_pairs() -> Set[Tuple[str, str]]:
    return {tuple(sorted((a, b))) for a, targets in GRAPH.items() for b in targets if a in GRAPH.get(b, {})}


def test_the_graph_sees_function_level_and_relative_imports():
    assert 'zoo.encodings.registry' in GRAPH['zoo.encodings.base']             # relative, module level
    assert 'zoo.encodings' in GRAPH['zoo.models.checkpoint_filters']          # absolute
    assert len(MODULES) > 40


def test_no_two_modules_import_each_other():
    pairs = _mutual_pairs()
    library = {p for p in pairs if all(any(_in(m, f) for f in FLOORS) for m in p)}
    assert not library, f'library modules that import each other: {sorted(library)}'
    new = pairs - library - _APPLICATION_FLOOR_TODO
    assert not new, f'modules that import each other: {sorted(new)} (break the cycle: move what both need lower)'
    fixed = _APPLICATION_FLOOR_TODO - pairs
    assert not fixed, f'remove these from _APPLICATION_FLOOR_TODO, they no longer import each other: {sorted(fixed)}'


def test_library_floors_have_no_import_cycle():
    """Longer cycles too: the library's import graph is acyclic (a depth-first search finds no back edge)."""
    library = {m for m in GRAPH if any(_in(m, f) for f in FLOORS)}
    state: Dict[str, int] = {}

    def visit(m: str, stack: Tuple[str, ...]) -> None:
        state[m] = 1
        for t in GRAPH[m]:
            if t not in library:
                continue
            if state.get(t) == 1:
                raise AssertionError(f'import cycle: {" -> ".join(stack[stack.index(t):] + (t,))}')
            if t not in state:
                visit(t, stack + (t,))
        state[m] = 2

    for m in sorted(library):
        if m not in state:
            visit(m, (m,))


@pytest.mark.parametrize('floor', sorted(FLOORS))
def test_library_floor_imports_nothing_above_it(floor):
    allowed = FLOORS[floor]
    bad = [f'{m} imports {t} (line {line})' for m, targets in GRAPH.items() if _in(m, floor)
           for t, line in targets.items() if not any(_in(t, a) for a in allowed)]
    assert not bad, f'{floor} may import only {allowed}:\n' + '\n'.join(bad)
