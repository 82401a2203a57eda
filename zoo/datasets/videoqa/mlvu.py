"""MLVU ("MLVU: A Comprehensive Benchmark for Multi-Task Long Video Understanding", arXiv:2406.04264), multiple choice.

Layout: ``<root>/json/<task>.json`` (e.g. ``1_plotQA.json``), each a JSON list of ``{"video", "duration",
"question", "candidates": [str, ...], "answer": <text>, "question_type"}``; videos in ``<root>/video/<task>/``,
``<root>/video/`` or ``<root>/``.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .common import LoadReport, VideoQARecord, opt_float, read_json_tasks, register_benchmark, text

LAYOUT = ('<root>/json/<task>.json (JSON list of {video, duration, question, candidates, answer, question_type}) '
          'with videos in <root>/video/<task>/')


def _fields(task: str, it: Dict[str, Any]) -> Dict[str, Any]:
    qtype = text(it.get('question_type')) or task
    return dict(task=qtype, category=qtype, extra=dict(duration=opt_float(it.get('duration'))))


@register_benchmark('mlvu', LAYOUT)
def read_mlvu(root: str, tasks: Optional[Sequence[str]] = None,
              allow_roots: Sequence[str] = ()) -> Tuple[List[VideoQARecord], LoadReport]:
    """Read MLVU multiple-choice tasks (``tasks``: JSON file stems; ``None``: all; ``allow_roots``: folders symlinks
    may lead into).

    Raises:
        BenchmarkFormatError: no ``json/*.json``, a requested task missing, or a file of another format.
    """
    return read_json_tasks(root, tasks, 'mlvu', 'MLVU', LAYOUT, lambda task: [os.path.join('video', task), 'video', ''],
                           _fields, allow_roots)
