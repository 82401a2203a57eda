"""zoo train / eval-resolution / demo on tiny generated image folders (CPU, a few seconds each)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import timm
import torch
from PIL import Image
from timm.data import create_transform

import zoo  # noqa: F401
from zoo.cli import main
from zoo.sweep.resolution import eval_resolution
from zoo.train import loop
from zoo.train.args import parse_model_kwargs, parse_train_args
from zoo.train.loop import train

CLASSES = ('blue', 'green', 'red')
TINY = ['--img-size', '32', '--model-kwargs', 'patch_size=8', 'embed_dim=32', 'depth=1', 'num_heads=2',
        '--batch-size', '8', '--workers', '0', '--no-progress', '--threads', '1', '--crop-pct', '1', '--epochs', '2',
        '--warmup-epochs', '1', '--lr', '3e-3', '--color-jitter', '0']
APE = 'pe_vit_tiny_patch16_ape_224'


def _make_folder(root, n_train: int = 8, n_val: int = 4, size: int = 32) -> str:
    """ImageFolder tree whose classes differ by colour (learnable in a few steps), with some texture noise."""
    g = torch.Generator().manual_seed(0)
    for split, n in (('train', n_train), ('val', n_val)):
        for c, name in enumerate(CLASSES):
            os.makedirs(os.path.join(root, split, name), exist_ok=True)
            for i in range(n):
                img = torch.rand(size, size, 3, generator=g) * 90
                img[..., c] += 150
                Image.fromarray(img.clamp(0, 255).byte().numpy()).save(os.path.join(root, split, name, f'{i}.png'))
    return str(root)


@pytest.fixture(scope='module')
def data(tmp_path_factory) -> str:
    return _make_folder(tmp_path_factory.mktemp('data'))


@pytest.fixture(scope='module')
def run(data, tmp_path_factory) -> dict:
    out = str(tmp_path_factory.mktemp('runs') / 'ape')
    result = train(['--model', APE, '--data-dir', data, '--output', out, *TINY])
    return dict(result, output=out)


def test_train_two_epochs(run):
    out = run['output']
    for name in ('checkpoint-last.pth', 'checkpoint-best.pth', 'metrics.csv', 'args.yaml'):
        assert os.path.isfile(os.path.join(out, name)), name
    metrics = pd.read_csv(os.path.join(out, 'metrics.csv'))
    assert list(metrics['epoch']) == [1, 2]
    ckpt = torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)
    assert ckpt['epoch'] == 2
    meta = ckpt['meta']
    assert meta['model_name'] == APE and meta['img_size'] == 32 and meta['class_names'] == list(CLASSES)
    assert meta['model_kwargs'] == dict(patch_size=8, embed_dim=32, depth=1, num_heads=2)
    assert not any(os.path.basename(p).startswith('.tmp') for p in os.listdir(out))


def test_model_kwargs_and_config_precedence(tmp_path):
    assert parse_model_kwargs(['patch_size=4', 'pe_kwargs.theta=10.0', 'pe_kwargs.after_blocks=[0, 1]']) == \
        dict(patch_size=4, pe_kwargs=dict(theta=10.0, after_blocks=[0, 1]))
    cfg = tmp_path / 'c.yaml'
    cfg.write_text('model: a\ndata_dir: d\noutput: o\nepochs: 7\nlr: 0.5\nmodel_kwargs: {pe_kwargs.theta: 3}\n')
    args = parse_train_args(['--config', str(cfg), '--epochs', '3'])
    assert (args.epochs, args.lr, args.model) == (3, 0.5, 'a')  # CLI over YAML over defaults
    assert args.model_kwargs == dict(pe_kwargs=dict(theta=3))
    cfg.write_text('epochz: 3\n')
    with pytest.raises(ValueError, match='unknown options'):
        parse_train_args(['--config', str(cfg)])


def test_resume_after_kill_matches_uninterrupted(data, tmp_path, monkeypatch):
    common = ['--model', APE, '--data-dir', data, *TINY, '--drop-path', '0.1', '--mixup', '0.2']
    full = train([*common, '--output', str(tmp_path / 'full')])

    real = loop.train_one_epoch

    def killed_in_second_epoch(*args, **kwargs):
        if kwargs.get('epoch', args[6] if len(args) > 6 else None) == 1:
            raise KeyboardInterrupt('simulated kill mid-epoch')
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, 'train_one_epoch', killed_in_second_epoch)
    out = str(tmp_path / 'killed')
    with pytest.raises(KeyboardInterrupt):
        train([*common, '--output', out])
    assert torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)['epoch'] == 1
    monkeypatch.setattr(loop, 'train_one_epoch', real)
    assert main(['train', '--output', out]) == 2  # existing dir without --resume is refused
    resumed = train(['--output', out, '--resume', '--workers', '0', '--no-progress', '--threads', '1'])

    a = torch.load(os.path.join(full['output'], 'checkpoint-last.pth'), weights_only=True)
    b = torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)
    assert b['epoch'] == 2
    for k, v in a['model'].items():
        torch.testing.assert_close(b['model'][k], v, rtol=0, atol=0, msg=k)
    drop = ['epoch_s']
    assert [{k: v for k, v in r.items() if k not in drop} for r in full['history']] == \
        [{k: v for k, v in r.items() if k not in drop} for r in resumed['history']]


def test_ema_and_longer_schedule_on_resume(data, tmp_path):
    out = str(tmp_path / 'ema')
    train(['--model', APE, '--data-dir', data, '--output', out, *TINY, '--epochs', '1', '--model-ema',
           '--model-ema-decay', '0.9'])
    ckpt = torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)
    assert set(ckpt['model_ema']) == set(ckpt['model'])
    longer = train(['--output', out, '--resume', '--epochs', '2'])
    assert [r['epoch'] for r in longer['history']] == [1, 2] and longer['history'][1]['ema_top1'] != ''
    assert torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)['meta']['args']['epochs'] == 2


def _independent_correct(ckpt_path: str, root: str, size: int) -> int:
    """Count top-1 hits with a separately built model and a plain loop over the files."""
    ckpt = torch.load(ckpt_path, weights_only=True)
    meta = ckpt['meta']
    model = timm.create_model(meta['model_name'], num_classes=meta['num_classes'], img_size=meta['img_size'],
                              **meta['model_kwargs'])
    model.load_state_dict(ckpt['model'])
    model.set_input_size(img_size=size)
    model.eval()
    cfg = meta['data_config']
    tf = create_transform((3, size, size), interpolation=cfg['interpolation'], mean=cfg['mean'], std=cfg['std'],
                          crop_pct=cfg['crop_pct'])
    correct = 0
    for target, name in enumerate(sorted(os.listdir(root))):
        for f in sorted(os.listdir(os.path.join(root, name))):
            x = tf(Image.open(os.path.join(root, name, f)).convert('RGB'))[None]
            with torch.no_grad():
                correct += int(model(x).argmax(-1).item() == target)
    return correct


def test_eval_resolution_report(run, data, tmp_path):
    out = str(tmp_path / 'eval')
    assert main(['eval-resolution', '--run', run['output'], '--data-dir', data, '--sizes', '40', '24', '32',
                 '--batch-size', '5', '--workers', '0', '--output', out, '--no-progress', '--threads', '1']) == 0
    for name in ('results.csv', 'results.json', 'report.md', 'scaling.png'):
        assert os.path.getsize(os.path.join(out, name)) > 0, name
    df = pd.read_csv(os.path.join(out, 'results.csv'))
    assert list(df['size']) == [24, 32, 40] and set(df['label']) == {'ape'}
    assert (df['n'] == 12).all() and (df['unreadable'] == 0).all()
    assert ((df['top1'] - 100 * df['correct1'] / df['n']).abs() < 1e-9).all()
    assert (df['correct5'] >= df['correct1']).all() and (df['images_per_s'] > 0).all()
    ckpt = os.path.join(run['output'], 'checkpoint-last.pth')
    for size in (32, 40):
        assert df.set_index('size').loc[size, 'correct1'] == _independent_correct(ckpt, os.path.join(data, 'val'), size)
    report = open(os.path.join(out, 'report.md')).read()
    assert 'Zero-shot' in report and 'bicubic' in report.lower() and 'crop_pct = 1.0' in report
    assert '**' in report and 'resampled' in report  # best marked; APE adaptation stated
    js = json.load(open(os.path.join(out, 'results.json')))
    assert js['protocol']['zero_shot'] and len(js['results']) == 3


def test_two_models_and_unreadable_images(run, data, tmp_path):
    bad = tmp_path / 'bad'
    shutil.copytree(os.path.join(data, 'val'), bad)
    (bad / 'red' / 'broken.jpg').write_bytes(b'this is not an image')
    good = (bad / 'blue' / '0.png').read_bytes()
    (bad / 'blue' / 'truncated.png').write_bytes(good[:len(good) // 2])
    rope = str(tmp_path / 'rope')
    train(['--model', 'pe_vit_tiny_patch16_rope_mixed_224', '--data-dir', data, '--output', rope, *TINY,
           '--epochs', '1'])
    out = str(tmp_path / 'eval')
    result = eval_resolution(['--run', run['output'], '--run', rope, '--data-dir', str(bad), '--sizes', '32', '48',
                              '--workers', '0', '--output', out, '--no-progress'])
    assert result['unreadable'] == 2
    df = pd.DataFrame(result['rows'])
    assert set(df['label']) == {'ape', 'rope_mixed'} and (df['n'] == 12).all() and (df['unreadable'] == 2).all()
    report = open(os.path.join(out, 'report.md')).read()
    assert 'broken.jpg' in report and 'truncated.png' in report and 'Unreadable images**: 2' in report


def test_fine_tune_at_new_resolution(run, data, tmp_path):
    out = str(tmp_path / 'ft48')
    train(['--model', APE, '--data-dir', data, '--output', out, *TINY, '--epochs', '1', '--img-size', '48',
           '--initial-checkpoint', os.path.join(run['output'], 'checkpoint-best.pth')])
    ckpt = torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)
    assert ckpt['meta']['img_size'] == 48
    assert ckpt['model']['pe.pos_embed'].shape[1] == 1 + 6 * 6  # resampled 4x4 -> 6x6 grid, class entry kept


def _err(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert 'Traceback' not in err and err.startswith('zoo ')
    return err


def test_bad_inputs(run, data, tmp_path, capsys):
    tiny = ['--data-dir', data, *TINY]
    assert 'does not exist' in _err(capsys, ['train', '--model', APE, *TINY, '--data-dir', str(tmp_path / 'nope'),
                                             '--output', str(tmp_path / 'o1')])
    empty = tmp_path / 'empty'
    for split in ('train', 'val'):
        (empty / split / 'cat').mkdir(parents=True)
    (empty / 'train' / 'cat' / 'notes.txt').write_text('no images here')
    assert 'no images' in _err(capsys, ['train', '--model', APE, *TINY, '--data-dir', str(empty),
                                        '--output', str(tmp_path / 'o2')])
    assert 'unknown model' in _err(capsys, ['train', '--model', 'pe_vit_tiny_patch16_nosuchpe_224', *tiny,
                                            '--output', str(tmp_path / 'o3')])
    ckpt = os.path.join(run['output'], 'checkpoint-best.pth')
    err = _err(capsys, ['eval-resolution', '--model', 'pe_vit_tiny_patch16_rope_mixed_224', '--checkpoint', ckpt,
                        '--data-dir', data, '--sizes', '32', '--output', str(tmp_path / 'o4'), '--force'])
    assert 'unexpected keys' in err and 'pe.pos_embed' in err
    err = _err(capsys, ['train', '--model', APE, *tiny, '--model-kwargs', 'patch_size=8', 'embed_dim=48', 'depth=1',
                        'num_heads=2', '--initial-checkpoint', ckpt, '--output', str(tmp_path / 'o5')])
    assert 'mis-shaped keys' in err
    err = _err(capsys, ['eval-resolution', '--run', run['output'], '--data-dir', data, '--sizes', '32', '36',
                        '--output', str(tmp_path / 'o6')])
    assert 'not divisible by the patch size 8' in err and '[36]' in err
    assert not os.path.exists(tmp_path / 'o6' / 'results.csv')
    assert 'already exists' in _err(capsys, ['train', '--model', APE, *tiny, '--output', run['output']])
    os.makedirs(tmp_path / 'o7')
    (tmp_path / 'o7' / 'old.txt').write_text('x')
    assert 'already exists' in _err(capsys, ['eval-resolution', '--run', run['output'], '--data-dir', data,
                                             '--sizes', '32', '--output', str(tmp_path / 'o7')])
    # the module entry point behaves the same in a real process
    proc = subprocess.run([sys.executable, '-m', 'zoo.train', '--model', APE, '--data-dir', str(tmp_path / 'nope'),
                           '--output', str(tmp_path / 'o8')], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and 'does not exist' in proc.stderr and 'Traceback' not in proc.stderr


def test_corrupt_training_images_are_counted(data, tmp_path):
    root = tmp_path / 'd'
    shutil.copytree(data, root)
    (root / 'train' / 'red' / 'broken.jpg').write_bytes(b'garbage')
    result = train(['--model', APE, '--data-dir', str(root), '--output', str(tmp_path / 'o'), *TINY, '--epochs', '1',
                    '--batch-size', '5'])
    assert result['history'][0]['train_unreadable'] == 1


@pytest.mark.slow
def test_ddp_two_cpu_processes(data, tmp_path):
    out = str(tmp_path / 'ddp')
    env = dict(os.environ, OMP_NUM_THREADS='1')
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc-per-node', '2', '-m', 'zoo.train',
           '--model', APE, '--data-dir', data, '--output', out, *TINY, '--batch-size', '4']
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    metrics = pd.read_csv(os.path.join(out, 'metrics.csv'))
    assert list(metrics['epoch']) == [1, 2]
    ckpt = torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)
    assert ckpt['meta']['world_size'] == 2 and ckpt['epoch'] == 2
    assert not any(k.startswith('module.') for k in ckpt['model'])
    assert proc.stdout.count('epoch 2/2') == 1  # only rank 0 logs and writes


def test_demo_reduced(tmp_path):
    from zoo.demo import demo, sample_dir
    assert sum(len(files) for _, _, files in os.walk(sample_dir())) >= 500
    result = demo(['--output', str(tmp_path / 'demo')], epochs=1)
    df = pd.DataFrame(result['rows'])
    assert set(df['label']) == {'ape', 'peg', 'rope_mixed'} and sorted(set(df['size'])) == [24, 32, 40, 48]
    assert (df['n'] == 100).all()
    assert 'How small this run was' in open(result['report']).read() and os.path.isfile(result['plot'])
    demo(['--output', str(tmp_path / 'demo')], pes=('ape',), sizes=(32,), epochs=1)  # re-running replaces the output


# ---- regressions from the QA pass ------------------------------------------------------------------------------------

TINY_RUN = ['--model', APE, '--model-kwargs', 'patch_size=8', 'embed_dim=32', 'depth=1', 'num_heads=2',
            '--img-size', '32', '--batch-size', '8', '--workers', '0', '--no-progress', '--threads', '1',
            '--crop-pct', '1', '--warmup-epochs', '0', '--color-jitter', '0']


def test_resume_from_older_best_is_refused_and_output_defaults(data, tmp_path, capsys, monkeypatch):
    out = str(tmp_path / 'r')
    train([*TINY_RUN, '--data-dir', data, '--output', out, '--epochs', '2'])
    best, last = os.path.join(out, 'checkpoint-best.pth'), os.path.join(out, 'checkpoint-last.pth')
    ck = torch.load(last, weights_only=True)
    ck['epoch'] = 1
    ck['history'] = ck['history'][:1]
    torch.save(ck, best)  # best older than last
    before_csv, before_last = open(os.path.join(out, 'metrics.csv')).read(), open(last, 'rb').read()
    err = _err(capsys, ['train', '--resume', best, '--output', out, '--epochs', '3'])
    assert 'epoch 1' in err and '--overwrite' in err
    err = _err(capsys, ['train', '--resume', best, '--epochs', '3'])  # output defaults to the checkpoint's folder
    assert 'epoch 1' in err and 'is required' not in err
    assert open(os.path.join(out, 'metrics.csv')).read() == before_csv and open(last, 'rb').read() == before_last
    # --resume PATH without --output trains in the checkpoint's folder
    result = train(['--resume', last, '--epochs', '3', '--workers', '0', '--no-progress', '--threads', '1'])
    assert result['output'] == os.path.abspath(out) and [r['epoch'] for r in result['history']] == [1, 2, 3]
    mode = os.stat(last).st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask and os.stat(best).st_mode & 0o777 == 0o666 & ~umask


class _NotATensor:
    """A pickled object weights_only loading refuses."""


def test_bad_checkpoint_files(run, data, tmp_path, capsys):
    empty, text = tmp_path / 'e.pth', tmp_path / 't.pth'
    empty.write_bytes(b'')
    text.write_text('hello')
    unsafe = tmp_path / 'u.pth'
    torch.save({'model': _NotATensor()}, unsafe)
    for path in (empty, text):
        for argv in (['train', *TINY_RUN, '--data-dir', data, '--output', str(tmp_path / 'o'),
                      '--initial-checkpoint', str(path)],
                     ['train', '--resume', str(path), '--output', str(tmp_path / 'o')],
                     ['eval-resolution', '--checkpoint', str(path), '--data-dir', data, '--sizes', '32',
                      '--output', str(tmp_path / 'ev')]):
            err = _err(capsys, argv)
            assert 'is not a torch checkpoint (' in err and ('empty' in err or 'another format' in err), err
    err = _err(capsys, ['eval-resolution', '--checkpoint', str(unsafe), '--data-dir', data, '--sizes', '32',
                        '--output', str(tmp_path / 'ev')])
    assert 'refused for safety' in err and 'weights_only=False' not in err
    # a mismatching checkpoint is named
    ckpt = os.path.join(run['output'], 'checkpoint-best.pth')
    err = _err(capsys, ['eval-resolution', '--model', 'pe_vit_tiny_patch16_rope_mixed_224', '--checkpoint', ckpt,
                        '--data-dir', data, '--sizes', '32', '--output', str(tmp_path / 'o4'), '--force'])
    assert ckpt in err and 'unexpected keys' in err


def test_user_errors_are_one_line(run, data, tmp_path, capsys):
    base = ['train', *TINY_RUN, '--data-dir', data]
    out = str(tmp_path / 'o')
    cases = [
        (['--epochs', '0'], '--epochs'), (['--epochs', '-1'], '--epochs'), (['--smoothing', '1'], '--smoothing'),
        (['--smoothing', '-0.1'], '--smoothing'), (['--aa', 'bogus'], '--aa'),
        (['--interpolation', 'bogus'], '--interpolation'), (['--device', 'bogus'], '--device'),
        (['--hflip', '1.5'], '--hflip'), (['--crop-pct', '0'], '--crop-pct'), (['--crop-pct', '1.5'], '--crop-pct'),
        (['--batch-size', '0'], '--batch-size'), (['--max-train-per-class', '0'], '--max-train-per-class'),
        (['--model-kwargs', 'x=[1,'], 'x=[1,'), (['--model-kwargs', 'embed_dim=abc'], 'embed_dim'),
        (['--split-nonsense'] if False else ['--train-split', '../x'], 'not a sub-folder'),
        (['--val-split', str(tmp_path)], 'not a sub-folder'),
    ]
    if not torch.cuda.is_available():
        cases.append((['--device', 'cuda'], 'CUDA is not available'))
    for extra, needle in cases:
        err = _err(capsys, [*base, '--output', out, *extra])
        assert needle in err, (extra, err)
        assert not os.path.exists(out), extra
    for text, needle in (('epochs: [1,\n', 'not valid YAML'), ('epochs: 1.5\n', 'epochs'), ('lr: "1e-3"\n', 'lr'),
                         ('hflip: true\n', 'hflip'), ('scale: 0.5\n', 'scale')):
        cfg = tmp_path / 'c.yaml'
        cfg.write_text(text)
        err = _err(capsys, [*base, '--output', out, '--config', str(cfg)])
        assert needle in err and 'must be' in err or 'not valid YAML' in err, (text, err)
        assert not os.path.exists(out), text
    err = _err(capsys, ['eval-resolution', '--run', run['output'], '--data-dir', data, '--split', '../x',
                        '--sizes', '32', '--output', str(tmp_path / 'ev')])
    assert 'not a sub-folder' in err
    err = _err(capsys, ['eval-resolution', '--run', run['output'], '--data-dir', data, '--sizes', '36',
                        '--output', str(tmp_path / 'ev')])
    assert 'dynamic_img_size=true dynamic_img_pad=true' in err


def test_resume_with_another_model_is_refused(run, data, tmp_path, capsys):
    out = str(tmp_path / 'r')
    shutil.copytree(run['output'], out)
    last = os.path.join(out, 'checkpoint-last.pth')
    before = open(last, 'rb').read()
    for extra in (['--model', 'pe_vit_tiny_patch16_rope_mixed_224'], ['--model-kwargs', 'patch_size=8',
                                                                        'embed_dim=48', 'depth=1', 'num_heads=2'],
                  ['--img-size', '48']):
        err = _err(capsys, ['train', '--output', out, '--resume', '--epochs', '3', *extra])
        assert '--initial-checkpoint' in err, (extra, err)
    assert open(last, 'rb').read() == before


def test_symlinks_out_of_the_data_root_are_skipped(data, tmp_path, caplog):
    from zoo.datasets import SafeImageFolder
    root = tmp_path / 'd'
    shutil.copytree(data, root)
    secret = tmp_path / 'secret'
    (secret / 'cls').mkdir(parents=True)
    shutil.copy(os.path.join(data, 'train', 'red', '0.png'), secret / 'cls' / 'x.png')
    os.symlink(secret / 'cls', root / 'train' / 'zzz')  # a class folder out of the root
    os.symlink(secret / 'cls' / 'x.png', root / 'train' / 'red' / 'link.png')  # a file out of the root
    ds = SafeImageFolder(str(root / 'train'), data_root=str(root))
    assert ds.classes == list(CLASSES) and len(ds.outside) == 2
    assert not any('secret' in os.path.realpath(p) for p, _ in ds.samples)


def test_run_crashed_before_first_checkpoint_can_restart(data, tmp_path, monkeypatch):
    out = str(tmp_path / 'c')
    argv = [*TINY_RUN, '--data-dir', data, '--output', out, '--epochs', '1']

    def crash(*args, **kwargs):
        raise KeyboardInterrupt('killed in epoch 1')

    monkeypatch.setattr(loop, 'train_one_epoch', crash)
    with pytest.raises(KeyboardInterrupt):
        train(argv)
    monkeypatch.undo()
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, 'args.yaml'), 'w') as f:  # what older versions left behind
        f.write('epochs: 1\n')
    assert train(argv)['epochs'] == 1  # the same command runs again
    shutil.rmtree(out)
    os.makedirs(out)
    open(os.path.join(out, 'args.yaml'), 'w').write('epochs: 1\n')
    assert train([*argv, '--resume'])['epochs'] == 1  # --resume starts it from scratch
    assert os.path.isfile(os.path.join(out, 'checkpoint-last.pth'))


def test_unreadable_training_images_are_named(data, tmp_path, caplog):
    root = tmp_path / 'd'
    shutil.copytree(data, root)
    (root / 'train' / 'red' / 'broken.jpg').write_bytes(b'garbage')
    with caplog.at_level('WARNING', logger='zoo'):
        train([*TINY_RUN, '--data-dir', str(root), '--output', str(tmp_path / 'o'), '--epochs', '1'])
    assert 'broken.jpg' in caplog.text


# ---- run management (issue 10) ---------------------------------------------------------------------------------------

_KILL_CHILD = r'''
import os, sys, time
from zoo.tasks import classification as task_mod
marker, after = sys.argv[1], int(sys.argv[2])
real, calls = task_mod.ImageClassificationTask.loss, [0]
def loss(self, outputs, batch):  # numerically the same loss; parks the process mid-epoch after `after` steps
    calls[0] += 1
    if calls[0] == after:
        open(marker, 'w').close()
        time.sleep(120)
    return real(self, outputs, batch)
task_mod.ImageClassificationTask.loss = loss
from zoo.cli import main
sys.exit(main(['train'] + sys.argv[3:]))
'''


def test_sigkill_mid_epoch_then_resume_is_bit_exact(data, tmp_path):
    """A real process kill in epoch 2, then ``--resume`` with no other flag: metrics.csv equals an uninterrupted run's
    byte for byte. The run records ``--workers 1`` (not the default): resume must restore it, or the augmentation
    seeding changes."""
    import signal
    import time
    common = ['--model', APE, '--data-dir', data, *TINY, '--workers', '1', '--epochs', '3', '--drop-path', '0.1',
              '--mixup', '0.2', '--batch-size', '4']
    full = str(tmp_path / 'full')
    train([*common, '--output', full])
    killed, marker = str(tmp_path / 'killed'), str(tmp_path / 'in-epoch-2')
    steps_per_epoch = 24 // 4
    proc = subprocess.Popen([sys.executable, '-c', _KILL_CHILD, marker, str(steps_per_epoch + 3), *common,
                             '--output', killed], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while not os.path.exists(marker):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.time() < deadline, 'the child never reached epoch 2'
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert torch.load(os.path.join(killed, 'checkpoint-last.pth'), weights_only=True)['epoch'] == 1
    assert os.path.exists(os.path.join(killed, '.zoo.lock'))  # left by the killed process: stale
    resumed = train(['--output', killed, '--resume'])
    assert resumed['epochs'] == 3
    assert open(os.path.join(killed, 'metrics.csv'), 'rb').read() == open(os.path.join(full, 'metrics.csv'), 'rb').read()
    assert torch.load(os.path.join(killed, 'checkpoint-last.pth'), weights_only=True)['meta']['args']['workers'] == 1
    a = torch.load(os.path.join(full, 'checkpoint-last.pth'), weights_only=True)['model']
    b = torch.load(os.path.join(killed, 'checkpoint-last.pth'), weights_only=True)['model']
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not os.path.exists(os.path.join(killed, '.zoo.lock'))  # released at the end
    summary = pd.read_csv(os.path.join(killed, 'summary.csv'))  # timm's update_summary format, with wall times
    assert {'train_loss', 'train_seconds', 'eval_top1', 'lr'} <= set(summary.columns)


def test_resume_restores_recorded_options_and_refuses_contradictions(data, tmp_path, capsys):
    out = str(tmp_path / 'r')
    train(['--model', APE, '--data-dir', data, '--output', out, *TINY, '--epochs', '1', '--seed', '3'])
    cfg = tmp_path / 'other.yaml'
    cfg.write_text(f'data_dir: {tmp_path / "elsewhere"}\nseed: 3\n')
    err = _err(capsys, ['train', '--output', out, '--resume', '--config', str(cfg), '--epochs', '2'])
    assert '--data-dir' in err and str(tmp_path / 'elsewhere') in err and data in err
    err = _err(capsys, ['train', '--output', out, '--resume', '--workers', '2', '--lr', '0.1'])
    assert '--workers 2' in err and 'recorded 0' in err and '--lr 0.1' in err and 'recorded 0.003' in err
    assert '--epochs' in err  # the list of options that may change
    result = train(['--output', out, '--resume', '--epochs', '2', '--no-progress', '--seed', '3'])  # same value: fine
    assert result['epochs'] == 2
    meta = torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)['meta']
    assert meta['args']['seed'] == 3 and meta['args']['workers'] == 0 and meta['args']['epochs'] == 2


def _write_lock(folder, pid, start=None):
    import socket
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, '.zoo.lock'), 'w') as f:
        json.dump(dict(host=socket.gethostname(), pid=pid, start=start, command='zoo train', since='earlier'), f)


def test_output_dir_lock(run, data, tmp_path, capsys, caplog):
    from zoo.runs.rundir import _start_time
    busy = str(tmp_path / 'busy')
    _write_lock(busy, os.getpid(), _start_time(os.getpid()))  # a live owner
    err = _err(capsys, ['train', '--model', APE, '--data-dir', data, *TINY, '--output', busy])
    assert 'in use by zoo train' in err and str(os.getpid()) in err
    err = _err(capsys, ['eval-resolution', '--run', run['output'], '--data-dir', data, '--sizes', '32',
                        '--output', busy])
    assert 'in use by' in err
    assert os.listdir(busy) == ['.zoo.lock']
    dead = subprocess.Popen([sys.executable, '-c', 'pass'])
    dead.wait()
    stale = str(tmp_path / 'stale')
    _write_lock(stale, dead.pid)
    with open(os.path.join(stale, '.tmp-abc.pth'), 'wb') as f:  # an interrupted checkpoint write
        f.write(b'x' * 1000)
    with caplog.at_level('WARNING', logger='zoo'):
        train(['--model', APE, '--data-dir', data, *TINY, '--epochs', '1', '--output', stale])
    assert 'stale lock' in caplog.text and str(dead.pid) in caplog.text
    assert not any(n.startswith('.tmp-') or n == '.zoo.lock' for n in os.listdir(stale))
    assert os.path.isfile(os.path.join(stale, 'model.safetensors'))


def test_checkpoint_write_failure_keeps_previous_files(run, tmp_path, monkeypatch):
    import errno
    from zoo.runs import checkpoints as zio
    from zoo.errors import OutputWriteError
    out = tmp_path / 'w'
    shutil.copytree(run['output'], out)
    last, best = out / 'checkpoint-last.pth', out / 'checkpoint-best.pth'
    before = last.read_bytes(), best.read_bytes()
    state = torch.load(last, weights_only=True)

    def full_disk(obj, f):
        f.write(b'partial')
        raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(zio.torch, 'save', full_disk)
    with pytest.raises(OutputWriteError, match='No space left on device.*free some space'):
        zio.save_checkpoint_files(state, str(last), str(best))
    assert (last.read_bytes(), best.read_bytes()) == before
    assert not any(n.startswith('.tmp-') for n in os.listdir(out))
    monkeypatch.undo()
    zio.save_checkpoint_files(state, str(last), str(best))  # best and last: the same complete file
    assert os.path.samefile(last, best) or last.read_bytes() == best.read_bytes()
    zio.save_checkpoint_files(dict(state, epoch=99), str(last))  # replacing last leaves best alone
    assert torch.load(best, weights_only=True)['epoch'] == state['epoch']


def test_sweep_writes_every_row_and_survives_failures(run, data, tmp_path, monkeypatch, caplog):
    from zoo.sweep import classify as resolution  # where the sweep calls the evaluation loop
    real = resolution.evaluate
    out = str(tmp_path / 'sweep')
    argv = ['--run', run['output'], '--data-dir', data, '--sizes', '24', '32', '40', '--workers', '0',
            '--no-progress', '--output', out]

    def interrupt_at_40(model, loader, *a, **k):
        if loader.dataset.transform.transforms[1].size == (40, 40):
            raise KeyboardInterrupt
        return real(model, loader, *a, **k)

    monkeypatch.setattr(resolution, 'evaluate', interrupt_at_40)
    with pytest.raises(KeyboardInterrupt):
        eval_resolution(argv)
    df = pd.read_csv(os.path.join(out, 'results.csv'))
    assert list(df['size']) == [24, 32]  # the finished sizes were kept
    assert 'Incomplete: 2 of 3' in open(os.path.join(out, 'report.md')).read()
    assert os.path.getsize(os.path.join(out, 'scaling.png')) > 0 and not os.path.exists(os.path.join(out, '.zoo.lock'))

    # --overwrite of a report: the old one stays until the new one is complete
    old = open(os.path.join(out, 'results.csv')).read()
    with pytest.raises(KeyboardInterrupt):
        eval_resolution([*argv, '--overwrite'])
    assert open(os.path.join(out, 'results.csv')).read() == old

    def oom_at_40(model, loader, *a, **k):
        if loader.dataset.transform.transforms[1].size == (40, 40):
            raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 20.00 GiB')
        return real(model, loader, *a, **k)

    monkeypatch.setattr(resolution, 'evaluate', oom_at_40)
    with caplog.at_level('INFO', logger='zoo'):
        assert main(['eval-resolution', *argv, '--overwrite', '--sizes', '24', '40', '32']) == 1
    assert 'roughly' in caplog.text  # the per-size time estimate
    df = pd.read_csv(os.path.join(out, 'results.csv'))
    assert list(df['size']) == [24, 32, 40] and df['top1'].isna().tolist() == [False, False, True]
    assert 'OutOfMemoryError' in df['error'].iloc[2]
    report = open(os.path.join(out, 'report.md')).read()
    assert 'Failed evaluations' in report and 'out of memory' in report and 'failed' in report
    assert 'Incomplete' not in report and not os.path.exists(os.path.join(out, 'incomplete'))


def test_plain_timm_model_and_ema_through_run(data, tmp_path):
    out = str(tmp_path / 'timm')
    train(['--model', 'vit_tiny_patch16_224', '--data-dir', data, '--output', out, *TINY, '--epochs', '1',
           '--model-ema', '--model-ema-decay', '0.5', '--results-file', str(tmp_path / 'train.json')])
    assert json.load(open(tmp_path / 'train.json'))[0]['model'] == 'vit_tiny_patch16_224'
    ev = str(tmp_path / 'ev')
    result = eval_resolution(['--run', out, '--data-dir', data, '--sizes', '32', '--workers', '0', '--no-progress',
                              '--output', ev, '--use-ema', '--results-file', str(tmp_path / 'rows.csv')])
    assert result['rows'][0]['n'] == 12 and result['rows'][0]['weights'] == 'EMA'
    report = open(os.path.join(ev, 'report.md')).read()
    assert 'EMA' in report and '`--use-ema`' in report
    assert len(pd.read_csv(tmp_path / 'rows.csv')) == 1
    # the EMA weights really are the ones evaluated: same count as an independent evaluation of model_ema
    ckpt = torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)
    model = timm.create_model('vit_tiny_patch16_224', num_classes=3, img_size=32, **ckpt['meta']['model_kwargs'])
    model.load_state_dict(ckpt['model_ema'])
    from zoo.tasks.evaluate import evaluate
    from zoo.datasets.splits import make_loader
    from zoo.datasets import open_image_folder
    cfg = ckpt['meta']['data_config']
    tf = create_transform((3, 32, 32), interpolation=cfg['interpolation'], mean=cfg['mean'], std=cfg['std'],
                          crop_pct=cfg['crop_pct'])
    counts = evaluate(model, make_loader(open_image_folder(data, None, tf), 5, 0, False), torch.device('cpu'))
    assert counts.correct1 == result['rows'][0]['correct1']


def test_safetensors_export_is_evaluable(run, data, tmp_path):
    from safetensors.torch import load_file
    path = os.path.join(run['output'], 'model.safetensors')
    ckpt = torch.load(os.path.join(run['output'], 'checkpoint-last.pth'), weights_only=True)
    tensors = load_file(path)
    assert all(torch.equal(tensors[k], v) for k, v in ckpt['model'].items())
    out = str(tmp_path / 'ev')
    a = eval_resolution(['--checkpoint', path, '--data-dir', data, '--sizes', '32', '--workers', '0', '--output', out,
                         '--no-progress'])
    b = eval_resolution(['--run', run['output'], '--data-dir', data, '--sizes', '32', '--workers', '0',
                         '--output', out + '2', '--no-progress'])
    assert a['rows'][0]['correct1'] == b['rows'][0]['correct1'] and a['rows'][0]['model'] == APE


def test_timm_flags(data, tmp_path, capsys):
    classes = tmp_path / 'map.txt'
    classes.write_text('red\nblue\n')  # two of the three classes, in another order
    out = str(tmp_path / 'f')
    result = train(['--model', APE, '--data-dir', data, '--output', out, *TINY, '--epochs', '1', '-b', '4', '-j', '0',
                    '--grad-accum-steps', '2', '--channels-last', '--amp', '--amp-dtype', 'bfloat16', '--pin-mem',
                    '--class-map', str(classes), '--max-val-per-class', '2'])
    meta = torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)['meta']
    assert meta['class_names'] == ['red', 'blue'] and meta['num_classes'] == 2
    assert meta['args']['batch_size'] == 4 and meta['args']['grad_accum_steps'] == 2
    assert result['history'][0]['val_top1'] >= 0
    m = pd.read_csv(os.path.join(out, 'metrics.csv'))
    assert len(m) == 1
    # validation subsampled: 2 per class x 2 classes
    res = eval_resolution(['--run', out, '--data-dir', data, '--sizes', '32', '-j', '0', '-b', '3', '--no-progress',
                           '--output', str(tmp_path / 'ev'), '--class-map', str(classes), '--interpolation',
                           'bilinear', '--mean', '0.5', '0.5', '0.5', '--std', '0.5', '0.5', '0.5', '--channels-last'])
    assert res['rows'][0]['n'] == 8 and res['rows'][0]['interpolation'] == 'bilinear'
    # a validation progress bar while training
    capsys.readouterr()
    train(['--model', APE, '--data-dir', data, '--output', str(tmp_path / 'bar'),
           *[a for a in TINY if a != '--no-progress'], '--epochs', '1'])
    assert 'validate' in capsys.readouterr().err


def test_grad_accum_updates_per_step_count(data, tmp_path):
    """4 batches of 6 with --grad-accum-steps 2 make 2 optimizer updates per epoch (the LR schedule counts them)."""
    out = str(tmp_path / 'ga')
    train(['--model', APE, '--data-dir', data, '--output', out, *TINY, '--epochs', '1', '-b', '6',
           '--grad-accum-steps', '2', '--warmup-epochs', '0'])
    opt = torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)['optimizer']
    steps = {int(s['step']) for s in opt['state'].values() if 'step' in s}
    assert steps == {2}, steps


def test_a_symlink_loop_reads_each_file_once(data, tmp_path, caplog):
    """A link back to its own class folder (``red/loop -> ../red``) made os.walk list every red image about 40 times
    (silently wrong counts and scores); each real file is read once and the loop is named in the log."""
    from zoo.datasets import SafeImageFolder
    root = tmp_path / 'd'
    shutil.copytree(data, root)
    before = SafeImageFolder(str(root / 'train'), data_root=str(root))
    os.symlink('../red', root / 'train' / 'red' / 'loop')
    with caplog.at_level('WARNING'):
        ds = SafeImageFolder(str(root / 'train'), data_root=str(root))
    assert sorted(ds.samples) == sorted(before.samples)
    assert ds.repeated and all('loop' in p for p in ds.repeated)
    assert 'symlink loop' in caplog.text and 'loop' in caplog.text
    assert not ds.other_files


def test_resume_compares_the_effective_options(tmp_path):
    """A sweep resumes its seed-1 run with the same command (--config X --seed 1 --resume): the config's seed 0 is
    overridden by the command line, so it must not count as a conflict (it did, and the sweep could not resume)."""
    from zoo.errors import ResumeMismatchError
    from zoo.train.args import parse_train_args
    cfg = tmp_path / 'c.yaml'
    cfg.write_text('seed: 0\nepochs: 3\n')
    argv = ['--config', str(cfg), '--seed', '1', '--output', str(tmp_path / 'o'), '--model', 'm', '--data-dir', 'd']
    args = parse_train_args(argv, recorded={'seed': 1, 'epochs': 3, 'model': 'm', 'data_dir': 'd'},
                            check_required=False)
    assert args.seed == 1
    with pytest.raises(ResumeMismatchError, match='--seed 2'):
        parse_train_args([*argv[:3], '2', *argv[4:]], recorded={'seed': 1, 'epochs': 3, 'model': 'm',
                                                                 'data_dir': 'd'}, check_required=False)
