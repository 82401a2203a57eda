"""Opening a split for training or evaluation: image folders (empty class folders named, timm's ``--class-map``),
video folders configured for clips (frames, size, normalisation, sampling), and the loaders over them."""
from __future__ import annotations

import logging
import os
from typing import Dict, Optional, Sequence, Set, Tuple

from torch.utils.data import DataLoader, DistributedSampler, RandomSampler, SequentialSampler
from torchvision.datasets.folder import IMG_EXTENSIONS

from .folder import TailCheckingBatchSampler
from .image_folder import SafeImageFolder, collate_skip_bad
from .video import VIDEO_EXTENSIONS, FrameCache, FrameSampling
from .video_folder import SafeVideoFolder

_logger = logging.getLogger('zoo.datasets')
_SHORT_LOGGED: Set[Tuple] = set()  # (task, frames held, frames asked): in-memory clips shorter than the frame count

__all__ = ['check_class_folders', 'load_class_map', 'apply_class_map', 'open_folder', 'make_loader', 'open_video_split',
           'configure_clips']


def check_class_folders(root: str, extensions: Sequence[str] = IMG_EXTENSIONS, kind: str = 'image') -> None:
    """Raise ``FileNotFoundError`` naming the class folders of ``root`` that hold no file of ``extensions`` when
    others do (torchvision's own message would read as if the whole split were empty); hidden folders are no
    classes. ``kind`` names the files in the message (``'image'``, ``'video'``)."""
    if not os.path.isdir(root):
        return
    exts = tuple(e.lower() for e in extensions)
    classes = sorted(d.name for d in os.scandir(root) if d.is_dir() and not d.name.startswith('.'))
    empty = []
    for c in classes:
        found, visited = False, set()
        for dirpath, dirnames, files in os.walk(os.path.join(root, c), followlinks=True):
            real = os.path.realpath(dirpath)
            if real in visited:  # a symlink loop: walk each folder once
                dirnames[:] = []
                continue
            visited.add(real)
            if any(f.lower().endswith(exts) for f in files):
                found = True
                break
        if not found:
            empty.append(c)
    if empty and len(empty) < len(classes):
        raise FileNotFoundError(f'class folder(s) {empty[:10]} of {root!r} hold no {kind}s ({len(empty)} of '
                                f'{len(classes)} class folders; extensions {", ".join(extensions)}); add {kind}s or '
                                'remove the empty folder(s)')


def load_class_map(path: str) -> Dict[str, int]:
    """timm's ``--class-map``: a ``.txt`` file of class folder names, one per line, line *i* = class id *i*.

    Raises:
        FileNotFoundError: no such file. ValueError: not ``.txt``, empty, duplicate names, or ids not 0..N-1.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f'--class-map {path!r} does not exist')
    if not path.lower().endswith('.txt'):
        raise ValueError(f'--class-map {path!r}: must be a .txt file with one class folder name per line')
    with open(path, encoding='utf-8') as f:
        names = [line.strip() for line in f if line.strip()]
    if not names:
        raise ValueError(f'--class-map {path!r} is empty; list one class folder name per line')
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f'--class-map {path!r} lists {dup[:5]} more than once')
    return {n: i for i, n in enumerate(names)}


def apply_class_map(ds: SafeImageFolder, class_map: Dict[str, int], path: str) -> SafeImageFolder:
    """Relabel ``ds`` with ``class_map`` (timm's meaning: images of folders not in the map are left out).

    Raises:
        ValueError: a class of the map has no folder in ``ds.root``.
    """
    missing = [c for c in class_map if c not in ds.class_to_idx]
    if missing:
        raise ValueError(f'--class-map {path!r} names {missing[:5]} ({len(missing)} in all), which have no class '
                         f'folder in {ds.root!r}; fix the map or --data-dir')
    old = {i: c for c, i in ds.class_to_idx.items()}
    keep = [(p, class_map[old[t]]) for p, t in ds.samples if old[t] in class_map]
    ds.samples = ds.imgs = keep
    ds.targets = [t for _, t in keep]
    ds.classes = sorted(class_map, key=class_map.get)
    ds.class_to_idx = dict(class_map)
    return ds


def open_folder(root: str, data_root: str, max_per_class: Optional[int] = None,
                class_map: Optional[str] = None, allow_roots: Sequence[str] = ()) -> SafeImageFolder:
    """A :class:`SafeImageFolder` with empty class folders reported by name and ``class_map`` applied; symlinks may
    lead into ``data_root`` and ``allow_roots``.

    Raises:
        FileNotFoundError / NotADirectoryError / ValueError: see :class:`SafeImageFolder` and
            :func:`check_class_folders`.
    """
    check_class_folders(root)
    ds = SafeImageFolder(root, max_per_class=max_per_class, data_root=data_root, allow_roots=allow_roots)
    if class_map:
        apply_class_map(ds, load_class_map(class_map), class_map)
    return ds


def make_loader(ds, batch_size: int, workers: int, pin_memory: bool, sampler=None, shuffle: bool = False,
                generator=None, drop_last: bool = False, collate_fn=None) -> DataLoader:
    """A ``DataLoader`` with ``collate_skip_bad`` (unreadable images set aside and counted, never fatal), or
    ``collate_fn`` (video folders: ``collate_video_skip_bad``).

    With ``drop_last`` over a zoo folder (:class:`~zoo.datasets.folder.SafeFolderMixin`), the samples left out of
    the full batches are still read, as check-only items of the last batch
    (:class:`~zoo.datasets.folder.TailCheckingBatchSampler`): an unreadable file is counted every epoch whatever the
    batch size, and no partial batch trains. ``len(loader)`` is the number of full batches, as with ``drop_last``.
    Over a ``DistributedSampler(drop_last=True)`` (with or without ``drop_last`` here), the few samples it leaves
    out of every process's share are checked too (:func:`~zoo.datasets.folder.left_out_by`).
    """
    common = dict(num_workers=workers, collate_fn=collate_fn or collate_skip_bad, pin_memory=pin_memory,
                  persistent_workers=False)
    if getattr(ds, 'checks_dropped_tail', False) and (drop_last or isinstance(sampler, DistributedSampler)):
        if sampler is None:
            sampler = RandomSampler(ds, generator=generator) if shuffle else SequentialSampler(ds)
        return DataLoader(ds, batch_sampler=TailCheckingBatchSampler(sampler, batch_size, drop_last), **common)
    return DataLoader(ds, batch_size=batch_size, sampler=sampler, shuffle=shuffle, generator=generator,
                      drop_last=drop_last, **common)


def open_video_split(root: str, data_root: str, max_per_class: Optional[int] = None,
                     class_map: Optional[str] = None, allow_roots: Sequence[str] = ()) -> SafeVideoFolder:
    """A :class:`SafeVideoFolder` over ``root`` (files must stay inside ``data_root`` or ``allow_roots``),
    ``class_map`` applied.

    Sampling, size and normalisation are set later by :func:`configure_clips`.

    Raises:
        FileNotFoundError: no folder, no class folders, no videos, or class folders without videos (named, by
            :func:`check_class_folders`). NotADirectoryError: ``root`` is a file.
        ValueError: a bad ``class_map``, a single class.
    """
    check_class_folders(root, VIDEO_EXTENSIONS, 'video')
    ds = SafeVideoFolder(root, data_root=data_root, max_per_class=max_per_class, allow_roots=allow_roots)
    if class_map:
        apply_class_map(ds, load_class_map(class_map), class_map)
    return ds


def configure_clips(ds: SafeVideoFolder, num_frames: int, size: int, mean: Sequence[float], std: Sequence[float],
                    train: bool, seed: int = 0, cache_dir: Optional[str] = None) -> SafeVideoFolder:
    """Set what ``ds`` returns: ``num_frames`` frames per clip (random offsets when ``train``, segment midpoints
    otherwise), ``size`` x ``size`` pixels, normalised with ``mean`` / ``std``; ``cache_dir`` caches the decoded frames
    of deterministic reads on disk. Returns ``ds``.

    In-memory clips (:class:`~zoo.datasets.diagnostic_video.DiagnosticClips`) holding fewer than ``num_frames`` frames
    repeat frames, as a shorter video does; that is logged once per process with the clip length."""
    held = getattr(ds, 'num_frames', None)  # in-memory clips know their length; video files are checked when read
    if held is not None and int(num_frames) > held:
        key = (getattr(ds, 'task', ''), held, int(num_frames))
        if key not in _SHORT_LOGGED:
            _SHORT_LOGGED.add(key)
            _logger.warning('--num-frames %d: the in-memory clips hold %d frames each (meta.json num_frames): '
                            'their frames repeat; write the set with --frames %d or more, or lower --num-frames',
                            int(num_frames), held, int(num_frames))
    ds.sampling = FrameSampling('uniform', int(num_frames), random=bool(train))
    ds.size = int(size)
    ds.mean, ds.std = tuple(mean), tuple(std)
    ds.seed = int(seed)
    ds.cache = FrameCache(cache_dir) if cache_dir and not train else None
    return ds
