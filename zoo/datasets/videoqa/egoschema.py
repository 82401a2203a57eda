"""EgoSchema ("EgoSchema: A Diagnostic Benchmark for Very Long-form Video Language Understanding",
arXiv:2308.09126).

Layout: ``<root>/questions.json``, a JSON list of ``{"q_uid", "question", "option 0", ..., "option 4"}``; the answers
in a separate JSON object ``{q_uid: int}`` (``<root>/subset_answers.json`` by default: only the public subset has
answers; questions without one are counted as ``no_answer``); videos ``<root>/videos/<q_uid>.mp4`` or
``<root>/<q_uid>.mp4``.
"""
from __future__ import annotations

import os
from typing import List, Optional, Sequence, Tuple

from .common import (BenchmarkFormatError, LoadReport, VideoQARecord, VideoResolver, add_record, read_json,
                     register_benchmark, require_list_of_dicts, text)

LAYOUT = ('<root>/questions.json (JSON list of {q_uid, question, "option 0".."option 4"}), answers '
          '<root>/subset_answers.json ({q_uid: int}), videos <root>/videos/<q_uid>.mp4')


@register_benchmark('egoschema', LAYOUT)
def read_egoschema(root: str, answers: Optional[str] = None,
                   allow_roots: Sequence[str] = ()) -> Tuple[List[VideoQARecord], LoadReport]:
    """Read EgoSchema questions with the answers in ``answers`` (a path relative to ``root``; default
    ``subset_answers.json``; ``allow_roots``: folders symlinks under ``root`` may lead into).

    Raises:
        BenchmarkFormatError: a file missing or of another format.
    """
    qpath = os.path.join(root, 'questions.json')
    apath = os.path.join(root, answers or 'subset_answers.json')
    for p in (qpath, apath):
        if not os.path.isfile(p):
            raise BenchmarkFormatError(f'no EgoSchema file {p!r}: expected {LAYOUT}')
    items = require_list_of_dicts(read_json(qpath, LAYOUT), qpath, ('q_uid', 'question', 'option 0'), LAYOUT,
                                  strict=False)
    ans = read_json(apath, LAYOUT)
    if not isinstance(ans, dict):
        raise BenchmarkFormatError(f'{apath} is not a JSON object {{q_uid: int}}; expected {LAYOUT}')
    report = LoadReport('egoschema', root, annotation_files=[qpath, apath])
    resolver = VideoResolver(root, dirs=('videos', ''), allow_roots=allow_roots)
    records: List[VideoQARecord] = []
    for i, it in enumerate(items):
        report.rows += 1
        if not isinstance(it, dict):
            report.skip('malformed_row', str(i), f'the item is a JSON {type(it).__name__}, not an object')
            continue
        rid = text(it.get('q_uid')) or str(i)
        options = [text(it[f'option {k}']) for k in range(5) if f'option {k}' in it]
        if 'q_uid' not in it or 'question' not in it or len(options) < 2:
            report.skip('malformed_row', rid, 'needs q_uid, question and "option 0".."option 4"')
            continue
        if rid not in ans:
            report.skip('no_answer', rid, f'not in {os.path.basename(apath)}')
            continue
        a = ans[rid]
        a = int(a) if isinstance(a, (int, str)) and str(a).strip().lstrip('-').isdigit() else -1
        add_record(records, report, resolver, rid, id=rid, question=text(it['question']), options=options, answer=a,
                   task='egoschema', category='egoschema', benchmark='egoschema')
    return records, report
