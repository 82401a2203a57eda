"""MLVU ("MLVU: A Comprehensive Benchmark for Multi-Task Long Video Understanding", arXiv:2406.04264), multiple choice.

Layout: ``<root>/json/<task>.json`` (e.g. ``1_plotQA.json``), each a JSON list of ``{"video", "duration",
"question", "candidates": [str, ...], "answer": <text>, "question_type"}``; videos in ``<root>/video/<task>/``,
``<root>/video/`` or ``<root>/``.
"""
from __future__ import annotations

import os
from typing import List, Optional, Sequence, Tuple

from .common import (BenchmarkFormatError, LoadReport, VideoQARecord, VideoResolver, add_record, find_files,
                     opt_float, read_json, register_benchmark, require_list_of_dicts, text)

LAYOUT = ('<root>/json/<task>.json (JSON list of {video, duration, question, candidates, answer, question_type}) '
          'with videos in <root>/video/<task>/')
_KEYS = ('video', 'question', 'candidates', 'answer')


@register_benchmark('mlvu', LAYOUT)
def read_mlvu(root: str, tasks: Optional[Sequence[str]] = None) -> Tuple[List[VideoQARecord], LoadReport]:
    """Read MLVU multiple-choice tasks (``tasks``: JSON file stems; ``None``: all).

    Raises:
        BenchmarkFormatError: no ``json/*.json``, a requested task missing, or a file of another format.
    """
    files = find_files(root, ['json/*.json'])
    if not files:
        raise BenchmarkFormatError(f'no MLVU annotation files in {root!r}: expected {LAYOUT}')
    by_task = {os.path.splitext(os.path.basename(f))[0]: f for f in files}
    if tasks:
        missing = [t for t in tasks if t not in by_task]
        if missing:
            raise BenchmarkFormatError(f'MLVU tasks {missing} not in {root}/json (found: {", ".join(by_task)})')
        by_task = {t: by_task[t] for t in tasks}
    report = LoadReport('mlvu', root, annotation_files=list(by_task.values()))
    resolver = VideoResolver(root)
    records: List[VideoQARecord] = []
    for task, path in by_task.items():
        items = require_list_of_dicts(read_json(path, LAYOUT), path, _KEYS, LAYOUT)
        dirs = [os.path.join('video', task), 'video', '']
        for i, it in enumerate(items):
            report.rows += 1
            rid = f'{task}/{i}'
            cands = it.get('candidates')
            if not all(k in it for k in _KEYS) or not isinstance(cands, list) or len(cands) < 2:
                report.skip('malformed_row', rid, 'needs video, question, candidates (a list of >= 2), answer')
                continue
            options = [text(c) for c in cands]
            ans = text(it['answer'])
            qtype = text(it.get('question_type')) or task
            add_record(records, report, resolver, it['video'], dirs=dirs, id=rid, question=text(it['question']),
                       options=options, answer=options.index(ans) if ans in options else -1, task=qtype,
                       category=qtype, benchmark='mlvu', extra=dict(duration=opt_float(it.get('duration'))))
    return records, report
