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
  but the timing ones; the recorded plan must equal the new one (else an error naming the difference): the models
  with every option that changes their outputs (``--model-kwargs``, ``--mean`` / ``--std``, crop, strategy ...),
  the content of each checkpoint file (size and SHA-256), the cells, the protocol, and a fingerprint of each input
  folder (its file list with sizes and modification times); paths compared after ``os.path.realpath``;
* after every cell, the whole result set through :func:`zoo.sweep.report.write_result_set` (``results.json``
  renamed first and ``manifest.json`` replaced last, so a kill after any rename leaves whole rows to resume from and
  a reader can tell a consistent set from one cut mid-update);
* publishing a complete ``--overwrite`` set: a marker in ``OUTPUT/incomplete/`` lists the moves first, so a run
  that finds it (after a kill mid-publication) finishes the publication before anything else. A staged set whose
  failed cells have good values in the old results is not published (the old values are kept; ``--resume``
  retries the failed cells).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from tqdm import tqdm

from zoo.datasets.files import TMP_PREFIX, clean_temp_files, file_fingerprint, tree_fingerprint, write_text_atomic
from zoo.errors import OutputDirError
from zoo.runs.rundir import STAGING, RunDirLock, previous_results
from .report import MANIFEST, read_result_set, write_result_set

__all__ = ['SweepModel', 'SweepState', 'Sweep', 'cell_key', 'TIMING_COLUMNS', 'PLAN_INFO_KEYS', 'PUBLISHING']

_logger = logging.getLogger('zoo.sweep')

#: Row columns that measure time (they differ between runs of the same cell, so resume and tests ignore them).
TIMING_COLUMNS = ('images_per_s', 'clips_per_s', 'read_s', 'decode_s', 'model_s', 'wall_s', 'seconds')
#: Keys of a model's ``info`` that are part of the plan ``--resume`` checks: what it is and every option that changes
#: its outputs (constructor overrides, preprocessing, strategy, weights).
PLAN_INFO_KEYS = ('model', 'checkpoint', 'strategy', 'weights', 'model_kwargs', 'data_config', 'mean', 'std',
                  'not_applicable')
#: The marker an ``--overwrite`` sweep writes into ``OUTPUT/incomplete/`` before it moves a complete set onto the
#: output: the files to move and the old ones to remove, so that a run finding it finishes the publication.
PUBLISHING = 'publishing.json'
#: Files a sweep's update writes besides plots (``*.png``): a folder holding only these and no ``results.json`` is
#: a first update cut before ``results.json`` was renamed (an older zoo renamed ``results.csv`` first).
_SET_FILES = ('results.csv', 'report.md')


@dataclass
class SweepModel:
    """One model (or model variant) of a sweep.

    Attributes:
        label: unique display name (rows and report).
        model: the loaded model at its training input (evaluations work on copies or move it and back).
        info: JSON-able description written to ``results.json`` -> ``models`` and the report's protocol table
            (``model``, ``checkpoint``, ``train_size``, ``family`` ...). Its label and its :data:`PLAN_INFO_KEYS`
            (``model``, ``checkpoint``, ``strategy``, ``model_kwargs``, ``data_config`` / ``mean`` / ``std`` ...)
            are part of the plan that ``--resume`` checks, with the checkpoint file's content. A variant with
            ``not_applicable`` (the reason) is not evaluated: its rows record the reason (an extrapolation strategy
            its encoding does not take).
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
        inputs: files and folders the rows depend on (the data folder, a class map ...): ``--resume`` refuses when
            one changed (a folder's file list with sizes and modification times, a file's size and SHA-256).
        exclude_inputs: folders inside ``inputs`` that change while the sweep runs (a frame cache); ``output`` is
            always left out.

    Raises:
        OutputDirError: the directory is locked, a file, holds results without ``overwrite`` / ``resume``, or holds
            an interrupted ``--overwrite`` sweep (``OUTPUT/incomplete``) without ``overwrite`` / ``resume``.
        ValueError: ``overwrite`` and ``resume`` together, or ``resume`` over a sweep with another plan.
        zoo.sweep.report.ResultSetError: ``resume`` over a corrupt or hand-edited ``results.json``.
    """

    def __init__(self, command: str, output: str, models: Sequence[SweepModel], plan: Sequence[Tuple[int, Dict]],
                 evaluate: Evaluate, page: Page, protocol: Dict[str, Any], overwrite: bool = False,
                 resume: bool = False, progress: bool = True,
                 base_row: Optional[Callable[[SweepModel, Dict[str, Any]], Dict[str, Any]]] = None,
                 failed_row: Optional[Dict[str, Any]] = None, volatile: Iterable[str] = (),
                 inputs: Iterable[str] = (), exclude_inputs: Iterable[Optional[str]] = ()):
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
        self.inputs = [p for p in dict.fromkeys(inputs) if p]
        self.exclude_inputs = [output] + [p for p in exclude_inputs if p]
        self._fingerprints: Optional[Dict[str, Any]] = None  # checkpoints and inputs, computed once per sweep
        keys = [cell_key(self.models[i].label, c) for i, c in self.plan]
        if len(set(keys)) != len(keys):
            raise ValueError('the sweep plans the same (model, cell) twice; remove repeated --sizes / --frames')

    # ---- the plan that --resume checks -----------------------------------------------------------------------------
    def _fingerprint_all(self) -> Dict[str, Any]:
        """Checkpoint files (size, SHA-256, mtime) and input fingerprints, by real path; computed once per sweep."""
        if self._fingerprints is None:
            files: Dict[str, Any] = {}  # the path as given -> (real path, fingerprint)
            for m in self.models:
                path = m.info.get('checkpoint')
                if isinstance(path, str) and os.path.isfile(path) and path not in files:
                    same = next((fp for real, fp in files.values() if real == _real(path)), None)
                    files[path] = (_real(path), same or file_fingerprint(path))
            inputs = {}
            for path in self.inputs:
                real = _real(path)
                inputs[real] = file_fingerprint(path) if os.path.isfile(path) else \
                    tree_fingerprint(path, self.exclude_inputs) if os.path.isdir(path) else None
            self._fingerprints = dict(checkpoints=files, inputs=inputs)
        return self._fingerprints

    def spec(self) -> Dict[str, Any]:
        """The plan as JSON-able data: models (label and :data:`PLAN_INFO_KEYS`, the checkpoint by real path with its
        file's size, SHA-256 and mtime), cells, fixed protocol (paths by real path), input fingerprints."""
        prints = self._fingerprint_all()
        models = []
        for m in self.models:
            entry = {k: m.info.get(k) for k in PLAN_INFO_KEYS} | {'label': m.label}
            if entry['checkpoint'] in prints['checkpoints']:  # a file (not 'pretrained')
                entry['checkpoint'], entry['checkpoint_file'] = prints['checkpoints'][entry['checkpoint']]
            models.append(entry)
        cells = [[self.models[i].label, {k: c[k] for k in sorted(c)}] for i, c in self.plan]
        protocol = {k: _real(v) if k.endswith(('_root', '_dir')) and isinstance(v, str) and os.path.exists(v) else v
                    for k, v in self.protocol.items() if k not in self.volatile}
        return json.loads(json.dumps(dict(command=self.command, models=models, cells=cells, protocol=protocol,
                                          inputs=prints['inputs']), default=str))

    def _check_same_plan(self, recorded: Dict[str, Any], where: str) -> None:
        new = self.spec()
        if 'inputs' not in recorded:  # no spec, or one without fingerprints: nothing to check the files against
            raise ValueError(f'--resume: the results in {where!r} record no plan with checkpoint and data '
                             'fingerprints (written by an older zoo or not by a sweep), so they cannot be checked '
                             'against this one; pass --overwrite to start the sweep again')
        for key in ('command', 'models', 'cells', 'protocol', 'inputs'):
            old_v, new_v = _comparable(recorded.get(key)), _comparable(new[key])
            if old_v == new_v:
                continue
            diffs = _differences(old_v, new_v, key)
            changed = [d for d in diffs if '.checkpoint_file' in d[0]]
            if key == 'models' and changed:
                i = int(changed[0][0].split('[', 1)[1].split(']', 1)[0])
                entry = new['models'][i]
                was, now = old_v[i].get('checkpoint_file'), new_v[i].get('checkpoint_file')
                raise ValueError(f'--resume: the checkpoint {entry["checkpoint"]!r} of {entry["label"]} changed since '
                                 f'the sweep in {where!r} started (it was {_describe_file(was)}, now '
                                 f'{_describe_file(now)}); resume with the same file, or pass --overwrite to start '
                                 'again')
            if key == 'inputs':
                for path in sorted(set(old_v or {}) | set(new_v or {})):
                    was, now = (old_v or {}).get(path), (new_v or {}).get(path)
                    if was != now:
                        raise ValueError(f'--resume: {path!r} changed since the sweep in {where!r} started (files '
                                         f'added, removed or modified: {_describe_input(was)} then; '
                                         f'{_describe_input(now)} now); resume on the same data, or pass --overwrite '
                                         'to start again')
            detail = '; '.join(f'{p} was {_short(a)}, now {_short(b)}' for p, a, b in diffs[:3])
            more = f' (and {len(diffs) - 3} more)' if len(diffs) > 3 else ''
            raise ValueError(f'--resume: the sweep in {where!r} was started with other {key}: {detail}{more}; resume '
                             'it with the same options, or pass --overwrite to start again')

    # ---- run -------------------------------------------------------------------------------------------------------
    def run(self) -> Dict[str, Any]:
        """Evaluate the plan. Returns ``rows``, ``paths`` (written files), ``failed`` (count), ``extras``,
        ``resumed`` (cells taken over from an interrupted sweep) and ``published`` (False when a complete
        ``--overwrite`` set stays in ``OUTPUT/incomplete`` to keep old values of its failed cells)."""
        if os.path.exists(self.output) and not os.path.isdir(self.output):
            raise OutputDirError(f'--output {self.output!r} is a file, not a directory; choose another --output')
        self._fingerprint_all()  # before the lock: a missing or unreadable input fails here
        with RunDirLock(self.output, self.command):
            staging = os.path.join(self.output, STAGING)
            clean_temp_files(self.output)
            clean_temp_files(staging)
            self._finish_publication(staging)
            target, staged = self._target()
            return self._run_in(target, staged)

    def _target(self) -> Tuple[str, bool]:
        """Where this sweep writes: ``output``, or ``output/incomplete`` while replacing earlier results."""
        staging = os.path.join(self.output, STAGING)
        if os.path.isdir(staging) and not os.path.isfile(os.path.join(staging, 'results.json')):
            shutil.rmtree(staging)  # nothing of a sweep in it (cut before its first results.json): nothing lost
        old = previous_results(self.output)
        if self.resume:
            if os.path.isdir(staging):
                return staging, True  # an interrupted --overwrite sweep: continue it where it was writing
            return self.output, False
        if os.path.isdir(staging):
            if not self.overwrite:
                status = (read_result_set(staging, check=False) or {}).get('status') or {}
                raise OutputDirError(
                    f'{staging!r} holds an interrupted --overwrite sweep ({status.get("done", "?")} of '
                    f'{status.get("total", "?")} cells done; the old results in {self.output!r} are unchanged); '
                    'pass --resume to continue it, --overwrite to start it again (its cells are lost), or choose '
                    'another --output')
            _logger.info('--overwrite: removing the interrupted --overwrite sweep in %s and starting again', staging)
            shutil.rmtree(staging)
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
            files = previous_results(target)
            if files and all(n in _SET_FILES or n.endswith('.png') for n in files):
                _logger.warning('--resume: %s holds %s but no results.json (the first update was cut); starting the '
                                'sweep', target, ', '.join(sorted(files)))
                return {}, {}
            if files:
                raise OutputDirError(f'--resume: {target!r} holds files ({", ".join(sorted(files)[:5])}) but no '
                                     'results.json of a zoo sweep; choose another --output, or pass --overwrite to '
                                     'replace them')
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
        extras = {k: v for k, v in (recorded.get('extras') or {}).items() if isinstance(v, (list, dict))}
        return rows, extras

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
                if m.info.get('not_applicable'):  # a strategy the encoding does not take: recorded, not evaluated
                    out, more = dict(self.failed_row, not_applicable=m.info['not_applicable']), {}
                else:
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
        published = True
        if staged and state.complete:
            kept = self._old_values_lost(state.rows)
            if kept:
                published = False
                _logger.warning(
                    '--overwrite: %d evaluation(s) failed that the old results in %s have values for (%s); the new '
                    'results stay in %s and the old ones in place: pass --resume to retry the failed cells (the new '
                    'set replaces the old one once they succeed), or delete %s to publish it as it is', len(kept),
                    self.output, '; '.join(kept[:3]), target, os.path.join(self.output, 'results.json'))
            else:
                paths = self._publish(target, paths)
        failed = state.failed
        if failed:
            _logger.warning('%d of %d evaluations failed (listed in %s): %s', len(failed), len(self.plan),
                            paths.get('md', target), '; '.join(f'{r["label"]}: {r["error"]}' for r in failed[:3]))
        return dict(rows=[_public(r) for r in state.rows], paths=paths, failed=len(failed), extras=state.extras,
                    resumed=resumed, published=published)

    def _write(self, state: SweepState, target: str) -> Dict[str, str]:
        rows = [_public(r) for r in state.rows]
        models = [dict(m.info, label=m.label) for m in self.models]
        files = self.page(SweepState(rows, state.extras, state.total), models)
        status = dict(done=len(state.rows), total=state.total, failed=len(state.failed), complete=state.complete)
        return write_result_set(target, rows, dict(status=status, spec=self.spec(), protocol=self.protocol,
                                                   models=models, results=state.rows, extras=state.extras), files)

    def _old_values_lost(self, rows: List[Dict[str, Any]]) -> List[str]:
        """The failed cells of a complete staged set that the old results in ``output`` hold good values for (label
        and cell, for the message)."""
        failed = {cell_key(r['label'], r['_cell']): r for r in rows if r.get('error')}
        if not failed:
            return []
        try:
            old = read_result_set(self.output, check=False) or {}
        except ValueError:  # an unreadable old set has no values to keep
            return []
        good = {cell_key(r['label'], r['_cell']) for r in old.get('results', [])
                if not r.get('error') and isinstance(r.get('_cell'), dict)}
        return [f'{r["label"]} @ ' + ', '.join(f'{k} {v}' for k, v in r['_cell'].items())
                for key, r in failed.items() if key in good]

    def _publish(self, staging: str, paths: Dict[str, str]) -> Dict[str, str]:
        """Move a complete staged set onto the output (manifest last) and remove what only the old set had.

        The moves are listed in ``staging/publishing.json`` first, so a kill at any point leaves a state that
        :meth:`_finish_publication` completes (the next run of any kind does it before anything else)."""
        try:
            old = read_result_set(self.output, check=False) or {}
        except ValueError:
            old = {}
        old_files = sorted(set((old.get('_manifest') or {}).get('files', {})))
        new_files = sorted(n for n in os.listdir(staging)
                           if n not in (MANIFEST, PUBLISHING) and not n.startswith(TMP_PREFIX)
                           and os.path.isfile(os.path.join(staging, n)))
        write_text_atomic(os.path.join(staging, PUBLISHING), json.dumps(dict(move=new_files, remove=sorted(
            set(old_files) - set(new_files) - {MANIFEST}))) + '\n')
        self._finish_publication(staging, recovering=False)
        return {k: os.path.join(self.output, os.path.basename(v)) for k, v in paths.items()}

    def _finish_publication(self, staging: str, recovering: bool = True) -> None:
        """Complete a publication listed in ``staging/publishing.json`` (idempotent: files already moved are
        skipped): move the files, then the manifest, remove the old set's other files, remove ``staging``."""
        marker = os.path.join(staging, PUBLISHING)
        if not os.path.isfile(marker):
            return
        with open(marker, encoding='utf-8') as f:
            plan = json.load(f)  # written atomically: whole
        moved = [n for n in plan['move'] if os.path.isfile(os.path.join(staging, n))]
        if recovering:
            _logger.warning('%s: finishing the publication of complete --overwrite results that a stopped run left '
                            'unfinished (%d of %d files still to move)', self.output, len(moved), len(plan['move']))
        for name in moved:
            os.replace(os.path.join(staging, name), os.path.join(self.output, name))
        if os.path.isfile(os.path.join(staging, MANIFEST)):
            os.replace(os.path.join(staging, MANIFEST), os.path.join(self.output, MANIFEST))
        for name in plan['remove']:
            stale = os.path.join(self.output, name)
            if os.path.isfile(stale):
                os.remove(stale)
        shutil.rmtree(staging)


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


def _real(path: str) -> str:
    return os.path.realpath(path)


def _comparable(value: Any) -> Any:
    """A spec part without modification times (information only: equal size and SHA-256 mean equal content)."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items() if k != 'mtime'}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return value


def _differences(old: Any, new: Any, path: str) -> List[Tuple[str, Any, Any]]:
    """``(path, old, new)`` for every leaf that differs (dicts by key, lists by position)."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in sorted(set(old) | set(new), key=str)
                for d in _differences(old.get(k), new.get(k), f'{path}.{k}')]
    if isinstance(old, list) and isinstance(new, list):
        out = [(f'{path} (entries)', len(old), len(new))] if len(old) != len(new) else []
        first = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), None)
        if first is not None:
            if isinstance(old[first], (dict, list)) and type(old[first]) is type(new[first]):
                out += _differences(old[first], new[first], f'{path}[{first}]')
            else:
                out.append((f'{path}[{first}]', old[first], new[first]))
        return out
    return [(path, old, new)]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + '...'


def _describe_file(fp: Optional[Dict[str, Any]]) -> str:
    if not fp:
        return 'missing'
    return f'{fp.get("bytes")} bytes, sha256 {str(fp.get("sha256"))[:12]}...'


def _describe_input(fp: Optional[Dict[str, Any]]) -> str:
    if not fp:
        return 'missing'
    if 'files' in fp:
        return f'{fp["files"]} files, {fp["bytes"]} bytes'
    return _describe_file(fp)
