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
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from torch.utils.data import Sampler

_logger = logging.getLogger('zoo.datasets')

__all__ = ['BadSample', 'CheckOnly', 'Unused', 'TailCheckingBatchSampler', 'SafeFolderMixin', 'split_bad', 'find_split',
           'evaluation_root', 'inside_any', 'escape_of', 'describe_escapes', 'allow_root_hint', 'check_allow_roots',
           'check_data_dir', 'left_out_by']


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


def inside_any(path: str, roots: Sequence[str]) -> bool:
    """True when the real path of ``path`` (symlinks followed, ``..`` applied) lies in one of ``roots`` (real
    paths)."""
    real = os.path.realpath(path)
    return any(_inside(real, r) for r in roots)


def escape_of(path: str, root: str) -> Tuple[str, str]:
    """The symlink through which ``path`` leaves ``root`` and where it leads: ``(link, target)``; ``(path, real
    path)`` when no component below ``root`` is a symlink (a ``..`` escape)."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    cur = os.path.abspath(root)
    for part in rel.split(os.sep):
        cur = os.path.join(cur, part)
        if os.path.islink(cur):
            return cur, os.path.realpath(cur)
    return path, os.path.realpath(path)


def check_allow_roots(allow_roots: Sequence[str]) -> None:
    """Refuse an ``--allow-root`` that is not an existing folder (a typo would otherwise admit nothing, silently).

    Raises:
        FileNotFoundError: a folder that does not exist. NotADirectoryError: a file.
    """
    for r in allow_roots:
        if os.path.isfile(r):
            raise NotADirectoryError(f'--allow-root {r} is a file; give the folder that symlinks in the data root '
                                     'lead into')
        if not os.path.isdir(r):
            raise FileNotFoundError(f'--allow-root {r} does not exist; give an existing folder that symlinks in the '
                                    'data root lead into (or drop the option)')


def allow_root_hint(target: str) -> str:
    """The ``--allow-root`` that would let a link to ``target`` be read: the target folder (a file's folder)."""
    return target if os.path.isdir(target) else os.path.dirname(target)


def describe_escapes(paths: Sequence[str], root: str, limit: int = 3) -> str:
    """``link -> target`` of the first ``limit`` escapes and the ``--allow-root`` options that would admit them."""
    pairs = [escape_of(p, root) for p in paths]
    shown = ', '.join(f'{link} -> {target}' for link, target in pairs[:limit])
    more = f' and {len(pairs) - limit} more' if len(pairs) > limit else ''
    fixes = ' '.join(f'--allow-root {d}' for d in dict.fromkeys(allow_root_hint(t) for _, t in pairs))
    return f'{shown}{more}; to read them, pass {fixes} (repeatable; only folders you trust)'


def _hidden(rel: str) -> bool:
    return any(part.startswith('.') for part in rel.split(os.sep))


class SafeFolderMixin:
    """Reads a torchvision class-folder tree (``root/<class>/<file>``) without leaving the data root.

    Put it before ``DatasetFolder`` / ``ImageFolder`` in the bases and, in ``__init__``, call :meth:`_check_root`
    first, then :meth:`_read_samples` in place of the torchvision ``__init__``.

    * Symlinks are followed when their target lies inside the data root or inside one of ``allow_roots``; class
      folders and files whose real path lies elsewhere are skipped, listed in ``outside`` and logged once with the
      link, its target and the ``--allow-root`` option that admits them.
    * Hidden folders (``.ipynb_checkpoints``, ``.thumbnails`` ...) are never classes, and files under them never
      samples; files that are not of the folder's kind (``notes.txt`` among videos) are listed in ``other_files``
      and logged once per split. Nothing is skipped silently.
    * One class is an error: a classifier of one class scores 100 % whatever it learns.

    Attributes:
        data_root: the real path of the data root.
        allowed_roots: real paths symlinks may lead into (the data root first).
        outside: paths of the class folders and files skipped because they resolve outside the allowed roots.
        other_files: files in the class folders that are not of this kind (by extension), relative to ``root``.
    """

    #: what the files are, in messages (``'image'``, ``'video'``)
    kind = 'file'
    #: ``__getitem__`` answers :class:`CheckOnly` indices (``make_loader`` then checks the ``drop_last`` tail)
    checks_dropped_tail = True
    data_root: str
    allowed_roots: List[str]
    outside: List[str]
    other_files: List[str]
    repeated: List[str]
    samples: List[Tuple[str, int]]
    targets: List[int]

    def _check_root(self, root: str, data_root: Optional[str], allow_roots: Sequence[str] = ()) -> None:
        """Set ``data_root`` (default ``root``), ``allowed_roots`` and empty ``outside`` / ``other_files``.

        Raises:
            FileNotFoundError: ``root`` is missing.
            NotADirectoryError: ``root`` is a file.
            ValueError: ``root`` resolves outside the data root and the allowed roots.
            FileNotFoundError / NotADirectoryError: an ``allow_roots`` entry is no existing folder.
        """
        if os.path.isfile(root):
            raise NotADirectoryError(f'{self.kind} folder {root!r} is a file, not a folder; give the folder that '
                                     f'holds <class>/<{self.kind}> sub-folders')
        if not os.path.isdir(root):
            raise FileNotFoundError(f'{self.kind} folder {root!r} does not exist')
        check_allow_roots(allow_roots)
        self.data_root = os.path.realpath(data_root if data_root is not None else root)
        self.allowed_roots = [self.data_root] + [os.path.realpath(r) for r in allow_roots]
        if not inside_any(root, self.allowed_roots):
            raise ValueError(f'{self.kind} folder {root!r} resolves outside the data root {data_root!r}: '
                             f'{describe_escapes([root], data_root or root)}')
        self.outside = []
        self.other_files = []
        self.repeated = []

    def _read_samples(self, root: str, max_per_class: Optional[int], extensions: Sequence[str], /,
                      **folder_kwargs: Any) -> None:
        """Run the torchvision ``__init__`` with ``folder_kwargs``, drop the files outside the allowed roots and
        under hidden folders, keep the first ``max_per_class`` files (sorted order) of each class (``None``: all),
        list the other files, and set ``samples`` and ``targets``.

        Args:
            root: the class-folder tree.
            max_per_class: files kept per class.
            extensions: the file endings of this kind (named in messages; files with others are listed).
            folder_kwargs: passed on to the torchvision ``__init__`` (``extensions`` among them for a
                ``DatasetFolder``).

        Raises:
            FileNotFoundError: no class folders, or no files (inside the allowed roots).
            ValueError: a single class folder.
        """
        files = f'{self.kind}s'
        try:
            super().__init__(root, **folder_kwargs)  # type: ignore[call-arg]
        except FileNotFoundError as e:
            raise FileNotFoundError(
                f'no {files} in {root!r}: expected {root}/<class name>/<{self.kind}> with extensions '
                f'{", ".join(extensions)} ({e})') from None
        kept, outside = [], []
        prefix = os.path.join(root, '')
        for p, t in self.samples:
            if _hidden(p[len(prefix):] if p.startswith(prefix) else os.path.relpath(p, root)):
                continue
            (kept if inside_any(p, self.allowed_roots) else outside).append((p, t))
        kept = self._drop_repeats(root, kept)
        self.outside.extend(p for p, _ in outside)
        if self.outside:
            _logger.warning('%s: skipped %d class folder(s) / file(s) that lead outside the data root %s: %s', root,
                            len(self.outside), self.data_root, describe_escapes(self.outside, root))
        self._list_other_files(root, extensions)
        if not kept:
            where = f' ({len(self.outside)} lead outside it: {describe_escapes(self.outside, root)})' \
                if self.outside else ''
            raise FileNotFoundError(f'no {files} in {root!r} inside the data root {self.data_root!r}{where}')
        used = sorted({t for _, t in kept})
        if len(used) < 2:
            name = self.classes[used[0]] if hasattr(self, 'classes') else '?'
            raise ValueError(f'{root!r} holds {files} of one class only ({name!r}): a classifier of one class scores '
                             f'100 % whatever it learns; add a folder per class under {root} (or point --data-dir at '
                             'the folder that holds the class folders)')
        if max_per_class is not None:
            seen: Counter = Counter()
            keep = []
            for path, target in kept:
                if seen[target] < max_per_class:
                    seen[target] += 1
                    keep.append((path, target))
            kept = keep
        self.samples = kept
        self.targets = [t for _, t in kept]

    def _drop_repeats(self, root: str, samples: List[Tuple[str, int]]) -> List[Tuple[str, int]]:
        """Keep each real file once per class: a symlink loop (``cls/loop -> ../cls``, which ``os.walk`` follows
        about 40 levels deep) or two links to one folder would otherwise repeat a file and weigh it many times in
        training and scores. The first path in sorted order is kept; the others go to ``repeated`` and are named
        once in the log."""
        seen: Dict[Tuple[str, int], str] = {}
        kept, repeated = [], []
        for p, t in samples:
            key = (os.path.realpath(p), t)
            if key in seen:
                repeated.append((p, seen[key]))
            else:
                seen[key] = p
                kept.append((p, t))
        self.repeated = [p for p, _ in repeated]
        if repeated:
            p, first = repeated[0]
            _logger.warning('%s: %d path(s) reach a file already listed in the same class, through a symlink loop or '
                            'two links to one folder, and are read once: e.g. %s (same file as %s); remove the link '
                            'to silence this', root, len(repeated), os.path.relpath(p, root),
                            os.path.relpath(first, root))
        return kept

    def _list_other_files(self, root: str, extensions: Sequence[str]) -> None:
        """List (once, in the log) the files of the class folders that are not of this kind, hidden ones aside."""
        exts = tuple(e.lower() for e in extensions)
        other = []
        for c in getattr(self, 'classes', []):
            top = os.path.join(root, c)
            visited = set()
            for dirpath, dirnames, names in os.walk(top, followlinks=True):
                real = os.path.realpath(dirpath)
                if real in visited:  # a symlink loop or a second link to a folder already listed
                    dirnames[:] = []
                    continue
                visited.add(real)
                dirnames[:] = sorted(d for d in dirnames if not d.startswith('.'))
                for name in sorted(names):
                    if not name.startswith('.') and not name.lower().endswith(exts):
                        other.append(os.path.relpath(os.path.join(dirpath, name), root))
        self.other_files = other
        if other:
            _logger.warning('%s: %d file(s) are not %s (extensions %s) and are not read: %s%s', root, len(other),
                            f'{self.kind}s', ', '.join(exts), ', '.join(other[:5]),
                            f' and {len(other) - 5} more' if len(other) > 5 else '')

    def find_classes(self, directory: str) -> Tuple[List[str], Dict[str, int]]:
        """torchvision's class discovery (sorted names) without hidden folders and without class folders resolving
        outside the allowed roots."""
        classes, _ = super().find_classes(directory)  # type: ignore[misc]
        ok = []
        for c in classes:
            if c.startswith('.'):
                continue
            if inside_any(os.path.join(directory, c), self.allowed_roots):
                ok.append(c)
            else:
                self.outside.append(os.path.join(directory, c))
        if not ok:
            escaped = f' ({len(self.outside)} lead outside it: {describe_escapes(self.outside, directory)})' \
                if self.outside else ''
            raise FileNotFoundError(f'Couldn\'t find any class folder in {directory} inside the data root{escaped}.')
        return ok, {c: i for i, c in enumerate(ok)}


class CheckOnly(int):
    """The index of a sample a loader only checks for readability: a sample ``drop_last`` leaves out of every batch
    (see :class:`TailCheckingBatchSampler`). A folder returns a :class:`BadSample` for it when it cannot be read, else
    an :class:`Unused` marker; neither trains."""


@dataclass(frozen=True)
class Unused:
    """A readable sample that was only checked (:class:`CheckOnly`); collate functions drop it."""
    path: str


def left_out_by(sampler: Any) -> List[int]:
    """The samples a ``DistributedSampler(drop_last=True)`` leaves out of every process's share this epoch (fewer than
    the number of processes, so that the shares are equal), the ``j``-th of them given to process ``j``; ``[]`` for
    any other sampler. Found through the public API: the shares of all processes, drawn as the sampler draws them
    (same seed and epoch), against the whole dataset."""
    from torch.utils.data import DistributedSampler
    if not (isinstance(sampler, DistributedSampler) and sampler.drop_last):
        return []
    n, world = len(sampler.dataset), sampler.num_replicas  # type: ignore[arg-type]
    if n % world == 0:
        return []
    taken = set()
    for rank in range(world):
        other = DistributedSampler(sampler.dataset, num_replicas=world, rank=rank, shuffle=sampler.shuffle,
                                   seed=sampler.seed, drop_last=True)
        other.set_epoch(sampler.epoch)
        taken.update(other)
    left = [i for i in range(n) if i not in taken]
    return left[sampler.rank::world]


class TailCheckingBatchSampler(Sampler):
    """``BatchSampler(sampler, batch_size, drop_last=True)`` that still reads the left-over samples: they are
    appended to the last full batch as :class:`CheckOnly` indices, so an unreadable file is counted every epoch
    whatever the batch size, while no partial batch trains. Over a ``DistributedSampler(drop_last=True)``, the few
    samples it leaves out of every process's share are checked too, each by one process (:func:`left_out_by`), so
    that the processes' counts add up to every file once.

    Args:
        sampler: the sample order (e.g. a seeded ``RandomSampler``, or a ``DistributedSampler``).
        batch_size: samples per batch.
        drop_last: ``False``: the last partial batch trains (only the distributed sampler's left-out samples are
            check-only).
    """

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool = True):
        if batch_size < 1:
            raise ValueError(f'batch_size must be at least 1, got {batch_size}')
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[List[int]]:
        batch: List[int] = []
        last: Optional[List[int]] = None
        for i in self.sampler:
            batch.append(int(i))
            if len(batch) == self.batch_size:
                if last is not None:
                    yield last
                last, batch = batch, []
        left = [CheckOnly(i) for i in left_out_by(self.sampler)]
        if not self.drop_last and batch:  # the partial batch trains; as many batches on every process
            if last is not None:
                yield last
            yield batch + left
            return
        if last is not None:
            yield last + [CheckOnly(i) for i in batch] + left

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def split_bad(batch: Sequence[Any]) -> Tuple[List[Any], List[BadSample]]:
    """The items of ``batch`` that are neither :class:`BadSample` s nor :class:`Unused` markers, and the bad ones,
    each in batch order."""
    bad = [s for s in batch if isinstance(s, BadSample)]
    good = [s for s in batch if not isinstance(s, (BadSample, Unused))]
    return good, bad


def check_data_dir(data_dir: str, flag: str = '--data-dir') -> None:
    """Raise for a data dir that is missing (``FileNotFoundError``) or a file (``NotADirectoryError``)."""
    if os.path.isfile(data_dir):
        raise NotADirectoryError(f'{flag} {data_dir!r} is a file, not a folder; give the folder that holds the data')
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f'{flag} {data_dir!r} does not exist')


def find_split(data_dir: str, names: Sequence[str], role: str, kind: str = 'file') -> str:
    """Return ``data_dir/<name>`` for the first existing name in ``names``.

    Args:
        data_dir: dataset root.
        names: candidate split folder names, e.g. ``('val', 'test')``.
        role: what the split is for, used in the message (``'training'``, ``'validation'``).
        kind: what the files are (``'image'``, ``'video'``; default ``'file'``), used in the message.

    Raises:
        FileNotFoundError: ``data_dir`` is missing or holds none of the names.
        NotADirectoryError: ``data_dir`` is a file.
        ValueError: a name that is absolute or leads outside ``data_dir`` (``..``, a symlink out).
    """
    check_data_dir(data_dir)
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
                            f'{" or ".join(repr(n) for n in names)} holding <class>/<{kind}> folders '
                            f'(<split>/<class>/<{kind}>)')


def evaluation_root(data_dir: str, split: Optional[str] = None, kind: str = 'file') -> str:
    """The folder to evaluate: ``data_dir/<split>`` if given, else ``data_dir/val`` or ``data_dir/test`` if one
    exists, else ``data_dir`` itself (e.g. an ImageNet ``val`` folder of synset sub-folders).

    Raises:
        FileNotFoundError: ``data_dir`` (or ``data_dir/<split>``) is missing.
        NotADirectoryError: ``data_dir`` is a file.
        ValueError: a split name leading outside ``data_dir``.
    """
    if split:
        return find_split(data_dir, [split], 'evaluation', kind)
    check_data_dir(data_dir)
    return next((os.path.join(data_dir, n) for n in ('val', 'test') if os.path.isdir(os.path.join(data_dir, n))),
                data_dir)
