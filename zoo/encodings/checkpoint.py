"""What the encodings' checkpoint hooks share: the mismatch error, the source layouts, and the time-part rule.

An encoding owns how checkpoints reach it (DESIGN.md, "The application floor"); backbones call two hooks of
:class:`~zoo.encodings.base.PosEncoding` and never name an encoding's parameters:

* ``map_checkpoint(layout, state_dict, prefix)``: take this encoding's tensors out of a checkpoint in one of
  :data:`CHECKPOINT_LAYOUTS` (upstream names), return them under the encoding's own names, learned tables resampled
  to its grid (``zoo.models.checkpoint_filters``);
* ``inflate_param(name, image_value, target, image_grid, prefix)``: one parameter of a video encoding made from the
  image encoding's (``zoo.models.inflate``).
"""
from __future__ import annotations

from typing import Optional

import torch

__all__ = ['CheckpointMismatchError', 'CHECKPOINT_LAYOUTS', 'append_time_part']

#: Checkpoint layouts a backbone's filter detects and hands to ``PosEncoding.map_checkpoint``, with where each
#: encoding's tensors sit in it.
CHECKPOINT_LAYOUTS = {
    'zoo': "the zoo's own layout: the encoding's names under the backbone's prefix ('pe.')",
    'timm_vit': "timm VisionTransformer: the learned table is 'pos_embed'",
    'timm_eva': "timm Eva (RoPE ViTs): RoPE-Mixed frequencies 'rope.freqs', the learned table 'pos_embed'",
    'deit_irpe': "official DeiT-iRPE: 'blocks.N.attn.rpe_{q,k,v}.*' tables, DeiT's learned table 'pos_embed'",
    'comrope_hf_clip': "official ComRoPE / LieRE (Hugging Face CLIP vision layout): "
                       "'vision_model.encoder.layers.N.self_attn.{freqs,multiplier}', "
                       "'vision_model.embeddings.position_embedding'",
    'deit_lape': "official LaPE (DeiT layout): DeiT's learned table 'pos_embed', the per-layer PE norms "
                 "'blocks.N.pe_norm.{weight,bias}'",
    'vjepa2': "V-JEPA 2 video encoder: an optional 'pos_embed' (its fixed 3D sin-cos table, or a learned one)",
    'kerple': "official KERPLE (ParallelKerpleLog / ParallelKerplePower): per-head 'bias_p', 'bias_a', each "
              "(H, 1, 1)",
}


class CheckpointMismatchError(ValueError):
    """A checkpoint whose keys or shapes do not match the model; the message lists every difference."""


def append_time_part(image_value: torch.Tensor, target: torch.Tensor) -> Optional[torch.Tensor]:
    """An image parameter zero-padded along the one axis where the video parameter is longer (the time part comes
    last there: RoPE-Mixed ``freqs``, Fourier ``W_r``, ComRoPE-LD ``multiplier``, LieRE ``freqs``).

    Args:
        image_value: the image encoding's tensor.
        target: the video encoding's tensor (shape and dtype of the result).

    Returns:
        A new tensor of ``target``'s shape and dtype holding ``image_value`` first and zeros after it, or ``None``
        when the shapes differ otherwise (other rank, several axes, or a shorter target).
    """
    if image_value.ndim != target.ndim:
        return None
    diff = [d for d in range(image_value.ndim) if image_value.shape[d] != target.shape[d]]
    if len(diff) != 1 or image_value.shape[diff[0]] > target.shape[diff[0]]:
        return None
    out = torch.zeros_like(target)
    out.narrow(diff[0], 0, image_value.shape[diff[0]]).copy_(image_value)
    return out
