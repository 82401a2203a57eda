"""ImageFolder trees (``root/<class>/<image>``) for training and evaluation.

Classes are the sorted sub-folder names, as in torchvision's ``ImageFolder``; for an ImageNet ``val`` folder laid out by
synset (``n01440764/...``) this is exactly the class order of timm's ImageNet-1k models.

An image that cannot be read or decoded does not stop a run: :class:`SafeImageFolder` returns a :class:`BadSample`
in its place and :func:`collate_skip_bad` drops it from the batch and hands it back, so the loop can count and report
it. Nothing is skipped silently.

Files are only read from inside the dataset root: class folders and images that are symlinks (or sit under symlinked
folders) resolving outside it are skipped, counted in :attr:`SafeImageFolder.outside` and logged.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
from PIL import Image
from torch.utils.data import default_collate
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import IMG_EXTENSIONS

_logger = logging.getLogger('zoo.datasets')

__all__ = ['BadSample', 'SafeImageFolder', 'collate_skip_bad', 'find_split', 'open_image_folder']


@dataclass(frozen=True)
class BadSample:
    """Stands in for an image that could not be loaded.

    Attributes:
        path: the file.
        error: a one-line reason (exception type and message).
    """
    path: str
    error: str


def _load_rgb(path: str) -> Image.Image:
    with open(path, 'rb') as f:
        img = Image.open(f)
        return img.convert('RGB')  # forces the full decode, so truncated files fail here


class SafeImageFolder(ImageFolder):
    """torchvision ``ImageFolder`` whose ``__getitem__`` returns a :class:`BadSample` for an unreadable image.

    Args:
        root: folder with one sub-folder per class.
        transform: applied to the RGB PIL image (e.g. a timm ``create_transform`` pipeline).
        max_per_class: keep only the first N images (sorted file order) of each class; ``None`` keeps all.
        data_root: files whose real path is outside this folder (default: ``root``) are skipped, not read.

    Attributes:
        outside: paths of the class folders and files skipped because they resolve outside ``data_root``.

    Raises:
        FileNotFoundError: ``root`` is missing, has no class folders, or holds no image files.
        ValueError: ``root`` itself resolves outside ``data_root``.
    """

    def __init__(self, root: str, transform: Optional[Callable] = None, max_per_class: Optional[int] = None,
                 data_root: Optional[str] = None):
        if not os.path.isdir(root):
            raise FileNotFoundError(f'image folder {root!r} does not exist')
        self.data_root = os.path.realpath(data_root if data_root is not None else root)
        if not _inside(os.path.realpath(root), self.data_root):
            raise ValueError(f'image folder {root!r} resolves outside the data root {data_root!r}')
        self.outside: List[str] = []
        try:
            super().__init__(root, transform=transform, loader=_load_rgb)
        except FileNotFoundError as e:
            raise FileNotFoundError(
                f'no images in {root!r}: expected {root}/<class name>/<image> with extensions '
                f'{", ".join(IMG_EXTENSIONS)} ({e})') from None
        keep = [(p, t) for p, t in self.samples if _inside(os.path.realpath(p), self.data_root)]
        if len(keep) != len(self.samples):
            kept = set(keep)
            self.outside.extend(p for p, t in self.samples if (p, t) not in kept)
            self.samples = self.imgs = keep
            self.targets = [t for _, t in keep]
        if self.outside:
            _logger.warning('%s: skipped %d class folder(s) / file(s) resolving outside the data root %s (not read), '
                            'e.g. %s', root, len(self.outside), self.data_root, ', '.join(self.outside[:3]))
        if not self.samples:
            raise FileNotFoundError(f'no images in {root!r} inside the data root {self.data_root!r}')
        if max_per_class is not None:
            seen: dict = {}
            keep = []
            for path, target in self.samples:
                if seen.get(target, 0) < max_per_class:
                    seen[target] = seen.get(target, 0) + 1
                    keep.append((path, target))
            self.samples = self.imgs = keep
            self.targets = [t for _, t in keep]

    def find_classes(self, directory: str) -> Tuple[List[str], dict]:
        """torchvision's class discovery, without class folders that resolve outside the data root."""
        classes, _ = super().find_classes(directory)
        ok = []
        for c in classes:
            if _inside(os.path.realpath(os.path.join(directory, c)), self.data_root):
                ok.append(c)
            else:
                self.outside.append(os.path.join(directory, c))
        if not ok:
            raise FileNotFoundError(f'Couldn\'t find any class folder in {directory} inside the data root.')
        return ok, {c: i for i, c in enumerate(ok)}

    def __getitem__(self, index: int) -> Any:
        path, target = self.samples[index]
        try:
            img = self.loader(path)
        except (OSError, ValueError, Image.DecompressionBombError, SyntaxError) as e:
            return BadSample(path, f'{type(e).__name__}: {e}'.splitlines()[0])
        if self.transform is not None:
            img = self.transform(img)
        return img, target


def _inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def collate_skip_bad(batch: Sequence[Any]) -> Tuple[torch.Tensor, torch.Tensor, List[BadSample]]:
    """Collate ``(image, target)`` pairs, setting :class:`BadSample` entries aside.

    Returns:
        ``images`` ``(B', C, H, W)``, ``targets`` ``(B',)`` int64 with ``B'`` the number of readable samples (may be
        0, then both tensors are empty), and the list of bad samples of this batch.
    """
    bad = [s for s in batch if isinstance(s, BadSample)]
    good = [s for s in batch if not isinstance(s, BadSample)]
    if not good:
        return torch.empty(0), torch.empty(0, dtype=torch.long), bad
    images, targets = default_collate(good)
    return images, targets, bad


def find_split(data_dir: str, names: Sequence[str], role: str) -> str:
    """Return ``data_dir/<name>`` for the first existing name in ``names``.

    Args:
        data_dir: dataset root.
        names: candidate split folder names, e.g. ``('val', 'test')``.
        role: what the split is for, used in the message (``'training'``, ``'validation'``).

    Raises:
        FileNotFoundError: ``data_dir`` is missing or holds none of the names.
        ValueError: a name that is absolute or leads outside ``data_dir`` (``..``, a symlink out).
    """
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f'data dir {data_dir!r} does not exist')
    root = os.path.realpath(data_dir)
    for name in names:
        if os.path.isabs(name) or not _inside(os.path.realpath(os.path.join(data_dir, name)), root):
            raise ValueError(f'{role} split {name!r} is not a sub-folder of the data dir {data_dir!r}; give a folder '
                             'name inside --data-dir (or point --data-dir elsewhere)')
    for name in names:
        path = os.path.join(data_dir, name)
        if os.path.isdir(path):
            return path
    raise FileNotFoundError(f'data dir {data_dir!r} has no {role} split: expected a sub-folder named '
                            f'{" or ".join(repr(n) for n in names)} in ImageFolder layout (<split>/<class>/<image>)')


def open_image_folder(data_dir: str, split: Optional[str] = None, transform: Optional[Callable] = None,
                      max_per_class: Optional[int] = None) -> SafeImageFolder:
    """Open an evaluation folder: ``data_dir/<split>`` if given, else ``data_dir/val`` or ``data_dir/test`` if one
    exists, else ``data_dir`` itself (e.g. an ImageNet ``val`` folder of synset sub-folders).

    Raises:
        FileNotFoundError: missing folder, no class folders, or no images.
    """
    if split:
        root = find_split(data_dir, [split], 'evaluation')
    elif not os.path.isdir(data_dir):
        raise FileNotFoundError(f'data dir {data_dir!r} does not exist')
    else:
        root = next((os.path.join(data_dir, n) for n in ('val', 'test') if os.path.isdir(os.path.join(data_dir, n))),
                    data_dir)
    return SafeImageFolder(root, transform=transform, max_per_class=max_per_class, data_root=data_dir)
