"""Video folders for ``zoo train`` / ``zoo eval-frames``: which models take clips, and how their folders are read.

A video model (a ``pe_video_vit_*`` name, or any module whose ``patch_embed.proj`` is a ``Conv3d``) trains and
evaluates on a video folder (``root/<split>/<class>/*.mp4|mkv|mov|avi|webm``, :class:`zoo.datasets.SafeVideoFolder`)
instead of an image folder. Training clips take ``num_frames`` frames with uniform random-offset sampling (a new draw
per epoch, from ``(seed, epoch, index)``); evaluation clips take the segment midpoints (MVBench's rule). Frames are
resized on the shorter side and centre-cropped to ``size`` pixels, then normalised with the model's mean / std.
There is no spatial augmentation: a horizontal flip would turn ``motion_left`` into ``motion_right``.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from torch import nn

from zoo.datasets import FrameSampling, SafeVideoFolder, collate_video_skip_bad

__all__ = ['is_video_model', 'open_video_split', 'configure_clips', 'collate_video_skip_bad']


def is_video_model(model: Union[str, nn.Module, None]) -> bool:
    """True for a registered ``pe_video_vit_*`` name, or a module whose ``patch_embed.proj`` is a ``Conv3d``."""
    if model is None:
        return False
    if isinstance(model, str):
        import timm
        from timm.models import model_entrypoint
        name = model.split('.')[0]
        return timm.is_model(name) and model_entrypoint(name).__module__ == 'zoo.models.video_vit'
    return isinstance(getattr(getattr(model, 'patch_embed', None), 'proj', None), nn.Conv3d)


def open_video_split(root: str, data_root: str, max_per_class: Optional[int] = None,
                     class_map: Optional[str] = None) -> SafeVideoFolder:
    """A :class:`SafeVideoFolder` over ``root`` (files must stay inside ``data_root``), ``class_map`` applied.

    Sampling, size and normalisation are set later by :func:`configure_clips`.

    Raises:
        FileNotFoundError: no folder, no class folders or no videos. ValueError: a bad ``class_map``.
    """
    ds = SafeVideoFolder(root, data_root=data_root, max_per_class=max_per_class)
    if class_map:
        from .data import apply_class_map, load_class_map
        apply_class_map(ds, load_class_map(class_map), class_map)
    return ds


def configure_clips(ds: SafeVideoFolder, num_frames: int, size: int, mean: Sequence[float], std: Sequence[float],
                    train: bool, seed: int = 0, cache_dir: Optional[str] = None) -> SafeVideoFolder:
    """Set what ``ds`` returns: ``num_frames`` frames per clip (random offsets when ``train``, segment midpoints
    otherwise), ``size`` x ``size`` pixels, normalised with ``mean`` / ``std``; ``cache_dir`` caches the decoded frames
    of deterministic reads on disk. Returns ``ds``."""
    from zoo.datasets import FrameCache
    ds.sampling = FrameSampling('uniform', int(num_frames), random=bool(train))
    ds.size = int(size)
    ds.mean, ds.std = tuple(mean), tuple(std)
    ds.seed = int(seed)
    ds.cache = FrameCache(cache_dir) if cache_dir and not train else None
    return ds


def video_num_frames(model: nn.Module) -> int:
    """The default clip length (frames) of a video model."""
    return int(getattr(model, 'num_frames', None) or model.patch_embed.num_frames)


def model_mean_std(model: nn.Module, mean: Optional[Sequence[float]] = None,
                   std: Optional[Sequence[float]] = None) -> Any:
    """``(mean, std)``: the given values, else the model's pretrained cfg, else ImageNet's."""
    cfg = getattr(model, 'pretrained_cfg', None) or {}
    return (tuple(mean or cfg.get('mean') or (0.485, 0.456, 0.406)),
            tuple(std or cfg.get('std') or (0.229, 0.224, 0.225)))
