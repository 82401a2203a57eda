"""Sweeps given inputs they cannot use (issue 20, items 5-8): a clear one-line error naming the fix, before any
model loads or the output is locked, and logs instead of silent repeats.

Regressions (each failed on the code before issue 20): ``--frames 100000`` killed eval-video and eval-frames with
``std::bad_alloc`` (rc 134, no Python error, a stale lock left); ``--frames 512`` on short clips repeated frames without
a word; a file that is not a checkpoint was "refused for safety: it holds Python objects"; a video-LLM given to
eval-frames was reported as a classifier of "?" classes; a data root that is a file "does not exist"; NExT-QA's test
split could not be chosen; a symlinked video folder ended in an error naming neither symlinks nor a fix.
"""
import json
import logging
import os
import shutil

import numpy as np
import pytest
import timm
import torch

import zoo  # noqa: F401  (registers the models)
from zoo.cli import main
from zoo.datasets import video as video_mod

VIDEO_CLASSES = ('motion_left', 'motion_right')
VIDEO = 'pe_video_vit_tiny_patch16_rope3d_224'
VIDEO_KW = dict(patch_size=8, embed_dim=32, depth=1, num_heads=2, tubelet_size=2)
VLM_KW = dict(dim=64, depth=1, num_heads=2, num_kv_heads=1, mlp_hidden=64,
              tower_kwargs=dict(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2))


@pytest.fixture(scope='module')
def videos(tmp_path_factory):
    from zoo.datasets.synthetic_video import make_videos
    root = tmp_path_factory.mktemp('vid')
    make_videos(str(root / 'data'), num_per_class=1, val_per_class=2, num_frames=8, size=32, seed=0,
                classes=VIDEO_CLASSES, progress=False)
    torch.manual_seed(0)
    model = timm.create_model(VIDEO, num_classes=2, img_size=32, num_frames=4, **VIDEO_KW)
    ckpt = root / 'video.pth'
    torch.save(dict(model=model.state_dict(), meta=dict(model_name=VIDEO, model_kwargs=VIDEO_KW, img_size=32,
                                                          num_frames=4, num_classes=2,
                                                          class_names=sorted(VIDEO_CLASSES))), ckpt)
    return str(root / 'data'), str(ckpt)


@pytest.fixture(scope='module')
def vqa(tmp_path_factory):
    from zoo.datasets.synthetic_videoqa import make_videoqa
    from zoo.models.vlm import create_video_llm
    root = tmp_path_factory.mktemp('vqa')
    make_videoqa(str(root / 'data'), num_per_task=2, num_frames=12, size=32, clips_dir=None, tasks=('counting',),
                 niah_lengths=(8,), niah_depths=(0.0,), niah_per_cell=1, progress=False)
    torch.manual_seed(0)
    model = create_video_llm('pe_vlm_tiny_mrope', **VLM_KW)
    ckpt = root / 'vlm.pth'
    torch.save(dict(model=model.state_dict(), meta=dict(model_name='pe_vlm_tiny_mrope', model_kwargs=VLM_KW,
                                                          img_size=32, num_frames=4)), ckpt)
    return str(root / 'data'), str(ckpt)


def _err(capsys, argv):
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and 'Traceback' not in err, (rc, err)
    return err


@pytest.mark.parametrize('command', ['eval-frames', 'eval-video'])
def test_frames_beyond_memory_are_refused_before_the_lock(command, videos, vqa, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(video_mod, 'available_memory', lambda: 8 * 2 ** 30)  # the same on any machine
    out = tmp_path / 'o'
    if command == 'eval-frames':
        argv = ['eval-frames', '--data-dir', videos[0], '--checkpoint', videos[1], '--sizes', '32']
    else:
        argv = ['eval-video', '--benchmark', 'mvbench', '--data-root', vqa[0], '--checkpoint', vqa[1]]
    err = _err(capsys, [*argv, '--frames', '100000', '--output', str(out), '-j', '0'])
    assert 'GiB' in err and 'available' in err and '--frames' in err and 'lower --frames or --batch-size' in err
    assert not out.exists()  # refused before the output dir (and its lock) exists


def test_frames_beyond_the_clip_length_repeat_and_are_logged_once(vqa, tmp_path, caplog):
    from zoo.sweep.videoqa import eval_video
    with caplog.at_level(logging.WARNING, logger='zoo.sweep'):
        res = eval_video(['--benchmark', 'mvbench', '--data-root', vqa[0], '--checkpoint', vqa[1], '--frames', '16',
                          '--sizes', '32', '16', '--output', str(tmp_path / 'o'), '-j', '0', '--no-progress',
                          '--max-new-tokens', '1'])
    lines = [r.getMessage() for r in caplog.records if 'hold fewer frames' in r.getMessage()]
    assert len(lines) == 1 and '--frames 16' in lines[0] and 'repeat' in lines[0], lines
    assert not res['failed']
    frames = json.load(open(tmp_path / 'o' / 'results.json'))['frames']['16']
    assert all(len(v['indices']) == 16 for v in frames.values())


def test_eval_frames_logs_short_clips_once(videos, tmp_path, caplog):
    from zoo.sweep.frames import eval_frames
    with caplog.at_level(logging.WARNING, logger='zoo.sweep'):
        res = eval_frames(['--data-dir', videos[0], '--checkpoint', videos[1], '--frames', '4', '16', '--sizes', '32',
                           '--output', str(tmp_path / 'o'), '-j', '0', '--no-progress'])
    lines = [r.getMessage() for r in caplog.records if 'hold fewer frames' in r.getMessage()]
    assert len(lines) == 1 and '--frames 16' in lines[0] and '8 frames' in lines[0] and not res['failed']


def test_a_video_llm_given_to_eval_frames_is_named(videos, vqa, tmp_path, capsys):
    err = _err(capsys, ['eval-frames', '--data-dir', videos[0], '--checkpoint', vqa[1], '--frames', '4', '--sizes',
                        '32', '--output', str(tmp_path / 'o')])
    assert 'video-LLM pe_vlm_tiny_mrope' in err and 'zoo eval-video' in err and '?' not in err


def test_files_that_are_no_checkpoint_say_what_they_look_like(videos, tmp_path, capsys):
    clip = next(os.path.join(d, f) for d, _, fs in os.walk(videos[0]) for f in fs if f.endswith('.mp4'))
    (tmp_path / 'meta.json').write_text('{"a": 1}')
    np.save(tmp_path / 'a.npy', np.zeros(3))
    for path, kind in ((clip, 'a video'), (str(tmp_path / 'meta.json'), 'JSON'), (str(tmp_path / 'a.npy'), 'NumPy')):
        err = _err(capsys, ['eval-frames', '--data-dir', videos[0], '--checkpoint', path, '--frames', '4',
                            '--sizes', '32', '--output', str(tmp_path / 'o')])
        assert 'is not a torch checkpoint' in err and kind in err and 'refused for safety' not in err, err


def test_data_roots_that_are_files_and_splits(vqa, videos, tmp_path, capsys):
    f = tmp_path / 'file'
    f.write_text('x')
    err = _err(capsys, ['eval-video', '--benchmark', 'mvbench', '--data-root', str(f), '--checkpoint', vqa[1],
                        '--frames', '4', '--output', str(tmp_path / 'o')])
    assert 'is a file, not a folder' in err and 'does not exist' not in err
    err = _err(capsys, ['eval-frames', '--data-dir', str(f), '--checkpoint', videos[1], '--frames', '4', '--sizes',
                        '32', '--output', str(tmp_path / 'o')])
    assert 'is a file, not a folder' in err
    err = _err(capsys, ['eval-video', '--benchmark', 'mvbench', '--split', 'test', '--data-root', vqa[0],
                        '--checkpoint', vqa[1], '--frames', '4', '--output', str(tmp_path / 'o')])
    assert 'mvbench takes no split option' in err
    nq = tmp_path / 'nq'
    (nq / 'videos').mkdir(parents=True)
    clip = next(os.path.join(d, x) for d, _, fs in os.walk(vqa[0]) for x in fs if x.endswith('.mp4'))
    shutil.copy(clip, nq / 'videos' / '7.mp4')
    head = 'video,frame_count,width,height,question,answer,qid,type,a0,a1,a2,a3,a4\n'
    (nq / 'test.csv').write_text(head + '7,12,32,32,why?,1,0,CW,a,b,c,d,e\n')
    err = _err(capsys, ['eval-video', '--benchmark', 'nextqa_mc', '--data-root', str(nq), '--checkpoint', vqa[1],
                        '--frames', '4', '--output', str(tmp_path / 'o')])
    assert 'val.csv' in err  # the default split
    assert main(['eval-video', '--benchmark', 'nextqa_mc', '--split', 'test', '--data-root', str(nq), '--checkpoint',
                 vqa[1], '--frames', '4', '--output', str(tmp_path / 'nq-out'), '-j', '0', '--no-progress',
                 '--max-new-tokens', '1']) == 0
    assert json.load(open(tmp_path / 'nq-out' / 'results.json'))['protocol']['split'] == 'test'


def test_a_symlinked_video_folder_names_the_link_and_the_option(vqa, tmp_path, capsys):
    store = tmp_path / 'store'
    shutil.copytree(os.path.join(vqa[0], 'video'), store)
    root = tmp_path / 'root'
    shutil.copytree(os.path.join(vqa[0], 'json'), root / 'json')
    os.symlink(store, root / 'video')
    err = _err(capsys, ['eval-video', '--benchmark', 'mvbench', '--data-root', str(root), '--checkpoint', vqa[1],
                        '--frames', '4', '--output', str(tmp_path / 'o')])
    assert f'{root}/video -> {store}' in err and f'--allow-root {store}' in err
    assert main(['eval-video', '--benchmark', 'mvbench', '--data-root', str(root), '--allow-root', str(store),
                 '--checkpoint', vqa[1], '--frames', '4', '--output', str(tmp_path / 'ok'), '-j', '0',
                 '--no-progress', '--max-new-tokens', '1']) == 0


def test_help_names_every_layout(capsys):
    from zoo.datasets.videoqa import get_benchmark, list_benchmarks
    with pytest.raises(SystemExit):
        main(['eval-video', '--help'])
    text = ' '.join(capsys.readouterr().out.split())
    for name in list_benchmarks():
        assert f'{name}: ' in text and ' '.join(get_benchmark(name)[1].split())[:40] in text
    assert '--allow-root' in text and '--split' in text
    with pytest.raises(SystemExit):
        main(['eval-frames', '--help'])
    text = ' '.join(capsys.readouterr().out.split())
    assert 'DIR/val/<class>/<video>' in text and '--allow-root' in text


def test_memory_estimate_is_checked_in_read_video(monkeypatch, vqa):
    clip = next(os.path.join(d, x) for d, _, fs in os.walk(vqa[0]) for x in fs if x.endswith('.mp4'))
    monkeypatch.setattr(video_mod, 'available_memory', lambda: 1024)
    with pytest.raises(video_mod.VideoMemoryError, match='fewer frames'):
        video_mod.read_video(clip, video_mod.FrameSampling('uniform', 8))


def test_the_model_kind_is_checked_before_the_data_and_the_classes(videos, vqa, tmp_path, capsys):
    from PIL import Image
    for c in ('blue', 'green', 'red'):
        os.makedirs(tmp_path / 'img' / 'val' / c)
        Image.new('RGB', (32, 32)).save(tmp_path / 'img' / 'val' / c / '0.png')
    image = 'pe_vit_tiny_patch16_rope_mixed_224'
    kw = dict(patch_size=8, embed_dim=32, depth=1, num_heads=2)
    model = timm.create_model(image, num_classes=3, img_size=32, **kw)
    ckpt = tmp_path / 'image.pth'
    torch.save(dict(model=model.state_dict(), meta=dict(model_name=image, model_kwargs=kw, img_size=32, num_classes=3,
                                                          class_names=['blue', 'green', 'red'])), ckpt)
    # an image classifier (trained on other classes) given to eval-frames: its kind, not a class mismatch
    err = _err(capsys, ['eval-frames', '--data-dir', videos[0], '--checkpoint', str(ckpt), '--frames', '4',
                        '--sizes', '32', '--output', str(tmp_path / 'o')])
    assert 'is an image model' in err and 'zoo eval-resolution' in err and 'classes' not in err
    # a video-LLM given to eval-resolution: names eval-video, not 'predicts ? classes'
    err = _err(capsys, ['eval-resolution', '--data-dir', str(tmp_path / 'img'), '--checkpoint', vqa[1], '--sizes',
                        '32', '--output', str(tmp_path / 'o')])
    assert 'video-LLM pe_vlm_tiny_mrope' in err and 'zoo eval-video' in err and 'classes' not in err
    # a video classifier given to eval-resolution on an image folder: names eval-frames
    err = _err(capsys, ['eval-resolution', '--data-dir', str(tmp_path / 'img'), '--checkpoint', videos[1], '--sizes',
                        '32', '--output', str(tmp_path / 'o')])
    assert 'is a video model' in err and 'zoo eval-frames' in err
    assert not os.path.exists(tmp_path / 'o')  # refused before any lock


def test_generated_backgrounds_by_choice_are_no_warning(tmp_path, caplog):
    from zoo.datasets._synth import background_segments
    with caplog.at_level(logging.WARNING):
        assert background_segments(None, 16, 4)
    assert 'None' not in caplog.text and 'background' not in caplog.text
    with caplog.at_level(logging.WARNING):
        assert background_segments(str(tmp_path), 16, 4)
    assert f'no readable background clips in {str(tmp_path)!r}' in caplog.text
