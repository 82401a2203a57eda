"""NExT-QA multiple choice ("NExT-QA: Next Phase of Question-Answering to Explaining Temporal Actions",
arXiv:2105.08276).

Layout: ``<root>/<split>.csv`` (``split='val'`` by default) with columns ``video, frame_count, width, height, question,
answer (0-4), qid, type, a0, a1, a2, a3, a4``; videos ``<root>/NExTVideo/<path>.mp4`` where ``<path>`` comes from
``<root>/map_vid_vidorID.json`` (``{video: "dir/name"}``) when present, else is the video id; also looked for in
``<root>/videos/`` and ``<root>/``. ``type`` is the question type (``CW``, ``TN``, ...); its first letter
(Causal / Temporal / Descriptive) is the category.
"""
from __future__ import annotations

import os
from typing import List, Sequence, Tuple

from .common import (BenchmarkFormatError, LoadReport, VideoQARecord, VideoResolver, add_record, read_json,
                     register_benchmark, text)
from .videomme import read_table

LAYOUT = ('<root>/<split>.csv with columns video, frame_count, width, height, question, answer, qid, type, a0..a4 '
          'and videos in <root>/NExTVideo/ (with map_vid_vidorID.json) or <root>/videos/<video>.mp4')
_COLUMNS = ('video', 'question', 'answer', 'qid', 'a0', 'a1', 'a2', 'a3', 'a4')


@register_benchmark('nextqa_mc', LAYOUT)
def read_nextqa_mc(root: str, split: str = 'val',
                   allow_roots: Sequence[str] = ()) -> Tuple[List[VideoQARecord], LoadReport]:
    """Read the NExT-QA multiple-choice CSV of ``split`` (``val``, ``test`` or ``train``: the file
    ``<root>/<split>.csv``; ``allow_roots``: folders symlinks under ``root`` may lead into).

    Raises:
        BenchmarkFormatError: the CSV is missing, unreadable, or lacks columns.
    """
    path = os.path.join(root, f'{split}.csv')
    if not os.path.isfile(path):
        raise BenchmarkFormatError(f'no NExT-QA annotation file {path!r}: expected {LAYOUT}')
    df = read_table([path], LAYOUT)
    missing = [c for c in _COLUMNS if c not in df.columns]
    if missing:
        raise BenchmarkFormatError(f'{path}: columns {missing} missing (found {list(df.columns)}); expected {LAYOUT}')
    mpath = os.path.join(root, 'map_vid_vidorID.json')
    vmap = read_json(mpath, LAYOUT) if os.path.isfile(mpath) else {}
    if not isinstance(vmap, dict):
        raise BenchmarkFormatError(f'{mpath} is not a JSON object {{video: "dir/name"}}; expected {LAYOUT}')
    report = LoadReport('nextqa_mc', root, annotation_files=[path] + ([mpath] if vmap else []))
    resolver = VideoResolver(root, dirs=('NExTVideo', 'videos', ''), allow_roots=allow_roots)
    records: List[VideoQARecord] = []
    for row in df.to_dict('records'):
        report.rows += 1
        vid = text(row['video'])
        rid = f'{vid}_{text(row["qid"])}'
        options = [text(row[f'a{k}']) for k in range(5)]
        a = text(row['answer'])
        if not a:
            report.skip('no_answer', rid, 'the answer column is empty (expected the index 0-4 of the right option)')
            continue
        answer = int(a) if a.isdigit() else -1
        if answer < 0:
            report.skip('answer_not_in_options', rid, f'answer {a!r} is not an option index 0-4')
            continue
        qtype = text(row.get('type'))
        add_record(records, report, resolver, text(vmap.get(vid, vid)), id=rid, question=text(row['question']),
                   options=options, answer=answer, task=qtype, category=qtype[:1], benchmark='nextqa_mc',
                   extra=dict(frame_count=text(row.get('frame_count'))))
    return records, report
