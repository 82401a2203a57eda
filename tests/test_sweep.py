"""The sweep engine behind eval-resolution, eval-frames and eval-video: a sweep killed for real (SIGKILL) continues
with ``--resume`` to the rows of an uninterrupted one (timing columns aside), evaluating only what was missing; a
failed cell runs again; the plan is checked; the result set is written as a set (manifest last);
``--extrapolation`` works on eval-frames too."""
import json
import os
import signal
import subprocess
import sys

import pandas as pd
import pytest
import timm
import torch
from PIL import Image

import zoo  # noqa: F401  (registers the models)
from zoo.sweep import classify
from zoo.sweep.engine import TIMING_COLUMNS
from zoo.sweep.frames import eval_frames
from zoo.sweep.report import ResultSetError, read_result_set
from zoo.sweep.resolution import eval_resolution
from zoo.sweep.videoqa import eval_video

CLASSES = ('blue', 'green', 'red')
VIDEO_CLASSES = ('motion_left', 'motion_right', 'speed_fast')
IMAGE = 'pe_vit_tiny_patch16_rope_mixed_224'
VIDEO = 'pe_video_vit_tiny_patch16_rope3d_224'
IMAGE_KW = dict(patch_size=8, embed_dim=32, depth=1, num_heads=2)
VIDEO_KW = dict(patch_size=8, embed_dim=32, depth=1, num_heads=2, tubelet_size=2)
VLM_KW = dict(dim=64, depth=1, num_heads=2, num_kv_heads=1, mlp_hidden=64,
              tower_kwargs=dict(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2))


def _checkpoint(path, name, kwargs, seed=0, classes=CLASSES, **meta):
    """A zoo checkpoint of a freshly initialised model (the sweep does not care whether it was trained)."""
    torch.manual_seed(seed)
    if name.startswith('pe_vlm_'):
        from zoo.models.vlm import create_video_llm
        model = create_video_llm(name, **kwargs)
    else:
        model = timm.create_model(name, num_classes=len(classes), img_size=meta['img_size'],
                                  **({'num_frames': meta['num_frames']} if 'num_frames' in meta else {}), **kwargs)
        meta = dict(meta, num_classes=len(classes), class_names=sorted(classes))
    torch.save(dict(model=model.state_dict(), meta=dict(meta, model_name=name, model_kwargs=kwargs,
                                                          args=dict(seed=seed))), path)
    return str(path)


@pytest.fixture(scope='module')
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp('img')
    g = torch.Generator().manual_seed(0)
    for c, name in enumerate(CLASSES):
        os.makedirs(root / 'val' / name)
        for i in range(4):
            img = torch.rand(32, 32, 3, generator=g) * 90
            img[..., c] += 150
            Image.fromarray(img.byte().numpy()).save(root / 'val' / name / f'{i}.png')
    ckpt = _checkpoint(root / 'image.pth', IMAGE, IMAGE_KW, img_size=32)
    return str(root), ckpt


@pytest.fixture(scope='module')
def videos(tmp_path_factory):
    from zoo.datasets.synthetic_video import make_videos
    root = tmp_path_factory.mktemp('vid')
    make_videos(str(root / 'data'), num_per_class=1, val_per_class=2, num_frames=8, size=32, seed=0,
                classes=VIDEO_CLASSES, progress=False)
    ckpt = _checkpoint(root / 'video.pth', VIDEO, VIDEO_KW, classes=VIDEO_CLASSES, img_size=32, num_frames=4)
    return str(root / 'data'), ckpt


@pytest.fixture(scope='module')
def videoqa(tmp_path_factory):
    from zoo.datasets.synthetic_videoqa import make_videoqa
    root = tmp_path_factory.mktemp('vqa')
    make_videoqa(str(root / 'data'), num_per_task=2, num_frames=12, size=32, clips_dir=None, tasks=('counting',),
                 niah_lengths=(8,), niah_depths=(0.0,), niah_per_cell=1, progress=False)
    ckpt = _checkpoint(root / 'vlm.pth', 'pe_vlm_tiny_mrope', VLM_KW, img_size=32, num_frames=4)
    return str(root / 'data'), ckpt


def _argv(kind, data, ckpt, out):
    common = ['--checkpoint', ckpt, '--output', str(out), '--no-progress', '-j', '0', '--threads', '1']
    if kind == 'resolution':
        return ['eval-resolution', '--data-dir', data, '--sizes', '24', '32', '40', '48', *common]
    if kind == 'frames':
        return ['eval-frames', '--data-dir', data, '--frames', '2', '4', '8', '--sizes', '24', '32', *common]
    return ['eval-video', '--benchmark', 'mvbench', '--data-root', data, '--frames', '2', '4', '8',
            '--max-new-tokens', '2', *common]


_SWEEP_FUNC = dict(resolution=eval_resolution, frames=eval_frames, video=eval_video)
# the function each sweep calls once per cell, patched in the child to SIGKILL itself at the chosen call
_CELL_HOOK = dict(resolution=('zoo.sweep.classify', 'evaluate'), frames=('zoo.sweep.classify', 'evaluate'),
                  video=('zoo.sweep.videoqa', '_evaluate_cell'))

_KILL_CHILD = r'''
import importlib, os, signal, sys
module, name, after = sys.argv[1], sys.argv[2], int(sys.argv[3])
mod = importlib.import_module(module)
real, calls = getattr(mod, name), [0]
def hooked(*a, **k):
    calls[0] += 1
    if calls[0] == after:  # a real kill in the middle of the sweep: no clean-up, the lock stays behind
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*a, **k)
setattr(mod, name, hooked)
from zoo.cli import main
sys.exit(main(sys.argv[4:]))
'''


def _rows(path):
    df = pd.read_csv(os.path.join(path, 'results.csv'))
    return df.drop(columns=[c for c in df.columns if c in TIMING_COLUMNS])


@pytest.mark.slow
@pytest.mark.parametrize('kind', ['resolution', 'frames', 'video'])
def test_killed_sweep_resumes_to_the_uninterrupted_rows(kind, images, videos, videoqa, tmp_path, monkeypatch):
    data, ckpt = dict(resolution=images, frames=videos, video=videoqa)[kind]
    argv = _argv(kind, data, ckpt, tmp_path / 'full')
    full = _SWEEP_FUNC[kind](argv[1:])
    assert not full['failed'] and full['resumed'] == 0
    total = len(full['rows'])

    killed = tmp_path / 'killed'
    module, name = _CELL_HOOK[kind]
    proc = subprocess.run([sys.executable, '-c', _KILL_CHILD, module, name, '3',
                           *_argv(kind, data, ckpt, killed)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert os.path.exists(killed / '.zoo.lock')  # stale: the process is gone
    assert json.load(open(killed / 'results.json'))['status']['done'] == 2
    assert 'Incomplete: 2 of' in open(killed / 'report.md').read()

    calls = []
    real = getattr(__import__(module, fromlist=[name]), name)
    monkeypatch.setattr(f'{module}.{name}', lambda *a, **k: calls.append(1) or real(*a, **k))
    resumed = _SWEEP_FUNC[kind](_argv(kind, data, ckpt, killed)[1:] + ['--resume'])
    assert resumed['resumed'] == 2 and len(calls) == total - 2  # only the missing cells ran
    pd.testing.assert_frame_equal(_rows(killed), _rows(tmp_path / 'full'))
    assert not os.path.exists(killed / '.zoo.lock')
    assert read_result_set(str(killed))['status']['complete']  # files agree with the manifest
    if kind == 'video':  # the predictions of the cells done before the kill were kept, none twice
        a = pd.DataFrame(json.load(open(killed / 'results.json'))['predictions'])
        b = pd.DataFrame(json.load(open(tmp_path / 'full' / 'results.json'))['predictions'])
        key = ['label', 'frames', 'size', 'id']
        assert a.sort_values(key)[key + ['pred']].reset_index(drop=True).equals(
            b.sort_values(key)[key + ['pred']].reset_index(drop=True))


def test_failed_cell_runs_again_on_resume_and_plan_is_checked(images, tmp_path, monkeypatch):
    data, ckpt = images
    argv = _argv('resolution', data, ckpt, tmp_path / 's')[1:]
    real = classify.evaluate

    def fail_at_40(model, loader, *a, **k):
        if loader.dataset.transform.transforms[1].size == (40, 40):
            raise RuntimeError('out of memory (simulated)')
        return real(model, loader, *a, **k)
    monkeypatch.setattr(classify, 'evaluate', fail_at_40)
    first = eval_resolution(argv)
    assert first['failed'] == 1 and 'out of memory' in open(tmp_path / 's' / 'report.md').read()
    monkeypatch.setattr(classify, 'evaluate', real)
    with pytest.raises(Exception, match='already exists and holds results; pass --resume'):
        eval_resolution(argv)
    calls = []
    monkeypatch.setattr(classify, 'evaluate', lambda *a, **k: calls.append(1) or real(*a, **k))
    again = eval_resolution(argv + ['--resume'])
    assert len(calls) == 1 and again['failed'] == 0 and again['resumed'] == 3
    assert list(pd.read_csv(tmp_path / 's' / 'results.csv')['size']) == [24, 32, 40, 48]
    other = [a if a != '48' else '56' for a in argv]  # another --sizes: another plan
    with pytest.raises(ValueError, match='other cells'):
        eval_resolution(other + ['--resume'])
    with pytest.raises(ValueError, match='contradict'):
        eval_resolution(argv + ['--resume', '--overwrite'])
    fresh = eval_resolution(_argv('resolution', data, ckpt, tmp_path / 'new')[1:] + ['--resume'])
    assert fresh['resumed'] == 0 and len(fresh['rows']) == 4  # --resume on an empty dir starts the sweep


def test_result_set_manifest_detects_a_cut_update(images, tmp_path):
    data, ckpt = images
    out = tmp_path / 'm'
    eval_resolution(_argv('resolution', data, ckpt, out)[1:])
    manifest = json.load(open(out / 'manifest.json'))
    modes = {name: os.stat(out / name).st_mode & 0o777 for name in manifest['files']}
    assert len(set(modes.values())) == 1 and modes['report.md'] & 0o044, modes  # not private temp-file modes
    assert {'results.csv', 'results.json', 'report.md', 'scaling.png', 'heatmap.png'} <= set(manifest['files'])
    assert manifest['status'] == dict(done=4, total=4, failed=0, complete=True)
    with open(out / 'report.md', 'a') as f:  # as if a kill fell between two renames of an update
        f.write('\nstale\n')
    with pytest.raises(ResultSetError, match='report.md'):
        read_result_set(str(out))
    eval_resolution(_argv('resolution', data, ckpt, out)[1:] + ['--resume'])  # rewrites the set
    assert 'stale' not in open(out / 'report.md').read() and read_result_set(str(out)) is not None


def test_eval_frames_takes_extrapolation_strategies(videos, tmp_path):
    data, ckpt = videos
    out = tmp_path / 'x'
    result = eval_frames(_argv('frames', data, ckpt, out)[1:] + ['--extrapolation', 'none', 'pi'])
    labels = list(dict.fromkeys(r['label'] for r in result['rows']))
    assert labels == ['rope3d · none', 'rope3d · pi'] and not result['failed']
    df = pd.read_csv(out / 'results.csv')
    at_train = df[(df['frames'] == 4) & (df['size'] == 32)].set_index('extrapolation')['top1']
    assert at_train['none'] == at_train['pi']  # at the training clip the strategies coincide
    assert 'Extrapolation strategies' in open(out / 'report.md').read()
    ape = _checkpoint(tmp_path / 'ape.pth', 'pe_video_vit_tiny_patch16_ape_224', VIDEO_KW, classes=VIDEO_CLASSES,
                      img_size=32, num_frames=4)
    with pytest.raises(ValueError, match='--extrapolation ntk'):
        eval_frames(_argv('frames', data, ape, tmp_path / 'y')[1:] + ['--extrapolation', 'ntk'])


def _one_cell(data, ckpt, out, *extra):
    return ['--data-dir', data, '--sizes', '32', '--checkpoint', ckpt, '--output', str(out), '--no-progress', '-j',
            '0', '--threads', '1', *extra]


def test_resume_checks_every_option_that_changes_results(images, tmp_path, monkeypatch):
    data, ckpt = images
    out = tmp_path / 's'
    eval_resolution(_one_cell(data, ckpt, out))
    for extra, needle in ((['--mean', '0.5', '0.5', '0.5'], 'data_config.mean'),
                          (['--std', '0.5', '0.5', '0.5'], 'data_config.std'),
                          (['--model-kwargs', 'drop_rate=0.1'], 'model_kwargs.drop_rate was None, now 0.1')):
        with pytest.raises(ValueError, match=f'other models: models\\[0\\].{needle}'):
            eval_resolution(_one_cell(data, ckpt, out, '--resume', *extra))
    # the same files by relative paths (another working directory): the same plan
    monkeypatch.chdir(os.path.dirname(data))
    again = eval_resolution(_one_cell(os.path.basename(data), os.path.relpath(ckpt), os.path.relpath(out),
                                      '--resume'))
    assert again['resumed'] == 1


def test_resume_detects_a_replaced_checkpoint_and_changed_data(images, tmp_path):
    import shutil
    data, ckpt = images
    mine, folder = tmp_path / 'c.pth', tmp_path / 'data'
    shutil.copy(ckpt, mine)
    shutil.copytree(data, folder)
    out = tmp_path / 's'
    eval_resolution(_one_cell(str(folder), str(mine), out))
    os.utime(mine, (1, 1))  # touched, same content: the same checkpoint
    assert eval_resolution(_one_cell(str(folder), str(mine), out, '--resume'))['resumed'] == 1
    _checkpoint(mine, IMAGE, IMAGE_KW, seed=1, img_size=32)  # retrained, same path
    with pytest.raises(ValueError, match=r"the checkpoint '.*c.pth' of rope_mixed changed since the sweep"):
        eval_resolution(_one_cell(str(folder), str(mine), out, '--resume'))
    shutil.copy(ckpt, mine)
    assert eval_resolution(_one_cell(str(folder), str(mine), out, '--resume'))['resumed'] == 1
    Image.new('RGB', (32, 32)).save(folder / 'val' / 'red' / 'new.png')  # more data under the same --data-dir
    with pytest.raises(ValueError, match=r"val' changed since the sweep .*12 files.* then; 13 files"):
        eval_resolution(_one_cell(str(folder), str(mine), out, '--resume'))


def test_results_file_problems_are_found_before_the_sweep(images, tmp_path, monkeypatch):
    from zoo.errors import OutputDirError
    data, ckpt = images
    calls = []
    monkeypatch.setattr(classify, 'evaluate', lambda *a, **k: calls.append(1))
    os.makedirs(tmp_path / 'dir.csv')
    with pytest.raises(OutputDirError, match='dir.csv.* is a directory'):
        eval_resolution(_one_cell(data, ckpt, tmp_path / 's', '--results-file', str(tmp_path / 'dir.csv')))
    real = os.open
    monkeypatch.setattr(os, 'open', lambda p, *a, **k: (_ for _ in ()).throw(PermissionError(13, 'Permission denied'))
                        if 'ro' in os.path.basename(os.path.dirname(str(p))) else real(p, *a, **k))
    with pytest.raises(OutputDirError, match="--results-file '.*ro/r.csv' cannot be written \\(Permission denied\\)"):
        eval_resolution(_one_cell(data, ckpt, tmp_path / 's', '--results-file', str(tmp_path / 'ro' / 'r.csv')))
    assert not calls and not os.path.exists(tmp_path / 's')


def test_extrapolation_records_a_strategy_a_model_cannot_take_as_not_applicable(images, tmp_path):
    data, ckpt = images
    ape = _checkpoint(tmp_path / 'ape.pth', 'pe_vit_tiny_patch16_ape_224', IMAGE_KW, img_size=32)
    result = eval_resolution(_one_cell(data, ckpt, tmp_path / 's', '--checkpoint', ape, '--extrapolation', 'none',
                                       'ntk'))
    rows = {r['label']: r for r in result['rows']}
    assert not result['failed']
    assert set(rows) == {'rope_mixed · none', 'rope_mixed · ntk', 'ape · none', 'ape · ntk'}
    assert 'ntk' in rows['ape · ntk']['not_applicable'] and rows['ape · ntk']['error'] == ''
    assert rows['ape · ntk']['top1'] != rows['ape · ntk']['top1']  # NaN: not evaluated
    assert rows['ape · none']['top1'] == rows['ape · none']['top1'] and not rows['ape · none'].get('not_applicable')
    assert 'Not applicable (not evaluated, empty cells): --extrapolation ntk for ape' in open(
        tmp_path / 's' / 'report.md').read()
    with pytest.raises(ValueError, match='--extrapolation ntk for ape'):  # nothing applies at all: refused
        eval_resolution(_one_cell(data, ape, tmp_path / 't', '--extrapolation', 'ntk'))


def test_a_refused_strategy_names_the_encodings_that_take_it():
    from zoo.encodings.registry import get_pos_encoding_class, list_pos_encodings
    with pytest.raises(ValueError) as e:
        get_pos_encoding_class('sincos1d')(dim=32).check_extrapolation('pi')
    takers = str(e.value).split("'pi' applies to the encodings ")[1].split(', ')
    assert 'sincos1d' not in takers and 'sincos' in takers  # never says that pi applies to what refuses it
    assert takers == [n for n in list_pos_encodings() if 'pi' in get_pos_encoding_class(n).supported_extrapolations()]
