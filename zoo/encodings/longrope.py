"""LongRoPE: per-frequency rescale factors with the first positions not interpolated, and their evolutionary search.

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
  perplexity on long documents; :func:`evolution_search` has the same loop with CPU-sized defaults (population 8,
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
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

__all__ = ['FORMAT', 'N_HAT_CHOICES', 'check_longrope_options', 'load_factors', 'factors_document', 'Ladder',
           'ladder_of', 'initial_factors', 'evolution_search', 'SearchResult', 'paired_decision']

FORMAT = 'zoo-longrope/1'
#: The paper's ``n_hat`` search space.
N_HAT_CHOICES = (0, 1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 64, 128, 256)
STEP = 0.01


def load_factors(path: str, encoding: str = 'this encoding') -> Dict[str, Any]:
    """Read a factors file (JSON, :data:`FORMAT`).

    Raises:
        ValueError: no such file, not JSON, another format, or no ``factors``.
    """
    if not os.path.isfile(path):
        raise ValueError(f'{encoding}: longrope factors file {path!r} not found; fix: write one with zoo '
                         'search-longrope --output FILE')
    try:
        with open(path, encoding='utf-8') as f:
            doc = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f'{encoding}: longrope factors file {path!r} is not readable JSON ({e})') from None
    if not isinstance(doc, dict) or doc.get('format') != FORMAT or 'factors' not in doc:
        raise ValueError(f'{encoding}: {path!r} is not a longrope factors file (format {FORMAT!r} with "factors"); '
                         'fix: write one with zoo search-longrope')
    return doc


def _floats(value: Any) -> Tuple[float, ...]:
    out = tuple(float(v) for v in value)
    if not out or not all(math.isfinite(v) and v > 0 for v in out):
        raise ValueError
    return out


def check_longrope_options(opts: Mapping[str, Any], encoding: str = 'this encoding') \
        -> Tuple[Tuple[Any, ...], Optional[Tuple[float, ...]]]:
    """LongRoPE's options (``factors``, ``n_hat``, ``factors_file``), validated.

    A file supplies ``factors`` and ``n_hat`` (given values override it) and its ``train_grid``.

    Returns:
        ``((factors, n_hat, factors_file), train_grid or None)``: ``factors`` a tuple of per-axis tuples of
        positive floats, ``n_hat`` a tuple of non-negative floats.

    Raises:
        ValueError: no factors, a non-positive or non-finite factor, a negative ``n_hat``, a bad file.
    """
    path = opts.get('factors_file')
    factors, n_hat, grid = opts.get('factors'), opts.get('n_hat', 0), None
    if path:
        doc = load_factors(str(path), encoding)
        factors = doc['factors'] if factors is None else factors
        n_hat = doc.get('n_hat', 0) if n_hat in (0, None) else n_hat
        grid = tuple(float(g) for g in doc['train_grid']) if doc.get('train_grid') else None
    if factors is None:
        raise ValueError(f"{encoding}: extrapolation 'longrope' needs its factors: longrope=FILE (zoo "
                         'search-longrope) or dict(strategy="longrope", factors=[...], n_hat=...)')
    try:
        rows = [factors] if not isinstance(factors[0], (list, tuple)) else list(factors)
        factors = tuple(_floats(r) for r in rows)
    except (TypeError, ValueError, IndexError):
        raise ValueError(f'{encoding}: longrope factors must be positive finite numbers (lambda_i), one list or one '
                         f'list per axis, got {factors!r}') from None
    try:
        n_hat = tuple(float(n) for n in (n_hat if isinstance(n_hat, (list, tuple)) else [n_hat]))
        if not n_hat or min(n_hat) < 0:
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(f'{encoding}: longrope n_hat must be a position >= 0 or one per axis, got {n_hat!r}') \
            from None
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
@dataclass
class Ladder:
    """What the search needs to know of an encoding.

    Attributes:
        encoding: registered name.
        axes: axis names, one factor list each (``('pairs',)`` for the multimodal decoder: one list for all axes).
        freqs: ``(len(axes), n)`` float32 frequencies (radians per position) of each axis's ladder (RoPE-Mixed: the
            mean magnitude of each band over blocks and heads); YaRN's initial factors use them.
        train_grid: training extent per axis of the encoding (``Extrapolation.train_grid``).
    """
    encoding: str
    axes: Tuple[str, ...]
    freqs: torch.Tensor
    train_grid: Tuple[float, ...]

    @property
    def num(self) -> int:
        return int(self.freqs.shape[-1])


def ladder_of(pe: Any) -> Ladder:
    """The :class:`Ladder` of a rotary encoding (``rope_axial``, ``rope_mixed``, ``rope3d``, ``multimodal_rope``).

    Raises:
        ValueError: another encoding (naming those that take ``longrope``), or no training grid.
    """
    from .registry import pos_encoding_name
    from .rotation import rope_frequencies
    name = pos_encoding_name(pe)
    ext = getattr(pe, 'extrapolation', None)
    if 'longrope' not in getattr(pe, 'extrapolation_strategies', ()):
        raise ValueError(f'the {name} encoding does not take longrope; the rotary encodings rope_axial, rope_mixed, '
                         'rope_mixed_ape, rope3d and multimodal_rope do')
    grid = ext.train_grid if ext is not None else None
    if name == 'multimodal_rope':
        theta = torch.as_tensor(getattr(pe, 'head_bases', None) or [pe.theta], dtype=torch.float64)
        n = pe.head_dim // 2
        freqs = torch.stack([rope_frequencies(n, float(t)) for t in theta]).mean(0, keepdim=True)
        axes = ('pairs',)
        grid = (max(grid),) if grid else None
    elif name == 'rope_axial':
        freqs = torch.stack([pe.bands, pe.bands])
        axes = ('rows', 'cols')
    elif name == 'rope3d':
        b = rope_frequencies(pe.sub // 2, pe.theta)
        freqs = torch.stack([b, b, b])
        axes = ('frames', 'rows', 'cols')
    else:  # rope_mixed(_ape): band magnitudes of the learned frequencies, per grid axis
        f = pe.freqs.detach().float().norm(dim=0)                                       # (depth, heads, n)
        ladder = pe._ladder()
        band = torch.arange(f.shape[-1]) % ladder
        mag = torch.stack([f[..., band == j].mean() for j in range(ladder)])
        axes = ('frames', 'rows', 'cols') if pe.video else ('rows', 'cols')
        freqs = mag.expand(len(axes), ladder).clone()
    if grid is None:
        raise ValueError(f'the {name} encoding has no training grid (extrapolation train_grid), which the factors '
                         'are relative to; fix: build it with its grid_size / extrapolation=dict(train_grid=...)')
    return Ladder(name, axes, freqs.float(), tuple(float(g) for g in grid))


def initial_factors(ladder: Ladder, scale: Sequence[float]) -> Dict[str, List[List[float]]]:
    """PI, NTK and YaRN written as LongRoPE factors ``lambda_i = theta_i / theta'_i`` per axis (the paper's
    initial population), for the per-axis factors ``scale`` (``s_a``)."""
    from .extrapolation import Extrapolation, ntk_exponents
    out: Dict[str, List[List[float]]] = {}
    e = ntk_exponents(ladder.num)
    for strategy in ('pi', 'ntk', 'yarn'):
        ext = Extrapolation(strategy, ladder.train_grid)
        rows = []
        for a in range(len(ladder.axes)):
            f = ladder.freqs[a]
            scaled = ext.frequencies(f, float(scale[a]), ladder.train_grid[a], e)
            rows.append(_monotone([max(1.0, float(v)) for v in (f / scaled.clamp(min=1e-30)).tolist()]))
        out[strategy] = rows
    return out


def _monotone(row: List[float]) -> List[float]:
    """Non-decreasing (each entry at least the one before), rounded to the search step."""
    out, top = [], 1.0
    for v in row:
        top = max(top, round(v / STEP) * STEP)
        out.append(round(top, 4))
    return out


# --------------------------------------------------------------------------------------------------- search
@dataclass
class SearchResult:
    """Outcome of :func:`evolution_search`.

    Attributes:
        factors, n_hat: the best candidate (per axis).
        loss: its mean validation loss.
        baselines: mean loss of ``none`` and of each initial strategy (``pi``, ``ntk``, ``yarn``).
        best_baseline: the name of the best baseline.
        decided: whether the validation set separates the best candidate from the best baseline (paired, 2 SE).
        message: one line saying so (or why not).
        history: best mean loss after each iteration.
        evaluations: candidates evaluated.
    """
    factors: List[List[float]]
    n_hat: List[float]
    loss: float
    baselines: Dict[str, float]
    best_baseline: str
    decided: bool
    message: str
    history: List[float] = field(default_factory=list)
    evaluations: int = 0


def paired_decision(best: torch.Tensor, base: torch.Tensor, what: str) -> Tuple[bool, str]:
    """Does the per-sample loss ``best`` beat ``base`` on the same samples (mean difference > 2 standard errors)?

    Returns:
        ``(decided, one line)``; undecided lines say the validation set is too small to decide.
    """
    d = (base - best).double()
    n = d.numel()
    mean = float(d.mean())
    se = float(d.std(unbiased=True) / math.sqrt(n)) if n > 1 else float('inf')
    if n > 1 and se == 0.0 and mean == 0.0:
        return False, (f'no candidate beat {what} on the {n} validation samples (the same loss on every one); the '
                       'file holds its factors: the validation set is too small to decide, or this is the best the '
                       'search finds; fix: use more validation samples or iterations')
    if mean > 2 * se:
        return True, f'the searched factors beat {what} by {mean:.4f} +- {se:.4f} mean loss on {n} validation samples'
    return False, (f'the validation set is too small to decide: the searched factors beat {what} by {mean:.4f} '
                   f'+- {se:.4f} mean loss on {n} samples (less than 2 standard errors); fix: use more validation '
                   'samples')


def evolution_search(ladder: Ladder, scale: Sequence[float], losses: Callable[[List[List[float]], List[float]],
                                                                               torch.Tensor],
                     population: int = 8, mutations: int = 4, crossovers: int = 4, parents: int = 4,
                     iterations: int = 3, n_hat_choices: Sequence[int] = N_HAT_CHOICES, seed: int = 0,
                     plain: Optional[Callable[[], torch.Tensor]] = None,
                     log: Optional[Callable[[str], None]] = None) -> SearchResult:
    """LongRoPE's evolutionary search (module docstring), small.

    Args:
        ladder: the encoding's geometry (:func:`ladder_of`).
        scale: per-axis target factors ``s_a`` (e.g. 2 for twice the training size).
        losses: ``losses(factors, n_hat)`` -> ``(N,)`` per-sample validation losses of the model under LongRoPE with
            these factors (lower is better); the same ``N`` samples every call.
        population, mutations, crossovers, parents, iterations: the loop's sizes (paper: 64, 16, 16, 32, 40).
        n_hat_choices: the ``n_hat`` space (positions; choices above the largest training extent are dropped).
        seed: the random generator's seed (the search is reproducible).
        plain: ``() -> (N,)`` losses without any strategy (reported as the ``none`` baseline).
        log: receives one line per iteration.

    Returns:
        :class:`SearchResult`.

    Raises:
        ValueError: sizes below 1, ``parents > population``, or fewer than 2 validation samples.
    """
    if min(population, parents, iterations) < 1 or min(mutations, crossovers) < 0 or parents > population:
        raise ValueError(f'search sizes: population {population}, parents {parents} (<= population), iterations '
                         f'{iterations} must be >= 1; mutations {mutations}, crossovers {crossovers} >= 0')
    rng = random.Random(seed)
    num_axes, n = len(ladder.axes), ladder.num
    hi = [1.25 * max(1.0, float(s)) for s in scale]
    nh = sorted({c for c in n_hat_choices if c < max(ladder.train_grid)}) or [0]
    cache: Dict[tuple, torch.Tensor] = {}

    def key(c):
        return tuple(tuple(r) for r in c[0]), tuple(c[1])

    def evaluate(c) -> torch.Tensor:
        k = key(c)
        if k not in cache:
            cache[k] = losses([list(r) for r in c[0]], list(c[1])).detach().double().flatten()
            if cache[k].numel() < 2:
                raise ValueError(f'the validation set has {cache[k].numel()} sample(s): too small to decide between '
                                 'candidates; fix: use more validation samples')
        return cache[k]

    def clip(row, a):
        return _monotone([min(hi[a], max(1.0, v)) for v in row])

    def mutate(c):
        rows = [list(r) for r in c[0]]
        for a in range(num_axes):
            for i in range(n):
                if rng.random() < 0.3:
                    rows[a][i] += rng.choice((-1, 1)) * rng.randint(1, 20) * STEP * max(1.0, hi[a] / 2)
            rows[a] = clip(rows[a], a)
        n_hat = [rng.choice(nh) if rng.random() < 0.3 else v for v in c[1]]
        return rows, n_hat

    def crossover(c1, c2):
        rows = [clip([c1[0][a][i] if rng.random() < 0.5 else c2[0][a][i] for i in range(n)], a)
                for a in range(num_axes)]
        n_hat = [c1[1][a] if rng.random() < 0.5 else c2[1][a] for a in range(num_axes)]
        return rows, n_hat

    init = initial_factors(ladder, scale)
    seeds = [(init[s], [0.0] * num_axes) for s in ('pi', 'ntk', 'yarn')]
    baselines = {s: float(evaluate(c).mean()) for s, c in zip(('pi', 'ntk', 'yarn'), seeds)}
    base_losses = {s: evaluate(c) for s, c in zip(('pi', 'ntk', 'yarn'), seeds)}
    if plain is not None:
        base_losses['none'] = plain().detach().double().flatten()
        baselines['none'] = float(base_losses['none'].mean())
    pop = list(seeds)
    while len(pop) < population:
        pop.append(mutate(rng.choice(seeds)))
    history = []
    for it in range(iterations):
        scored = sorted(pop, key=lambda c: float(evaluate(c).mean()))
        top = scored[:parents]
        history.append(float(evaluate(top[0]).mean()))
        if log:
            log(f'iteration {it + 1}/{iterations}: best mean loss {history[-1]:.4f} ({len(cache)} candidates '
                'evaluated)')
        children = [mutate(rng.choice(top)) for _ in range(mutations)]
        children += [crossover(rng.choice(top), rng.choice(top)) for _ in range(crossovers)]
        pop = top + children
    best = min(pop, key=lambda c: float(evaluate(c).mean()))
    best_name = min(baselines, key=baselines.get)
    decided, message = paired_decision(evaluate(best), base_losses[best_name], f'the best baseline ({best_name})')
    return SearchResult([list(r) for r in best[0]], list(best[1]), float(evaluate(best).mean()), baselines,
                        best_name, decided, message, history, len(cache))
