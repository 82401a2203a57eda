"""Image folders for training and evaluation: empty class folders named, timm's ``--class-map``, loaders."""
from __future__ import annotations

import os
from typing import Dict, Optional

from torch.utils.data import DataLoader
from torchvision.datasets.folder import IMG_EXTENSIONS

from zoo.datasets import SafeImageFolder, collate_skip_bad

__all__ = ['check_class_folders', 'load_class_map', 'apply_class_map', 'open_folder', 'make_loader']


def check_class_folders(root: str) -> None:
    """Raise ``FileNotFoundError`` naming the class folders of ``root`` that hold no image file (torchvision's own
    message would read as if the whole split were empty)."""
    if not os.path.isdir(root):
        return
    classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
    empty = []
    for c in classes:
        has_image = False
        for _, _, files in os.walk(os.path.join(root, c), followlinks=True):
            if any(f.lower().endswith(IMG_EXTENSIONS) for f in files):
                has_image = True
                break
        if not has_image:
            empty.append(c)
    if empty and len(empty) < len(classes):
        raise FileNotFoundError(f'class folder(s) {empty[:10]} of {root!r} hold no images (of {len(classes)} class '
                                f'folders; extensions {", ".join(IMG_EXTENSIONS)}); add images or remove the empty '
                                'folder(s)')


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
                class_map: Optional[str] = None) -> SafeImageFolder:
    """A :class:`SafeImageFolder` with empty class folders reported by name and ``class_map`` applied."""
    check_class_folders(root)
    ds = SafeImageFolder(root, max_per_class=max_per_class, data_root=data_root)
    if class_map:
        apply_class_map(ds, load_class_map(class_map), class_map)
    return ds


def make_loader(ds, batch_size: int, workers: int, pin_memory: bool, sampler=None, shuffle: bool = False,
                generator=None, drop_last: bool = False, collate_fn=None) -> DataLoader:
    """A ``DataLoader`` with ``collate_skip_bad`` (unreadable images set aside and counted, never fatal), or
    ``collate_fn`` (video folders: ``collate_video_skip_bad``)."""
    return DataLoader(ds, batch_size=batch_size, sampler=sampler, shuffle=shuffle, num_workers=workers,
                      collate_fn=collate_fn or collate_skip_bad, pin_memory=pin_memory, generator=generator, drop_last=drop_last,
                      persistent_workers=False)

