"""Training-free extrapolation strategies for rotary encodings (and the matching coordinate choice for sin-cos and
Fourier features): how frequencies and positions change when a model runs on a larger grid (or more frames, or a
longer sequence) than it was trained on.

Notation: a rotary pair turns by ``m * theta_d`` at position ``m`` (``theta_d`` in radians per position unit); per
axis ``a``, ``L_a`` is the training extent (positions) and ``s_a = max(1, L'_a / L_a)`` the factor of the evaluated
extent ``L'_a`` (patch rows, patch columns, frames / tubelets, or the span of explicit position ids). Every strategy
leaves a grid no larger than the training grid exactly unchanged.

* ``none``: today's behaviour, ``theta'_d = theta_d`` (integer positions extrapolate).
* ``pi``: Position Interpolation, Chen et al. 2023, "Extending Context Window of Large Language Models via Positional
  Interpolation" (arXiv:2306.15595), Eq. 4: ``f'(x, m) = f(x, m L / L')``, i.e. ``theta'_d = theta_d / s``.
* ``ntk``: NTK-aware base scaling (bloc97, 2023; as written in the YaRN paper, Sec. 3.2):
  ``b' = b * s^(|D| / (|D| - 2))``. With ``theta_d = b^(-2d/|D|)`` this is ``theta'_d = theta_d * s^(-2d / (|D| - 2))``,
  ``d = 0 .. |D|/2 - 1``: the highest frequency is kept, the lowest is interpolated by exactly ``1/s``. Written per
  band as ``theta'_d = theta_d * s^(-e_d)`` with ``e_d = d / (n - 1)`` for ``n`` bands of one geometric ladder (an axis
  of RoPE-Axial / 3D RoPE: its ``n`` bands; a 1D multimodal head: ``n = |D|/2``; RoPE-Mixed: the band index of each
  pair in its initialisation ladder).
* ``yarn``: YaRN, Peng et al. 2023, "YaRN: Efficient Context Window Extension of Large Language Models"
  (arXiv:2309.00071), Sec. 3.2-3.4 ("NTK-by-parts" + temperature): with ``r_d = L / lambda_d = L * |theta_d| / (2 pi)``
  (how many turns the pair makes over the training extent) and the ramp ``gamma(r) = 0 if r < alpha, 1 if r > beta,
  (r - alpha) / (beta - alpha) otherwise``, ``theta'_d = (1 - gamma(r_d)) * theta_d / s + gamma(r_d) * theta_d``
  (pairs that turn less than ``alpha`` times are interpolated, more than ``beta`` times kept; ``alpha = 1``,
  ``beta = 32`` as for LLaMA). Attention temperature: ``softmax(q^T k / (t sqrt(|D|)))`` with
  ``sqrt(1/t) = 0.1 ln(s) + 1``; applied through the encoding's own term by scaling the rotation tables (sin and cos)
  by ``sqrt(1/t)``, so q and k are each scaled by it and every logit by ``1/t`` (no attention-side branch; prefix
  tokens, which rotate by angle 0, are scaled alike). The ``s`` of the temperature is the token-count ratio of a grid
  (``prod_a s_a``; 1D: ``s``), and for explicit-id schemes (video-LLMs) the largest ``s_a`` (text: the context ratio).

* ``mspoe``: Ms-PoE, Zhang et al. 2024, "Found in the Middle: How Language Models Use Long Contexts Better via
  Plug-and-Play Positional Encoding" (arXiv:2403.04797), Sec. 3: training-free, per head. Head ``n`` reads positions
  ``m / r_n`` with ratios ``r`` from ``ratio_min`` to ``ratio_max`` (1.2 and 1.8) over the heads, assigned by a head
  order (``'normal'``: reversed head index; ``'outlier'``: heads sorted by their share of outlier attention weights,
  the most position-aware head getting the smallest ratio; or an explicit permutation). The multimodal RoPE of the
  video-LLM decoder takes it on key heads (under GQA every query head of a group shares its group's ratio; see
  :mod:`zoo.encodings.multimodal.mspoe` and ``docs/mspoe.md`` for the rule, the options and the official code's
  bugs), and the image / video RoPE encodings (``rope_axial``, ``rope_mixed``, ``rope3d``) per head and per axis
  (option ``axes``: which grid axes are compressed; :mod:`zoo.encodings.mspoe_axes`). Unlike the strategies above it
  also changes a grid no larger than the training grid (it is a re-reading of positions, not a size adaptation).
* ``longrope``: LongRoPE, Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million Tokens"
  (arXiv:2402.13753), Sec. 3.2, Eq. 3: per-frequency rescale factors ``lambda_i`` with the first ``n_hat``
  positions not interpolated: pair ``i`` turns by ``n * theta_i`` for ``n < n_hat`` and by ``n * theta_i / lambda_i``
  for ``n >= n_hat``. Per axis: ``lambda_{a,i}`` and ``n_hat_a`` of axis ``a`` (its ``i``-th frequency of the
  axis's ladder; RoPE-Mixed: the band index of the pair in its initialisation ladder, as for NTK; the multimodal
  decoder: the pair index ``j`` of ``theta^(-2j / head_dim)``, whatever axis the scheme gives the pair). Applied
  only on axes whose factor ``s_a > 1`` (a grid no larger than the training grid is unchanged, as above); no
  attention temperature. The factors come from a file (:func:`zoo.encodings.longrope.load_factors`, written by
  ``zoo search-longrope``: ``extrapolation='longrope=FILE'`` or ``dict(strategy='longrope', factors_file=FILE)``) or
  are given (``factors``, ``n_hat``).

Additive encodings (``sincos``, ``fourier``) have the matching coordinate choice: ``none`` (integer patch
coordinates, extrapolated) or ``pi`` (coordinates rescaled by ``L_a / L'_a`` per axis, so a larger grid covers the
trained range). NTK and YaRN change rotary frequencies and the attention temperature and do not apply to them.

An encoding owns its strategy: it is built with ``extrapolation=...`` (a model's ``pe_kwargs``), read through
``PosEncoding.extrapolation``, validated without any change by ``PosEncoding.check_extrapolation(strategy)`` and
switched by ``PosEncoding.set_extrapolation(strategy)``, which also drops the encoding's cached tables.
:func:`set_extrapolation` and :func:`extrapolation_of` below are those methods as functions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

import torch

__all__ = ['STRATEGIES', 'COORDINATE_STRATEGIES', 'HEAD_STRATEGIES', 'FACTOR_STRATEGIES', 'ROTARY_STRATEGIES',
           'ALL_STRATEGIES', 'MSPOE_OPTIONS', 'LONGROPE_OPTIONS', 'Extrapolation', 'ntk_exponents', 'yarn_ramp',
           'set_extrapolation', 'extrapolation_of', 'strategy_name', 'strategy_argument']

STRATEGIES = ('none', 'pi', 'ntk', 'yarn')
COORDINATE_STRATEGIES = ('none', 'pi')
#: Per-head strategies (Ms-PoE); taken by the encodings that list them (``multimodal_rope``, ``rope_axial``,
#: ``rope_mixed``, ``rope3d``).
HEAD_STRATEGIES = ('mspoe',)
#: Per-frequency strategies with factors from a search (LongRoPE); taken by the same rotary encodings.
FACTOR_STRATEGIES = ('longrope',)
#: Everything a rotary encoding with fixed ladders takes.
ROTARY_STRATEGIES = STRATEGIES + FACTOR_STRATEGIES + HEAD_STRATEGIES
ALL_STRATEGIES = ROTARY_STRATEGIES
#: Ms-PoE's options and defaults (:mod:`zoo.encodings.multimodal.mspoe`); ``axes`` (grid / id axes compressed,
#: ``None`` = all) is per axis.
MSPOE_OPTIONS = {'ratio_min': 1.2, 'ratio_max': 1.8, 'head_order': 'normal', 'layers': None, 'official': False,
                 'axes': None}
#: LongRoPE's options: ``factors`` (lambda_i: one list for every axis, or one list per axis), ``n_hat`` (int or one
#: per axis), ``factors_file`` (a JSON file from ``zoo search-longrope`` that holds both).
LONGROPE_OPTIONS = {'factors': None, 'n_hat': 0, 'factors_file': None}


def strategy_name(value: Any) -> str:
    """The strategy name of an option value: ``'longrope=FILE'`` -> ``'longrope'``; a dict's ``strategy``."""
    if isinstance(value, Mapping):
        value = value.get('strategy', 'none')
    if isinstance(value, Extrapolation):
        return value.strategy
    return str(value or 'none').split('=', 1)[0]


def strategy_argument(text: str) -> str:
    """``argparse`` type of ``--extrapolation``: a strategy name (:data:`ALL_STRATEGIES`) or ``longrope=FILE``.

    Raises:
        argparse.ArgumentTypeError: an unknown name, ``longrope`` without a file, or a file for another strategy.
    """
    import argparse
    name, sep, arg = text.partition('=')
    if name not in ALL_STRATEGIES:
        raise argparse.ArgumentTypeError(f'unknown strategy {text!r}; choose from {", ".join(ALL_STRATEGIES)} '
                                         '(longrope as longrope=FILE, the factors file of zoo search-longrope)')
    if name == 'longrope' and not arg:
        raise argparse.ArgumentTypeError('longrope needs its factors file: --extrapolation longrope=FILE (written by '
                                         'zoo search-longrope)')
    if sep and name != 'longrope':
        raise argparse.ArgumentTypeError(f'{text!r}: only longrope takes a file (longrope=FILE)')
    return text


def ntk_exponents(num_bands: int, device: Optional[torch.device] = None, period: Optional[int] = None) -> torch.Tensor:
    """NTK exponents ``e_d = j / (m - 1)`` for ``num_bands`` pairs, ``j = d mod m`` (``m = period`` or ``num_bands``):
    0 for the highest frequency of a ladder, 1 for its lowest. ``(num_bands,)`` float32 (a 1-band ladder gets 1)."""
    m = period or num_bands
    j = torch.arange(num_bands, device=device, dtype=torch.float32) % m
    return j / (m - 1) if m > 1 else torch.ones_like(j)


def yarn_ramp(r: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
    """YaRN's ramp ``gamma(r)``: 0 below ``alpha``, 1 above ``beta``, linear between (same shape as ``r``)."""
    return ((r - alpha) / (beta - alpha)).clamp(0.0, 1.0)


@dataclass(frozen=True)
class Extrapolation:
    """One strategy with its options, as held by an encoding.

    Attributes:
        strategy: ``'none'``, ``'pi'``, ``'ntk'``, ``'yarn'``, ``'mspoe'`` or ``'longrope'``.
        train_grid: training extent per axis, in the encoding's position units (the model's ``grid_size`` in
            patches ``(H, W)`` / ``(T, H, W)``; for explicit-id schemes the span of ids seen in training per axis).
        alpha, beta: YaRN's ramp bounds (turns over the training extent); 1 and 32 as in the paper.
        mspoe: Ms-PoE's options as sorted ``(key, value)`` pairs (:data:`MSPOE_OPTIONS`), empty otherwise.
        longrope: LongRoPE's ``(factors, n_hat, factors_file)``: ``factors`` a tuple of per-axis tuples of
            ``lambda_i`` (one tuple: every axis), ``n_hat`` a tuple of per-axis ints (one: every axis); empty
            otherwise.
    """
    strategy: str = 'none'
    train_grid: Optional[Tuple[float, ...]] = None
    alpha: float = 1.0
    beta: float = 32.0
    mspoe: Tuple[Tuple[str, Any], ...] = ()
    longrope: Tuple[Any, ...] = ()

    @classmethod
    def parse(cls, value: Union[None, str, Mapping[str, Any], 'Extrapolation'], train_grid: Optional[Sequence] = None,
              allowed: Sequence[str] = STRATEGIES, encoding: str = 'this encoding') -> 'Extrapolation':
        """Build from an encoding option: a strategy name (``'longrope=FILE'`` for LongRoPE's factors file), or a dict
        ``{'strategy', 'train_grid', 'alpha', 'beta'}`` plus the options of ``mspoe`` (:data:`MSPOE_OPTIONS`) or
        ``longrope`` (:data:`LONGROPE_OPTIONS`) (``train_grid`` defaults to the model's grid).

        Raises:
            ValueError: unknown strategy or key, a strategy ``encoding`` does not support, bad ``train_grid`` or ramp.
        """
        if isinstance(value, Extrapolation):
            opts = dict(strategy=value.strategy, train_grid=value.train_grid, alpha=value.alpha, beta=value.beta,
                        **dict(value.mspoe))
            if value.longrope:
                opts.update(zip(('factors', 'n_hat', 'factors_file'), value.longrope))
        elif value is None or isinstance(value, str):
            opts = dict(strategy=value or 'none')
        elif isinstance(value, Mapping):
            unknown = sorted(set(value) - {'strategy', 'train_grid', 'alpha', 'beta', *MSPOE_OPTIONS,
                                           *LONGROPE_OPTIONS})
            if unknown:
                raise ValueError(f'{encoding}: unknown extrapolation options {unknown}; use strategy, train_grid, '
                                 'alpha, beta (e.g. dict(strategy="yarn", train_grid=(14, 14))), the mspoe options '
                                 f'{list(MSPOE_OPTIONS)} or the longrope options {list(LONGROPE_OPTIONS)}')
            opts = dict(value)
        else:
            raise ValueError(f'{encoding}: extrapolation must be a strategy name {ALL_STRATEGIES} or a dict, got '
                             f'{type(value).__name__}')
        strategy = opts.get('strategy', 'none') or 'none'
        if isinstance(strategy, str) and '=' in strategy:  # 'longrope=FILE'
            strategy, _, path = strategy.partition('=')
            if strategy != 'longrope':
                raise ValueError(f'{encoding}: only longrope takes a file (longrope=FILE), got {opts["strategy"]!r}')
            opts['factors_file'] = path
        opts['strategy'] = strategy
        if strategy not in ALL_STRATEGIES:
            raise ValueError(f'{encoding}: unknown extrapolation strategy {strategy!r}; choose one of {STRATEGIES} '
                             '(none, position interpolation, NTK-aware scaling, YaRN), mspoe (Ms-PoE) or '
                             'longrope=FILE (LongRoPE)')
        if strategy in HEAD_STRATEGIES + FACTOR_STRATEGIES and strategy not in allowed:
            what = 'per-head position scales' if strategy == 'mspoe' else 'per-frequency factors'
            raise ValueError(f'{encoding}: extrapolation {strategy!r} ({what}) is taken only by the rotary encodings '
                             f'({", ".join(_takers(strategy))}); fix: use one of '
                             f'{tuple(allowed)} here')
        if strategy not in allowed:
            raise ValueError(f'{encoding}: extrapolation {strategy!r} does not apply to it (it supports '
                             f'{tuple(allowed)}): NTK and YaRN rescale rotary frequencies and the attention '
                             'temperature; additive sin-cos / Fourier features take none (integer coordinates) or '
                             'pi (rescaled)')
        grid = opts.get('train_grid', None)
        if grid is None:
            grid = train_grid
        if grid is not None:
            try:
                grid = tuple(float(g) for g in grid)
            except TypeError:
                raise ValueError(f'{encoding}: train_grid must be a sequence of extents, got {grid!r}') from None
            if not grid or min(grid) <= 0:
                raise ValueError(f'{encoding}: train_grid extents must be positive, got {grid}')
        alpha, beta = float(opts.get('alpha', 1.0)), float(opts.get('beta', 32.0))
        if not 0 <= alpha < beta:
            raise ValueError(f'{encoding}: YaRN needs 0 <= alpha < beta, got alpha={alpha}, beta={beta}')
        mspoe = ()
        if strategy == 'mspoe':
            from .multimodal.mspoe import check_mspoe_options  # the options' rules live with the method
            mspoe = check_mspoe_options({k: opts.get(k, v) for k, v in MSPOE_OPTIONS.items()}, encoding)
        elif any(k in opts and opts[k] != MSPOE_OPTIONS[k] for k in MSPOE_OPTIONS):
            raise ValueError(f'{encoding}: the options {sorted(k for k in MSPOE_OPTIONS if k in opts)} belong to '
                             f"extrapolation 'mspoe', not {strategy!r}")
        longrope = ()
        if strategy == 'longrope':
            from .longrope import check_longrope_options  # the options' rules and the file format live there
            longrope, file_grid = check_longrope_options({k: opts.get(k, v) for k, v in LONGROPE_OPTIONS.items()},
                                                         encoding)
            if grid is None and file_grid is not None:
                grid = file_grid
        elif any(k in opts and opts[k] != LONGROPE_OPTIONS[k] for k in LONGROPE_OPTIONS):
            raise ValueError(f'{encoding}: the options {sorted(k for k in LONGROPE_OPTIONS if k in opts)} belong to '
                             f"extrapolation 'longrope', not {strategy!r}")
        return cls(strategy, grid, alpha, beta, mspoe, longrope)

    @property
    def active(self) -> bool:
        return self.strategy != 'none'

    def factors(self, extent: Sequence, encoding: str = 'this encoding') -> Tuple[float, ...]:
        """Per-axis factors ``s_a = max(1, extent_a / train_a)`` (all 1 for ``none``).

        Raises:
            ValueError: an active strategy without a training grid, or one with another number of axes.
        """
        if not self.active:  # before any float(): sizes stay symbolic under torch.export
            return (1.0,) * len(extent)
        extent = tuple(float(e) for e in extent)
        if self.train_grid is None:
            raise ValueError(f'{encoding}: extrapolation {self.strategy!r} needs the training extent per axis; pass '
                             f'extrapolation=dict(strategy={self.strategy!r}, train_grid=(...))')
        if len(self.train_grid) != len(extent):
            raise ValueError(f'{encoding}: train_grid {self.train_grid} has {len(self.train_grid)} axes but the '
                             f'positions have {len(extent)} ({extent})')
        return tuple(max(1.0, e / t) for e, t in zip(extent, self.train_grid))

    def frequencies(self, freqs: torch.Tensor, factor: float, train_length: float,
                    exponents: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Scaled frequencies ``theta'`` of one axis (formulas in the module docstring).

        Args:
            freqs: ``(..., n)`` radians per position unit (signed; learned ones too), any float dtype.
            factor: ``s`` of this axis (1 leaves ``freqs`` untouched, also for ``ntk`` and ``yarn``).
            train_length: ``L`` of this axis (YaRN's ramp).
            exponents: ``(n,)`` NTK exponents ``e_d`` (:func:`ntk_exponents`); needed for ``ntk``.

        Returns:
            Same shape and dtype as ``freqs`` (differentiable: learned frequencies keep their gradient).
        """
        if not self.active or factor == 1.0 or self.strategy in HEAD_STRATEGIES + FACTOR_STRATEGIES:
            return freqs  # LongRoPE rescales positions per frequency (positions()); Ms-PoE per head
        if self.strategy == 'pi':
            return freqs / factor
        if self.strategy == 'ntk':
            if exponents is None:
                raise ValueError('ntk needs the band exponents of the frequencies (ntk_exponents)')
            return freqs * factor ** (-exponents.to(freqs.device, freqs.dtype))
        gamma = yarn_ramp(train_length * freqs.detach().abs() / (2 * math.pi), self.alpha, self.beta)
        return (1 - gamma) * freqs / factor + gamma * freqs

    def lambdas(self, axis: int, num: int, device: Optional[torch.device] = None,
                period: Optional[int] = None) -> torch.Tensor:
        """LongRoPE's ``lambda_i`` of axis ``axis`` for ``num`` pairs ``(num,)`` float32 (pair ``i`` takes entry
        ``i mod period`` when ``period`` is given: RoPE-Mixed's ladders).

        Raises:
            ValueError: not ``longrope``, or a factor list whose length is not the axis's frequency count.
        """
        if self.strategy != 'longrope':
            raise ValueError(f'lambdas() belongs to longrope, not {self.strategy!r}')
        factors = self.longrope[0]
        if len(factors) > 1 and axis >= len(factors):
            raise ValueError(f'longrope factors have {len(factors)} axis lists but the positions have axis {axis}; '
                             'fix: one list per axis, or one list for every axis')
        row = factors[axis if len(factors) > 1 else 0]
        m = period or num
        if len(row) != m:
            raise ValueError(f'longrope factors have {len(row)} entries for axis {axis} but the encoding has {m} '
                             'frequencies there; fix: search factors for this model (zoo search-longrope) or pass '
                             f'{m} lambda_i per axis')
        lam = torch.tensor(row, dtype=torch.float32, device=device)
        return lam[torch.arange(num, device=device) % m] if period else lam

    def n_hat(self, axis: int) -> float:
        """LongRoPE's ``n_hat`` of axis ``axis`` (positions below it are not interpolated)."""
        n = self.longrope[1]
        return float(n[axis if len(n) > 1 else 0])

    def positions(self, coords: torch.Tensor, axis: int, factor: float, num: int,
                  period: Optional[int] = None) -> torch.Tensor:
        """Positions of axis ``axis`` per frequency, to multiply by the frequencies ``(..., num)``: ``coords[...,
        None]`` (broadcasts) for every strategy but ``longrope``, which gives ``n`` below ``n_hat`` and
        ``n / lambda_i`` from it on (when the axis's factor ``s_a > 1``).

        Args:
            coords: ``(...,)`` positions (float).
            axis: the axis index (grid order: rows, cols / t, rows, cols; explicit ids: the id axis).
            factor: ``s_a`` of the axis.
            num: frequencies of the axis (the last dim of the frequencies multiplied).
            period: RoPE-Mixed's ladder length (pair ``i`` uses ``lambda_{i mod period}``).

        Returns:
            ``(..., 1)`` or ``(..., num)``, the dtype of ``coords``.
        """
        c = coords[..., None]
        if self.strategy != 'longrope' or factor <= 1.0:
            return c
        lam = self.lambdas(axis, num, coords.device, period).to(coords.dtype)
        return torch.where(c >= self.n_hat(axis), c / lam, c)

    def grid_positions(self, coords: torch.Tensor, factors: Optional[Sequence[float]], num: int) -> torch.Tensor:
        """:meth:`positions` of every axis of ``coords`` ``(..., A)``: ``(..., A, 1)`` or ``(..., A, num)``."""
        if self.strategy != 'longrope' or factors is None or all(f <= 1.0 for f in factors):
            return coords[..., None]
        return torch.stack([self.positions(coords[..., a], a, f, num).expand(*coords.shape[:-1], num)
                            for a, f in enumerate(factors)], dim=-2)

    def attention_scale(self, factor: float) -> float:
        """YaRN's ``sqrt(1/t) = 0.1 ln(s) + 1`` for temperature factor ``s`` (1 for the other strategies or s <= 1);
        multiply both sin and cos tables by it."""
        if self.strategy != 'yarn' or factor <= 1.0:
            return 1.0
        return 0.1 * math.log(factor) + 1.0

    def grid_attention_scale(self, factors: Sequence[float]) -> float:
        """:meth:`attention_scale` of a grid: ``s = prod_a s_a`` (the token-count ratio)."""
        return self.attention_scale(math.prod(factors))

    def coords(self, coords: torch.Tensor, factors: Sequence[float]) -> torch.Tensor:
        """Positions ``(..., A)`` for additive encodings: unchanged (``none``), or divided by ``s_a`` per axis
        (``pi``: the evaluated grid covers the trained range)."""
        if self.strategy != 'pi' or all(f == 1.0 for f in factors):
            return coords
        return coords / torch.tensor(factors, dtype=coords.dtype, device=coords.device)

    def key(self) -> tuple:
        """Cache-key part."""
        return (self.strategy, self.train_grid, self.alpha, self.beta, self.mspoe, self.longrope)

    def describe(self) -> str:
        """One line for reports."""
        if not self.active:
            return 'none (integer positions extrapolate)'
        if self.strategy == 'mspoe':
            o = dict(self.mspoe)
            axes = f", axes {list(o['axes'])}" if o.get('axes') is not None else ''
            return (f"mspoe (ratios {o['ratio_min']:g}..{o['ratio_max']:g}, head order {o['head_order']}"
                    f"{', official' if o['official'] else ''}{axes})")
        grid = 'x'.join(f'{g:g}' for g in self.train_grid) if self.train_grid else '?'
        if self.strategy == 'longrope':
            factors, n_hat, path = self.longrope
            src = f'factors {path}' if path else f'{sum(len(f) for f in factors)} factors'
            return f'longrope ({src}, n_hat {"/".join(f"{n:g}" for n in n_hat)}, training grid {grid})'
        extra = f', YaRN ramp alpha={self.alpha:g}, beta={self.beta:g}' if self.strategy == 'yarn' else ''
        return f'{self.strategy} (training grid {grid}{extra})'


def _takers(strategy: str) -> list:
    """Registered encodings that take ``strategy`` (for error messages)."""
    try:
        from .registry import get_pos_encoding_class, list_pos_encodings
        return [n for n in list_pos_encodings()
                if strategy in getattr(get_pos_encoding_class(n), 'extrapolation_strategies', ())]
    except Exception:  # noqa: BLE001  (a message helper never hides the real error)
        return []


def extrapolation_of(encoding: Any) -> Optional[Extrapolation]:
    """``encoding.extrapolation``: the :class:`Extrapolation` an encoding holds, or ``None`` when it takes no strategy
    (or is no encoding, e.g. ``None``). Prefer the property :attr:`PosEncoding.extrapolation`."""
    ext = getattr(encoding, 'extrapolation', None)
    return ext if isinstance(ext, Extrapolation) else None


def set_extrapolation(encoding: Any, strategy: Union[str, Mapping[str, Any]]) -> None:
    """``encoding.set_extrapolation(strategy)`` (:meth:`PosEncoding.set_extrapolation`): switch an encoding (e.g.
    ``model.pe``) to another strategy at run time, keeping its training grid and ramp unless ``strategy`` is a dict
    that sets them.

    Raises:
        ValueError: unknown strategy, or a strategy the encoding does not take (see
            :meth:`PosEncoding.check_extrapolation`).
    """
    encoding.set_extrapolation(strategy)
