"""Official DeiT-iRPE checkpoints -> the zoo ViT layout.

Source: "Rethinking and Improving Relative Position Encoding for Vision Transformer" (Wu et al., ICCV 2021,
arXiv:2107.14222); released DeiT-iRPE weights at https://github.com/wkcn/iRPE-model-zoo/releases/tag/1.0.

The official layout is DeiT's (``cls_token``, ``pos_embed``, ``patch_embed.proj.*``,
``blocks.N.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}.*``, ``norm.*``, ``head.*``, the same names as timm's
``VisionTransformer``) plus per block ``blocks.N.attn.rpe_{q,k,v}.lookup_table_{weight,bias}`` (and
``blocks.N.attn.rpe_X.rp_rows/rp_cols.lookup_table_*`` for the cross method). In the zoo the encoding lives under
``pe``: the DeiT APE becomes ``pe.ape.pos_embed`` and the tables ``pe.layers.N.rpe_X.*``. Table shapes are the same in
both layouts, so the tensors are moved, never changed (the APE is resampled only when the grids differ).
"""
from __future__ import annotations

import math
import pickle
import re
from pathlib import Path
from typing import Dict, Union

import torch
from torch import nn
from timm.layers import resample_abs_pos_embed

from .checkpoint_filters import CheckpointMismatchError, check_state_dict, unwrap_state_dict

__all__ = ['filter_deit_irpe', 'load_official_irpe_checkpoint']

_RPE_KEY = re.compile(r'^blocks\.(\d+)\.attn\.(rpe_[qkv]\..+)$')


def _resample_deit_ape(table: torch.Tensor, target: torch.Tensor, grid_size) -> torch.Tensor:
    """Resample a DeiT APE ``(1, P + S*S, C)`` (square training grid, as DeiT uses) to ``target``'s shape."""
    if table.shape == target.shape:
        return table
    gh, gw = grid_size
    num_prefix = target.shape[1] - gh * gw
    old_n = table.shape[1] - num_prefix
    side = math.isqrt(old_n) if old_n > 0 else 0
    if num_prefix < 0 or side * side != old_n or table.shape[-1] != target.shape[-1]:
        return table  # not resamplable: check_state_dict reports the shapes
    return resample_abs_pos_embed(table, new_size=[gh, gw], old_size=[side, side], num_prefix_tokens=num_prefix)


def filter_deit_irpe(state_dict: Dict, model: nn.Module) -> Dict[str, torch.Tensor]:
    """Map an official DeiT-iRPE state dict onto a zoo ``PEVisionTransformer`` built with ``pe='irpe'``.

    Args:
        state_dict: the official model's ``state_dict()``, or a training checkpoint holding it under ``'model'``.
        model: the target model; its ``pe`` must be an iRPE encoding with the same ``rpe_on``, method, mode and
            ``shared_head`` as the checkpoint, and ``ape=True`` (the official DeiT-iRPE models keep DeiT's APE).

    Returns:
        A state dict ready for ``model.load_state_dict(strict=True)``. The APE is resampled bicubically when the
        model's patch grid differs from the checkpoint's (square) grid.

    Raises:
        CheckpointMismatchError (a ValueError): the checkpoint does not fit the model; every missing, unexpected and
            mis-shaped key is listed, with a hint when the APE or the iRPE sides disagree.
    """
    sd = unwrap_state_dict(state_dict)
    target = model.state_dict()
    out: Dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        m = _RPE_KEY.match(k)
        if m:
            out[f'pe.layers.{m.group(1)}.{m.group(2)}'] = v
        elif k == 'pos_embed':
            if 'pe.ape.pos_embed' not in target:
                raise CheckpointMismatchError(
                    'the DeiT-iRPE checkpoint has a learned APE (pos_embed) but the model has none; build it with '
                    "pe='irpe' and pe_kwargs ape=True (the default of the registered irpe models)")
            out['pe.ape.pos_embed'] = _resample_deit_ape(v, target['pe.ape.pos_embed'], model.patch_embed.grid_size)
        else:
            out[k] = v
    def sides(keys) -> str:
        return ''.join(s for s in 'qkv' if any(k.startswith('pe.layers.') and k.split('.')[3] == f'rpe_{s}'
                                               for k in keys))
    sides_ckpt, sides_model = sides(out), sides(target)
    if sides_ckpt != sides_model:
        raise CheckpointMismatchError(
            f'the checkpoint has iRPE on {sides_ckpt!r} but the model on {sides_model!r}; build the model with '
            f'pe_kwargs rpe_on={sides_ckpt!r} (e.g. the *_irpe_qkv_* model for a qkv checkpoint)')
    check_state_dict(out, model, source='DeiT-iRPE checkpoint')
    return out


def load_official_irpe_checkpoint(path: Union[str, Path]) -> Dict[str, torch.Tensor]:
    """Load an official DeiT-iRPE ``.pth`` safely and return its state dict (the ``'model'`` entry if wrapped).

    The file is read with ``torch.load(..., map_location='cpu', weights_only=True)``: no arbitrary code runs.

    Args:
        path: a local ``.pth`` file (e.g. ``deit_small_patch16_224_ctx_product_50_shared_k.pth``).

    Returns:
        The tensors in the official layout; pass them to :func:`filter_deit_irpe`.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        RuntimeError: ``weights_only=True`` refused the file (it pickles objects other than tensors and plain
            containers); the message says how to proceed for a file you trust.
        CheckpointMismatchError: the file holds no state dict.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'no checkpoint at {path}')
    try:
        checkpoint = torch.load(path, map_location='cpu', weights_only=True)
    except pickle.UnpicklingError as e:
        raise RuntimeError(
            f'torch.load(weights_only=True) refused {path}: it pickles objects other than tensors ({e}). Nothing was '
            'executed. If you trust the file, re-save only its tensors once, e.g. torch.save(torch.load(path, '
            "weights_only=False)['model'], new_path), and load new_path.") from e
    sd = unwrap_state_dict(checkpoint)
    if not sd or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise CheckpointMismatchError(f'{path} holds no tensor state dict (top-level keys: {list(checkpoint)[:10]})')
    return sd
