"""The record type, load report, registry and path rules shared by the video-QA benchmark readers."""
from __future__ import annotations

import json
import logging
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..folder import allow_root_hint, check_allow_roots, escape_of, inside_any
from ..video import VIDEO_EXTENSIONS

_logger = logging.getLogger('zoo.datasets')

__all__ = ['VideoQARecord', 'LoadReport', 'BenchmarkFormatError', 'RowError', 'window_seconds', 'register_benchmark',
           'list_benchmarks', 'get_benchmark', 'load_benchmark', 'VideoResolver']


class BenchmarkFormatError(ValueError):
    """A data root without the expected annotation file, or an annotation file of another format."""


class RowError(ValueError):
    """A row that cannot be used: skipped and counted under ``reason`` (with ``detail`` as the example)."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f'{reason}: {detail}')
        self.reason, self.detail = reason, detail


@dataclass
class VideoQARecord:
    """One multiple-choice question about one video.

    Attributes:
        id: unique within the benchmark.
        video: absolute path of the video file, inside the data root.
        question: the question text.
        options: the candidate answers, text only (no letter prefixes).
        answer: index of the correct option in ``options``.
        start, end: optional window in seconds that the question is about.
        task: the benchmark's task / question type.
        category: a coarser grouping used in reports (e.g. Video-MME duration, NExT-QA C/T/D).
        benchmark: registry name of the reader.
        extra: other fields of the row worth keeping (duration, domain, V-NIAH length and depth, ...).
    """
    id: str
    video: str
    question: str
    options: List[str]
    answer: int
    start: Optional[float] = None
    end: Optional[float] = None
    task: str = ''
    category: str = ''
    benchmark: str = ''
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class LoadReport:
    """Rows read and rows skipped per reason, and, from reading or probing, the
    :class:`~zoo.datasets.video.VideoReadError` reasons ``undecodable``, ``truncated``, ``zero_frames``,
    ``bad_window``.

    Row reasons: ``missing_video`` (no such file), ``outside_root`` (a symlink leading out of the data root and the
    ``--allow-root`` folders), ``escapes_root`` (a video name that leaves the data root by ``..`` or an absolute
    path), ``no_video`` (no video name), ``no_question``, ``empty_option``, ``duplicate_options``, ``no_answer``
    (an empty answer, or none in the answer file), ``answer_not_in_options``, ``bad_window`` (a start / end that is
    not finite, negative, or not increasing), ``duplicate_id`` (a question id seen before; the first row is kept)
    and ``malformed_row`` (a row that is not an object, lacks fields, or has a start / end that is no number).

    ``examples`` keeps up to 5 ``(row id, detail)`` pairs per reason.
    """
    benchmark: str
    root: str
    annotation_files: List[str] = field(default_factory=list)
    rows: int = 0
    kept: int = 0
    skipped: Counter = field(default_factory=Counter)
    examples: Dict[str, List[Tuple[str, str]]] = field(default_factory=dict)

    #: folders that ``--allow-root`` would admit (targets of symlinks that leave the data root)
    allow_roots_needed: List[str] = field(default_factory=list)
    #: what the rows name, for the messages: ``'video'``, or ``'image'`` for the image-QA reader
    media: str = 'video'
    #: the ids of the rows kept so far (a repeated id is skipped as ``duplicate_id``)
    ids: set = field(default_factory=set, repr=False)

    def skip(self, reason: str, row_id: str, detail: str = '') -> None:
        self.skipped[reason] += 1
        ex = self.examples.setdefault(reason, [])
        if len(ex) < 5:
            ex.append((str(row_id), detail))

    def hint(self) -> str:
        """What to do about the skipped rows, one sentence (``''`` when nothing is skipped for a reason with a
        fix): symlinks leaving the data root name ``--allow-root``, missing videos the layout."""
        parts, m = [], self.media
        if self.skipped.get('outside_root'):
            first = self.examples['outside_root'][0][1]
            dirs = ' '.join(f'--allow-root {d}' for d in self.allow_roots_needed[:3])
            parts.append(f'{self.skipped["outside_root"]} rows name {m}s that lead outside the data root (e.g. '
                         f'{first})' + (f'; to read them, pass {dirs} (repeatable)' if dirs else ''))
        if self.skipped.get('escapes_root'):
            first = self.examples['escapes_root'][0][1]
            parts.append(f'{self.skipped["escapes_root"]} rows name {m}s by paths that leave the data root (e.g. '
                         f'{first}); {m} names must stay inside the data root: fix the annotation file')
        if self.skipped.get('missing_video'):
            first = self.examples['missing_video'][0][1]
            parts.append(f'{self.skipped["missing_video"]} rows name {m}s that do not exist (e.g. {first!r}); '
                         f'check the layout: {get_benchmark(self.benchmark)[1]}' if self.benchmark in _REGISTRY else
                         f'{self.skipped["missing_video"]} rows name {m}s that do not exist (e.g. {first!r})')
        return '; '.join(parts)

    def summary(self) -> Dict[str, Any]:
        """A JSON-ready dict: benchmark, root, annotation files, rows, kept, skipped per reason, examples."""
        return dict(benchmark=self.benchmark, root=self.root, annotation_files=list(self.annotation_files),
                    rows=self.rows, kept=self.kept, skipped=dict(sorted(self.skipped.items())),
                    examples={k: [list(e) for e in v] for k, v in sorted(self.examples.items())},
                    **({'allow_roots_needed': list(self.allow_roots_needed)} if self.allow_roots_needed else {}))

    def log(self) -> None:
        if self.skipped:
            hint = self.hint()
            _logger.warning('%s: kept %d of %d rows; skipped %s%s', self.benchmark, self.kept, self.rows,
                            ', '.join(f'{k}={v}' for k, v in sorted(self.skipped.items())),
                            f' ({hint})' if hint else '')


Reader = Callable[..., Tuple[List[VideoQARecord], LoadReport]]
_REGISTRY: Dict[str, Tuple[Reader, str]] = {}


def register_benchmark(name: str, layout: str) -> Callable[[Reader], Reader]:
    """Register a reader ``fn(root, **kwargs) -> (records, report)`` under an lmms-eval task name.

    Args:
        name: the key (lower case).
        layout: one line describing the expected data-root layout (used in error messages).

    Raises:
        ValueError: ``name`` is already registered.
    """
    def deco(fn: Reader) -> Reader:
        if name in _REGISTRY:
            raise ValueError(f'benchmark {name!r} is already registered (by {_REGISTRY[name][0].__module__}); '
                             'choose another name')
        _REGISTRY[name] = (fn, layout)
        return fn
    return deco


def list_benchmarks() -> List[str]:
    """Registered benchmark names, sorted."""
    return sorted(_REGISTRY)


def get_benchmark(name: str) -> Tuple[Reader, str]:
    """The reader and layout line registered under ``name``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    key = name.lower()
    if key not in _REGISTRY:
        raise ValueError(f'unknown benchmark {name!r}; known: {", ".join(list_benchmarks())}')
    return _REGISTRY[key]


def load_benchmark(name: str, root: str, probe: bool = False, allow_roots: Sequence[str] = (),
                   **kwargs: Any) -> Tuple[List[VideoQARecord], LoadReport]:
    """Read benchmark ``name`` from ``root``.

    Args:
        name: a registered name (see :func:`list_benchmarks`).
        root: the data root.
        probe: also open every video (first and last frame decoded) and drop those that fail, counted per reason;
            otherwise such videos are found when read.
        allow_roots: folders that symlinks inside ``root`` may lead into (``--allow-root``); any other escape is
            skipped as ``outside_root``.
        kwargs: reader options (e.g. ``tasks``, ``split``).

    Returns:
        The usable records and the :class:`LoadReport`.

    Raises:
        ValueError: unknown benchmark, or an option the reader does not take (e.g. ``split`` for MVBench).
        FileNotFoundError: ``root`` missing.
        NotADirectoryError: ``root`` is a file.
        BenchmarkFormatError: no annotation file where the layout expects it, or a file of another format.
        FileNotFoundError / NotADirectoryError: an ``allow_roots`` entry is no existing folder.
    """
    fn, layout = get_benchmark(name)
    if os.path.isfile(root):
        raise NotADirectoryError(f'data root {root!r} for {name} is a file, not a folder; --data-root takes the '
                                 f'folder laid out as: {layout}')
    if not os.path.isdir(root):
        raise FileNotFoundError(f'data root {root!r} for {name} does not exist; expected layout: {layout}')
    check_allow_roots(allow_roots)
    import inspect
    takes = inspect.signature(fn).parameters
    unknown = [k for k in kwargs if k not in takes]
    if unknown:
        own = [k for k in takes if k not in ('root', 'allow_roots')]
        raise ValueError(f'{name} takes no {", ".join(unknown)} option (its options: {", ".join(own) or "none"})')
    records, report = fn(root, allow_roots=allow_roots, **kwargs)
    if probe:
        records = probe_records(records, report)
    report.kept = len(records)
    report.log()
    return records, report


def probe_records(records: Sequence[VideoQARecord], report: LoadReport) -> List[VideoQARecord]:
    """Keep the records whose video opens and decodes its first and last frame; count the others per reason."""
    from ..video import VideoReadError, probe_video
    status: Dict[str, Optional[VideoReadError]] = {}
    keep = []
    for r in records:
        if r.video not in status:
            try:
                probe_video(r.video)
                status[r.video] = None
            except VideoReadError as e:
                status[r.video] = e
        err = status[r.video]
        if err is None:
            keep.append(r)
        else:
            report.skip(err.reason, r.id, err.detail)
    return keep


class VideoResolver:
    """Turns a video name from an annotation row into a file inside the data root.

    Candidates are tried in order; a candidate whose real path (symlinks followed, ``..`` applied) lies neither in
    the root nor in one of ``allow_roots`` is refused. ``resolve`` returns ``(path, None)`` or ``(None, reason)``
    with reason ``outside_root`` (through a symlink: ``last_escape`` then holds the ``(link, target)`` that left the
    root), ``escapes_root`` (the name itself leaves the root: ``..`` or an absolute path; no ``--allow-root`` is
    suggested for it), ``missing_video`` or ``no_video`` (an empty name).

    Args:
        root: the data root.
        dirs: folders (relative to the root) to look in, in order.
        extensions: endings to try when the name has none of :data:`~zoo.datasets.video.VIDEO_EXTENSIONS`.
        allow_roots: more folders symlinks may lead into (``--allow-root``).
    """

    def __init__(self, root: str, dirs: Sequence[str] = ('',), extensions: Sequence[str] = VIDEO_EXTENSIONS,
                 allow_roots: Sequence[str] = ()):
        self.root = root
        self.real_root = os.path.realpath(root)
        self.allowed = [self.real_root] + [os.path.realpath(r) for r in allow_roots]
        self.dirs = list(dirs)
        self.extensions = list(extensions)
        self.last_escape: Optional[Tuple[str, str]] = None

    def resolve(self, name: str, dirs: Optional[Sequence[str]] = None) -> Tuple[Optional[str], Optional[str]]:
        name = text(name)
        if not name:
            return None, 'no_video'
        names = [name] if name.lower().endswith(tuple(VIDEO_EXTENSIONS)) else \
            [name + e for e in self.extensions] + [name]
        outside = None
        for d in (self.dirs if dirs is None else dirs):
            for n in names:
                cand = os.path.join(self.root, d, n)
                if not inside_any(cand, self.allowed):
                    if outside is None or (os.path.exists(cand) and not os.path.exists(outside)):
                        outside = cand  # named for the message: an existing file first
                    continue
                if os.path.isfile(cand):
                    return os.path.abspath(cand), None
        if outside is not None:
            link, target = escape_of(outside, self.root)
            if not os.path.islink(link):  # no symlink on the way: the name itself leaves the root
                self.last_escape = None
                return None, 'escapes_root'
            self.last_escape = (link, target)
            return None, 'outside_root'
        return None, 'missing_video'


def add_record(records: List[VideoQARecord], report: LoadReport, resolver: VideoResolver, video_name: Any,
               dirs: Optional[Sequence[str]] = None, **fields: Any) -> None:
    """Check the row (id seen before, question, options, answer index), resolve the video and append the record,
    or count why not under one of the :class:`LoadReport` reasons."""
    rid = str(fields['id'])
    opts = fields['options']
    ans = fields['answer']
    problem = None
    if rid in report.ids:
        problem = ('duplicate_id', f'question id {rid!r} appears more than once (the first row is kept)')
    elif not text(fields.get('question')):
        problem = ('no_question', 'the question is empty or null')
    elif any(not o for o in opts):
        problem = ('empty_option', f'option {[k for k, o in enumerate(opts) if not o]} of {opts} is empty')
    elif len({o.casefold() for o in opts}) < len(opts):
        problem = ('duplicate_options', f'options {opts} repeat one text: an answer naming it would be ambiguous')
    elif not isinstance(ans, int) or not 0 <= ans < len(opts):
        problem = ('answer_not_in_options', f'answer {ans!r} for {len(opts)} options')
    if problem is not None:
        report.skip(problem[0], rid, problem[1])
        return
    path, reason = resolver.resolve(video_name, dirs)
    if path is None:
        detail = text(video_name) or 'the row names no video'
        if reason == 'outside_root' and resolver.last_escape:
            link, target = resolver.last_escape
            detail = f'{link} -> {target}'
            need = allow_root_hint(target)
            if need not in report.allow_roots_needed:
                report.allow_roots_needed.append(need)
        elif reason == 'escapes_root':
            detail = f'{text(video_name)!r} leads out of {report.root!r}'
        report.skip(reason, rid, detail)
        return
    report.ids.add(rid)
    records.append(VideoQARecord(video=path, **fields))


#: the fields every item of an MVBench-style task file (``<root>/json/<task>.json``) needs
CANDIDATE_KEYS = ('video', 'question', 'candidates', 'answer')


def read_json_tasks(root: str, tasks: Optional[Sequence[str]], benchmark: str, title: str, layout: str,
                    dirs: Callable[[str], List[str]],
                    fields: Callable[[str, Dict[str, Any]], Dict[str, Any]],
                    allow_roots: Sequence[str] = ()) -> Tuple[List[VideoQARecord], LoadReport]:
    """Read MVBench-style task files: ``<root>/json/<task>.json``, each a JSON list of ``{"video", "question",
    "candidates": [str, ...], "answer": <text of the right candidate>, ...}`` (MVBench, MLVU).

    Row ids are ``<task>/<index>``; a row without the :data:`CANDIDATE_KEYS` or with fewer than 2 candidates is
    counted as ``malformed_row``, an answer that is none of the candidates as ``answer_not_in_options``.

    Args:
        root: data root.
        tasks: task names (JSON file stems) to read; ``None``: all.
        benchmark: registry name, stored in the report and the records.
        title: the benchmark's name in messages (``'MVBench'``).
        layout: the expected layout, in messages.
        dirs: the folders (relative to ``root``) that hold a task's videos, in search order.
        fields: more record fields (``task``, ``category``, ``start``, ``extra``, ...) of a task's row.
        allow_roots: folders symlinks may lead into besides ``root``.

    Raises:
        BenchmarkFormatError: no ``json/*.json``, a requested task missing, or a file of another format.
    """
    files = find_files(root, ['json/*.json'], allow_roots)
    if not files:
        raise BenchmarkFormatError(f'no {title} annotation files in {root!r}: expected {layout}')
    by_task = {os.path.splitext(os.path.basename(f))[0]: f for f in files}
    if tasks:
        missing = [t for t in tasks if t not in by_task]
        if missing:
            raise BenchmarkFormatError(f'{title} tasks {missing} not in {root}/json (found: {", ".join(by_task)})')
        by_task = {t: by_task[t] for t in tasks}
    report = LoadReport(benchmark, root, annotation_files=list(by_task.values()))
    resolver = VideoResolver(root, allow_roots=allow_roots)
    records: List[VideoQARecord] = []
    for task, path in by_task.items():
        items = require_list_of_dicts(read_json(path, layout), path, CANDIDATE_KEYS, layout, strict=False)
        task_dirs = dirs(task)
        for i, it in enumerate(items):
            report.rows += 1
            rid = f'{task}/{i}'
            if not isinstance(it, dict):
                report.skip('malformed_row', rid, f'the item is a JSON {type(it).__name__}, not an object')
                continue
            cands = it.get('candidates')
            if not all(k in it for k in CANDIDATE_KEYS) or not isinstance(cands, list) or len(cands) < 2:
                report.skip('malformed_row', rid, 'needs video, question, candidates (a list of >= 2), answer')
                continue
            options = [text(c) for c in cands]
            ans = text(it['answer'])
            if not ans:
                report.skip('no_answer', rid, 'the answer is empty or null (expected the text of the right candidate)')
                continue
            try:
                more = fields(task, it)
            except RowError as e:
                report.skip(e.reason, rid, e.detail)
                continue
            add_record(records, report, resolver, it['video'], dirs=task_dirs, id=rid, question=text(it['question']),
                       options=options, answer=options.index(ans) if ans in options else -1, benchmark=benchmark,
                       **more)
    return records, report


def read_json(path: str, expected: str) -> Any:
    """Parse a JSON file, or raise :class:`BenchmarkFormatError` naming ``expected``."""
    try:
        with open(path, encoding='utf-8') as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BenchmarkFormatError(f'{path} is not JSON ({e}); expected {expected}') from None


def require_list_of_dicts(data: Any, path: str, keys: Iterable[str], expected: str, strict: bool = True) -> List:
    """Check the top-level shape of a JSON annotation file: a list of objects of which at least one has ``keys``
    (``strict=False``: items that are no object may be among them, for the reader to count as bad rows)."""
    if not isinstance(data, list) or (strict and not all(isinstance(x, dict) for x in data)) or \
            (data and not any(isinstance(x, dict) for x in data)):
        raise BenchmarkFormatError(f'{path} is not a JSON list of objects; expected {expected}')
    keys = list(keys)
    if data and not any(isinstance(x, dict) and all(k in x for k in keys) for x in data):
        raise BenchmarkFormatError(f'{path}: no item has the fields {", ".join(keys)}; expected {expected}')
    return data


def find_files(root: str, patterns: Sequence[str], allow_roots: Sequence[str] = ()) -> List[str]:
    """Sorted files under ``root`` matching the first glob pattern that matches anything (their real paths inside the
    root or ``allow_roots`` only)."""
    import glob
    allowed = [os.path.realpath(r) for r in (root, *allow_roots)]
    for pat in patterns:
        hits = sorted(p for p in glob.glob(os.path.join(root, pat)) if os.path.isfile(p) and inside_any(p, allowed))
        if hits:
            return hits
    return []


def text(x: Any) -> str:
    """A cell as stripped text; ``None`` and NaN (pandas' empty cell) are ``''``."""
    if x is None or (isinstance(x, float) and x != x):
        return ''
    return str(x).strip()


def opt_float(x: Any) -> Optional[float]:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if v == v else None  # NaN -> None


def window_seconds(row: Dict[str, Any], start_key: str = 'start', end_key: str = 'end') -> Tuple[Optional[float],
                                                                                                 Optional[float]]:
    """A row's optional ``(start, end)`` window in seconds (absent, null or ``''``: ``None``).

    Raises:
        RowError: reason ``malformed_row``: a value that is no number (``"abc"``, a list, a bool); reason
            ``bad_window``: a number that is not finite, a negative one, or an end not after the start. Never read as
            0 or the whole video.
    """
    out = []
    for key in (start_key, end_key):
        x = row.get(key)
        if x is None or (isinstance(x, str) and not x.strip()):
            out.append(None)
            continue
        try:
            if isinstance(x, bool):
                raise TypeError(key)
            v = float(x)
        except (TypeError, ValueError):
            raise RowError('malformed_row', f'{key} {x!r} is not a number of seconds') from None
        if not math.isfinite(v) or v < 0:
            raise RowError('bad_window', f'{key} {x!r} is not a finite number of seconds >= 0')
        out.append(v)
    if out[0] is not None and out[1] is not None and out[1] <= out[0]:
        raise RowError('bad_window', f'{end_key} {out[1]:g} s is not after {start_key} {out[0]:g} s')
    return out[0], out[1]
