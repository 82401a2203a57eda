"""Video-MME ("Video-MME: The First-Ever Comprehensive Evaluation Benchmark of Multi-modal LLMs in Video Analysis",
arXiv:2405.21075).

Layout: rows in ``<root>/videomme/*.parquet`` (as published: ``videomme/test-00000-of-00001.parquet``),
``<root>/*.parquet`` or ``<root>[/videomme]/*.jsonl``, with columns ``videoID, duration, domain, sub_category,
task_type, question_id, question, options`` (strings ``"A. ..."``) and ``answer`` (a letter); videos
``<root>/data/<videoID>.mp4`` (or another video extension), ``<root>/videos/`` or ``<root>/``.
"""
from __future__ import annotations

import json
import re
from typing import Any, List, Sequence, Tuple

import numpy as np

from .common import (BenchmarkFormatError, LoadReport, VideoQARecord, VideoResolver, add_record, find_files,
                     register_benchmark, text)

LAYOUT = ('<root>/videomme/*.parquet or <root>/*.jsonl rows {videoID, duration, domain, sub_category, task_type, '
          'question_id, question, options ["A. ...", ...], answer (letter)} with videos in <root>/data/<videoID>.mp4')
_COLUMNS = ('videoID', 'question_id', 'question', 'options', 'answer')


def read_table(files: List[str], layout: str) -> Any:
    """Concatenate parquet / JSON-lines / CSV files into one pandas DataFrame (raises BenchmarkFormatError)."""
    import pandas as pd
    frames = []
    for f in files:
        try:
            if f.endswith('.parquet'):
                frames.append(pd.read_parquet(f))
            elif f.endswith('.jsonl'):
                frames.append(pd.read_json(f, lines=True, dtype=False))
            else:
                frames.append(pd.read_csv(f, dtype=str, keep_default_na=False))
        except ImportError as e:
            raise BenchmarkFormatError(f'cannot read {f}: {e} (install pyarrow to read parquet)') from None
        except Exception as e:  # pandas / pyarrow parse errors have many types
            first = str(e).splitlines()[0][:200] if str(e) else ''
            raise BenchmarkFormatError(f'{f} is not a readable table ({type(e).__name__}: {first}); expected '
                                       f'{layout}') from None
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def _options(x: Any) -> List[str]:
    if isinstance(x, str):
        try:
            x = json.loads(x)
        except json.JSONDecodeError:
            return []
    if isinstance(x, np.ndarray):
        x = x.tolist()
    return [text(o) for o in x] if isinstance(x, (list, tuple)) else []


_LETTER = re.compile(r'^\(?([A-Z])[\.\):]\s*')


@register_benchmark('videomme', LAYOUT)
def read_videomme(root: str, allow_roots: Sequence[str] = ()) -> Tuple[List[VideoQARecord], LoadReport]:
    """Read Video-MME rows (``allow_roots``: folders symlinks under ``root`` may lead into).

    Raises:
        BenchmarkFormatError: no table where the layout expects it, or columns missing.
    """
    files = find_files(root, ['videomme/*.parquet', '*.parquet', 'videomme/*.jsonl', '*.jsonl'], allow_roots)
    if not files:
        raise BenchmarkFormatError(f'no Video-MME annotation table in {root!r}: expected {LAYOUT}')
    df = read_table(files, LAYOUT)
    missing = [c for c in _COLUMNS if c not in df.columns]
    if missing:
        raise BenchmarkFormatError(f'{", ".join(files)}: columns {missing} missing (found {list(df.columns)}); '
                                   f'expected {LAYOUT}')
    report = LoadReport('videomme', root, annotation_files=files)
    resolver = VideoResolver(root, dirs=('data', 'videos', ''), allow_roots=allow_roots)
    records: List[VideoQARecord] = []
    for i, row in enumerate(df.to_dict('records')):
        report.rows += 1
        rid = text(row['question_id']) or f'row {i}'
        if not text(row['videoID']):
            report.skip('no_video', rid, 'the videoID is empty or missing')
            continue
        raw = _options(row['options'])
        if len(raw) < 2:
            report.skip('malformed_row', rid, 'options must be a list of >= 2 strings "A. ..."')
            continue
        options, letters = [], []
        for k, o in enumerate(raw):
            m = _LETTER.match(o)
            letters.append(m.group(1) if m else chr(ord('A') + k))
            options.append(o[m.end():] if m else o)
        letter = text(row['answer']).upper().strip('(). ')
        if not letter:
            report.skip('no_answer', rid, 'the answer is empty (expected the letter of the right option)')
            continue
        answer = letters.index(letter) if letter in letters else -1
        duration = text(row.get('duration'))
        add_record(records, report, resolver, text(row['videoID']), id=rid, question=text(row['question']),
                   options=options, answer=answer, task=text(row.get('task_type')), category=duration,
                   benchmark='videomme', extra=dict(duration=duration, domain=text(row.get('domain')),
                                                    sub_category=text(row.get('sub_category'))))
    return records, report
