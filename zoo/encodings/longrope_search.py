"""LongRoPE's evolutionary search of per-frequency factors (Ding et al. 2024, Sec. 3.2), CPU-sized: the frequency
ladder of an encoding, the paper's initial population (PI, NTK and YaRN as factors, plus
``none``: all factors 1), mutation and crossover under the
monotone constraint, and the paired decision whether the best candidate beats the baselines. The factors file and the
options are :mod:`zoo.encodings.longrope`; ``zoo search-longrope`` (:mod:`zoo.sweep.search_longrope`) runs it.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from .extrapolation import Extrapolation, ntk_exponents
from .longrope import N_HAT_CHOICES, STEP
from .registry import pos_encoding_name
from .rotation import rope_frequencies

__all__ = ['Ladder', 'ladder_of', 'initial_factors', 'evolution_search', 'SearchResult', 'paired_decision']


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
        verdict: :func:`paired_decision` of the best candidate against the best baseline: ``'better'``,
            ``'worse'`` or ``'undecided'``.
        message: one line saying so (or why not).
        history: best mean loss after each iteration.
        evaluations: candidates evaluated.
    """
    factors: List[List[float]]
    n_hat: List[float]
    loss: float
    baselines: Dict[str, float]
    best_baseline: str
    verdict: str
    message: str
    history: List[float] = field(default_factory=list)
    evaluations: int = 0

    @property
    def decided(self) -> bool:
        """The searched factors beat the best baseline (verdict ``'better'``)."""
        return self.verdict == 'better'


def paired_decision(best: torch.Tensor, base: torch.Tensor, what: str) -> Tuple[str, str]:
    """Compare the per-sample losses ``best`` and ``base`` (``(N,)``, the same ``N`` samples): the paired mean
    difference ``base - best`` against 2 standard errors.

    Returns:
        ``(verdict, one line)``: verdict ``'better'`` (``best`` lower by more than 2 SE), ``'worse'`` (higher by more
        than 2 SE: the line says ``what`` wins) or ``'undecided'`` (within 2 SE, or the same loss on every sample:
        the line says the validation set is too small to decide).
    """
    d = (base - best).double()
    n = d.numel()
    mean = float(d.mean())
    se = float(d.std(unbiased=True) / math.sqrt(n)) if n > 1 else float('inf')
    if n > 1 and se == 0.0 and mean == 0.0:
        return 'undecided', (f'no candidate beat {what} on the {n} validation samples (the same loss on every one): '
                             'the validation set is too small to decide, or this is the best the search finds; fix: '
                             'use more validation samples or iterations')
    if mean > 2 * se:
        return 'better', (f'the searched factors beat {what} by {mean:.4f} +- {se:.4f} mean loss on {n} validation '
                          'samples')
    if -mean > 2 * se:
        return 'worse', (f'{what} wins: the searched factors lose to it by {-mean:.4f} +- {se:.4f} mean loss on {n} '
                         'validation samples (more than 2 standard errors); use it instead of these factors')
    return 'undecided', (f'the validation set is too small to decide: the searched factors beat {what} by '
                         f'{mean:.4f} +- {se:.4f} mean loss on {n} samples (less than 2 standard errors); fix: use '
                         'more validation samples')


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
        plain: ``() -> (N,)`` losses without any strategy (the ``none`` baseline; without it, ``none`` is the
            losses of all factors 1, n_hat 0, which is also in the starting population).
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
    init['none'] = [[1.0] * n for _ in range(num_axes)]  # all factors 1, n_hat 0: LongRoPE doing nothing
    names = ('none', 'pi', 'ntk', 'yarn')
    seeds = [(init[s], [0.0] * num_axes) for s in names]
    base_losses = {s: evaluate(c) for s, c in zip(names, seeds)}
    if plain is not None:  # the model without any strategy (the same as factors 1 when LongRoPE is exact)
        base_losses['none'] = plain().detach().double().flatten()
    baselines = {s: float(v.mean()) for s, v in base_losses.items()}
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
    verdict, message = paired_decision(evaluate(best), base_losses[best_name], f'the best baseline ({best_name})')
    return SearchResult([list(r) for r in best[0]], list(best[1]), float(evaluate(best).mean()), baselines,
                        best_name, verdict, message, history, len(cache))
