"""Training checkpoints: what they hold, atomic writes, and loading with ``weights_only=True``.

A checkpoint is a plain dict of tensors and Python primitives, so ``torch.load(path, weights_only=True)`` reads it:

* ``model``: the model state dict (``zoo.models.unwrap_state_dict`` and ``checkpoint_filter_fn`` find it there);
* ``model_ema``: the EMA state dict, when ``--model-ema`` was on;
* ``optimizer``, ``scheduler``, ``scaler``: their state dicts (``scaler`` only with CUDA AMP);
* ``epoch``: number of completed epochs; ``history``: one metrics dict per completed epoch;
* ``best_top1`` / ``best_epoch``;
* ``meta``: ``model_name``, ``model_kwargs``, ``img_size``, ``num_classes``, ``class_names``, ``data_config``
  (mean, std, interpolation, crop_pct) and ``args`` (all options, a plain dict): enough to rebuild the model
  and its eval transform from the file alone.
"""
from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from typing import Callable, Any, Dict

import torch

__all__ = ['save_atomic', 'copy_atomic', 'load_checkpoint', 'checkpoint_meta']


def _output_mode() -> int:
    """``0o666`` less the process umask: the mode ``open()`` gives other output files (mkstemp uses ``0o600``)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _write_atomic(path: str, write: Callable[[str], None]) -> None:
    """Call ``write(tmp)`` on a temporary file next to ``path``, then ``os.replace`` it onto ``path``.

    A crash leaves either the previous file or the new one, never a truncated file.
    """
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix='.tmp-', suffix=os.path.splitext(path)[1], dir=folder)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, _output_mode())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def save_atomic(obj: Dict[str, Any], path: str) -> None:
    """``torch.save`` to a temporary file in the same folder (fsynced), then ``os.replace`` it onto ``path``."""
    def write(tmp: str) -> None:
        with open(tmp, 'wb') as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
    _write_atomic(path, write)


def copy_atomic(src: str, dst: str) -> None:
    """Copy ``src`` to ``dst`` through a temporary file and ``os.replace``."""
    _write_atomic(dst, lambda tmp: shutil.copyfile(src, tmp))


def load_checkpoint(path: str) -> Dict[str, Any]:
    """Load a checkpoint on the CPU with ``weights_only=True``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is not a torch checkpoint (empty, truncated, another format), or it holds objects
            other than tensors and plain containers (refused for safety: it could run code when loaded).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f'checkpoint {path!r} does not exist')
    not_torch = f'{path!r} is not a torch checkpoint (empty, truncated or another format)'
    if os.path.getsize(path) == 0:
        raise ValueError(not_torch)
    try:
        return torch.load(path, map_location='cpu', weights_only=True)
    except (PermissionError, IsADirectoryError):
        raise
    except pickle.UnpicklingError as e:
        if 'weights only' in str(e).lower() or 'weights_only' in str(e).lower():
            raise ValueError(f'{path!r} is refused for safety: it holds Python objects other than tensors and plain '
                             'containers (only those are loaded, since unpickling anything else can run code); '
                             're-save it as a plain state dict of tensors') from None
        raise ValueError(not_torch) from None
    except Exception:  # EOFError, KeyError, RuntimeError (zip reader), ...: all mean "not a readable checkpoint"
        raise ValueError(not_torch) from None


def checkpoint_meta(ckpt: Dict[str, Any]) -> Dict[str, Any]:
    """The ``meta`` dict of a zoo training checkpoint, or ``{}`` for other files (plain state dicts)."""
    meta = ckpt.get('meta') if isinstance(ckpt, dict) else None
    return meta if isinstance(meta, dict) else {}
