"""What image and video folders share: class folders and files only from inside the data root, ``max_per_class``,
bad samples set aside instead of stopping a run, and the choice of the split folder.

:class:`SafeFolderMixin` goes before a torchvision ``DatasetFolder`` (or ``ImageFolder``) in the bases of
:class:`~zoo.datasets.image_folder.SafeImageFolder` and :class:`~zoo.datasets.video_folder.SafeVideoFolder`; each of
those adds only its loader and its ``__getitem__``.
"""
from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

_logger = logging.getLogger('zoo.datasets')

__all__ = ['BadSample', 'SafeFolderMixin', 'split_bad', 'find_split', 'evaluation_root']


@dataclass(frozen=True)
class BadSample:
    """Stands in for a sample (an image, a video) that could not be loaded.

    Attributes:
        path: the file.
        error: a one-line reason (exception type and message).
    """
    path: str
    error: str


def _inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


class SafeFolderMixin:
    """Reads a torchvision class-folder tree (``root/<class>/<file>``) without leaving the data root.

    Put it before ``DatasetFolder`` / ``ImageFolder`` in the bases and, in ``__init__``, call :meth:`_check_root`
    first, then :meth:`_read_samples` in place of the torchvision ``__init__``. Class folders and files whose real
    path (symlinks followed) leaves the data root are skipped, listed in ``outside`` and logged.

    Attributes:
        data_root: the real path of the data root.
        outside: paths of the class folders and files skipped because they resolve outside ``data_root``.
    """

    #: what the files are, in messages (``'image'``, ``'video'``)
    kind = 'file'
    data_root: str
    outside: List[str]
    samples: List[Tuple[str, int]]
    targets: List[int]

    def _check_root(self, root: str, data_root: Optional[str]) -> None:
        """Set ``data_root`` (default ``root``) and an empty ``outside``.

        Raises:
            FileNotFoundError: ``root`` is missing.
            ValueError: ``root`` resolves outside ``data_root``.
        """
        if not os.path.isdir(root):
            raise FileNotFoundError(f'{self.kind} folder {root!r} does not exist')
        self.data_root = os.path.realpath(data_root if data_root is not None else root)
        if not _inside(os.path.realpath(root), self.data_root):
            raise ValueError(f'{self.kind} folder {root!r} resolves outside the data root {data_root!r}')
        self.outside = []

    def _read_samples(self, root: str, max_per_class: Optional[int], extensions: Sequence[str], /,
                      **folder_kwargs: Any) -> None:
        """Run the torchvision ``__init__`` with ``folder_kwargs``, drop the files outside the data root, keep the
        first ``max_per_class`` files (sorted order) of each class (``None``: all) and set ``samples`` and ``targets``.

        Args:
            root: the class-folder tree.
            max_per_class: files kept per class.
            extensions: the file endings, named in the message when there are none.
            folder_kwargs: passed on to the torchvision ``__init__`` (``extensions`` among them for a
                ``DatasetFolder``).

        Raises:
            FileNotFoundError: no class folders, or no files (inside the data root).
        """
        files = f'{self.kind}s'
        try:
            super().__init__(root, **folder_kwargs)  # type: ignore[call-arg]
        except FileNotFoundError as e:
            raise FileNotFoundError(
                f'no {files} in {root!r}: expected {root}/<class name>/<{self.kind}> with extensions '
                f'{", ".join(extensions)} ({e})') from None
        samples = [(p, t) for p, t in self.samples if _inside(os.path.realpath(p), self.data_root)]
        if len(samples) != len(self.samples):
            kept = set(samples)
            self.outside.extend(p for p, t in self.samples if (p, t) not in kept)
        if self.outside:
            _logger.warning('%s: skipped %d class folder(s) / file(s) resolving outside the data root %s (not read), '
                            'e.g. %s', root, len(self.outside), self.data_root, ', '.join(self.outside[:3]))
        if not samples:
            raise FileNotFoundError(f'no {files} in {root!r} inside the data root {self.data_root!r}')
        if max_per_class is not None:
            seen: Counter = Counter()
            keep = []
            for path, target in samples:
                if seen[target] < max_per_class:
                    seen[target] += 1
                    keep.append((path, target))
            samples = keep
        self.samples = samples
        self.targets = [t for _, t in samples]

    def find_classes(self, directory: str) -> Tuple[List[str], Dict[str, int]]:
        """torchvision's class discovery (sorted names), without class folders resolving outside the data root."""
        classes, _ = super().find_classes(directory)  # type: ignore[misc]
        ok = []
        for c in classes:
            if _inside(os.path.realpath(os.path.join(directory, c)), self.data_root):
                ok.append(c)
            else:
                self.outside.append(os.path.join(directory, c))
        if not ok:
            raise FileNotFoundError(f'Couldn\'t find any class folder in {directory} inside the data root.')
        return ok, {c: i for i, c in enumerate(ok)}


def split_bad(batch: Sequence[Any]) -> Tuple[List[Any], List[BadSample]]:
    """The items of ``batch`` that are not :class:`BadSample` s, and those that are, each in batch order."""
    bad = [s for s in batch if isinstance(s, BadSample)]
    good = [s for s in batch if not isinstance(s, BadSample)]
    return good, bad


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


def evaluation_root(data_dir: str, split: Optional[str] = None) -> str:
    """The folder to evaluate: ``data_dir/<split>`` if given, else ``data_dir/val`` or ``data_dir/test`` if one
    exists, else ``data_dir`` itself (e.g. an ImageNet ``val`` folder of synset sub-folders).

    Raises:
        FileNotFoundError: ``data_dir`` (or ``data_dir/<split>``) is missing.
        ValueError: a split name leading outside ``data_dir``.
    """
    if split:
        return find_split(data_dir, [split], 'evaluation')
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f'data dir {data_dir!r} does not exist')
    return next((os.path.join(data_dir, n) for n in ('val', 'test') if os.path.isdir(os.path.join(data_dir, n))),
                data_dir)
