"""LongVideoBench ("LongVideoBench: A Benchmark for Long-context Interleaved Video-Language Understanding",
arXiv:2407.15754).

Layout: ``<root>/lvb_<split>.json`` (``split='val'`` by default), a JSON list of ``{"id", "video_path", "question",
"candidates": [str, ...]`` (or ``"option0"`` .. ``"option4"``), ``"correct_choice": int, "duration",
"question_category"}``; videos in ``<root>/videos/`` or ``<root>/``.
"""
from __future__ import annotations

import os
from typing import List, Sequence, Tuple

from .common import (BenchmarkFormatError, LoadReport, VideoQARecord, VideoResolver, add_record, opt_float,
                     read_json, register_benchmark, require_list_of_dicts, text)

LAYOUT = ('<root>/lvb_<split>.json (JSON list of {id, video_path, question, candidates or option0..option4, '
          'correct_choice, duration, question_category}) with videos in <root>/videos/')


@register_benchmark('longvideobench', LAYOUT)
def read_longvideobench(root: str, split: str = 'val',
                        allow_roots: Sequence[str] = ()) -> Tuple[List[VideoQARecord], LoadReport]:
    """Read LongVideoBench ``lvb_<split>.json`` (``split``: ``val`` or ``test``; ``allow_roots``: folders symlinks
    under ``root`` may lead into).

    Raises:
        BenchmarkFormatError: the file is missing or of another format.
    """
    path = os.path.join(root, f'lvb_{split}.json')
    if not os.path.isfile(path):
        raise BenchmarkFormatError(f'no LongVideoBench annotation file {path!r}: expected {LAYOUT}')
    items = require_list_of_dicts(read_json(path, LAYOUT), path, ('video_path', 'question', 'correct_choice'),
                                  LAYOUT, strict=False)
    report = LoadReport('longvideobench', root, annotation_files=[path])
    resolver = VideoResolver(root, dirs=('videos', ''), allow_roots=allow_roots)
    records: List[VideoQARecord] = []
    for i, it in enumerate(items):
        report.rows += 1
        if not isinstance(it, dict):
            report.skip('malformed_row', str(i), f'the item is a JSON {type(it).__name__}, not an object')
            continue
        rid = text(it.get('id')) or str(i)
        cands = it.get('candidates')
        if not isinstance(cands, list):
            cands = [it[f'option{k}'] for k in range(10) if it.get(f'option{k}') not in (None, '', 'N/A')]
        choice = it.get('correct_choice')
        if not all(k in it for k in ('video_path', 'question')) or len(cands) < 2 or isinstance(choice, bool) \
                or not isinstance(choice, int):
            report.skip('malformed_row', rid, 'needs video_path, question, >= 2 candidates, integer correct_choice')
            continue
        cat = text(it.get('question_category'))
        add_record(records, report, resolver, it['video_path'], id=rid, question=text(it['question']),
                   options=[text(c) for c in cands], answer=choice, task=cat, category=cat,
                   benchmark='longvideobench', extra=dict(duration=opt_float(it.get('duration'))))
    return records, report
