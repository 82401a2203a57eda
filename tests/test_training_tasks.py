"""Training tasks (zoo.tasks.training): the one loop asks them everything that differs between image, video and
video-LLM training; a new kind of training is one TrainingTask subclass."""
from __future__ import annotations

import csv
import logging
import os

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset

from zoo.tasks import (ImageClassificationTask, ImageClassificationTraining, TrainingData, TrainingTask,
                       VideoClassificationTraining, classification_training)
from zoo.train.args import parse_train_args
from zoo.train.loop import train

VIDEO = ['--model', 'pe_video_vit_tiny_patch16_nope_224', '--img-size', '16', '--model-kwargs', 'patch_size=8',
         'embed_dim=32', 'depth=1', 'num_heads=2']


def _args(*argv):
    return parse_train_args(['--data-dir', 'd', '--output', 'o', *argv])


def test_the_model_name_picks_the_classification_task():
    assert type(classification_training(_args('--model', 'pe_vit_tiny_patch16_ape_224'))) is \
        ImageClassificationTraining
    assert type(classification_training(_args(*VIDEO))) is VideoClassificationTraining
    with pytest.raises(ValueError, match='takes images'):
        classification_training(_args('--model', 'pe_vit_tiny_patch16_ape_224', '--num-frames', '4'))
    with pytest.raises(ValueError, match='apply to images'):
        classification_training(_args(*VIDEO, '--cutmix', '1'))


@pytest.mark.parametrize('frames', [['--num-frames', '4'], ['num_frames=4']])
def test_video_training_has_one_frame_count_and_no_image_transforms(tmp_path, frames):
    """--num-frames (or the model kwargs) builds the model, samples the clips and is recorded; the video folder
    gets no image transform."""
    from zoo.datasets.synthetic_video import make_videos
    make_videos(str(tmp_path), 2, 8, 16, val_per_class=1, clips_dir=None, classes=('motion_left', 'motion_right'),
                progress=False)
    tt = classification_training(parse_train_args([*VIDEO, *frames, '--data-dir', str(tmp_path), '--output', 'o']))
    model = tt.create_model(resuming=False)
    data = tt.open_data(model)
    assert model.patch_embed.num_frames == 4
    assert data.train.transform is None and data.val.transform is None
    assert data.train.sampling.num_frames == data.val.sampling.num_frames == 4
    assert data.train.sampling.random and not data.val.sampling.random
    meta = tt.meta(data)
    assert (meta['num_frames'], meta['img_size'], meta['class_names']) == (4, 16, ['motion_left', 'motion_right'])
    assert data.data_config['num_frames'] == 4
    tt.set_epoch(data, 3)
    assert data.train.epoch == 3
    assert tt.describe(data).startswith('4 frames at 16 px | 4 train / 2 val clips')


class _Blobs(Dataset):
    """Two Gaussian blobs in 2D, labelled by blob: ``(x, y)`` pairs."""

    def __init__(self, n: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.y = torch.arange(n) % 2
        self.x = torch.randn(n, 2, generator=g) * 0.3 + (self.y[:, None] * 2. - 1.)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def _collate(items):
    return torch.stack([x for x, _ in items]), torch.stack([y for _, y in items]), []


class _BlobTraining(TrainingTask):
    """A whole new kind of training in one class: a linear classifier of 2D points."""
    metric_names, samples = ('acc', 'acc2'), 'points'

    def create_model(self, resuming: bool) -> nn.Module:
        return nn.Linear(2, 2)

    def open_data(self, model: nn.Module) -> TrainingData:
        return TrainingData(_Blobs(32, 0), _Blobs(16, 1), _collate, ['left', 'right'], dict(dims=2), 'blobs')

    def create_task(self, model: nn.Module, data: TrainingData) -> ImageClassificationTask:
        return ImageClassificationTask(len(data.classes))

    def meta(self, data: TrainingData):
        return dict(num_classes=2, class_names=data.classes)


def test_a_new_training_task_runs_through_the_one_loop(tmp_path, caplog):
    out = str(tmp_path / 'blobs')
    argv = ['--model', 'linear', '--data-dir', str(tmp_path), '--output', out, '--epochs', '2', '-b', '8', '-j', '0',
            '--no-progress', '--warmup-epochs', '0', '--lr', '0.1', '--model-ema']
    with caplog.at_level(logging.INFO, logger='zoo'):
        result = train(argv, training=_BlobTraining)
    assert result['epochs'] == 2 and result['history'][-1]['val_top1'] == 100.
    assert 'linear (0.00M params, pe timm) | 32 train / 16 val points, 2 classes' in caplog.text
    assert 'val loss' in caplog.text and ' acc 100.00 acc2 100.00 | ema acc ' in caplog.text
    with open(os.path.join(out, 'metrics.csv')) as f:
        assert [r['epoch'] for r in csv.DictReader(f)] == ['1', '2']
    meta = torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)['meta']
    assert meta['class_names'] == ['left', 'right'] and meta['data_config'] == dict(dims=2)
    assert {'model_name', 'pe', 'model_kwargs', 'args', 'world_size'} <= set(meta)
    resumed = train(['--output', out, '--resume', '--epochs', '3', '--no-progress'], training=_BlobTraining)
    assert [r['epoch'] for r in resumed['history']] == [1, 2, 3]
