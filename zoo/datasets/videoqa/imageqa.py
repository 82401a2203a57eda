"""Image QA in MVBench layout (``imageqa``): the set ``zoo make-imageqa`` writes, for the video-LLM's tiled images.

Layout: ``<root>/json/<task>.json``, each a JSON list of ``{"image", "question", "candidates": [str, ...], "answer":
<text of the right candidate>}`` (other fields kept in ``record.extra``); images (PNG / JPEG) under
``<root>/image/<task>/``, ``<root>/image/`` or ``<root>/``. A record's ``video`` field holds the image path and
``extra['modality'] == 'image'``: ``zoo train-vlm --benchmark imageqa`` reads the images
(:class:`zoo.tasks.imageqa.ImageQATraining`); the video readers cannot.
"""
from __future__ import annotations

import glob
import json
import os
from typing import List, Optional, Sequence, Tuple

from ..folder import allow_root_hint, escape_of, inside_any
from .common import BenchmarkFormatError, LoadReport, VideoQARecord, register_benchmark

LAYOUT = ('<root>/json/<task>.json (JSON list of {image, question, candidates, answer}) with images in '
          '<root>/image/[<task>/] (zoo make-imageqa)')
IMAGE_EXTENSIONS = ('.png', '.jpg', '.jpeg')
_KNOWN = {'image', 'question', 'candidates', 'answer'}

__all__ = ['read_imageqa', 'IMAGE_EXTENSIONS']


@register_benchmark('imageqa', LAYOUT)
def read_imageqa(root: str, tasks: Optional[Sequence[str]] = None,
                 allow_roots: Sequence[str] = ()) -> Tuple[List[VideoQARecord], LoadReport]:
    """Read image-QA task files (the layout above).

    Rows are skipped and counted per reason: ``malformed_row`` (not an object, a missing field, fewer than 2
    candidates), ``answer_not_in_options``, ``missing_video`` (no such image), ``outside_root`` (an image path that
    leaves the root and the ``allow_roots``; the report's hint names the ``--allow-root`` that would admit it).

    Raises:
        BenchmarkFormatError: no ``json/*.json``, a requested task missing, or a file that is not a JSON list.
    """
    report = LoadReport('imageqa', root, media='image')
    files = sorted(glob.glob(os.path.join(root, 'json', '*.json')))
    names = {os.path.splitext(os.path.basename(f))[0]: f for f in files}
    if not names:
        raise BenchmarkFormatError(f'no annotation files in {os.path.join(root, "json")!r}; expected layout: {LAYOUT}')
    wanted = list(names) if tasks is None else list(tasks)
    missing = [t for t in wanted if t not in names]
    if missing:
        raise BenchmarkFormatError(f'imageqa task(s) {missing} not in {root!r} (it has {sorted(names)})')
    allowed = [os.path.realpath(root)] + [os.path.realpath(r) for r in allow_roots]
    records: List[VideoQARecord] = []
    for task in wanted:
        path = names[task]
        report.annotation_files.append(path)
        try:
            with open(path, encoding='utf-8') as f:
                rows = json.load(f)
        except (OSError, ValueError) as e:
            raise BenchmarkFormatError(f'{path!r} is not a readable JSON file: {e}') from None
        if not isinstance(rows, list):
            raise BenchmarkFormatError(f'{path!r} holds a {type(rows).__name__}, expected a JSON list; layout: '
                                       f'{LAYOUT}')
        for k, row in enumerate(rows):
            report.rows += 1
            rid = f'{task}/{k}'
            if not isinstance(row, dict) or not _KNOWN <= set(row) or not isinstance(row['candidates'], list) or \
                    len(row['candidates']) < 2:
                report.skip('malformed_row', rid, f'needs {sorted(_KNOWN)} with 2+ candidates')
                continue
            options = [str(o) for o in row['candidates']]
            if str(row['answer']) not in options:
                report.skip('answer_not_in_options', rid, f'{row["answer"]!r} not in {options}')
                continue
            image = None
            for d in (os.path.join('image', task), 'image', ''):
                cand = os.path.join(root, d, str(row['image']))
                if os.path.splitext(cand)[1].lower() in IMAGE_EXTENSIONS and os.path.isfile(cand):
                    image = cand
                    break
            if image is None:
                report.skip('missing_video', rid, str(row['image']))
                continue
            if not inside_any(image, allowed):
                link, target = escape_of(image, root)
                need = allow_root_hint(target)
                if need not in report.allow_roots_needed:
                    report.allow_roots_needed.append(need)
                report.skip('outside_root', rid, f'{link} -> {target}')
                continue
            extra = {k2: v for k2, v in row.items() if k2 not in _KNOWN}
            records.append(VideoQARecord(id=rid, video=os.path.abspath(image), question=str(row['question']),
                                         options=options, answer=options.index(str(row['answer'])), task=task,
                                         category=task, benchmark='imageqa', extra=dict(extra, modality='image')))
    return records, report
