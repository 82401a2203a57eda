"""MVBench ("MVBench: A Comprehensive Multi-modal Video Understanding Benchmark", arXiv:2311.17005).

Layout: ``<root>/json/<task>.json``, each a JSON list of ``{"video", "question", "candidates": [str, ...],
"answer": <text of the right candidate>, ["start", "end" seconds]}``; videos under ``<root>/video/<prefix>/``
(``video_prefix={task: prefix}``, as MVBench's own task table gives), ``<root>/video/<task>/``, ``<root>/video/`` or
``<root>/``. Extra item fields (e.g. V-NIAH's ``length`` and ``depth``) are kept in ``record.extra``.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .common import CANDIDATE_KEYS, LoadReport, VideoQARecord, read_json_tasks, register_benchmark, window_seconds

LAYOUT = ('<root>/json/<task>.json (JSON list of {video, question, candidates, answer[, start, end]}) with videos '
          'in <root>/video/[<task>/]')
_KNOWN = set(CANDIDATE_KEYS) | {'start', 'end'}


def _fields(task: str, it: Dict[str, Any]) -> Dict[str, Any]:
    """The record fields of a row; a start / end that is no number raises ``RowError`` (counted as
    ``malformed_row``), one that is negative, not finite or not increasing too (counted as ``bad_window``)."""
    start, end = window_seconds(it)
    return dict(start=start, end=end, task=task, category=task,
                extra={k: v for k, v in it.items() if k not in _KNOWN})


@register_benchmark('mvbench', LAYOUT)
def read_mvbench(root: str, tasks: Optional[Sequence[str]] = None,
                 video_prefix: Optional[Dict[str, str]] = None,
                 allow_roots: Sequence[str] = ()) -> Tuple[List[VideoQARecord], LoadReport]:
    """Read MVBench-format tasks.

    Args:
        root: data root.
        tasks: task names (JSON file stems) to read; ``None``: all.
        video_prefix: per-task folder under ``<root>/video/`` holding its videos.
        allow_roots: folders symlinks under ``root`` may lead into (``--allow-root``).

    Raises:
        BenchmarkFormatError: no ``json/*.json``, a requested task missing, or a file of another format.
    """
    prefix = video_prefix or {}

    def dirs(task: str) -> List[str]:
        return ([os.path.join('video', prefix[task])] if task in prefix else []) + \
            [os.path.join('video', task), 'video', '']

    return read_json_tasks(root, tasks, 'mvbench', 'MVBench', LAYOUT, dirs, _fields, allow_roots)
