"""The vision tower: any registered timm / zoo model whose ``forward_features`` returns patch tokens on a grid.

Two kinds of tower are recognised from the model itself, never from a token count:

* **image towers** (a ``Conv2d`` patch embedding, e.g. ``pe_vit_*``; or a CNN whose ``forward_features`` returns an
  ``(N, C, H, W)`` map): frames are encoded one by one; ``temporal_patch_size`` consecutive frames form one temporal
  patch, their patch features concatenated on the channel axis (Qwen2-VL's temporal patch of 2 frames, Wang et al.,
  arXiv:2409.12191, Sec. 2.1). An image is repeated to fill its temporal patch, as in Qwen2-VL.
* **video towers** (a ``Conv3d`` patch embedding, input ``(B, C, T, H, W)``, e.g. ``pe_video_vit_*``): the clip goes
  through the tower once; its tubelet (the ``Conv3d`` stride on time) is the temporal patch.

Frames whose count is not a multiple of the temporal patch are padded by repeating the last frame (Qwen2-VL).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

__all__ = ['VisionTower']


def _pair(v) -> Tuple[int, int]:
    return (int(v[0]), int(v[1])) if isinstance(v, (tuple, list)) else (int(v), int(v))


class VisionTower(nn.Module):
    """A timm model turned into per-visual patch features on a ``(t, h, w)`` grid.

    Args:
        model: a timm model name (zoo ``pe_vit_*``, ``pe_video_vit_*`` or any timm ViT / CNN) or a built module.
        model_kwargs: constructor options for a name (``img_size``, ``patch_size``, ``embed_dim`` ...);
            ``num_classes=0`` and, for ViTs, ``dynamic_img_size=True`` are the defaults.
        temporal_patch_size: frames per temporal patch of an image tower (default 2; a video tower uses its tubelet
            and refuses another value).
        spatial_merge_size: the projector's merge factor: the patch grid of every frame must be divisible by it.
        pretrained: load timm's pretrained weights for the name (needs them in the local cache: nothing downloads in
            tests).

    Attributes:
        num_features: channels per patch ``C``; the projector receives :attr:`out_features`.
        is_video: the tower takes clips ``(B, C, T, H, W)``.
        patch_size: ``(ph, pw)`` pixels per patch (the feature stride for CNN towers).

    Raises:
        ValueError: an unknown model name or options it rejects; a model without a patch grid; a
            ``temporal_patch_size`` that contradicts a video tower; a fixed input size whose patch grid does not allow
            the ``spatial_merge_size`` merge (the message names the grid and the sizes that work).
    """

    def __init__(self, model: Union[str, nn.Module], model_kwargs: Optional[Dict[str, Any]] = None,
                 temporal_patch_size: Optional[int] = None, spatial_merge_size: int = 2, pretrained: bool = False):
        super().__init__()
        self.model_name = model if isinstance(model, str) else type(model).__name__
        self.model = _create(model, model_kwargs, pretrained) if isinstance(model, str) else model
        self.merge = int(spatial_merge_size)
        m = self.model
        proj = getattr(getattr(m, 'patch_embed', None), 'proj', None)
        self.num_prefix_tokens = int(getattr(m, 'num_prefix_tokens', 0) or 0)
        self.num_features = int(getattr(m, 'num_features', 0) or getattr(m, 'embed_dim', 0))
        if isinstance(proj, nn.Conv3d):
            self.is_video, self.kind = True, 'tokens'
            tubelet = int(proj.stride[0])
            self.patch_size = (int(proj.stride[1]), int(proj.stride[2]))
            if temporal_patch_size not in (None, tubelet):
                raise ValueError(f'temporal_patch_size={temporal_patch_size} contradicts the video tower '
                                 f'{self.model_name!r}, whose tubelet is {tubelet} frames; fix: drop '
                                 'temporal_patch_size or build the tower with tubelet_size=...')
            self.temporal_patch_size = tubelet
        elif isinstance(proj, nn.Conv2d):
            self.is_video, self.kind = False, 'tokens'
            self.patch_size = _pair(proj.stride)
            self.temporal_patch_size = 2 if temporal_patch_size is None else int(temporal_patch_size)
        elif getattr(m, 'feature_info', None) and hasattr(m, 'forward_features'):
            self.is_video, self.kind = False, 'map'
            info = m.feature_info[-1] if isinstance(m.feature_info, list) else m.feature_info.get_dicts()[-1]
            self.patch_size = _pair(info['reduction'])
            self.temporal_patch_size = 2 if temporal_patch_size is None else int(temporal_patch_size)
        else:
            raise ValueError(f'vision tower {self.model_name!r} has no patch grid: expected a ViT with a Conv2d / '
                             'Conv3d `patch_embed.proj` or a CNN with `feature_info`; fix: pick a zoo pe_vit_* / '
                             'pe_video_vit_* model or a timm ViT')
        if self.temporal_patch_size < 1:
            raise ValueError(f'temporal_patch_size must be >= 1 frame, got {self.temporal_patch_size}')
        if not self.num_features:
            raise ValueError(f'vision tower {self.model_name!r} does not report num_features')
        self.dynamic = bool(getattr(m, 'dynamic_img_size', self.kind == 'map'))
        self.dynamic_pad = bool(getattr(m, 'dynamic_img_pad', False))
        img_size = getattr(getattr(m, 'patch_embed', None), 'img_size', None)
        self.img_size = _pair(img_size) if img_size is not None else None
        if self.img_size is not None:
            self.grid_hw(*self.img_size)  # the default input size must allow the merge

    @property
    def out_features(self) -> int:
        """Channels per grid cell handed to the projector: ``temporal_patch_size * num_features`` for an image tower
        (frames concatenated), ``num_features`` for a video tower (its tubelet already mixes them)."""
        return self.num_features if self.is_video else self.temporal_patch_size * self.num_features

    def grid_hw(self, height: int, width: int) -> Tuple[int, int]:
        """Patch grid ``(h, w)`` of a ``height x width`` px frame.

        Raises:
            ValueError: a size the tower cannot take, or a grid not divisible by the merge factor.
        """
        ph, pw = self.patch_size
        if not self.dynamic and self.img_size is not None and (height, width) != self.img_size:
            raise ValueError(f'vision tower {self.model_name!r} takes {self.img_size[0]}x{self.img_size[1]} px frames, '
                             f'got {height}x{width}; fix: resize the frames or build the tower with '
                             'dynamic_img_size=True')
        if self.dynamic_pad:
            h, w = -(-height // ph), -(-width // pw)
        else:
            if self.kind == 'tokens' and (height % ph or width % pw):
                raise ValueError(f'{height}x{width} px frames are not divisible by the tower patch {ph}x{pw}; fix: '
                                 f'use multiples of {ph * self.merge}x{pw * self.merge} px')
            h, w = height // ph, width // pw
        if h % self.merge or w % self.merge or h < 1 or w < 1:
            raise ValueError(f'{height}x{width} px frames give a {h}x{w} patch grid (patch {ph}x{pw}) that does not '
                             f'allow the projector\'s {self.merge}x{self.merge} merge; fix: use frame sizes (tower '
                             f'img_size) that are multiples of {ph * self.merge}x{pw * self.merge} px')
        return h, w

    def grid(self, num_frames: int, height: int, width: int) -> Tuple[int, int, int]:
        """Pre-merge grid ``(t, h, w)`` of a clip: ``t = ceil(num_frames / temporal_patch_size)`` temporal patches."""
        if int(num_frames) < 1:
            raise ValueError(f'a video needs at least one frame, got {num_frames}')
        h, w = self.grid_hw(int(height), int(width))
        return -(-int(num_frames) // self.temporal_patch_size), h, w

    def _tokens(self, x: torch.Tensor, grid_hw: Tuple[int, int], frames_per_item: int) -> torch.Tensor:
        """``forward_features`` of a batch -> ``(N, frames_per_item or 1, h, w, C)`` patch features."""
        y = self.model.forward_features(x)
        h, w = grid_hw
        if self.kind == 'map':
            if y.dim() != 4 or y.shape[-2:] != (h, w):
                raise ValueError(f'vision tower {self.model_name!r} returned features of shape {tuple(y.shape)}, '
                                 f'expected an (N, C, {h}, {w}) map')
            return y.permute(0, 2, 3, 1).unsqueeze(1)
        t = frames_per_item
        n_expect = self.num_prefix_tokens + t * h * w
        if y.dim() != 3 or y.shape[1] != n_expect:
            raise ValueError(f'vision tower {self.model_name!r} returned {tuple(y.shape)} tokens, expected '
                             f'{n_expect} = {self.num_prefix_tokens} prefix + {t}x{h}x{w} patches')
        return y[:, self.num_prefix_tokens:].reshape(y.shape[0], t, h, w, y.shape[-1])

    def forward(self, visuals: Sequence[torch.Tensor]) -> List[torch.Tensor]:
        """Encode videos ``(T, C, H, W)`` and images ``(C, H, W)`` (float, normalised as the tower expects).

        Returns:
            One tensor per visual, ``(t, h, w, out_features)``, temporal patches in order.

        Raises:
            ValueError: a tensor of another rank, or a frame size the tower cannot take / merge.
        """
        outs: List[Optional[torch.Tensor]] = [None] * len(visuals)
        clips = []
        for i, v in enumerate(visuals):
            if not isinstance(v, torch.Tensor) or v.dim() not in (3, 4) or not v.is_floating_point():
                raise ValueError(f'visual #{i} must be a float image (C, H, W) or video (T, C, H, W), got '
                                 f'{getattr(v, "shape", type(v).__name__)} {getattr(v, "dtype", "")}')
            clip = v.unsqueeze(0) if v.dim() == 3 else v
            tp = self.temporal_patch_size
            pad = (-clip.shape[0]) % tp
            if pad:
                clip = torch.cat([clip, clip[-1:].expand(pad, *clip.shape[1:])], dim=0)
            clips.append(clip)
        # group visuals of one frame size into one forward
        groups: Dict[Tuple[int, int], List[int]] = {}
        for i, c in enumerate(clips):
            groups.setdefault(tuple(c.shape[-2:]), []).append(i)
        tp = self.temporal_patch_size
        for (height, width), idx in groups.items():
            hw = self.grid_hw(height, width)
            if self.is_video:
                sizes = {clips[i].shape[0] for i in idx}
                for n in sorted(sizes):
                    sub = [i for i in idx if clips[i].shape[0] == n]
                    x = torch.stack([clips[i] for i in sub]).transpose(1, 2)  # (N, C, T, H, W)
                    feats = self._tokens(x, hw, n // tp)                      # (N, t, h, w, C)
                    for j, i in enumerate(sub):
                        outs[i] = feats[j]
                continue
            frames = torch.cat([clips[i] for i in idx])
            feats = self._tokens(frames, hw, 1)[:, 0]                          # (frames, h, w, C)
            start = 0
            for i in idx:
                n = clips[i].shape[0]
                f = feats[start:start + n]
                start += n
                # temporal patch: tp consecutive frames concatenated on channels
                outs[i] = f.reshape(n // tp, tp, *f.shape[1:]).permute(0, 2, 3, 1, 4).reshape(
                    n // tp, f.shape[1], f.shape[2], tp * f.shape[-1])
        return outs


def _create(name: str, kwargs: Optional[Dict[str, Any]], pretrained: bool) -> nn.Module:
    import timm
    import zoo.models  # noqa: F401  (registers pe_vit_* / pe_video_vit_*)
    if not timm.is_model(name):
        raise ValueError(f'unknown vision tower {name!r}: not a registered timm model; fix: pick one of `zoo list` '
                         "(e.g. 'pe_vit_tiny_patch16_rope_mixed_224')")
    kwargs = dict(kwargs or {})
    kwargs.setdefault('num_classes', 0)
    try:
        return timm.create_model(name, pretrained=pretrained, **dict({'dynamic_img_size': True}, **kwargs))
    except TypeError as e:
        if 'dynamic_img_size' in kwargs or 'dynamic_img_size' not in str(e):
            raise ValueError(f'vision tower {name!r} rejects options {kwargs}: {e}') from None
    try:  # a model without dynamic sizes (CNNs): build it as is
        return timm.create_model(name, pretrained=pretrained, **kwargs)
    except TypeError as e:
        raise ValueError(f'vision tower {name!r} rejects options {kwargs}: {e}') from None
