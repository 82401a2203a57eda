"""A torch Dataset over video-QA records: sampled frames, indices and timestamps per item, bad videos counted."""
from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Optional, Sequence

from torch.utils.data import Dataset

from ..video import FrameCache, FrameSampling, VideoReadError, read_video
from ..video_folder import BadVideo
from .common import LoadReport, VideoQARecord

__all__ = ['VideoQADataset', 'collate_videoqa']


class VideoQADataset(Dataset):
    """Frames of each record's video (inside its start/end window), read with one fixed, logged protocol.

    Args:
        records: from :func:`zoo.datasets.videoqa.load_benchmark`.
        sampling: the frame protocol (e.g. ``FrameSampling('uniform', 16)`` or ``FrameSampling('fps', 64, fps=1)``).
        size: frame size (see :func:`zoo.datasets.video.resize_frames`).
        cache_dir: on-disk frame cache; a sweep over model sizes then decodes each video once per sampling.
        on_truncated: ``'error'`` (count and skip) or ``'clamp'`` (use the decodable prefix).
        report: the loader's report; read failures are added to it (in this process).

    Items are dicts ``{'record': VideoQARecord, 'frames': uint8 (T, H, W, 3), 'frame_indices': int64 (T,),
    'timestamps': float64 (T,) seconds, 'fps': float}``, or a :class:`~zoo.datasets.video_folder.BadVideo` (with
    ``reason``) for a video that cannot be read.

    Attributes:
        bad_counts: read failures per reason in this process.
    """

    def __init__(self, records: Sequence[VideoQARecord], sampling: FrameSampling, size: Any = None,
                 cache_dir: Optional[str] = None, on_truncated: str = 'error', report: Optional[LoadReport] = None):
        self.records = list(records)
        self.sampling = sampling
        self.size = size
        self.cache = FrameCache(cache_dir) if cache_dir else None
        self.on_truncated = on_truncated
        self.report = report
        self.bad_counts: Counter = Counter()

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> Any:
        r = self.records[index]
        try:
            clip = read_video(r.video, self.sampling, start=r.start, end=r.end, size=self.size, cache=self.cache,
                              on_truncated=self.on_truncated)
        except VideoReadError as e:
            self.bad_counts[e.reason] += 1
            if self.report is not None:
                self.report.skip(e.reason, r.id, e.detail)
            return BadVideo(r.video, f'{e.reason}: {e.detail}', reason=e.reason)
        return {'record': r, 'frames': clip.frames, 'frame_indices': clip.indices, 'timestamps': clip.timestamps,
                'fps': clip.fps}


def collate_videoqa(batch: Sequence[Any]) -> Dict[str, List[Any]]:
    """Keep items as lists (clips may differ in length under fps sampling): ``{'items': [...], 'bad': [...]}``."""
    bad = [b for b in batch if isinstance(b, BadVideo)]
    return {'items': [b for b in batch if not isinstance(b, BadVideo)], 'bad': bad}
