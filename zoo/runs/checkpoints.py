"""Files a run writes: training checkpoints and exported ``.safetensors`` weights, and how they are read back.

A training checkpoint is a plain dict of tensors and Python primitives, so ``torch.load(path, weights_only=True)``
reads it:

* ``model``: the model state dict (``zoo.models.unwrap_state_dict`` and ``checkpoint_filter_fn`` find it there);
* ``model_ema``: the EMA state dict, when ``--model-ema`` was on;
* ``optimizer``, ``scheduler``, ``scaler``: their state dicts (``scaler`` only with float16 AMP on CUDA);
* ``epoch``: number of completed epochs; ``history``: one metrics dict per completed epoch;
* ``best_top1`` / ``best_epoch``;
* ``meta``: ``model_name``, ``pe`` (the position encoding, ``None`` for a plain timm model), ``model_kwargs``,
  ``img_size``, ``num_classes``, ``class_names``, ``data_config`` (mean, std, interpolation, crop_pct) and ``args``
  (all options, a plain dict): enough to rebuild the model and its eval transform from the file alone.

A finished run also exports ``model.safetensors`` (and ``model_ema.safetensors``): the weights only, with ``meta`` as
JSON in the header, loadable by ``zoo eval-resolution --checkpoint`` and by :func:`load_checkpoint`.

Every write goes through :mod:`zoo.datasets.files` (a temp file ``os.replace``-d onto its name).
"""
from __future__ import annotations

import csv
import errno
import io
import json
import logging
import os
import pickle
from typing import Any, Dict, List, Optional

import torch

from zoo.datasets.files import output_mode as _output_mode
from zoo.datasets.files import remove_quietly as _remove_quietly
from zoo.datasets.files import temp_path as _tmp_path
from zoo.datasets.files import strict_json, write_atomic, write_text_atomic

__all__ = ['save_atomic', 'save_checkpoint_files', 'save_safetensors', 'load_checkpoint', 'checkpoint_meta',
           'write_results_file']

_logger = logging.getLogger('zoo.io')


def _torch_save(obj: Any, tmp: str) -> None:
    with open(tmp, 'wb') as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())


def save_atomic(obj: Dict[str, Any], path: str) -> None:
    """``torch.save`` to a temporary file in the same folder (fsynced), then ``os.replace`` it onto ``path``."""
    write_atomic(path, lambda tmp: _torch_save(obj, tmp))


def save_checkpoint_files(obj: Dict[str, Any], last: str, best: Optional[str] = None) -> None:
    """Write ``obj`` to ``last`` and, if given, to ``best``; each file is replaced atomically.

    ``best`` is replaced first (a hard link of the same temporary file, or a second write where the file system has
    no hard links), then ``last``: a kill at any point leaves both files complete, and a run whose ``last`` names
    epoch *e* always has the ``best`` of epochs 1..*e*, so a resumed run never lacks one.

    Raises:
        OutputWriteError: read-only folder, disk full, ...
    """
    def write(tmp: str) -> None:
        _torch_save(obj, tmp)
        if best is not None:
            os.chmod(tmp, _output_mode())  # the link shares the file: give it its final mode first
            _replace_by_link(tmp, best, obj)
    write_atomic(last, write)


def _replace_by_link(tmp: str, best: str, obj: Dict[str, Any]) -> None:
    """Replace ``best`` by a hard link of ``tmp`` (or, without hard links, by a second write of ``obj``)."""
    linked = None
    try:
        linked = _tmp_path(best)
        os.remove(linked)
        os.link(tmp, linked)
        os.replace(linked, best)
    except OSError as e:
        _remove_quietly(linked)
        if e.errno in (errno.ENOSPC, errno.EROFS, errno.EDQUOT):
            raise
        save_atomic(obj, best)  # no hard links here (e.g. some network / FUSE file systems)


def save_safetensors(state_dict: Dict[str, torch.Tensor], path: str, meta: Optional[Dict[str, Any]] = None) -> None:
    """Export weights as ``.safetensors`` (atomic), with ``meta`` as JSON under the header key ``zoo_meta``."""
    from safetensors.torch import save_file
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in state_dict.items()}
    header = {'zoo_meta': json.dumps(meta, default=str)} if meta else None
    write_atomic(path, lambda tmp: save_file(tensors, tmp, metadata=header))


def _load_safetensors(path: str) -> Dict[str, Any]:
    from safetensors import safe_open
    from safetensors.torch import load_file
    try:
        with safe_open(path, framework='pt') as f:
            header = f.metadata() or {}
        tensors = load_file(path, device='cpu')
    except Exception:  # SafetensorError, OSError on a truncated header, ...
        raise ValueError(f'{path!r} is not a readable .safetensors file (empty, truncated or another format)') \
            from None
    out: Dict[str, Any] = {'model': tensors}
    if header.get('zoo_meta'):
        try:
            out['meta'] = json.loads(header['zoo_meta'])
        except json.JSONDecodeError:
            _logger.warning('%s: unreadable zoo_meta header ignored', path)
    return out


def load_checkpoint(path: str) -> Dict[str, Any]:
    """Load a checkpoint on the CPU: ``torch.load(weights_only=True)``, or safetensors for ``*.safetensors``.

    A ``.safetensors`` file comes back as ``{'model': tensors, 'meta': ...}`` (``meta`` when its header has one).

    Raises:
        FileNotFoundError: no such file.
        IsADirectoryError: ``path`` is a directory (the message suggests ``--run DIR``).
        ValueError: the file is not a torch / safetensors checkpoint (empty, truncated, another format: the message
            says what it looks like), or it holds objects other than tensors and plain containers (refused for safety:
            it could run code when loaded).
    """
    if os.path.isdir(path):
        raise IsADirectoryError(f'checkpoint {path!r} is a directory, not a checkpoint file; for a zoo train output '
                                f'dir pass --run {path} (eval-resolution) or --resume '
                                f'{os.path.join(path, "checkpoint-last.pth")}')
    if not os.path.isfile(path):
        raise FileNotFoundError(f'checkpoint {path!r} does not exist')
    if path.endswith('.safetensors'):
        return _load_safetensors(path)
    not_torch = f'{path!r} is not a torch checkpoint ({_looks_like(path)})'
    if os.path.getsize(path) == 0:
        raise ValueError(not_torch)
    try:
        return torch.load(path, map_location='cpu', weights_only=True)
    except PermissionError:
        raise
    except pickle.UnpicklingError as e:
        text = str(e)
        if 'Unsupported global' in text or 'safe_globals' in text or 'GLOBAL' in text:
            raise ValueError(f'{path!r} is refused for safety: it holds Python objects other than tensors and plain '
                             'containers (only those are loaded, since unpickling anything else can run code); '
                             're-save it as a plain state dict of tensors') from None
        raise ValueError(not_torch) from None  # "Unsupported operand ...": not a torch file at all
    except Exception:  # EOFError, KeyError, RuntimeError (zip reader), ...: all mean "not a readable checkpoint"
        raise ValueError(not_torch) from None


def _looks_like(path: str) -> str:
    """What a file that is no torch checkpoint seems to be, from its first bytes (for the message)."""
    if os.path.getsize(path) == 0:
        return 'the file is empty'
    with open(path, 'rb') as f:
        head = f.read(64)
    kinds = [(head[4:8] == b'ftyp', 'a video (MP4/MOV)'), (head[:4] == b'\x1aE\xdf\xa3', 'a video (Matroska/WebM)'),
             (head[:4] == b'RIFF', 'a RIFF file (AVI/WAV)'), (head[:6] == b'\x93NUMPY', 'a NumPy .npy array'),
             (head[:4] == b'PK\x03\x04', 'a zip archive that is not a torch checkpoint'),
             (head[:2] in (b'\x89P', b'\xff\xd8'), 'an image'), (head[:1] == b'\x80', 'a plain pickle, not torch.save'),
             (head.lstrip()[:1] in (b'{', b'['), 'JSON or text')]
    for hit, kind in kinds:
        if hit:
            return f'it looks like {kind}; pass the .pth / .safetensors file a zoo train run wrote'
    return 'empty, truncated or another format'



def checkpoint_meta(ckpt: Dict[str, Any]) -> Dict[str, Any]:
    """The ``meta`` dict of a zoo training checkpoint, or ``{}`` for other files (plain state dicts)."""
    meta = ckpt.get('meta') if isinstance(ckpt, dict) else None
    return meta if isinstance(meta, dict) else {}


def write_results_file(path: str, rows: List[Dict[str, Any]]) -> None:
    """timm's ``--results-file``: ``rows`` as CSV or JSON (by the extension), written atomically.

    Raises:
        ValueError: another extension than ``.csv`` / ``.json``.
    """
    if not path.lower().endswith(('.csv', '.json')):
        raise ValueError(f'--results-file {path!r}: must be a .csv or .json path')
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if path.lower().endswith('.json'):
        write_text_atomic(path, strict_json(rows, indent=1) + '\n')  # null, not NaN: strict parsers read it
        return
    buf = io.StringIO()
    fields = list(dict.fromkeys(k for r in rows for k in r))
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator='\n')
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, buf.getvalue())
