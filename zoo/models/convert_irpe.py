"""Official DeiT-iRPE checkpoints -> the zoo ViT layout.

Source: "Rethinking and Improving Relative Position Encoding for Vision Transformer" (Wu et al., ICCV 2021,
arXiv:2107.14222); released DeiT-iRPE weights at https://github.com/wkcn/iRPE-model-zoo/releases/tag/1.0.

The official layout is DeiT's (``cls_token``, ``pos_embed``, ``patch_embed.proj.*``,
``blocks.N.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}.*``, ``norm.*``, ``head.*``, the same names as timm's
``VisionTransformer`` and the zoo's) plus per block ``blocks.N.attn.rpe_{q,k,v}.lookup_table_{weight,bias}`` (and
``blocks.N.attn.rpe_X.rp_rows/rp_cols.lookup_table_*`` for the cross method). The encoding's tensors are mapped by the
encoding itself (:meth:`zoo.encodings.IRPE.map_checkpoint`): the DeiT APE becomes ``pe.ape.pos_embed`` and the tables
``pe.layers.N.rpe_X.*``. Table shapes are the same in both layouts, so the tensors are moved, never changed (the APE
is resampled only when the grids differ).
"""
from __future__ import annotations

import pickle
from pathlib import Path
from typing import Dict, Union

import torch
from torch import nn

from .checkpoint_filters import CheckpointMismatchError, checkpoint_filter_fn, unwrap_state_dict

__all__ = ['filter_deit_irpe', 'load_official_irpe_checkpoint']


def filter_deit_irpe(state_dict: Dict, model: nn.Module) -> Dict[str, torch.Tensor]:
    """Map an official DeiT-iRPE state dict onto a zoo ``PEVisionTransformer`` built with ``pe='irpe'``
    (:func:`~zoo.models.checkpoint_filters.checkpoint_filter_fn` with the ``'deit_irpe'`` layout).

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
    return checkpoint_filter_fn(state_dict, model, layout='deit_irpe')


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
