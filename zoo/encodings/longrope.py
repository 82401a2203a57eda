"""LongRoPE: per-frequency rescale factors with the first positions not interpolated: options and the factors file
(the search is :mod:`zoo.encodings.longrope_search`, kept apart so that this module imports nothing of the package).

Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million Tokens" (arXiv:2402.13753):

* Sec. 3.2, Eq. 3: pair ``i`` rotates by ``I(lambda_i, n_hat) * n * theta_i`` with ``I = 1`` for ``n < n_hat`` and
  ``1 / lambda_i`` otherwise (the rule itself is :meth:`zoo.encodings.extrapolation.Extrapolation.positions`; here:
  the options, the factors file and the search).
* Sec. 3.2, the search: the space ``lambda_i in [1, 1.25 s]`` in steps of 0.01 and ``n_hat`` in
  ``{0, 1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 64, 128, 256}`` (positions; in patches / tubelets for a ViT axis), the
  population started from PI, NTK and YaRN and mutations of them, each iteration keeping the best ``k`` (parents)
  and adding mutations and crossovers of them, the monotonically non-decreasing constraint
  ``lambda_i <= lambda_{i+1}`` (a lower frequency is never interpolated less), and the fitness is the loss at the
  target length. The paper uses population 64, 16 mutations, 16 crossovers, 32 parents, 40 iterations and
  perplexity on long documents; :func:`zoo.encodings.longrope_search.evolution_search` has the same loop with CPU-sized defaults (population 8,
  4 + 4, 4 parents, 3 iterations) and any per-sample loss.

The factors file (JSON, written atomically by ``zoo search-longrope``)::

    {"format": "zoo-longrope/1", "encoding": "rope_axial", "axes": ["rows", "cols"],
     "factors": [[lambda_0, ...], [...]],   # one list per axis (or one list: every axis)
     "n_hat": [0, 0],                         # one per axis (or one)
     "train_grid": [4, 4], "target_grid": [8, 8],
     "search": {...}}                         # how it was found: fitness, baselines, samples, decided

``factors`` of the multimodal decoder are indexed by the pair ``j`` of ``theta^(-2j / head_dim)`` (one list for
every id axis: each pair is driven by one axis); of RoPE-Mixed by the band index of a pair in its initialisation
ladder (the learned frequencies themselves are not searched).
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

__all__ = ['FORMAT', 'N_HAT_CHOICES', 'STEP', 'ENCODING_AXES', 'check_longrope_options', 'load_factors',
           'factors_document']

FORMAT = 'zoo-longrope/1'
#: The paper's ``n_hat`` search space.
N_HAT_CHOICES = (0, 1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 64, 128, 256)
STEP = 0.01


#: The axes of the factor lists of each encoding (``rope_mixed``: rows, cols, and frames first on video).
ENCODING_AXES = {'rope_axial': ('rows', 'cols'), 'rope3d': ('frames', 'rows', 'cols'), 'multimodal_rope': ('pairs',),
                 'rope_mixed': ('frames', 'rows', 'cols'), 'rope_mixed_ape': ('frames', 'rows', 'cols')}


def _family(name: Any) -> str:
    """``rope_mixed_ape`` and ``rope_mixed`` share factors (the same rotary bands)."""
    return str(name).replace('rope_mixed_ape', 'rope_mixed')


def load_factors(path: str, encoding: str = 'this encoding') -> Dict[str, Any]:
    """Read and check a factors file (JSON, :data:`FORMAT`) on its own: everything but whether it fits a model.

    ``factors`` are JSON numbers (not strings or booleans), positive and finite, one list or one per entry of
    ``axes``; ``n_hat`` finite numbers >= 0, one or one per axis; ``axes`` (when given) those of ``encoding`` (when
    given and known, :data:`ENCODING_AXES`).

    Raises:
        ValueError: one line naming the file, the field and the fix: no such file, not JSON, another format, no
            ``factors``, a bad ``factors`` / ``n_hat`` / ``axes`` / ``encoding`` field.
    """
    if not os.path.isfile(path):
        raise ValueError(f'{encoding}: longrope factors file {path!r} not found; fix: write one with zoo '
                         'search-longrope --output FILE')
    try:
        with open(path, encoding='utf-8') as f:
            doc = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f'{encoding}: longrope factors file {path!r} is not readable JSON ({e}); fix: write it '
                         'again with zoo search-longrope') from None
    if not isinstance(doc, dict) or doc.get('format') != FORMAT or 'factors' not in doc:
        raise ValueError(f'{encoding}: {path!r} is not a longrope factors file (format {FORMAT!r} with "factors"); '
                         'fix: write one with zoo search-longrope')

    def bad(field: str, why: str) -> ValueError:
        return ValueError(f'{encoding}: longrope factors file {path!r}: field "{field}" {why}; fix: write the file '
                          'again with zoo search-longrope (or correct that field)')

    axes = doc.get('axes')
    if axes is not None and (not isinstance(axes, list) or not axes or not all(isinstance(a, str) for a in axes)):
        raise bad('axes', f'must be a non-empty list of axis names, got {axes!r}')
    name = doc.get('encoding')
    if name is not None and not isinstance(name, str):
        raise bad('encoding', f'must be an encoding name, got {name!r}')
    known = ENCODING_AXES.get(name) if name else None
    if known and axes is not None and not (tuple(axes) == known or (_family(name) == 'rope_mixed'
                                                                     and tuple(axes) == known[1:])):
        raise bad('axes', f'{axes} are not the axes of {name} ({list(known)})')
    count = len(axes) if axes is not None else (len(known) if known and _family(name) != 'rope_mixed' else None)
    rows = doc['factors']
    if not isinstance(rows, list) or not rows:
        raise bad('factors', f'must be a list of numbers or one list per axis, got {rows!r}')
    rows = [rows] if not isinstance(rows[0], list) else rows
    for r in rows:
        if not isinstance(r, list) or not r or not all(_number(v) and math.isfinite(v) and v > 0 for v in r):
            raise bad('factors', f'must hold positive finite JSON numbers (lambda_i; not strings or booleans), got '
                      f'{r!r}')
    if count is not None and len(rows) not in (1, count):
        raise bad('factors', f'has {len(rows)} lists for {count} axes {axes or list(known)}; give one list or one '
                  'per axis')
    n_hat = doc.get('n_hat', 0)
    n_list = n_hat if isinstance(n_hat, list) else [n_hat]
    if not n_list or not all(_number(v) and math.isfinite(v) and v >= 0 for v in n_list):
        raise bad('n_hat', f'must be finite JSON numbers >= 0 (positions), one or one per axis, got {n_hat!r}')
    if count is not None and len(n_list) not in (1, count):
        raise bad('n_hat', f'has {len(n_list)} values for {count} axes {axes or list(known)}; give one or one per '
                  'axis')
    grid = doc.get('train_grid')
    if grid is not None and (not isinstance(grid, list) or not grid or
                             not all(_number(v) and math.isfinite(v) and v > 0 for v in grid)):
        raise bad('train_grid', f'must be positive finite extents, got {grid!r}')
    return doc


def _number(v: Any) -> bool:
    """A JSON number (``bool`` is an ``int`` in Python: refused)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _floats(value: Any) -> Tuple[float, ...]:
    if isinstance(value, (str, bytes)) or not all(_number(v) for v in value):
        raise ValueError
    out = tuple(float(v) for v in value)
    if not out or not all(math.isfinite(v) and v > 0 for v in out):
        raise ValueError
    return out


def check_longrope_options(opts: Mapping[str, Any], encoding: str = 'this encoding') \
        -> Tuple[Tuple[Any, ...], Optional[Tuple[float, ...]]]:
    """LongRoPE's options (``factors``, ``n_hat``, ``factors_file``), validated.

    A file supplies ``factors`` and ``n_hat`` (given values override it) and its ``train_grid``; its ``encoding``
    must be ``encoding`` (when that is a registered name; ``rope_mixed`` and ``rope_mixed_ape`` share files).

    Returns:
        ``((factors, n_hat, factors_file), train_grid or None)``: ``factors`` a tuple of per-axis tuples of
        positive floats, ``n_hat`` a tuple of non-negative floats.

    Raises:
        ValueError: no factors, a factor that is not a positive finite number (strings and booleans included), an
            ``n_hat`` that is negative or not finite, more factor lists or ``n_hat`` values than ``encoding`` has
            axes, a bad file (:func:`load_factors`) or a file for another encoding.
    """
    path = opts.get('factors_file')
    factors, n_hat, grid = opts.get('factors'), opts.get('n_hat', 0), None
    if path:
        doc = load_factors(str(path), encoding)
        if doc.get('encoding') and encoding in ENCODING_AXES and _family(doc['encoding']) != _family(encoding):
            raise ValueError(f'{encoding}: longrope factors file {path!r}: field "encoding" is {doc["encoding"]!r}, '
                             f'not {encoding}; fix: search factors for this model (zoo search-longrope)')
        factors = doc['factors'] if factors is None else factors
        n_hat = doc.get('n_hat', 0) if n_hat in (0, None) else n_hat
        grid = tuple(float(g) for g in doc['train_grid']) if doc.get('train_grid') else None
    if factors is None:
        raise ValueError(f"{encoding}: extrapolation 'longrope' needs its factors: longrope=FILE (zoo "
                         'search-longrope) or dict(strategy="longrope", factors=[...], n_hat=...)')
    try:
        rows = [factors] if not isinstance(factors[0], (list, tuple)) else list(factors)
        factors = tuple(_floats(r) for r in rows)
    except (TypeError, ValueError, IndexError, KeyError):
        raise ValueError(f'{encoding}: longrope factors must be positive finite numbers (lambda_i), one list or one '
                         f'list per axis, got {factors!r}') from None
    try:
        n_hat = n_hat if isinstance(n_hat, (list, tuple)) else [n_hat]
        if isinstance(n_hat, str) or not all(_number(n) for n in n_hat):
            raise ValueError
        n_hat = tuple(float(n) for n in n_hat)
        if not n_hat or not all(math.isfinite(n) and n >= 0 for n in n_hat):
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(f'{encoding}: longrope n_hat must be a finite position >= 0 or one per axis, got {n_hat!r}') \
            from None
    axes = ENCODING_AXES.get(encoding)
    if axes is not None:
        for what, got in (('factor lists', len(factors)), ('n_hat values', len(n_hat))):
            if got > len(axes):
                src = f' in {path!r}' if path else ''
                raise ValueError(f'{encoding}: {got} longrope {what}{src} for at most {len(axes)} axes '
                                 f'({", ".join(axes)}); fix: give one or one per axis')
    return (factors, n_hat, str(path) if path else None), grid


def factors_document(encoding: str, axes: Sequence[str], factors: Sequence[Sequence[float]], n_hat: Sequence[float],
                     train_grid: Sequence[float], target_grid: Sequence[float],
                     search: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The JSON document of a factors file (write it with ``zoo.datasets.files.write_text_atomic``)."""
    return dict(format=FORMAT, encoding=encoding, axes=list(axes),
                factors=[[round(float(v), 4) for v in row] for row in factors], n_hat=[float(n) for n in n_hat],
                train_grid=[float(g) for g in train_grid], target_grid=[float(g) for g in target_grid],
                search=dict(search or {}))


# ------------------------------------------------------------------------------------------------- geometry
