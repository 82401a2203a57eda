"""--sched hold_cosine (zoo.train.schedule) and the per-epoch training metrics of zoo train (metrics.csv
train_top1 / train_top_share, train_classes.csv): the schedule's defining property (peak LR until released, cosine to
min_lr over the updates left), its state in the checkpoint (a killed and resumed run writes the same files), and the
metrics against a hand-made confusion matrix."""
from __future__ import annotations

import math
import os

import pandas as pd
import pytest
import torch
from PIL import Image

from zoo.cli import main
from zoo.train import loop
from zoo.train.loop import train, train_metrics
from zoo.train.schedule import HoldCosineScheduler

APE = 'pe_vit_tiny_patch16_ape_224'
TINY = ['--img-size', '32', '--model-kwargs', 'patch_size=8', 'embed_dim=32', 'depth=1', 'num_heads=2',
        '--batch-size', '8', '--workers', '0', '--no-progress', '--threads', '1', '--crop-pct', '1', '--epochs', '3',
        '--warmup-epochs', '0', '--lr', '3e-3', '--min-lr', '1e-5', '--color-jitter', '0', '--sched', 'hold_cosine']


def _opt(lr: float = 1.0):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def test_hold_cosine_holds_the_peak_until_released_then_decays_to_min_lr():
    opt = _opt(1.0)
    s = HoldCosineScheduler(opt, total_updates=100, release_at=60., warmup_updates=10, warmup_lr=0., min_lr=0.01)
    assert s.lr_at(0, 1.0) == 0. and s.lr_at(5, 1.0) == pytest.approx(0.5)  # linear warm-up
    assert [s.lr_at(t, 1.0) for t in (10, 40, 99, 100)] == [1.0] * 4       # held while not released
    assert not s.observe(1, 59.99, 30) and s.released_at is None
    assert s.observe(2, 60., 40) and (s.released_at, s.released_epoch) == (40, 2)
    assert not s.observe(3, 10., 50) or s.released_at == 40                # released once
    assert s.lr_at(40, 1.0) == pytest.approx(1.0)
    assert s.lr_at(70, 1.0) == pytest.approx(0.01 + 0.5 * 0.99)             # halfway through the decay
    assert s.lr_at(100, 1.0) == pytest.approx(0.01)
    lrs = [s.lr_at(t, 1.0) for t in range(40, 101)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))
    s.step_update(70)
    assert opt.param_groups[0]['lr'] == pytest.approx(0.505)
    # the state is the release point; a fresh scheduler restored from it gives the same LRs
    t = HoldCosineScheduler(_opt(1.0), total_updates=100, release_at=60., warmup_updates=10, min_lr=0.01)
    t.load_state_dict(s.state_dict())
    assert [t.lr_at(u, 1.0) for u in range(101)] == [s.lr_at(u, 1.0) for u in range(101)]
    with pytest.raises(ValueError, match='another LR schedule'):
        t.load_state_dict(dict(t_initial=3))
    with pytest.raises(ValueError, match='--hold-until 0'):
        HoldCosineScheduler(_opt(), total_updates=10, release_at=0)
    assert not s.observe(4, math.nan, 60) or s.released_at == 40


def test_train_metrics_from_a_confusion_matrix():
    # rows true, columns predicted: class 0: 3 right, 1 as class 1; class 1: 2 as class 0; class 2: none
    m = train_metrics(torch.tensor([[3, 1, 0], [2, 0, 0], [0, 0, 0]]))
    assert m['top1'] == pytest.approx(50.) and m['top_share'] == pytest.approx(500 / 6)
    assert m['samples'] == [4, 2, 0]
    assert m['class_top1'][:2] == [75., 0.] and math.isnan(m['class_top1'][2])
    assert m['predicted_share'] == pytest.approx([500 / 6, 100 / 6, 0.])


def _folder(root) -> str:
    g = torch.Generator().manual_seed(0)
    for split, n in (('train', 12), ('val', 4)):
        for c, name in enumerate(('blue', 'green', 'red')):
            os.makedirs(os.path.join(root, split, name), exist_ok=True)
            for i in range(n):
                img = torch.rand(32, 32, 3, generator=g) * 90
                img[..., c] += 150
                Image.fromarray(img.clamp(0, 255).byte().numpy()).save(os.path.join(root, split, name, f'{i}.png'))
    return str(root)


def test_hold_cosine_run_logs_train_metrics_and_resumes_exactly(tmp_path, monkeypatch):
    data = _folder(tmp_path / 'data')
    common = ['--model', APE, '--data-dir', data, *TINY, '--hold-until', '1']
    full = str(tmp_path / 'full')
    result = train([*common, '--output', full])
    m = pd.read_csv(os.path.join(full, 'metrics.csv'))
    assert {'train_top1', 'train_top_share'} <= set(m.columns) and 'epoch_s' not in m.columns
    assert m['train_top1'].between(0, 100).all() and m['train_top_share'].between(100 / 3 - 1e-6, 100).all()
    # released after epoch 1 (top-1 >= 1 %): epoch 1 ends at the peak, the last update reaches min_lr
    assert m['lr'][0] == pytest.approx(3e-3) and 1e-5 < m['lr'][1] < 3e-3 and m['lr'][2] == pytest.approx(1e-5)
    ck = torch.load(os.path.join(full, 'checkpoint-last.pth'), weights_only=True)
    assert ck['scheduler'] == dict(released_at=4, released_epoch=1)  # 36 images, batch 8, drop_last: 4 updates
    per = pd.read_csv(os.path.join(full, 'train_classes.csv'))
    assert list(per.columns) == loop.CLASS_FIELDS and list(per['outcome'][:3]) == ['blue', 'green', 'red']
    assert (per.groupby('epoch')['samples'].sum() == 32).all()  # every image of the 4 full batches counted once
    assert (per.groupby('epoch')['predicted_share'].sum().round(6) == 100).all()
    first = per[per['epoch'] == 1]
    assert (first['samples'] * first['top1']).sum() / 32 == pytest.approx(m['train_top1'][0], abs=1e-3)
    assert result['history'][0]['train_top1'] == m['train_top1'][0]

    real = loop.train_one_epoch

    def killed_in_third_epoch(*args, **kwargs):
        if kwargs.get('epoch') == 2:
            raise KeyboardInterrupt('simulated kill mid-epoch')
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, 'train_one_epoch', killed_in_third_epoch)
    out = str(tmp_path / 'killed')
    with pytest.raises(KeyboardInterrupt):
        train([*common, '--output', out])
    monkeypatch.setattr(loop, 'train_one_epoch', real)
    train(['--output', out, '--resume', '--workers', '0', '--no-progress', '--threads', '1'])
    for name in ('metrics.csv', 'train_classes.csv'):
        assert open(os.path.join(out, name), 'rb').read() == open(os.path.join(full, name), 'rb').read(), name


def test_hold_until_needs_hold_cosine(tmp_path, capsys):
    assert main(['train', '--model', APE, '--data-dir', str(tmp_path), '--output', str(tmp_path / 'o'),
                 '--hold-until', '60']) == 2
    assert '--hold-until applies to --sched hold_cosine only' in capsys.readouterr().err
    assert main(['train', '--model', APE, '--data-dir', str(tmp_path), '--output', str(tmp_path / 'o'),
                 '--sched', 'hold_cosine', '--hold-until', '120']) == 2
    assert '--hold-until 120.0: must be a training top-1 in (0, 100] percent' in capsys.readouterr().err


def test_hold_release_by_caps_the_hold():
    """--hold-release-by: a run that never reaches --hold-until still decays from the cap; an earlier release wins;
    a release reported after the cap does not move the decay (it already started)."""
    s = HoldCosineScheduler(_opt(1.0), total_updates=100, release_at=90., warmup_updates=10, min_lr=0.01,
                            release_by=50)
    assert [s.lr_at(t, 1.0) for t in (10, 49, 50)] == [1.0] * 3
    assert s.lr_at(75, 1.0) == pytest.approx(0.01 + 0.5 * 0.99) and s.lr_at(100, 1.0) == pytest.approx(0.01)
    assert not s.observe(1, 40., 30) and s.observe(2, 40., 50) and s.released_at is None  # capped, not released
    assert s.observe(3, 95., 60) and s.released_at is None and s.decay_start() == 50        # the cap stays the start
    early = HoldCosineScheduler(_opt(1.0), total_updates=100, release_at=90., release_by=50)
    assert early.observe(1, 91., 20) and early.decay_start() == 20
    assert early.lr_at(60, 1.0) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.5)))
    with pytest.raises(ValueError, match='release_by'):
        HoldCosineScheduler(_opt(), total_updates=10, release_at=50., release_by=11)


def test_hold_release_by_option_checks(tmp_path, capsys):
    data = str(tmp_path)
    assert main(['train', '--model', APE, '--data-dir', data, '--output', str(tmp_path / 'o'), '--hold-release-by', '0.5']) == 2
    assert '--hold-release-by applies to --sched hold_cosine only' in capsys.readouterr().err
    assert main(['train', '--model', APE, '--data-dir', data, '--output', str(tmp_path / 'o'), '--sched', 'hold_cosine',
                 '--hold-release-by', '1.5']) == 2
    assert '--hold-release-by 1.5' in capsys.readouterr().err


def test_resume_help_names_every_option_that_may_change(capsys):
    """The --resume help and the epilog are built from MAY_CHANGE_ON_RESUME (they once omitted --allow-root)."""
    from zoo.train.args import MAY_CHANGE_ON_RESUME
    with pytest.raises(SystemExit):
        main(['train', '--help'])
    text = ' '.join(capsys.readouterr().out.split())
    for name in MAY_CHANGE_ON_RESUME:
        assert text.count('--' + name.replace('_', '-')) >= 3, name  # usage, the --resume help and the epilog
