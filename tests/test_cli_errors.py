"""The CLI's bad inputs (issue 10): each is one line on stderr, exit status 2, no traceback, naming problem and fix."""
from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch
from PIL import Image

from zoo.cli import main

APE = 'pe_vit_tiny_patch16_ape_224'
TINY = ['--img-size', '32', '--model-kwargs', 'patch_size=8', 'embed_dim=32', 'depth=1', 'num_heads=2',
        '--batch-size', '8', '--workers', '0', '--no-progress', '--threads', '1', '--crop-pct', '1', '--epochs', '1',
        '--warmup-epochs', '0', '--color-jitter', '0']


@pytest.fixture(scope='module')
def data(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp('data')
    g = torch.Generator().manual_seed(0)
    for split in ('train', 'val'):
        for c, name in enumerate(('blue', 'green', 'red')):
            os.makedirs(root / split / name)
            for i in range(4):
                img = torch.rand(32, 32, 3, generator=g) * 90
                img[..., c] += 150
                Image.fromarray(img.clamp(0, 255).byte().numpy()).save(root / split / name / f'{i}.png')
    return str(root)


@pytest.fixture(scope='module')
def runs(data, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp('runs')
    out = {}
    for pe in ('nope', 'ape'):
        out[pe] = str(root / pe)
        assert main(['train', '--model', f'pe_vit_tiny_patch16_{pe}_224', '--data-dir', data, '--output', out[pe],
                     *TINY]) == 0
    return out


def _err(capsys, argv) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert 'Traceback' not in err and err.startswith('zoo ') and err.count('\n') == 1, err
    return err


# 1. --resume contradicting the record
def test_resume_flag_contradicting_record(runs, capsys):
    err = _err(capsys, ['train', '--output', runs['ape'], '--resume', '--workers', '2'])
    assert '--workers 2' in err and 'recorded 0' in err and '--initial-checkpoint' in err


def test_resume_config_contradicting_record(runs, tmp_path, capsys):
    cfg = tmp_path / 'c.yaml'
    cfg.write_text(f'data_dir: {tmp_path}\n')
    err = _err(capsys, ['train', '--output', runs['ape'], '--resume', '--config', str(cfg)])
    assert '--data-dir' in err and str(tmp_path) in err and 'recorded' in err


# 2. a second run into a directory in use
def test_second_run_into_locked_dir(runs, data, tmp_path, capsys):
    import json
    import socket
    from zoo.runs.rundir import _start_time
    out = tmp_path / 'busy'
    out.mkdir()
    (out / '.zoo.lock').write_text(json.dumps(dict(host=socket.gethostname(), pid=os.getpid(),
                                                   start=_start_time(os.getpid()), command='zoo eval-resolution')))
    err = _err(capsys, ['train', '--model', APE, '--data-dir', data, *TINY, '--output', str(out)])
    assert 'in use by zoo eval-resolution' in err and 'choose another --output' in err
    err = _err(capsys, ['eval-resolution', '--run', runs['ape'], '--data-dir', data, '--sizes', '32',
                        '--output', str(out)])
    assert 'in use by' in err


def test_lock_from_another_host_is_not_stolen(data, tmp_path, capsys):
    out = tmp_path / 'remote'
    out.mkdir()
    (out / '.zoo.lock').write_text('{"host": "some-other-node", "pid": 1, "command": "zoo train"}')
    err = _err(capsys, ['train', '--model', APE, '--data-dir', data, *TINY, '--output', str(out)])
    assert 'some-other-node' in err and 'delete' in err and '.zoo.lock' in err


# 5. checkpoints evaluated as another model / PE; --use-ema without EMA weights
def test_checkpoint_evaluated_as_another_pe(runs, data, tmp_path, capsys):
    ckpt = os.path.join(runs['nope'], 'checkpoint-last.pth')
    argv = ['eval-resolution', '--model', 'pe_vit_tiny_patch16_sincos_224', '--checkpoint', ckpt, '--data-dir', data,
            '--sizes', '32', '--workers', '0', '--no-progress']
    err = _err(capsys, [*argv, '--output', str(tmp_path / 'e1')])
    assert 'pe_vit_tiny_patch16_nope_224' in err and 'nope' in err and 'sincos' in err and '--force' in err
    assert main([*argv, '--output', str(tmp_path / 'e2'), '--force']) == 0  # forced: loads (no parameter differs)


def test_use_ema_without_ema_weights(runs, data, tmp_path, capsys):
    err = _err(capsys, ['eval-resolution', '--run', runs['ape'], '--data-dir', data, '--sizes', '32', '--use-ema',
                        '--output', str(tmp_path / 'e')])
    assert 'no EMA weights' in err and '--model-ema' in err


# 6. zoo list
@pytest.mark.parametrize('pattern', ['*tiny*', 'vit_*', '*', 'rope_mixed', 'no_such_thing'])
def test_zoo_list_never_a_traceback(pattern, capsys):
    code = main(['list', pattern])
    out, err = capsys.readouterr()
    assert 'Traceback' not in err
    if pattern in ('*tiny*', '*', 'rope_mixed'):
        assert code == 0 and 'pe_vit_tiny_patch16_rope_mixed_224' in out
        if pattern == 'rope_mixed':
            assert all('rope_mixed' in line for line in out.splitlines()[1:])
    else:
        assert code == 2 and 'rope_mixed' in err and err.count('\n') == 1  # lists the PE names


# 7. raw tracebacks and misleading messages
def test_output_is_a_file(runs, data, tmp_path, capsys):
    f = tmp_path / 'file'
    f.write_text('x')
    assert 'is a file' in _err(capsys, ['train', '--model', APE, '--data-dir', data, *TINY, '--output', str(f)])
    assert 'is a file' in _err(capsys, ['train', '--output', str(f), '--resume'])
    assert 'is a file' in _err(capsys, ['eval-resolution', '--run', runs['ape'], '--data-dir', data, '--sizes', '32',
                                        '--output', str(f)])


@pytest.mark.parametrize('code,needle', [(errno.ENOSPC, 'free some space'), (errno.EROFS, 'read-only')])
def test_full_or_read_only_disk_while_saving(data, tmp_path, capsys, monkeypatch, code, needle):
    from zoo.runs import checkpoints as zio

    def fail(obj, f):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(zio.torch, 'save', fail)
    err = _err(capsys, ['train', '--model', APE, '--data-dir', data, *TINY, '--output', str(tmp_path / 'o')])
    assert 'cannot write' in err and 'checkpoint-last.pth' in err and needle in err
    out = tmp_path / 'o'
    assert not out.exists() or not any(n.startswith('.tmp-') for n in os.listdir(out))  # (an empty dir is removed)


@pytest.mark.parametrize('kwarg', ['embed_dim=-8', 'depth=0', 'patch_size=0', 'drop_rate=1.5'])
def test_bad_model_kwargs_values(data, tmp_path, capsys, kwarg):
    err = _err(capsys, ['train', '--model', APE, '--data-dir', data, *TINY, '--model-kwargs', kwarg,
                        '--output', str(tmp_path / 'o')])
    assert kwarg.split('=')[0] in err and 'must be' in err
    assert not os.path.exists(tmp_path / 'o')


def test_one_empty_class_folder(runs, data, tmp_path, capsys):
    root = tmp_path / 'd'
    shutil.copytree(data, root)
    (root / 'train' / 'zebra').mkdir()
    (root / 'val' / 'zebra').mkdir()
    (root / 'train' / 'zebra' / 'notes.txt').write_text('no image')
    err = _err(capsys, ['train', '--model', APE, '--data-dir', str(root), *TINY, '--output', str(tmp_path / 'o')])
    assert "['zebra']" in err and 'hold no images' in err and 'no images in' not in err
    err = _err(capsys, ['eval-resolution', '--run', runs['ape'], '--data-dir', str(root), '--sizes', '32',
                        '--output', str(tmp_path / 'e')])
    assert "['zebra']" in err and 'hold no images' in err


def test_checkpoint_path_is_a_directory(runs, data, tmp_path, capsys):
    err = _err(capsys, ['eval-resolution', '--checkpoint', runs['ape'], '--data-dir', data, '--sizes', '32',
                        '--output', str(tmp_path / 'e')])
    assert 'is a directory' in err and '--run' in err and 'does not exist' not in err
    err = _err(capsys, ['train', '--model', APE, '--data-dir', data, *TINY, '--initial-checkpoint', runs['ape'],
                        '--output', str(tmp_path / 'o')])
    assert 'is a directory' in err


def test_pe_name_given_as_model(data, tmp_path, capsys):
    err = _err(capsys, ['train', '--model', 'rope_mixed', '--data-dir', data, *TINY, '--output', str(tmp_path / 'o')])
    assert 'is a position encoding' in err and 'pe_vit_tiny_patch16_rope_mixed_224' in err


# 8. the timm flags: bad values
@pytest.mark.parametrize('extra,needle', [(['--grad-accum-steps', '0'], '--grad-accum-steps'),
                                          (['--amp-dtype', 'float8'], '--amp-dtype'),
                                          (['--results-file', 'r.txt'], '--results-file'),
                                          (['--max-val-per-class', '0'], '--max-val-per-class')])
def test_bad_timm_flag_values(data, tmp_path, capsys, extra, needle):
    err = _err(capsys, ['train', '--model', APE, '--data-dir', data, *TINY, *extra, '--output', str(tmp_path / 'o')])
    assert needle in err


def test_bad_class_map(runs, data, tmp_path, capsys):
    cmap = tmp_path / 'map.txt'
    cmap.write_text('red\nzebra\n')
    err = _err(capsys, ['train', '--model', APE, '--data-dir', data, *TINY, '--class-map', str(cmap),
                        '--output', str(tmp_path / 'o')])
    assert 'zebra' in err and '--class-map' in err
    err = _err(capsys, ['eval-resolution', '--run', runs['ape'], '--data-dir', data, '--sizes', '32', '--class-map',
                        str(tmp_path / 'missing.txt'), '--output', str(tmp_path / 'e')])
    assert 'missing.txt' in err and 'does not exist' in err


def test_eval_bad_interpolation_and_std(runs, data, tmp_path, capsys):
    base = ['eval-resolution', '--run', runs['ape'], '--data-dir', data, '--sizes', '32', '--output',
            str(tmp_path / 'e')]
    assert '--interpolation' in _err(capsys, [*base, '--interpolation', 'cubic-ish'])
    assert '--std' in _err(capsys, [*base, '--std', '0', '1', '1'])


def test_module_entry_point_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, '-m', 'zoo.train', '--model', 'rope_mixed', '--data-dir', str(tmp_path),
                           '--output', str(tmp_path / 'o')], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr and proc.stderr.count('\n') == 1


def test_missing_package_is_one_line_naming_the_extra(monkeypatch, capsys):
    """A package zoo needs but cannot import: one line naming the extra (optional) or a reinstall (core)."""
    import zoo.cli as cli
    from zoo.errors import MissingDependencyError, require
    with pytest.raises(MissingDependencyError, match=r"pip install 'zoo\[hf\]'"):
        require('transformers.zoo_no_such_module', 'the Hugging Face adapter')

    def needs(argv):
        import zoo_no_such_package  # noqa: F401
    monkeypatch.setitem(cli.SUBCOMMANDS, 'demo', (needs, 'x'))
    assert main(['demo']) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'zoo_no_such_package' is not installed" in err[0] and 'reinstall zoo' in err[0]


def test_train_resume_on_a_sweep_output_names_the_sweep(tmp_path, capsys):
    import json
    out = tmp_path / 'eval'
    out.mkdir()
    (out / 'results.json').write_text(json.dumps(dict(spec=dict(command='zoo eval-resolution'), results=[])))
    err = _err(capsys, ['train', '--output', str(out), '--resume'])
    assert "result set of zoo eval-resolution, not a training run" in err and 'zoo eval-resolution --resume' in err
    assert '--model is required' not in err


def test_train_given_a_video_llm_names_train_vlm(data, tmp_path, capsys):
    err = _err(capsys, ['train', '--model', 'pe_vlm_tiny_mrope', '--data-dir', data, '--output', str(tmp_path / 'o')])
    assert 'video-LLM' in err and 'zoo train-vlm' in err and 'unknown model' not in err


def test_help_shows_each_default_once(capsys):
    for argv in (['eval-resolution', '--help'], ['eval-frames', '--help'], ['train', '--help']):
        with pytest.raises(SystemExit):
            main(argv)
        text = ' '.join(capsys.readouterr().out.split())
        assert '(default: None)' not in text and not re.search(r'\(default: [^)]*\) \(default:', text), argv
    with pytest.raises(SystemExit):
        main(['eval-resolution', '--help'])
    assert '(default: 128)' in ' '.join(capsys.readouterr().out.split())  # -b: a default worth showing
