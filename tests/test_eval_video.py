"""zoo eval-video: batch > 1 = batch 1 (left padding), one decode per video and sampling across sizes and models,
frame logs, answer parsing and fallback, report files, and a one-line error for each bad input."""
import json
import os

import pandas as pd
import pytest
import torch

from zoo.cli import main
from zoo.sweep.videoqa import eval_video
from zoo.tasks.answers import fallback_choice as _fallback, parse_choice

KW = dict(dim=64, depth=1, num_heads=2, num_kv_heads=1, mlp_hidden=64,
          tower_kwargs=dict(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2))


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    from zoo.datasets.synthetic_videoqa import make_videoqa
    root = tmp_path_factory.mktemp('vqa')
    make_videoqa(str(root), num_per_task=3, num_frames=12, size=32, clips_dir=None, tasks=('counting', 'vniah'),
                 niah_lengths=(16,), niah_depths=(0.0, 1.0), niah_per_cell=1, progress=False)
    return str(root)


def _checkpoint(path, scheme, seed):
    from zoo.models.vlm import create_video_llm
    torch.manual_seed(seed)
    model = create_video_llm(f'pe_vlm_tiny_{scheme}', **KW)
    meta = dict(model_name=f'pe_vlm_tiny_{scheme}', model_kwargs=KW, img_size=32, num_frames=4, args=dict(seed=seed))
    torch.save(dict(model=model.state_dict(), meta=meta), path)
    return str(path)


@pytest.fixture(scope='module')
def ckpts(tmp_path_factory):
    d = tmp_path_factory.mktemp('ck')
    return [_checkpoint(d / 'a.pth', 'mrope', 0), _checkpoint(d / 'b.pth', 'videorope', 1)]


def _run(data, ckpts, out, *extra):
    argv = ['--benchmark', 'mvbench', '--data-root', data, '--frames', '4', '8', '--output', str(out), '--no-progress',
            '-j', '0', '--max-new-tokens', '3']
    for c in ckpts:
        argv += ['--checkpoint', c]
    return eval_video(argv + list(extra))


@pytest.mark.slow
def test_batched_equals_batch1_and_cache_decodes_once(data, ckpts, tmp_path):
    cache = tmp_path / 'cache'
    one = _run(data, ckpts, tmp_path / 'b1', '-b', '1', '--sizes', '32', '16', '--frame-cache', str(cache))
    many = _run(data, ckpts, tmp_path / 'b4', '-b', '4', '--sizes', '32', '16')
    key = ['label', 'frames', 'size', 'id']
    p1 = pd.DataFrame(one['predictions']).sort_values(key).reset_index(drop=True)
    p4 = pd.DataFrame(many['predictions']).sort_values(key).reset_index(drop=True)
    assert len(p1) == 2 * 2 * 2 * 5 and not one['failed']
    assert p1[key + ['output', 'pred']].equals(p4[key + ['output', 'pred']])
    rows = pd.DataFrame(one['rows'])
    assert rows.groupby('frames')['decoded'].sum().tolist() == [5, 5]  # once per video and sampling, not per size/model
    again = _run(data, ckpts, tmp_path / 'b1', '-b', '2', '--sizes', '32', '--frame-cache', str(cache), '--overwrite')
    assert sum(r['decoded'] for r in again['rows']) == 0                 # the cache survives between runs
    out = tmp_path / 'b1'
    assert {'results.csv', 'results.json', 'report.md', 'accuracy.png', 'vniah.png'} <= set(os.listdir(out))
    res = json.loads((out / 'results.json').read_text())
    assert res['status']['complete'] and set(res['frames']) == {'4', '8'}
    logged = res['frames']['8']
    assert len(logged) == 5 and all(len(v['indices']) == 8 == len(v['timestamps']) for v in logged.values())
    csv = pd.read_csv(out / 'results.csv')
    assert {'acc', 'acc_qa', 'acc_vniah', 'acc:counting', 'acc:vniah', 'fallback', 'decode_s', 'model_s'} <= set(csv)
    assert (csv['fallback'] == [sum(p['fallback'] for p in again['predictions'] if (p['label'], p['frames']) == k)
                                for k in zip(csv['label'], csv['frames'])]).all()
    assert set(csv['label']) == {'mrope', 'videorope'}


def test_parse_choice_and_fallback():
    opts = ['red', 'green', 'blue']
    assert parse_choice('B', opts) == 1
    assert parse_choice('(c) blue', opts) == 2
    assert parse_choice('a.', opts) == 0
    assert parse_choice('2', opts) == 2
    assert parse_choice('the answer is (b)', opts) == 1
    assert parse_choice('Green', opts) == 1
    assert parse_choice('d', opts) is None            # a letter beyond the options
    assert parse_choice('zebra crossing', opts) is None
    assert parse_choice('', opts) is None
    picks = {_fallback(0, f'q{i}', 3) for i in range(30)}
    assert picks == {0, 1, 2} and _fallback(0, 'q1', 3) == _fallback(0, 'q1', 3)


def _cli(capsys, *argv):
    rc = main(['eval-video', *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    return err


def test_bad_inputs_one_line_each(data, ckpts, tmp_path, capsys):
    base = ['--frames', '8', '--checkpoint', ckpts[0], '--output', str(tmp_path / 'o')]
    err = _cli(capsys, '--benchmark', 'nosuchbench', '--data-root', data, *base)
    assert 'unknown benchmark' in err and 'mvbench' in err
    empty = tmp_path / 'empty'
    empty.mkdir()
    err = _cli(capsys, '--benchmark', 'mvbench', '--data-root', str(empty), *base)
    assert 'no MVBench annotation files' in err and 'json/<task>.json' in err
    other = tmp_path / 'other'
    (other / 'json').mkdir(parents=True)
    (other / 'json' / 'task.json').write_text(json.dumps({'q_uid': 'x', 'question': 'q'}))
    err = _cli(capsys, '--benchmark', 'mvbench', '--data-root', str(other), *base)
    assert 'not a JSON list' in err and 'candidates' in err
    err = _cli(capsys, '--benchmark', 'mvbench', '--data-root', data, *base[:1], '0', *base[2:])
    assert '--frames [0]' in err and 'at least 1' in err
    image = tmp_path / 'image.pth'
    torch.save(dict(model={'w': torch.zeros(1)}, meta=dict(model_name='pe_vit_tiny_patch16_ape_224')), image)
    err = _cli(capsys, '--benchmark', 'mvbench', '--data-root', data, '--frames', '8', '--checkpoint', str(image),
               '--output', str(tmp_path / 'o'))
    assert 'not a video-LLM checkpoint' in err and 'pe_vit_tiny_patch16_ape_224' in err and 'pe_vlm_' in err
    assert not (tmp_path / 'o').exists()                               # nothing written before the inputs are checked


@pytest.mark.slow
def test_demo_videoqa_part(tmp_path):
    from zoo.demo import _videoqa_demo
    result = _videoqa_demo(str(tmp_path), ['--threads', '1'], epochs=1)
    assert {r['frames'] for r in result['rows']} == {4, 8} and not result['failed']
    assert all(r['n'] == 36 for r in result['rows']) and os.path.isfile(result['paths']['md'])
