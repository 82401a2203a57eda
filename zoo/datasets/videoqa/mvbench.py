"""MVBench ("MVBench: A Comprehensive Multi-modal Video Understanding Benchmark", arXiv:2311.17005).

Layout: ``<root>/json/<task>.json``, each a JSON list of ``{"video", "question", "candidates": [str, ...],
"answer": <text of the right candidate>, ["start", "end" seconds]}``; videos under ``<root>/video/<prefix>/``
(``video_prefix={task: prefix}``, as MVBench's own task table gives), ``<root>/video/<task>/``, ``<root>/video/`` or
``<root>/``. Extra item fields (e.g. V-NIAH's ``length`` and ``depth``) are kept in ``record.extra``.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple

from .common import (BenchmarkFormatError, LoadReport, VideoQARecord, VideoResolver, add_record, find_files,
                     opt_float, read_json, register_benchmark, require_list_of_dicts, text)

LAYOUT = ('<root>/json/<task>.json (JSON list of {video, question, candidates, answer[, start, end]}) with videos '
          'in <root>/video/[<task>/]')
_KEYS = ('video', 'question', 'candidates', 'answer')
_KNOWN = set(_KEYS) | {'start', 'end'}


@register_benchmark('mvbench', LAYOUT)
def read_mvbench(root: str, tasks: Optional[Sequence[str]] = None,
                 video_prefix: Optional[Dict[str, str]] = None) -> Tuple[List[VideoQARecord], LoadReport]:
    """Read MVBench-format tasks.

    Args:
        root: data root.
        tasks: task names (JSON file stems) to read; ``None``: all.
        video_prefix: per-task folder under ``<root>/video/`` holding its videos.

    Raises:
        BenchmarkFormatError: no ``json/*.json``, a requested task missing, or a file of another format.
    """
    files = find_files(root, ['json/*.json'])
    if not files:
        raise BenchmarkFormatError(f'no MVBench annotation files in {root!r}: expected {LAYOUT}')
    by_task = {os.path.splitext(os.path.basename(f))[0]: f for f in files}
    if tasks:
        missing = [t for t in tasks if t not in by_task]
        if missing:
            raise BenchmarkFormatError(f'MVBench tasks {missing} not in {root}/json (found: {", ".join(by_task)})')
        by_task = {t: by_task[t] for t in tasks}
    report = LoadReport('mvbench', root, annotation_files=list(by_task.values()))
    resolver = VideoResolver(root)
    records: List[VideoQARecord] = []
    prefix = video_prefix or {}
    for task, path in by_task.items():
        items = require_list_of_dicts(read_json(path, LAYOUT), path, _KEYS, LAYOUT)
        dirs = ([os.path.join('video', prefix[task])] if task in prefix else []) + \
            [os.path.join('video', task), 'video', '']
        for i, it in enumerate(items):
            report.rows += 1
            rid = f'{task}/{i}'
            cands = it.get('candidates')
            if not all(k in it for k in _KEYS) or not isinstance(cands, list) or len(cands) < 2:
                report.skip('malformed_row', rid, 'needs video, question, candidates (a list of >= 2), answer')
                continue
            options = [text(c) for c in cands]
            ans = text(it['answer'])
            answer = options.index(ans) if ans in options else -1
            add_record(records, report, resolver, it['video'], dirs=dirs, id=rid, question=text(it['question']),
                       options=options, answer=answer, start=opt_float(it.get('start')),
                       end=opt_float(it.get('end')), task=task, category=task, benchmark='mvbench',
                       extra={k: v for k, v in it.items() if k not in _KNOWN})
    return records, report
