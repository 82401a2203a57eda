"""Video folders (``root/<split>/<class>/<video>``) for training and evaluating video models.

The same rules as :mod:`zoo.datasets.image_folder` (both folders are :class:`~zoo.datasets.folder.SafeFolderMixin` s):
classes are the sorted sub-folder names; class folders and files that resolve outside the data root (symlinks) are
skipped, counted in :attr:`SafeVideoFolder.outside` and logged; a video that cannot be read (missing, undecodable,
truncated, zero frames) comes back as a :class:`BadVideo` (a :class:`~zoo.datasets.folder.BadSample` with a
``reason``) that :func:`collate_video_skip_bad` sets aside, so the loop counts and reports it. Nothing stops a run,
nothing is skipped silently.

Items are ``(clip, target)`` with ``clip`` float32 ``(C, T, H, W)`` normalised by ``mean`` / ``std``; with
``return_info=True`` a third element holds the sampled frame indices and timestamps (collate with
:func:`collate_video_skip_bad`).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.utils.data import default_collate
from torchvision.datasets import DatasetFolder

from .folder import BadSample, CheckOnly, SafeFolderMixin, Unused, evaluation_root, split_bad
from .video import VIDEO_EXTENSIONS, FrameCache, FrameSampling, VideoReadError, frames_to_clip, read_video

__all__ = ['BadVideo', 'SafeVideoFolder', 'collate_video_skip_bad', 'count_bad', 'open_video_folder']

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class BadVideo(BadSample):
    """A :class:`BadSample` for a video, with the :class:`~zoo.datasets.video.VideoReadError` reason
    (``missing``, ``undecodable``, ``zero_frames``, ``truncated``, ``bad_window``)."""
    reason: str = 'undecodable'


def count_bad(bad: Iterable[BadSample]) -> Dict[str, int]:
    """Bad samples per reason (``BadSample`` without a reason counts as ``unreadable``), sorted by reason."""
    c = Counter(getattr(b, 'reason', 'unreadable') for b in bad)
    return dict(sorted(c.items()))


class SafeVideoFolder(SafeFolderMixin, DatasetFolder):
    """A folder of class sub-folders of videos whose ``__getitem__`` returns a :class:`BadVideo` for a bad file.

    Args:
        root: folder with one sub-folder per class.
        sampling: frame sampling (``random=True`` for training: offsets drawn from ``(seed, epoch, index)``).
        size: frame size: int (shorter side, then centre crop) or ``(h, w)``; see
            :func:`zoo.datasets.video.resize_frames`.
        mean, std: per-channel normalisation of ``[0, 1]`` pixels.
        transform: applied to the normalised float clip ``(C, T, H, W)`` (e.g. a flip).
        max_per_class: keep the first N videos (sorted order) of each class; ``None``: all.
        data_root: files resolving outside it (default ``root``) are skipped, not read.
        cache_dir: on-disk cache of decoded frames (deterministic sampling only).
        seed: seed of the random sampling.
        return_info: items become ``(clip, target, info)``, ``info`` = ``{'index': int, 'frame_indices': (T,) int64,
            'timestamps': (T,) float64 seconds}``.
        on_truncated: ``'error'`` (a truncated video is a :class:`BadVideo`) or ``'clamp'`` (its decodable prefix is
            sampled).
        extensions: file endings counted as videos.
        allow_roots: more folders symlinks inside the data root may lead into (``--allow-root``).

    Attributes:
        outside: class folders and files skipped for resolving outside the allowed roots.
        other_files: files of the class folders that are not videos (listed once in the log).
        bad_counts: bad reads per reason in this process (with DataLoader workers, count the ``BadVideo`` items the
            collate function hands back instead).

    Raises:
        FileNotFoundError: ``root`` missing, no class folders, or no video files.
        NotADirectoryError: ``root`` is a file.
        ValueError: ``root`` resolves outside the allowed roots, or holds a single class.
    """

    kind = 'video'

    def __init__(self, root: str, sampling: Optional[FrameSampling] = None, size: Any = 224,
                 mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD,
                 transform: Optional[Callable] = None, max_per_class: Optional[int] = None,
                 data_root: Optional[str] = None, cache_dir: Optional[str] = None, seed: int = 0,
                 return_info: bool = False, on_truncated: str = 'error',
                 extensions: Sequence[str] = VIDEO_EXTENSIONS, allow_roots: Sequence[str] = ()):
        self._check_root(root, data_root, allow_roots)
        if on_truncated not in ('error', 'clamp'):
            raise ValueError(f"on_truncated must be 'error' or 'clamp', got {on_truncated!r}")
        exts = tuple(e.lower() for e in extensions)
        self._read_samples(root, max_per_class, exts, loader=None, extensions=exts, transform=None)
        self.sampling = sampling if sampling is not None else FrameSampling('uniform', 8)
        self.size = size
        self.mean, self.std = tuple(mean), tuple(std)
        self.video_transform = transform
        self.cache = FrameCache(cache_dir) if cache_dir else None
        self.seed = int(seed)
        self.epoch = 0
        self.return_info = return_info
        self.on_truncated = on_truncated
        self.bad_counts: Counter = Counter()

    def set_epoch(self, epoch: int) -> None:
        """Change the random frame offsets (``sampling.random``) for a new epoch."""
        self.epoch = int(epoch)

    def __getitem__(self, index: int) -> Any:
        path, target = self.samples[index]
        gen = np.random.default_rng((self.seed, self.epoch, index)) if self.sampling.random else None
        try:
            clip = read_video(path, self.sampling, size=self.size, generator=gen, cache=self.cache,
                              on_truncated=self.on_truncated)
        except VideoReadError as e:
            self.bad_counts[e.reason] += 1
            return BadVideo(path, f'{e.reason}: {e.detail}', reason=e.reason)
        if isinstance(index, CheckOnly):  # a drop_last left-over: read only to count it if unreadable
            return Unused(path)
        x = frames_to_clip(clip.frames, self.mean, self.std)
        if self.video_transform is not None:
            x = self.video_transform(x)
        if self.return_info:
            return x, target, {'index': index, 'frame_indices': clip.indices, 'timestamps': clip.timestamps}
        return x, target


def collate_video_skip_bad(batch: Sequence[Any]) -> Tuple[torch.Tensor, torch.Tensor, List[BadSample],
                                                           Optional[Dict[str, torch.Tensor]]]:
    """Collate ``(clip, target[, info])`` items, setting :class:`BadSample` entries aside.

    Returns:
        ``clips`` ``(B', C, T, H, W)``, ``targets`` ``(B',)`` int64, the bad samples, and the collated ``info``
        (``index`` ``(B',)``, ``frame_indices`` ``(B', T)``, ``timestamps`` ``(B', T)``) or ``None`` when items carry
        none. ``B'`` may be 0 (then the tensors are empty).
    """
    good, bad = split_bad(batch)
    if not good:
        return torch.empty(0), torch.empty(0, dtype=torch.long), bad, None
    if len(good[0]) == 3:
        clips, targets, info = default_collate(good)
        return clips, targets, bad, info
    clips, targets = default_collate(good)
    return clips, targets, bad, None


def open_video_folder(data_dir: str, split: Optional[str] = None, **kwargs: Any) -> SafeVideoFolder:
    """Open ``data_dir/<split>`` if given, else ``data_dir/val`` or ``data_dir/test`` if one exists, else
    ``data_dir``; ``kwargs`` go to :class:`SafeVideoFolder`.

    Raises:
        FileNotFoundError: missing folder, no class folders, or no videos.
        NotADirectoryError: ``data_dir`` is a file.
        ValueError: a split name leading outside ``data_dir``, a single class.
    """
    return SafeVideoFolder(evaluation_root(data_dir, split, 'video'), data_root=data_dir, **kwargs)
