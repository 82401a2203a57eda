"""Options shared by the subcommands: ``--model-kwargs``, devices, AMP and the timm data options."""
from __future__ import annotations

import argparse
import contextlib
from typing import Any, Dict, Optional, Sequence

import yaml

__all__ = ['parse_model_kwargs', 'check_device', 'resolve_device', 'amp_dtype', 'autocast', 'INTERPOLATIONS',
           'command_parser', 'DefaultsOnceHelpFormatter']


class DefaultsOnceHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults formatter, without a second default: no ``(default: ...)`` added to a help text that
    states its own default, nor for a default that says nothing (``None``, ``False``, an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ''
        if 'default' in text or action.default in (None, False, [], ()) or action.default is argparse.SUPPRESS:
            return text
        return super()._get_help_string(action)


def command_parser(prog: str, description: str, epilog: str = '') -> argparse.ArgumentParser:
    """The parser of one ``zoo`` subcommand: defaults shown in ``--help`` once (:class:`DefaultsOnceHelpFormatter`)."""
    return argparse.ArgumentParser(prog=prog, description=description, epilog=epilog or None,
                                   formatter_class=DefaultsOnceHelpFormatter)


def parse_model_kwargs(items: Optional[Sequence[str] | Dict[str, Any]]) -> Dict[str, Any]:
    """Turn ``['patch_size=4', 'pe_kwargs.block_size=4']`` into ``{'patch_size': 4, 'pe_kwargs': {'block_size': 4}}``.

    Values are parsed with ``yaml.safe_load`` (``4`` -> int, ``1e-3`` -> float, ``[0,1]`` -> list, ``true`` -> bool).
    Dotted keys nest. A dict (from YAML) passes through, its dotted keys nested the same way.

    Raises:
        ValueError: an item without ``=`` or with an empty key.
    """
    if not items:
        return {}
    pairs = items.items() if isinstance(items, dict) else []
    if not isinstance(items, dict):
        parsed = []
        for item in items:
            key, sep, value = str(item).partition('=')
            if not sep or not key.strip():
                raise ValueError(f'--model-kwargs expects key=value items, got {item!r} (e.g. patch_size=4 '
                                 'pe_kwargs.theta=10)')
            try:
                parsed.append((key.strip(), yaml.safe_load(value) if value.strip() else None))
            except yaml.YAMLError as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise ValueError(f'--model-kwargs {item!r}: the value is not valid YAML ({first}); quote lists and '
                                 'nested values, e.g. pe_kwargs.after_blocks=[0,1]') from None
        pairs = parsed
    out: Dict[str, Any] = {}
    for key, value in pairs:
        node = out
        parts = str(key).split('.')
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f'--model-kwargs key {key!r} nests under a non-dict value')
        node[parts[-1]] = value
    return out


INTERPOLATIONS = ('bilinear', 'bicubic', 'nearest', 'box', 'hamming', 'lanczos')


def check_device(device: Optional[str], flag: str = '--device') -> None:
    """Raise ``ValueError`` for a device string torch does not parse, or a CUDA / MPS device that is not there."""
    if device is None:
        return
    import torch
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise ValueError(f'{flag} {device!r} is not a torch device (e.g. cpu, cuda, cuda:1)') from None
    if dev.type == 'cuda':
        if not torch.cuda.is_available():
            raise ValueError(f'{flag} {device!r}: CUDA is not available on this machine; use --device cpu')
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f'{flag} {device!r}: only {torch.cuda.device_count()} CUDA device(s) here')
    elif dev.type == 'mps':
        if not (getattr(torch.backends, 'mps', None) and torch.backends.mps.is_available()):
            raise ValueError(f'{flag} {device!r}: MPS is not available on this machine; use --device cpu')
    elif dev.type != 'cpu':
        raise ValueError(f'{flag} {device!r}: only cpu, cuda and mps devices are supported')


def resolve_device(device: Optional[str], local_rank: int = 0) -> str:
    """The device string to use: ``device`` as given, else ``cuda:<local_rank>`` when CUDA is available, else cpu."""
    if device:
        return device
    import torch
    return f'cuda:{local_rank}' if torch.cuda.is_available() else 'cpu'


def amp_dtype(amp: bool, name: Optional[str], device_type: str):
    """The autocast dtype: ``None`` without AMP; ``--amp-dtype`` if given (timm's flag: float16 or bfloat16); else
    float16 on CUDA and bfloat16 elsewhere.

    Raises:
        ValueError: an ``--amp-dtype`` other than float16 / bfloat16.
    """
    import torch
    if name is not None and name not in ('float16', 'bfloat16'):
        raise ValueError(f'--amp-dtype {name!r}: must be float16 or bfloat16')
    if not amp:
        return None
    if name is not None:
        return getattr(torch, name)
    return torch.float16 if device_type == 'cuda' else torch.bfloat16


def autocast(device_type: str, dtype):
    """``torch.autocast`` for ``dtype``, or a null context when ``dtype`` is ``None`` (no AMP)."""
    import torch
    return torch.autocast(device_type, dtype=dtype) if dtype is not None else contextlib.nullcontext()
