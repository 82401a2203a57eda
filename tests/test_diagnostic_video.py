"""Diagnostic video tasks (zoo make-videos --task ranking / steps, zoo.datasets.diagnostic_video): the decoded MP4
files show what their labels say (colours and places per block, found against the re-rendered background), both
flashes of the order classes are on screen for the same time, every sampled tubelet lies inside one block, the
in-memory clips are the files' frames and are fixed by the seed."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import torch

from zoo.cli import main
from zoo.datasets._synth import COLORS, pick_background
from zoo.datasets.diagnostic_video import TASKS, DiagnosticClips, block_bounds, clip_rng
from zoo.datasets.synthetic_video import make_videos
from zoo.datasets.video import FrameSampling, read_video

PER_CLASS, T, SIZE, BLOCKS = 3, 32, 32, 4


@pytest.fixture(scope='module')
def sets(tmp_path_factory):
    out = {}
    for task in TASKS:
        root = str(tmp_path_factory.mktemp(task))
        make_videos(root, num_per_class=PER_CLASS, val_per_class=1, num_frames=T, size=SIZE, seed=3, task=task,
                    blocks=BLOCKS, progress=False)
        out[task] = root
    return out


def _objects(task: str, cls: str, i: int, root: str):
    """Per raw frame of training clip ``i`` of ``cls``: the decoded frame, and the mask of pixels that differ from the
    re-rendered background."""
    frames = read_video(os.path.join(root, 'train', cls, f'{cls}_{i:05d}.mp4'), FrameSampling('stride', T, stride=1))
    frames = frames.frames.numpy().astype(np.int16)
    ds = DiagnosticClips(task, 'train', PER_CLASS, T, SIZE, BLOCKS, seed=3)
    background = pick_background(ds.backgrounds, T, clip_rng(3, 'train', task, cls, i)).astype(np.int16)
    return frames, np.abs(frames - background).max(axis=-1) > 60


def _colour_pixels(frame: np.ndarray, name: str) -> np.ndarray:
    return np.abs(frame - np.array(COLORS[name])).max(axis=-1) < 45


@pytest.mark.parametrize('cls', TASKS['ranking'])
def test_ranking_labels_match_the_decoded_frames(sets, cls):
    bounds = block_bounds(T, BLOCKS)
    for i in range(PER_CLASS):
        frames, changed = _objects('ranking', cls, i, sets['ranking'])
        shown = {}  # colour -> blocks where it is on screen
        for b, (a, e) in enumerate(bounds):
            inner = slice(a + 1, e - 1)  # codec blur at block edges
            for name in ('red', 'blue'):
                counts = (_colour_pixels(frames[inner], name) & changed[inner]).sum(axis=(1, 2))
                assert (counts > 8).all() or (counts == 0).all(), (cls, i, b, name, counts)  # static in a block
                if (counts > 8).all():
                    shown.setdefault(name, []).append(b)
        if cls in ('flash_red_blue', 'flash_blue_red'):
            assert sorted(shown) == ['blue', 'red'] and all(len(v) == 1 for v in shown.values()), shown  # equal time
            first = 'red' if cls == 'flash_red_blue' else 'blue'
            second = 'blue' if first == 'red' else 'red'
            assert shown[first][0] < shown[second][0], (cls, shown)
        else:
            assert len(shown) == 1 and len(next(iter(shown.values()))) == 1, shown
            assert next(iter(shown.values()))[0] == (0 if cls == 'flash_early' else BLOCKS - 1), (cls, shown)


@pytest.mark.parametrize('cls', TASKS['steps'])
def test_steps_labels_match_the_decoded_frames(sets, cls):
    axis, sign = {'step_left': (1, -1), 'step_right': (1, 1), 'step_up': (0, -1), 'step_down': (0, 1)}[cls]
    for i in range(PER_CLASS):
        frames, changed = _objects('steps', cls, i, sets['steps'])
        centres = []
        for a, e in block_bounds(T, BLOCKS):
            ys, xs = np.nonzero(changed[(a + e) // 2])
            assert len(ys) > 8
            centres.append((ys.mean(), xs.mean()))
            inside = [np.argwhere(changed[t]).mean(axis=0) for t in (a + 1, e - 2)]
            assert np.abs(inside[0] - inside[1]).max() < 0.5  # static inside the block
        c = np.array(centres)
        steps = np.diff(c[:, axis]) * sign
        assert (steps > 2).all(), (cls, i, c)                     # one step per block, the labelled way
        assert np.abs(c[:, 1 - axis] - c[0, 1 - axis]).max() < 2  # and not across


def test_in_memory_clips_are_the_files_frames_and_fixed_by_the_seed(sets):
    ds = DiagnosticClips('ranking', 'train', PER_CLASS, T, SIZE, BLOCKS, seed=3)
    for index in (0, PER_CLASS * 3 + 2):
        frames, target = ds.frames(index)
        cls = ds.classes[target]
        path = os.path.join(sets['ranking'], 'train', cls, f'{cls}_{index % PER_CLASS:05d}.mp4')
        decoded = read_video(path, FrameSampling('stride', T, stride=1)).frames.numpy().astype(np.int16)
        assert np.abs(decoded - frames).mean() < 4  # H.264 at crf 18
        assert np.array_equal(frames, DiagnosticClips('ranking', 'train', PER_CLASS, T, SIZE, BLOCKS, seed=3)
                              .frames(index)[0])
    other = DiagnosticClips('ranking', 'train', PER_CLASS, T, SIZE, BLOCKS, seed=4)
    assert not np.array_equal(ds.frames(0)[0], other.frames(0)[0])
    assert not np.array_equal(ds.frames(0)[0], DiagnosticClips('ranking', 'val', PER_CLASS, T, SIZE, BLOCKS,
                                                               seed=3).frames(0)[0])


def test_sampled_tubelets_lie_inside_one_block():
    ds = DiagnosticClips('ranking', 'train', 2, T, SIZE, BLOCKS, sampling=FrameSampling('uniform', 8, random=True))
    for epoch in range(3):
        ds.set_epoch(epoch)
        for index in range(len(ds)):
            gen = np.random.default_rng((ds.seed, epoch, index))
            idx = FrameSampling('uniform', 8, random=True).indices(T, 1.0, generator=gen)
            assert (idx[0::2] // (T // BLOCKS) == idx[1::2] // (T // BLOCKS)).all(), idx
    clip, target = ds[5]
    assert clip.shape == (3, 8, SIZE, SIZE) and clip.dtype == torch.float32 and target == 2
    assert -1 <= float(clip.min()) and float(clip.max()) <= 1  # mean = std = 0.5


def test_make_videos_task_option_and_errors(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(['make-videos', '--help'])
    assert '--task {basic,ranking,steps}' in capsys.readouterr().out
    assert main(['make-videos', '--task', 'ranking', '--output', str(tmp_path / 'x'), '--frames', '30']) == 2
    assert '--frames 30 must be a multiple of --blocks 4' in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown classes \\['motion_left'\\] for --task ranking"):
        make_videos(str(tmp_path / 'y'), task='ranking', num_frames=32, classes=('motion_left',))


def test_zoo_train_renders_the_set_in_memory(sets, tmp_path, capsys):
    out = tmp_path / 'run'
    argv = ['train', '--model', 'pe_video_vit_tiny_patch16_rope3d_224', '--data-dir', sets['ranking'],
            '--in-memory-clips', '--num-frames', '8', '--img-size', '32', '--model-kwargs', 'patch_size=8',
            'embed_dim=32', 'depth=1', 'num_heads=2', '--epochs', '1', '-b', '4', '-j', '0', '--no-progress',
            '--threads', '1', '--sched', 'hold_cosine', '--output', str(out)]
    assert main(argv) == 0
    per = pd.read_csv(out / 'train_classes.csv')
    assert list(per['outcome']) == list(TASKS['ranking']) and per['samples'].sum() == 4 * PER_CLASS
    meta = torch.load(out / 'checkpoint-last.pth', weights_only=True)['meta']
    assert meta['class_names'] == list(TASKS['ranking']) and meta['num_frames'] == 8
    # the image folder and a basic set are refused with the reason
    image = [a for a in argv[:-1] if a not in ('--num-frames', '8')]
    assert main([*image, str(tmp_path / 'other'), '--model', 'pe_vit_tiny_patch16_ape_224']) == 2
    assert '--in-memory-clips renders video clips' in capsys.readouterr().err
    basic = tmp_path / 'basic'
    make_videos(str(basic), num_per_class=1, val_per_class=1, num_frames=8, size=32, clips_dir=None,
                classes=('motion_left', 'motion_right'), progress=False)
    assert main([*argv[:4], str(basic), *argv[5:-1], str(tmp_path / 'third')]) == 2
    assert "task 'basic'" in capsys.readouterr().err
