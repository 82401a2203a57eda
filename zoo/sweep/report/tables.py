"""Markdown tables of sweep rows: one pivot (rows x columns of a metric, best per column in bold, training cell marked,
failed cells named) that every page uses, relative and per-strategy tables, and reading a table back from a page."""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

import pandas as pd

__all__ = ['fmt', 'cell', 'split_row', 'pivot_markdown', 'markdown_table', 'relative_to_train', 'relative_table',
           'has_strategies', 'strategy_tables', 'rows_from_markdown', 'SEED_SUFFIX']

#: A label's seed or repeat suffix (``rope_mixed (seed 1)``, ``ape #2``).
SEED_SUFFIX = re.compile(r'\s*\(seed \d+\)|\s*#\d+$')


def fmt(value: Any, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals, ``n/a`` for a missing value."""
    return 'n/a' if value is None or pd.isna(value) else f'{value:.{digits}f}'


def cell(value: Any) -> str:
    """``value`` as the text of one markdown table cell: ``|`` escaped, line breaks as spaces (a PE description such as
    "saturates at |offset| >= 4" would otherwise split the row)."""
    return ' '.join(str(value).split()).replace('|', '\\|')


def split_row(line: str) -> List[str]:
    """The cells of a markdown table row, escaped ``|`` inside cells kept (the inverse of :func:`cell`)."""
    parts = re.split(r'(?<!\\)\|', line.strip())
    if parts and not parts[0].strip():
        parts = parts[1:]
    if parts and not parts[-1].strip():
        parts = parts[:-1]
    return [p.replace('\\|', '|').strip() for p in parts]


def pivot_markdown(df: pd.DataFrame, index: str, columns: str, value: str = 'top1', unit: str = '',
                   mark: Optional[Dict[Any, Any]] = None, bold_best: bool = True, digits: int = 1,
                   higher_is_better: bool = True, index_title: Optional[str] = None,
                   lead: Optional[tuple] = None) -> str:
    """Markdown table of ``value`` with rows ``index`` (in order of appearance) and columns ``columns`` (sorted).

    Args:
        df: rows with the ``index``, ``columns`` and ``value`` columns (and ``error``: a failed cell reads "failed").
        unit: appended to every column heading (``px``, ``f``).
        mark: ``row -> column value`` cells to mark with ``◦`` (each model's training size or clip).
        bold_best: the best value of every column (ties too) in bold.
        higher_is_better: best = highest (else lowest).
        index_title: the first heading (default: ``index``).
        lead: ``(heading, {row: text})``: a column after the first (e.g. the training size).
    """
    wide = df.pivot_table(index=index, columns=columns, values=value, sort=False, dropna=False)
    rows = list(dict.fromkeys(df[index]))
    wide = wide.reindex(rows)
    wide = wide.reindex(columns=sorted(wide.columns))
    failed = set()
    if 'error' in df:
        failed = {(r[index], r[columns]) for _, r in df.iterrows() if isinstance(r['error'], str) and r['error']}
    cols = list(wide.columns)
    best = wide.max() if higher_is_better else wide.min()
    heads = [cell(h) for h in [index_title or index] + ([lead[0]] if lead else []) + [f'{c} {unit}'.strip()
                                                                                          for c in cols]]
    lines = ['| ' + ' | '.join(heads) + ' |', '|' + '---|' * len(heads)]
    for r in rows:
        cells = []
        for c in cols:
            v = wide.loc[r, c]
            text = 'failed' if (r, c) in failed else fmt(v, digits)
            if bold_best and not pd.isna(v) and round(v, digits) == round(best[c], digits):
                text = f'**{text}**'
            if mark is not None and mark.get(r) == c:
                text += ' ◦'
            cells.append(text)
        lines.append(f'| {cell(r)} | ' + (f'{cell(lead[1].get(r, ""))} | ' if lead else '') + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def markdown_table(df: pd.DataFrame, metric: str, digits: int = 2, higher_is_better: bool = True) -> str:
    """A model x size markdown table of ``metric`` (the resolution page's): best of every size in bold (ties too),
    each model's training size marked ``◦``, a "trained at" column.

    Args:
        df: one row per (label, size) with columns ``label``, ``size``, ``train_size`` and ``metric``.
        metric: the column to tabulate, e.g. ``top1``.
    """
    train = df.groupby('label', sort=False)['train_size'].first()
    return pivot_markdown(df, 'label', 'size', metric, 'px', mark=train.to_dict(), digits=digits,
                          higher_is_better=higher_is_better, index_title='model',
                          lead=('trained at', {k: f'{v} px' for k, v in train.items()}))


def relative_to_train(df: pd.DataFrame, metric: str = 'top1') -> pd.Series:
    """``metric`` minus the same model's ``metric`` at its training size (points), per row; NaN where a model was
    not evaluated at its training size."""
    at_train = df[df['size'] == df['train_size']].groupby('label')[metric].first()
    return df[metric] - df['label'].map(at_train)


def relative_table(df: pd.DataFrame, digits: int = 1) -> str:
    """Markdown model x size table of top-1 minus the model's own training-size top-1 (points)."""
    d = df.assign(rel=relative_to_train(df))
    labels = list(dict.fromkeys(d['label']))
    wide = d.pivot_table(index='label', columns='size', values='rel', sort=False, dropna=False).reindex(labels)
    train = d.groupby('label', sort=False)['train_size'].first()
    sizes = list(wide.columns)
    lines = ['| model | ' + ' | '.join(f'{s} px' for s in sizes) + ' |', '|' + '---|' * (len(sizes) + 1)]
    for label in labels:
        cells = []
        for s in sizes:
            v = wide.loc[label, s]
            cells.append('◦' if s == train[label] else ('n/a' if pd.isna(v) else f'{v:+.{digits}f}'))
        lines.append(f'| {cell(label)} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def has_strategies(df: pd.DataFrame) -> bool:
    """True when the rows carry more than one extrapolation strategy (``zoo eval-resolution --extrapolation``)."""
    return 'extrapolation' in df and df['extrapolation'].fillna('').astype(str).str.len().gt(0).any() \
        and df['extrapolation'].dropna().nunique() > 1


def strategy_tables(df: pd.DataFrame, digits: int = 2, axis: str = 'size', unit: str = 'px') -> str:
    """Markdown: per value of ``axis`` (evaluated size, or frames), model (without strategy) x strategy top-1, the
    best strategy of each row bold; the heading gives the value as a multiple of the training value."""
    d = df[df['extrapolation'].fillna('').astype(str) != '']
    strategies = list(dict.fromkeys(d['extrapolation']))
    out = []
    for value in sorted(set(d[axis])):
        part = d[d[axis] == value]
        wide = part.pivot_table(index='base_label', columns='extrapolation', values='top1', sort=False,
                                dropna=False).reindex(columns=strategies)
        train = part.groupby('base_label', sort=False)['train_' + axis].first()
        scales = sorted({round(value / t, 3) for t in train})
        out += [f'**{value} {unit}** ({", ".join(f"{x:g}" for x in scales)}x the training {axis})', '',
                '| model | ' + ' | '.join(cell(x) for x in strategies) + ' |', '|' + '---|' * (len(strategies) + 1)]
        for label, vals in wide.iterrows():
            best = vals.max()
            cells = [('**' + fmt(v, digits) + '**') if not pd.isna(v) and round(v, digits) == round(best, digits)
                     else fmt(v, digits) for v in vals]
            out.append(f'| {cell(label)} | ' + ' | '.join(cells) + ' |')
        out.append('')
    return '\n'.join(out).rstrip()


def rows_from_markdown(path: str) -> List[Dict[str, Any]]:
    """Rows (``label, pe, train_size, size, top1``) of the first top-1 table in a report or results page: a
    ``| model | trained at | 24 px | ... |`` table; bold, ``◦`` marks and non-``px`` columns are ignored.

    Raises:
        ValueError: no such table in ``path``.
    """
    with open(path) as f:
        lines = [ln.strip() for ln in f]
    start = next((i for i, ln in enumerate(lines) if ln.startswith('| model | trained at |')), None)
    if start is None:
        raise ValueError(f'{path!r} has no "| model | trained at | <size> px |" table')
    head = split_row(lines[start])
    cols = {i: int(c[:-3]) for i, c in enumerate(head) if re.fullmatch(r'\d+ px', c)}
    rows = []
    for ln in lines[start + 2:]:
        if not ln.startswith('|'):
            break
        cells = split_row(ln)
        label, train = cells[0], int(cells[1].split()[0])
        for i, size in cols.items():
            text = cells[i].replace('*', '').replace('◦', '').strip()
            value = float('nan') if text in ('n/a', 'failed', '') else float(text)
            rows.append(dict(label=label, pe=SEED_SUFFIX.sub('', label).strip(), train_size=train, size=size,
                             top1=value))
    return rows

