"""One sweep engine: models x cells -> rows, resumable, written as one result set after every cell.

A sweep is a plan of (model, cell) pairs: a cell is a dict of coordinates (``size``; ``frames`` and ``size``; an
extrapolation strategy is part of the model variant). The front end (``zoo eval-resolution``, ``eval-frames``,
``eval-video``: :mod:`zoo.sweep.resolution`, :mod:`zoo.sweep.frames`, :mod:`zoo.sweep.videoqa`) loads the models,
lists the cells, evaluates one cell (a row, plus optional extras such as per-item predictions) and lays out its page;
this module owns everything else:

* the output directory (a lock, temp files of a killed writer removed, ``--overwrite`` staging in
  ``OUTPUT/incomplete/`` until the new set is complete);
* the loop, with a progress bar over cells; a failing cell (out of memory, a grid a model cannot take) becomes a row
  with an ``error`` and the sweep goes on;
* ``--resume``: the rows of an interrupted sweep (read back from its ``results.json``, also in a later session) are
  kept and only the missing or failed cells run, so the rows equal those of an uninterrupted sweep in every column
  but the timing ones; the recorded plan must equal the new one (else an error naming the difference);
* after every cell, the whole result set through :func:`zoo.sweep.report.write_result_set` (``manifest.json``
  replaced last, so a reader can tell a consistent set from one cut mid-update).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from tqdm import tqdm

from zoo.datasets.files import clean_temp_files
from zoo.errors import OutputDirError
from zoo.runs.rundir import STAGING, RunDirLock, previous_results
from .report import read_result_set, write_result_set

__all__ = ['SweepModel', 'SweepState', 'Sweep', 'cell_key', 'TIMING_COLUMNS']

_logger = logging.getLogger('zoo.sweep')

#: Row columns that measure time (they differ between runs of the same cell, so resume and tests ignore them).
TIMING_COLUMNS = ('images_per_s', 'clips_per_s', 'read_s', 'decode_s', 'model_s', 'wall_s', 'seconds')


@dataclass
class SweepModel:
    """One model (or model variant) of a sweep.

    Attributes:
        label: unique display name (rows and report).
        model: the loaded model at its training input (evaluations work on copies or move it and back).
        info: JSON-able description written to ``results.json`` -> ``models`` and the report's protocol table
            (``model``, ``checkpoint``, ``train_size``, ``family`` ...). Its ``label``, ``model``, ``checkpoint`` and
            ``strategy`` (a variant's extrapolation strategy) keys are part of the plan that ``--resume`` checks.
    """
    label: str
    model: Any
    info: Dict[str, Any] = field(default_factory=dict)


@dataclass
class SweepState:
    """What a sweep has so far, handed to the page writer after every cell.

    Attributes:
        rows: finished rows in plan order (failed ones have a non-empty ``error``).
        extras: what evaluations add besides rows, JSON-able (``predictions`` list, ``frames`` log, ``unreadable``
            dict ...); kept across ``--resume``.
        total: cells planned.
    """
    rows: List[Dict[str, Any]]
    extras: Dict[str, Any]
    total: int

    @property
    def complete(self) -> bool:
        return len(self.rows) >= self.total

    @property
    def failed(self) -> List[Dict[str, Any]]:
        return [r for r in self.rows if r.get('error')]


def cell_key(label: str, cell: Dict[str, Any]) -> str:
    """The identity of a (model, cell) pair: ``label`` and the cell's coordinates (JSON, sorted keys)."""
    return json.dumps([label, {k: cell[k] for k in sorted(cell)}], sort_keys=True, default=str)


#: (a model's info, the cell) -> (row, extras to merge). Raise to record the cell as failed.
Evaluate = Callable[[SweepModel, Dict[str, Any], SweepState], Tuple[Dict[str, Any], Dict[str, Any]]]
#: (state, model infos with their labels) -> {file name: str content, or a callable writing the file at a path}.
Page = Callable[[SweepState, List[Dict[str, Any]]], Dict[str, Any]]


class Sweep:
    """Evaluate ``plan`` (pairs of a model and a cell) into rows and write the result set after every cell.

    Args:
        command: the subcommand, for the lock and messages (``zoo eval-resolution``).
        output: the output directory.
        models: every model of the plan.
        plan: ``(model index, cell)`` pairs in evaluation order.
        evaluate: evaluates one cell; an exception (other than ``KeyboardInterrupt``) becomes the row's ``error``.
        page: the report files of the current state (``report.md`` and the plots); ``results.csv``,
            ``results.json`` and ``manifest.json`` are added by the engine.
        protocol: JSON-able description of how cells are evaluated (data, preprocessing, batch ...); part of the
            plan that ``--resume`` checks, except the keys in ``volatile``.
        overwrite: replace earlier results (written to ``OUTPUT/incomplete/`` until complete).
        resume: continue an interrupted sweep in ``output`` (or its ``incomplete/`` folder) from its finished cells.
        progress: show a progress bar over cells.
        base_row: ``model -> row fields`` written into every row of that model before the evaluation (label, model
            name, training size ...); a failed row keeps them.
        failed_row: the metric fields of a failed row (NaNs and zeros), so failed rows have the same columns.
        volatile: protocol keys that may change between a sweep and its resumption (device, batch size ...).

    Raises:
        OutputDirError: the directory is locked, a file, or holds results without ``overwrite`` / ``resume``.
        ValueError: ``overwrite`` and ``resume`` together, or ``resume`` over a sweep with another plan.
    """

    def __init__(self, command: str, output: str, models: Sequence[SweepModel], plan: Sequence[Tuple[int, Dict]],
                 evaluate: Evaluate, page: Page, protocol: Dict[str, Any], overwrite: bool = False,
                 resume: bool = False, progress: bool = True,
                 base_row: Optional[Callable[[SweepModel, Dict[str, Any]], Dict[str, Any]]] = None,
                 failed_row: Optional[Dict[str, Any]] = None, volatile: Iterable[str] = ()):
        if overwrite and resume:
            raise ValueError('--overwrite and --resume contradict each other: --resume continues the sweep in '
                             '--output, --overwrite starts it again')
        labels = [m.label for m in models]
        if len(set(labels)) != len(labels):
            raise ValueError(f'model labels are not unique: {labels}; pass one --label per model')
        self.command, self.output, self.models, self.plan = command, output, list(models), list(plan)
        self.evaluate, self.page, self.protocol = evaluate, page, protocol
        self.overwrite, self.resume, self.progress = overwrite, resume, progress
        self.base_row = base_row or (lambda m, cell: dict(label=m.label, **cell))
        self.failed_row = dict(failed_row or {})
        self.volatile = set(volatile) | {'unreadable'}
        keys = [cell_key(self.models[i].label, c) for i, c in self.plan]
        if len(set(keys)) != len(keys):
            raise ValueError('the sweep plans the same (model, cell) twice; remove repeated --sizes / --frames')

    # ---- the plan that --resume checks -----------------------------------------------------------------------------
    def spec(self) -> Dict[str, Any]:
        """The plan as JSON-able data: models (label, model, checkpoint, strategy), cells, fixed protocol."""
        models = [{k: m.info.get(k) for k in ('model', 'checkpoint', 'strategy', 'weights')} | {'label': m.label}
                  for m in self.models]
        cells = [[self.models[i].label, {k: c[k] for k in sorted(c)}] for i, c in self.plan]
        protocol = {k: v for k, v in self.protocol.items() if k not in self.volatile}
        return json.loads(json.dumps(dict(command=self.command, models=models, cells=cells, protocol=protocol),
                                     default=str))

    def _check_same_plan(self, recorded: Dict[str, Any], where: str) -> None:
        new = self.spec()
        for key in ('command', 'models', 'cells', 'protocol'):
            old_v, new_v = recorded.get(key), new[key]
            if old_v == new_v:
                continue
            detail = ''
            if isinstance(old_v, dict) and isinstance(new_v, dict):
                diff = sorted(k for k in set(old_v) | set(new_v) if old_v.get(k) != new_v.get(k))
                detail = ': ' + '; '.join(f'{k} was {old_v.get(k)!r}, now {new_v.get(k)!r}' for k in diff[:3])
            elif isinstance(old_v, list) and isinstance(new_v, list):
                detail = f' ({len(old_v)} recorded, {len(new_v)} now)'
                first = next((i for i, (a, b) in enumerate(zip(old_v, new_v)) if a != b), None)
                if first is not None:
                    detail += f': entry {first} was {old_v[first]}, now {new_v[first]}'
            raise ValueError(f'--resume: the sweep in {where!r} was started with other {key}{detail}; resume it with '
                             'the same options, or pass --overwrite to start again')

    # ---- run -------------------------------------------------------------------------------------------------------
    def run(self) -> Dict[str, Any]:
        """Evaluate the plan. Returns ``rows``, ``paths`` (written files), ``failed`` (count), ``extras``,
        ``resumed`` (cells taken over from an interrupted sweep)."""
        if os.path.exists(self.output) and not os.path.isdir(self.output):
            raise OutputDirError(f'--output {self.output!r} is a file, not a directory; choose another --output')
        with RunDirLock(self.output, self.command):
            clean_temp_files(self.output)
            target, staged = self._target()
            return self._run_in(target, staged)

    def _target(self) -> Tuple[str, bool]:
        """Where this sweep writes: ``output``, or ``output/incomplete`` while replacing earlier results."""
        staging = os.path.join(self.output, STAGING)
        old = previous_results(self.output)
        if self.resume:
            if os.path.isdir(staging):
                return staging, True  # an interrupted --overwrite sweep: continue it where it was writing
            return self.output, False
        if os.path.isdir(staging):
            shutil.rmtree(staging)  # an interrupted --overwrite sweep, now started again
        if old and not self.overwrite:
            raise OutputDirError(f'output dir {self.output!r} already exists and holds results; pass --resume to '
                                 'continue that sweep, --overwrite to replace them (the old report stays until the '
                                 'new one is complete), or choose another --output')
        if old:
            os.makedirs(staging)
            _logger.info('writing the new results to %s; they replace the old report when the sweep is complete',
                         staging)
            return staging, True
        return self.output, False

    def _restore(self, target: str) -> Tuple[Dict[str, Dict[str, Any]], Dict[str, Any]]:
        """Finished rows (by cell key) and extras of the sweep in ``target`` (``--resume``); empty when none."""
        recorded = read_result_set(target, check=False)  # results.json is whole; the set is rewritten next
        if recorded is None:
            if previous_results(target):
                raise OutputDirError(f'--resume: {target!r} holds files but no results.json of a zoo sweep; choose '
                                     'another --output, or pass --overwrite to replace them')
            _logger.info('--resume: %s holds no sweep yet; starting it', target)
            return {}, {}
        self._check_same_plan(recorded.get('spec') or {}, target)
        rows = {}
        for row in recorded.get('results', []):
            if row.get('error'):
                continue  # a failed cell runs again
            cell = row.get('_cell')
            if isinstance(cell, dict):
                rows[cell_key(row['label'], cell)] = row
        return rows, dict(recorded.get('extras') or {})

    def _run_in(self, target: str, staged: bool) -> Dict[str, Any]:
        os.makedirs(target, exist_ok=True)
        done, extras = self._restore(target) if self.resume else ({}, {})
        state = SweepState(rows=[], extras=extras, total=len(self.plan))
        # drop extras of cells that will run again (predictions of a failed cell, ...): the evaluation adds them anew
        todo = []
        for i, cell in self.plan:
            key = cell_key(self.models[i].label, cell)
            if key in done:
                state.rows.append(done[key])
            else:
                todo.append((len(state.rows) + len(todo), i, cell))
        resumed = len(state.rows)
        if self.resume and resumed:
            _logger.info('--resume: %d of %d cells already done in %s; evaluating the other %d', resumed,
                         len(self.plan), target, len(todo))
        order = {cell_key(self.models[i].label, c): n for n, (i, c) in enumerate(self.plan)}
        paths = self._write(state, target) if state.rows else {}  # a resumed set is rewritten whole at once
        bar = tqdm(total=len(self.plan), initial=resumed, desc=self.command, unit='cell', dynamic_ncols=True,
                   disable=not self.progress or not todo, leave=False)
        for _, i, cell in todo:
            m = self.models[i]
            row = dict(self.base_row(m, cell))
            if m.info.get('strategy'):  # a strategy variant (--extrapolation)
                row.update(extrapolation=m.info['strategy'], base_label=m.info['base_label'])
            try:
                out, more = self.evaluate(m, cell, state)
                row.update(out)
                row.setdefault('error', '')
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as e:  # out of memory, a grid the model cannot take, ...: record and go on
                _free_accelerator_memory()
                detail = ' '.join(str(e).split())[:300]
                where = ', '.join(f'{k} {v}' for k, v in cell.items())
                _logger.error('%s @ %s failed: %s: %s', m.label, where, type(e).__name__, detail)
                row.update(self.failed_row, error=f'{type(e).__name__}: {detail}')
                more = {}
            row['_cell'] = cell
            _merge(state.extras, more)
            state.rows.append(row)
            state.rows.sort(key=lambda r: order[cell_key(r['label'], r['_cell'])])
            paths = self._write(state, target)
            bar.update(1)
        bar.close()
        if staged and state.complete:
            paths = self._publish(target, paths)
        failed = state.failed
        if failed:
            _logger.warning('%d of %d evaluations failed (listed in %s): %s', len(failed), len(self.plan),
                            paths.get('md', target), '; '.join(f'{r["label"]}: {r["error"]}' for r in failed[:3]))
        return dict(rows=[_public(r) for r in state.rows], paths=paths, failed=len(failed), extras=state.extras,
                    resumed=resumed)

    def _write(self, state: SweepState, target: str) -> Dict[str, str]:
        rows = [_public(r) for r in state.rows]
        models = [dict(m.info, label=m.label) for m in self.models]
        files = self.page(SweepState(rows, state.extras, state.total), models)
        status = dict(done=len(state.rows), total=state.total, failed=len(state.failed), complete=state.complete)
        return write_result_set(target, rows, dict(status=status, spec=self.spec(), protocol=self.protocol,
                                                   models=models, results=state.rows, extras=state.extras), files)

    def _publish(self, staging: str, paths: Dict[str, str]) -> Dict[str, str]:
        """Move a complete staged set onto the output (manifest last) and remove what only the old set had."""
        from .report import MANIFEST
        old = read_result_set(self.output, check=False) or {}
        old_files = set((old.get('_manifest') or {}).get('files', {}))
        new_files = [n for n in os.listdir(staging) if n != MANIFEST]
        for name in new_files:
            os.replace(os.path.join(staging, name), os.path.join(self.output, name))
        os.replace(os.path.join(staging, MANIFEST), os.path.join(self.output, MANIFEST))
        for name in old_files - set(new_files) - {MANIFEST}:
            stale = os.path.join(self.output, name)
            if os.path.isfile(stale):
                os.remove(stale)
        shutil.rmtree(staging)
        return {k: os.path.join(self.output, os.path.basename(v)) for k, v in paths.items()}


def _free_accelerator_memory() -> None:
    import torch
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _merge(extras: Dict[str, Any], more: Dict[str, Any]) -> None:
    """Add an evaluation's extras: lists are extended, dicts updated (first value kept), other values replaced."""
    for k, v in more.items():
        if isinstance(v, list):
            extras.setdefault(k, []).extend(v)
        elif isinstance(v, dict):
            cur = extras.setdefault(k, {})
            for kk, vv in v.items():
                cur.setdefault(kk, vv)
        else:
            extras[k] = v


def _public(row: Dict[str, Any]) -> Dict[str, Any]:
    """A row without the engine's bookkeeping (``_cell``)."""
    return {k: v for k, v in row.items() if k != '_cell'}
