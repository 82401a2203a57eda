"""Multiple-choice image QA with tiled images for the video-LLM (``zoo train-vlm --benchmark imageqa``).

The same prompt, loss and counts as :mod:`zoo.tasks.videoqa` (loss on the answer tokens only; ``val_top1`` the
multiple-choice accuracy, ``val_top5`` the greedy exact match); the visual is one image, cut into AnyRes tiles plus a
thumbnail by ``VideoLLM.prepare_image`` (up to the model's ``max_tiles``, tiles of ``--frame-size`` px, default the
tower's input size). Data: :mod:`zoo.datasets.videoqa.imageqa` (``zoo make-imageqa`` writes a set).
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Optional, Sequence

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from zoo.datasets.video_folder import BadVideo
from zoo.datasets.videoqa import VideoQARecord, collate_videoqa
from .base import Task
from .training import TrainingData
from .videoqa import LETTERS, VideoQABatch, VideoQATask, VideoQATraining, _IGNORE, format_question

__all__ = ['ImageQADataset', 'ImageQATask', 'ImageQATraining', 'vlm_training', 'read_image']

_logger = logging.getLogger('zoo.train')


def read_image(path: str) -> torch.Tensor:
    """uint8 ``(H, W, 3)`` RGB of an image file.

    Raises:
        OSError / ValueError: an unreadable file (PIL's errors).
    """
    from PIL import Image
    with Image.open(path) as im:
        return torch.from_numpy(np.asarray(im.convert('RGB')).copy())


class ImageQADataset(Dataset):
    """The images of image-QA records: items ``{'record', 'image': uint8 (H, W, 3)}``, or a
    :class:`~zoo.datasets.video_folder.BadVideo` (reason ``undecodable``) for a file that cannot be read.

    Attributes:
        bad_counts: read failures per reason in this process.
    """

    def __init__(self, records: Sequence[VideoQARecord]):
        self.records = list(records)
        self.bad_counts: Dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> Any:
        r = self.records[index]
        try:
            return {'record': r, 'image': read_image(r.video)}
        except (OSError, ValueError) as e:
            self.bad_counts['undecodable'] = self.bad_counts.get('undecodable', 0) + 1
            return BadVideo(r.video, f'undecodable: {e}', reason='undecodable')


class ImageQATask(VideoQATask):
    """:class:`~zoo.tasks.videoqa.VideoQATask` on images: each item's image goes through ``prepare_image`` (AnyRes
    tiles + thumbnail, ``tile_size`` px tiles) and the batch carries ``images``, ``image_grid_thw`` and
    ``image_tiles`` (samples may have different tile grids).

    Args:
        model: the (unwrapped) video-LLM.
        num_options: see :class:`VideoQATask`.
        tile_size: tile side in px (default: the tower's input size).
    """

    def __init__(self, model: nn.Module, num_options: Optional[int] = None, tile_size: Optional[int] = None):
        super().__init__(model, num_options)
        self.tile_size = tile_size

    def to_batch(self, raw: Any, device: torch.device, train: bool) -> VideoQABatch:
        items, bad = raw['items'], raw['bad']
        if not items:
            return VideoQABatch(None, torch.empty(0, dtype=torch.int64), bad, 0)
        m = self.model
        prompts, pixels, options, answers = [], [], [], []
        for it in items:
            r = it['record']
            pix, seg = m.prepare_image(it['image'], tile_size=self.tile_size)
            prompts.append(m.prompt([seg, format_question(r.question, r.options)], answer=LETTERS[r.answer]))
            pixels.append(pix.to(device, non_blocking=True))
            options.append(torch.tensor(self.letter_ids[:len(r.options)], dtype=torch.int64))
            answers.append(int(r.answer))
        b = m.collate(prompts, 'right')
        answer = b['labels'][:, 1:] != _IGNORE
        logits_mask = torch.zeros_like(b['labels'], dtype=torch.bool)
        logits_mask[:, :-1] = answer
        inputs = dict(input_ids=b['input_ids'].to(device), attention_mask=b['attention_mask'].to(device),
                      images=pixels, image_grid_thw=b['image_grid_thw'], image_tiles=b['image_tiles'],
                      logits_mask=logits_mask.to(device))
        return VideoQABatch(inputs, b['labels'][:, 1:][answer].to(device), bad, len(items),
                            answer.sum(dim=1).tolist(), options, answers)


class ImageQATraining(VideoQATraining):
    """``zoo train-vlm --benchmark imageqa``: a video-LLM on multiple-choice image QA with tiled images.

    ``--frame-size`` is the tile size (default: the tower's input size); the tile budget is the model's
    ``max_tiles`` (``--model-kwargs max_tiles=4``; 6 for ``pe_vlm_*_rope_dhr``); with ``max_tiles`` 1 (every scheme
    but RoPE-DHR) each image is one tile resized to the tile size, with no thumbnail (logged once). Frame options
    (``--num-frames``, ``--sampling``, ``--fps``, ``--fixed-frames``, ``--frame-cache``) do not apply.
    """
    metric_names, samples, files = ('mc acc', 'exact'), 'questions', 'image'

    def create_model(self, resuming: bool) -> nn.Module:
        model = super().create_model(resuming)
        model.visual_grid(1, self.img_size, self.img_size)  # a tile size the tower can merge
        return model

    def open_data(self, model: nn.Module) -> TrainingData:
        if model.max_tiles == 1:
            why = ('takes no tiles' if not model.decoder.pe.spec.takes_tiles else
                   'has max_tiles 1 (--model-kwargs max_tiles=N for more)')
            _logger.info('%s (scheme %s) %s: each image is one tile, resized to %d px, with no thumbnail',
                         self.args.model, model.scheme, why, self.img_size)
        train_rec, val_rec = self._records()
        return TrainingData(ImageQADataset(train_rec), ImageQADataset(val_rec), collate_videoqa,
                            sorted({r.task for r in train_rec}),
                            dict(model.data_config, tile_size=self.img_size, max_tiles=model.max_tiles),
                            self.args.data_dir)

    def create_task(self, model: nn.Module, data: TrainingData) -> Task:
        return ImageQATask(model, num_options=max(len(r.options) for r in data.train.records),
                           tile_size=self.img_size)

    def meta(self, data: TrainingData) -> Dict[str, Any]:
        return dict(img_size=self.img_size, benchmark=self.args.benchmark, tasks=list(data.classes),
                    max_tiles=int(data.data_config['max_tiles']))

    def describe(self, data: TrainingData) -> str:
        budget = int(data.data_config['max_tiles'])
        tiles = (f'images as one tile of {self.img_size} px (no thumbnail)' if budget == 1 else
                 f'images in tiles of {self.img_size} px (at most {budget} + thumbnail)')
        return (f'{tiles} | {len(data.train)} train / {len(data.val)} val questions ({", ".join(data.classes)})')


def vlm_training(args: Any) -> VideoQATraining:
    """The ``zoo train-vlm`` training task of the options: :class:`ImageQATraining` for ``--benchmark imageqa``,
    else :class:`~zoo.tasks.videoqa.VideoQATraining`."""
    return ImageQATraining(args) if getattr(args, 'benchmark', None) == 'imageqa' else VideoQATraining(args)
