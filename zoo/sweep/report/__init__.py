"""The report module of every sweep: the result set (``results.csv``, ``results.json``, ``report.md``, plots and
``manifest.json``) written as one update, read back for ``--resume`` and replotting, and the tables, plots and pages.

One update writes every file to a temporary name first, then renames them onto their names (``results.json``
first, so a kill after any rename leaves whole rows to resume from) and replaces ``manifest.json`` last. The
manifest names every file of the set with its size and SHA-256, so :func:`read_result_set` (and any reader) can tell
a consistent set from one that a kill cut between two renames; the next update (``--resume``) rewrites the whole
set.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import pandas as pd

from zoo.datasets.files import output_mode, remove_quietly, strict_json, temp_path, write_error, write_text_atomic
from zoo.errors import ZooError
from .pages import frames_page, resolution_page, slug, videoqa_page
from .plots import (NIAH_TASK, chance_by_panel, color_range, encoding_family, plot_accuracy, plot_frames_scaling,
                    plot_grid_heatmap, plot_heatmap, plot_scaling, plot_strategies, plot_vniah, series_styles)
from .tables import (fmt, has_strategies, markdown_table, pivot_markdown, relative_table, relative_to_train,
                     rows_from_markdown, strategy_tables)

__all__ = ['MANIFEST', 'write_result_set', 'read_result_set', 'ResultSetError', 'resolution_page', 'frames_page',
           'videoqa_page', 'write_report', 'write_frames_report', 'write_video_report', 'replot', 'markdown_table',
           'pivot_markdown', 'relative_table', 'relative_to_train', 'strategy_tables', 'has_strategies',
           'rows_from_markdown', 'fmt', 'slug', 'plot_scaling', 'plot_heatmap', 'plot_strategies',
           'plot_frames_scaling', 'plot_grid_heatmap', 'plot_accuracy', 'plot_vniah', 'chance_by_panel',
           'color_range', 'series_styles', 'encoding_family', 'NIAH_TASK']

_logger = logging.getLogger('zoo.sweep')

MANIFEST = 'manifest.json'
#: Keys of ``results.json`` that are not extras of the evaluations.
_FIXED_KEYS = ('status', 'spec', 'protocol', 'models', 'results')

Writer = Union[str, Callable[[str], None]]


class ResultSetError(ZooError, ValueError):
    """A result set that cannot be used as it is: files that disagree with its manifest (a kill between two
    renames), a corrupt (truncated) ``manifest.json`` or ``results.json``, or hand-edited rows that are no result
    rows. The message names the file (and row) and how to recover."""


def _csv(rows: List[Dict[str, Any]]) -> str:
    return pd.DataFrame(rows).to_csv(index=False)


def _digest(path: str) -> Dict[str, Any]:
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
            h.update(chunk)
    return dict(bytes=os.path.getsize(path), sha256=h.hexdigest())


def write_result_set(out_dir: str, rows: List[Dict[str, Any]], record: Dict[str, Any],
                     files: Dict[str, Writer]) -> Dict[str, str]:
    """Write one update of a sweep's results as a set.

    ``results.json`` is strict JSON: NaN and infinities are written as ``null`` (:func:`read_result_set` reads the
    metrics back as NaN).

    Args:
        out_dir: the existing output folder.
        rows: the rows for ``results.csv``.
        record: ``results.json``'s content: ``status``, ``spec``, ``protocol``, ``models``, ``results`` and, under
            ``extras``, what the evaluations add (``predictions``, ``frames``, ``unreadable`` ...), which is
            written at the top level.
        files: the page's files (``report.md`` text, plot writers).

    Returns:
        ``{key: path}`` with keys ``csv``, ``json``, ``md``, ``manifest`` and, for other files, the name without
        its extension (``scaling``, ``heatmap`` ...; ``png`` for the page's main plot).

    Raises:
        zoo.errors.OutputWriteError: the folder is read-only, the disk full, ...
    """
    record = dict(record)
    extras = record.pop('extras', {}) or {}
    # results.json is renamed first: a kill after any rename leaves whole rows to --resume from (the other files
    # and the manifest are rewritten by the next update)
    content: Dict[str, Writer] = {'results.json': strict_json(dict(record, **extras), indent=1) + '\n',
                                  'results.csv': _csv(rows)}
    content.update(files)
    temps: Dict[str, str] = {}
    try:
        for name, writer in content.items():
            target = os.path.join(out_dir, name)
            tmp = temps[name] = temp_path(target)
            if callable(writer):
                writer(tmp)
            else:
                with open(tmp, 'w', encoding='utf-8') as f:
                    f.write(writer)
            os.chmod(tmp, output_mode())  # a temp file is private (0600); results are as readable as other files
        for name, tmp in temps.items():
            os.replace(tmp, os.path.join(out_dir, name))
    except OSError as e:
        for tmp in temps.values():
            remove_quietly(tmp)
        raise write_error(out_dir, e) from None
    except BaseException:
        for tmp in temps.values():
            remove_quietly(tmp)
        raise
    status = record.get('status', {})
    manifest = dict(status=status, files={name: _digest(os.path.join(out_dir, name)) for name in content})
    write_text_atomic(os.path.join(out_dir, MANIFEST), json.dumps(manifest, indent=1) + '\n')
    paths = {'csv': 'results.csv', 'json': 'results.json', 'md': 'report.md', 'manifest': MANIFEST}
    main_plot = next((n for n in files if n.endswith('.png')), None)
    for name in files:
        key = 'png' if name == main_plot else os.path.splitext(name)[0]
        paths.setdefault(key, name)
    return {k: os.path.join(out_dir, v) for k, v in paths.items()}


def read_result_set(out_dir: str, check: bool = True) -> Optional[Dict[str, Any]]:
    """``results.json`` of a sweep folder (``None`` when there is none), with its extras at the top level and the
    manifest under ``_manifest``.

    Args:
        check: compare every file with ``manifest.json``. Without ``check`` (``--resume``, which rewrites the whole
            set) a corrupt manifest is logged and ignored: the rows in ``results.json`` are whole.

    Raises:
        ResultSetError: ``results.json`` is not readable JSON (truncated), is not a sweep's (no ``results`` list),
            or holds a row that is no result row (not a dict with a ``label``: a hand edit), naming the row; with
            ``check``, a corrupt ``manifest.json``, or a file that differs from it (the set was cut mid-update: its
            rows are still complete, so ``--resume`` continues from them and rewrites the set).
    """
    path = os.path.join(out_dir, 'results.json')
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding='utf-8') as f:
            record = json.load(f)
    except (OSError, ValueError) as e:
        raise ResultSetError(f'{path!r} is corrupt or not a sweep result ({type(e).__name__}: {e}); restore it, or '
                             'pass --overwrite to start the sweep again') from None
    if not isinstance(record, dict) or not isinstance(record.get('results'), list):
        raise ResultSetError(f'{path!r} is not a zoo sweep result (no "results" list); choose another --output, or '
                             'pass --overwrite to replace it')
    for i, row in enumerate(record['results']):
        if not isinstance(row, dict) or not isinstance(row.get('label'), str):
            text = json.dumps(row, default=str)
            text = text if len(text) <= 80 else text[:77] + '...'
            raise ResultSetError(f'{path!r}: row {i} ({text}) is not a result row (a dict with a "label"; it was '
                                 'edited by hand?); fix or remove that row, or pass --overwrite to start the sweep '
                                 'again')
    if not isinstance(record.get('spec', {}), dict):
        raise ResultSetError(f'{path!r}: "spec" is not a dict (edited by hand?); restore it, or pass --overwrite to '
                             'start the sweep again')
    record['_manifest'] = _read_manifest(out_dir, check)
    if check and record['_manifest']:
        files = record['_manifest'].get('files', {})
        stale = [name for name, want in files.items()
                 if not os.path.isfile(os.path.join(out_dir, name)) or _digest(os.path.join(out_dir, name)) != want]
        if stale:
            raise ResultSetError(f'{out_dir!r}: {", ".join(stale)} differ from {MANIFEST} (the sweep was stopped '
                                 'while writing an update); rerun it with --resume to rewrite the set')
    record['results'] = _nan_for_null(record['results'])
    record['extras'] = {k: v for k, v in record.items() if k not in _FIXED_KEYS and not k.startswith('_')}
    return record


def _read_manifest(out_dir: str, check: bool) -> Dict[str, Any]:
    """``manifest.json`` of a result set (``{}`` when there is none); see :func:`read_result_set` for a corrupt one."""
    path = os.path.join(out_dir, MANIFEST)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding='utf-8') as f:
            manifest = json.load(f)
        if not isinstance(manifest, dict) or not isinstance(manifest.get('files', {}), dict):
            raise ValueError('not a manifest (no "files" dict)')
        return manifest
    except (OSError, ValueError) as e:
        problem = (f'{path!r} is corrupt ({type(e).__name__}: {" ".join(str(e).split())}; truncated by a full disk '
                   'or a kill, or edited)')
        if check:
            raise ResultSetError(f'{problem}; rerun the sweep with --resume to rewrite the set from its rows in '
                                 'results.json, or delete the manifest') from None
        _logger.warning('%s: ignored; this update rewrites it', problem)
        return {}


def _nan_for_null(rows: List[Any]) -> List[Any]:
    """Rows read back from strict JSON: ``null`` becomes NaN again in the columns that hold numbers with decimals or
    nothing at all (metrics of failed cells, NaN-only columns), so resumed rows equal the rows of an uninterrupted
    sweep; ``null`` in other columns (``None`` written by the sweep) stays ``None``."""
    dicts = [r for r in rows if isinstance(r, dict)]
    keys = {k for r in dicts for k in r}
    numeric = {k for k in keys if any(isinstance(r.get(k), float) for r in dicts)}
    empty = {k for k in keys if all(r.get(k) is None for r in dicts)}
    for r in dicts:
        for k in numeric | empty:
            if k in r and r[k] is None:
                r[k] = float('nan')
    return rows


# ---- writers of one page as a whole set (the sweeps use the engine; these serve scripts and tests) -----------------
def _write_page(page: Callable[..., Dict[str, Writer]], rows: List[Dict[str, Any]], models: List[Dict[str, Any]],
                protocol: Dict[str, Any], out_dir: str, notes: Sequence[str], total: Optional[int],
                extras: Dict[str, Any]) -> Dict[str, str]:
    total = len(rows) if total is None else total
    failed = sum(1 for r in rows if r.get('error'))
    status = dict(done=len(rows), total=total, failed=failed, complete=len(rows) >= total)
    state = SimpleNamespace(rows=rows, total=total, extras=extras)
    return write_result_set(out_dir, rows, dict(status=status, protocol=protocol, models=models, results=rows,
                                                extras=extras), page(state, models, protocol, notes))


def write_report(rows: List[Dict[str, Any]], models: List[Dict[str, Any]], protocol: Dict[str, Any], out_dir: str,
                 notes: Sequence[str] = (), total: Optional[int] = None) -> Dict[str, str]:
    """Write a resolution sweep's result set (see :func:`resolution_page`; ``protocol['unreadable']``: a list of
    ``[path, error]`` or a dict). Returns the paths."""
    return _write_page(resolution_page, rows, models, protocol, out_dir, notes, total,
                       dict(unreadable=dict(protocol.get('unreadable') or {})))


def write_frames_report(rows: List[Dict[str, Any]], models: List[Dict[str, Any]], protocol: Dict[str, Any],
                        out_dir: str, notes: Sequence[str] = (), total: Optional[int] = None) -> Dict[str, str]:
    """Write a frames sweep's result set (see :func:`frames_page`). Returns the paths."""
    return _write_page(frames_page, rows, models, protocol, out_dir, notes, total,
                       dict(unreadable=dict(protocol.get('unreadable') or {})))


def write_video_report(rows: List[Dict[str, Any]], models: List[Dict[str, Any]], protocol: Dict[str, Any],
                       out_dir: str, predictions: List[Dict[str, Any]], frame_log: Dict[str, Any],
                       notes: Sequence[str] = (), total: Optional[int] = None) -> Dict[str, str]:
    """Write a video-QA sweep's result set (see :func:`videoqa_page`). Returns the paths."""
    return _write_page(videoqa_page, rows, models, protocol, out_dir, notes, total,
                       dict(predictions=predictions, frames=frame_log,
                            unreadable=dict(protocol.get('unreadable') or {})))


def replot(argv: Optional[Sequence[str]] = None) -> Dict[str, str]:
    """``python -m zoo.sweep.report``: redraw a sweep's plots from saved results (``results.csv`` /
    ``results.json`` of eval-resolution, eval-frames or eval-video, or the top-1 table of a markdown page), without
    evaluating anything: the scaling plot (eval-resolution), the frames/size plot (eval-frames) or the accuracy plot
    (eval-video) as ``--png``.

    Raises:
        ValueError: a missing or unreadable file, rows of no sweep, or an option the rows' sweep has no plot for
            (``python -m zoo.sweep.report`` prints it as one line, status 2).
    """
    p = argparse.ArgumentParser(prog='python -m zoo.sweep.report',
                                description=' '.join(replot.__doc__.split('\n\n')[0].split()))
    p.add_argument('results', help='results.csv, results.json, or a .md page with a "| model | trained at |" table')
    p.add_argument('--png', required=True, help='plot to write (scaling, frames/size or accuracy, by the sweep)')
    p.add_argument('--heatmap', help='heatmap to write (eval-resolution: model x size; eval-frames: frames x size of '
                                     'a single model)')
    p.add_argument('--csv', help='also write the rows read (e.g. a table parsed from markdown) to this CSV')
    p.add_argument('--strategies', help='per-strategy plot to write (rows of an --extrapolation sweep)')
    p.add_argument('--title', default=None, help='plot title (default: the kind of sweep)')
    args = p.parse_args(argv)
    if not os.path.isfile(args.results):
        raise ValueError(f'{args.results!r} does not exist (or is not a file); pass a sweep\'s results.csv or '
                         'results.json')
    try:
        if args.results.endswith('.json'):
            with open(args.results, encoding='utf-8') as f:
                record = json.load(f)
            if not isinstance(record, dict) or not isinstance(record.get('results'), list):
                raise ValueError('no "results" list of a zoo sweep')
            df = pd.DataFrame(record['results'])
        elif args.results.endswith('.csv'):
            df = pd.read_csv(args.results)
        else:
            df = pd.DataFrame(rows_from_markdown(args.results))
    except (OSError, ValueError, pd.errors.ParserError) as e:
        raise ValueError(f'{args.results!r} is not readable sweep results ({type(e).__name__}: '
                         f'{" ".join(str(e).split())})') from None
    if 'error' in df:
        df = df[~df['error'].apply(lambda e: isinstance(e, str) and bool(e))]
    kind = 'video' if 'acc' in df else 'frames' if {'frames', 'top1'} <= set(df) else 'resolution' \
        if {'size', 'top1'} <= set(df) else None
    if kind is None or not len(df) or 'label' not in df:
        raise ValueError(f'{args.results!r} holds no successful rows of a zoo sweep (columns {sorted(df)[:8]}); pass '
                         'the results.csv or results.json of zoo eval-resolution, eval-frames or eval-video')
    title = args.title or dict(resolution='Zero-shot resolution sweep', frames='Zero-shot frames / size sweep',
                               video='Video QA accuracy')[kind]
    if kind != 'resolution' and args.strategies:
        raise ValueError(f'--strategies plots an eval-resolution sweep; {args.results!r} holds eval-{kind} rows')
    out = dict(png=args.png)
    if kind == 'video':
        if args.heatmap:
            raise ValueError(f'--heatmap: {args.results!r} holds eval-video rows, which have no heatmap; drop '
                             '--heatmap')
        plot_accuracy(df, args.png, title)
    elif kind == 'frames':
        plot_frames_scaling(df, args.png, title)
        if args.heatmap:
            if df['label'].nunique() != 1:
                raise ValueError(f'--heatmap: {args.results!r} holds {df["label"].nunique()} models; a frames x size '
                                 'heatmap shows one (the sweep\'s report has one per model)')
            plot_grid_heatmap(df, args.heatmap, f'{df["label"].iloc[0]}: zero-shot top-1')
            out['heatmap'] = args.heatmap
    else:
        plot_scaling(df, args.png, title)
        if args.strategies and has_strategies(df):
            plot_strategies(df, args.strategies, title)
            out['strategies'] = args.strategies
        if args.heatmap:
            plot_heatmap(df, args.heatmap, f'top-1 (%): {title}')
            out['heatmap'] = args.heatmap
    if args.csv:
        write_text_atomic(args.csv, df.to_csv(index=False))
        out['csv'] = args.csv
    return out
