"""ImageFolder trees (``root/<class>/<image>``) for training and evaluation.

Classes are the sorted sub-folder names, as in torchvision's ``ImageFolder``; for an ImageNet ``val`` folder laid out by
synset (``n01440764/...``) this is exactly the class order of timm's ImageNet-1k models.

An image that cannot be read or decoded does not stop a run: :class:`SafeImageFolder` returns a :class:`BadSample`
in its place and :func:`collate_skip_bad` drops it from the batch and hands it back, so the loop can count and report
it. Nothing is skipped silently.

Files are only read from inside the dataset root: class folders and images that are symlinks (or sit under symlinked
folders) resolving outside it are skipped, counted in :attr:`SafeImageFolder.outside` and logged. These rules are
:class:`zoo.datasets.folder.SafeFolderMixin`'s, shared with the video folders.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
from PIL import Image
from torch.utils.data import default_collate
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import IMG_EXTENSIONS

from .folder import BadSample, CheckOnly, SafeFolderMixin, Unused, evaluation_root, find_split, split_bad

__all__ = ['BadSample', 'SafeImageFolder', 'collate_skip_bad', 'find_split', 'open_image_folder']


def _load_rgb(path: str) -> Image.Image:
    with open(path, 'rb') as f:
        img = Image.open(f)
        return img.convert('RGB')  # forces the full decode, so truncated files fail here


class SafeImageFolder(SafeFolderMixin, ImageFolder):
    """torchvision ``ImageFolder`` whose ``__getitem__`` returns a :class:`BadSample` for an unreadable image.

    Args:
        root: folder with one sub-folder per class.
        transform: applied to the RGB PIL image (e.g. a timm ``create_transform`` pipeline).
        max_per_class: keep only the first N images (sorted file order) of each class; ``None`` keeps all.
        data_root: files whose real path is outside this folder (default: ``root``) are skipped, not read.
        allow_roots: more folders symlinks inside the data root may lead into (``--allow-root``).

    Attributes:
        outside: paths of the class folders and files skipped because they resolve outside the allowed roots.
        other_files: files of the class folders that are not images (listed once in the log).

    Raises:
        FileNotFoundError: ``root`` is missing, has no class folders, or holds no image files.
        NotADirectoryError: ``root`` is a file.
        ValueError: ``root`` itself resolves outside the allowed roots, or holds a single class.
    """

    kind = 'image'

    def __init__(self, root: str, transform: Optional[Callable] = None, max_per_class: Optional[int] = None,
                 data_root: Optional[str] = None, allow_roots: Sequence[str] = ()):
        self._check_root(root, data_root, allow_roots)
        self._read_samples(root, max_per_class, IMG_EXTENSIONS, transform=transform, loader=_load_rgb)
        self.imgs = self.samples

    def __getitem__(self, index: int) -> Any:
        """``(image, target)``, a :class:`BadSample` for an unreadable file, or an :class:`Unused` marker for a
        readable one asked for as a :class:`CheckOnly` index."""
        path, target = self.samples[index]
        try:
            img = self.loader(path)
        except (OSError, ValueError, Image.DecompressionBombError, SyntaxError) as e:
            return BadSample(path, f'{type(e).__name__}: {e}'.splitlines()[0])
        if isinstance(index, CheckOnly):
            return Unused(path)
        if self.transform is not None:
            img = self.transform(img)
        return img, target


def collate_skip_bad(batch: Sequence[Any]) -> Tuple[torch.Tensor, torch.Tensor, List[BadSample]]:
    """Collate ``(image, target)`` pairs, setting :class:`BadSample` entries aside.

    Returns:
        ``images`` ``(B', C, H, W)``, ``targets`` ``(B',)`` int64 with ``B'`` the number of readable samples (may be
        0, then both tensors are empty), and the list of bad samples of this batch.
    """
    good, bad = split_bad(batch)
    if not good:
        return torch.empty(0), torch.empty(0, dtype=torch.long), bad
    images, targets = default_collate(good)
    return images, targets, bad


def open_image_folder(data_dir: str, split: Optional[str] = None, transform: Optional[Callable] = None,
                      max_per_class: Optional[int] = None, allow_roots: Sequence[str] = ()) -> SafeImageFolder:
    """Open an evaluation folder: ``data_dir/<split>`` if given, else ``data_dir/val`` or ``data_dir/test`` if one
    exists, else ``data_dir`` itself (e.g. an ImageNet ``val`` folder of synset sub-folders).

    Raises:
        FileNotFoundError: missing folder, no class folders, or no images.
        NotADirectoryError: ``data_dir`` is a file.
        ValueError: a single class, a split or root leading outside the allowed roots.
    """
    return SafeImageFolder(evaluation_root(data_dir, split, 'image'), transform=transform,
                           max_per_class=max_per_class, data_root=data_dir, allow_roots=allow_roots)
