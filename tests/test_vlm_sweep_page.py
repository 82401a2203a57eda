"""benchmarks/vlm_sweep.py's page (issue 19): runs below 80 % at the training frame count or answering one letter are
listed as not learned and never compared; a difference holds only beyond twice the largest seed spread of its cell."""
import importlib.util
import json
import os
import types

import pandas as pd
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _sweep():
    spec = importlib.util.spec_from_file_location('vlm_sweep', os.path.join(ROOT, 'benchmarks', 'vlm_sweep.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake_run(out, scheme, seed, acc, letters):
    """A finished run whose evaluation scores ``acc[frames]`` and answers the letters ``letters`` (at 8 frames)."""
    name = f'{scheme}_s{seed}'
    run, ev = os.path.join(out, name), os.path.join(out, 'eval', name)
    os.makedirs(run)
    os.makedirs(ev)
    torch.save(dict(epoch=18, meta=dict(args=dict(epochs=18))), os.path.join(run, 'checkpoint-last.pth'))
    pd.DataFrame(dict(epoch=[1, 2], lr=[3e-3, 3e-3], train_loss=[1., .5], train_top1=[25., acc[8]],
                      train_top_share=[90., 30.], val_loss=[1., .5], val_top1=[25., acc[8]],
                      val_top5=[25., acc[8]])).to_csv(os.path.join(run, 'metrics.csv'), index=False)
    label = f'{scheme} (seed {seed})'
    rows = [dict(label=label, scheme=scheme, train_frames=8, frames=f, acc_qa=a, chance_qa=25.0, error='')
            for f, a in acc.items()]
    pd.DataFrame(rows).to_csv(os.path.join(ev, 'results.csv'), index=False)
    preds = [dict(label=label, frames=8, pred=int(p)) for p in letters]
    with open(os.path.join(ev, 'results.json'), 'w') as f:
        json.dump(dict(predictions=preds), f)


def test_page_acceptance_and_seed_bar(tmp_path):
    sweep = _sweep()
    out, docs = str(tmp_path / 'runs'), str(tmp_path / 'docs')
    mixed = [0, 1, 2, 3] * 25
    _fake_run(out, 'mrope', 0, {4: 60., 8: 95., 16: 70., 32: 50.}, mixed)
    _fake_run(out, 'mrope', 1, {4: 62., 8: 97., 16: 74., 32: 52.}, mixed)          # spread 2 / 2 / 4 / 2
    _fake_run(out, 'videorope', 0, {4: 50., 8: 90., 16: 71., 32: 80.}, mixed)
    _fake_run(out, 'videorope', 1, {4: 52., 8: 92., 16: 73., 32: 82.}, mixed)
    _fake_run(out, 'rope1d', 0, {4: 25., 8: 79., 16: 25., 32: 25.}, mixed)         # below 80 %
    _fake_run(out, 'vrope', 0, {4: 25., 8: 85., 16: 25., 32: 25.}, [2] * 90 + [0] * 10)  # one letter
    args = types.SimpleNamespace(schemes=['mrope', 'videorope', 'rope1d', 'vrope'],
                                 noise_schemes=['mrope', 'videorope'], jobs=2, out=out, docs=docs)
    sweep.write_docs(args)
    md = open(os.path.join(docs, 'video_qa.md')).read()
    assert '**Partial**' not in md
    assert 'Not learned at this budget** (not ranked): rope1d (seed 0) (79.0 %' in md
    assert 'vrope (seed 0) (85.0 %, letter (C) 90 %)' in md
    ranked = md.split('## Accuracy (%) against frames, learned runs only')[1].split('## Which')[0]
    assert 'rope1d' not in ranked and 'vrope' not in ranked and 'mrope (seed 1)' in ranked
    # 4 frames: means 61 vs 51, bar 2 x 2 = 4 -> holds; 16 frames: 72 vs 72, bar 8 -> none; 32: 81 vs 51 -> holds
    assert '**4 frames**: mrope 61.0, videorope 51.0; seed spread 2.0, bar 4.0 points: mrope > videorope by 10.0.' \
        in md
    assert '**16 frames**: videorope 72.0, mrope 72.0; seed spread 4.0, bar 8.0 points: no difference holds.' in md \
        or '**16 frames**: mrope 72.0, videorope 72.0; seed spread 4.0, bar 8.0 points: no difference holds.' in md
    assert '**32 frames**: videorope 81.0, mrope 51.0; seed spread 2.0, bar 4.0 points: videorope > mrope by 30.0.' \
        in md
    csv = pd.read_csv(os.path.join(docs, 'video_qa_results.csv'))
    assert list(csv.columns) == ['label', 'scheme', 'train_frames', 'frames', 'acc_qa', 'chance']
    assert len(csv) == 6 * 4 and os.path.isfile(os.path.join(docs, 'video_qa_curves.png'))


def test_partial_page_names_the_missing_runs_and_the_resume_command(tmp_path):
    sweep = _sweep()
    out, docs = str(tmp_path / 'runs'), str(tmp_path / 'docs')
    _fake_run(out, 'mrope', 0, {4: 60., 8: 95., 16: 70., 32: 50.}, [0, 1, 2, 3] * 25)
    args = types.SimpleNamespace(schemes=['mrope', 'videorope'], noise_schemes=['mrope'], jobs=2, out=out, docs=docs)
    sweep.write_docs(args)
    md = open(os.path.join(docs, 'video_qa.md')).read()
    assert md.count('**Partial**: 1 of 3 planned runs') == 1 and sweep.RESUME_CMD in md
    assert 'Not yet in: mrope (seed 1), videorope (seed 0).' in md
    assert '| videorope (seed 0) | not started | | | | | | | |' in md
    assert 'only 1 learned scheme (mrope): nothing to compare.' in md


def test_a_run_of_another_recipe_stops_the_sweep(tmp_path):
    import pytest
    sweep = _sweep()
    run = tmp_path / 'mrope_s0'
    run.mkdir()
    torch.save(dict(epoch=12, meta=dict(args=dict(epochs=12, seed=0))), run / 'checkpoint-last.pth')
    with pytest.raises(SystemExit, match=r'another recipe .*epochs: 12 there, 18 now.*remove'):
        sweep.check_recipe(str(run), os.path.join(ROOT, 'configs', 'vlm_mrope.yaml'), 0)
    torch.save(dict(epoch=18, meta=dict(args=dict(epochs=18, seed=0))), run / 'checkpoint-last.pth')
    sweep.check_recipe(str(run), os.path.join(ROOT, 'configs', 'vlm_mrope.yaml'), 0)  # the same recipe: no error
