"""benchmarks/vlm_sweep.py across machines (runs/ is not kept): a finished run's small files are archived with a
fingerprint of its recipe, seed and data; a sweep into an empty runs folder restores it instead of training, and a
changed recipe is not restored. Also the square size of the diagnostic QA tasks (``--object-size``)."""
import importlib.util
import os
import types

import numpy as np
import pytest

from test_vlm_sweep_page import _fake_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _sweep():
    spec = importlib.util.spec_from_file_location('vlm_sweep', os.path.join(ROOT, 'benchmarks', 'vlm_sweep.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _args(out, docs):
    return types.SimpleNamespace(schemes=['mrope'], noise_schemes=[], new_schemes=[], jobs=1, out=out, docs=docs)


def test_a_finished_run_is_archived_and_restored_not_trained(tmp_path):
    sweep = _sweep()
    out, docs = str(tmp_path / 'runs'), str(tmp_path / 'docs')
    _fake_run(out, 'mrope', 0, {4: 60., 8: 95., 16: 70., 32: 50.}, [0, 1, 2, 3] * 25)
    run, ev = os.path.join(out, 'mrope_s0'), os.path.join(out, 'eval', 'mrope_s0')
    with open(run + '.log', 'w') as f:
        f.write('epoch 1/18 | train loss 1.0 | 30.0s\nepoch 2/18 | train loss 0.5 | 30.0s\n')
    (tmp_path / 'runs' / 'mrope_s0' / 'train_classes.csv').write_text('epoch,outcome,top1\n2,A,95.0\n')
    parts = sweep.run_parts('mrope', 0)
    sweep.keep(run, ev, sweep.archive_dir(_args(out, docs)), parts)
    archive = os.path.join(docs, sweep.ARCHIVE)
    assert sorted(os.listdir(os.path.join(archive, 'mrope_s0'))) == ['fingerprint.json', 'metrics.csv',
                                                                     'train.log', 'train_classes.csv']
    assert sorted(os.listdir(os.path.join(archive, 'eval', 'mrope_s0'))) == ['fingerprint.json', 'predictions.json',
                                                                             'results.csv']
    # a fresh machine: empty runs folder; any zoo command would fail ('false'), so the run must come from the archive
    out2 = str(tmp_path / 'fresh')
    os.makedirs(os.path.join(out2, 'eval'))
    args = _args(out2, docs)
    sweep.one_run(args, ['false'], dict(os.environ), 'mrope', 0)
    assert os.path.isfile(os.path.join(out2, 'eval', 'mrope_s0', 'results.csv'))
    assert not os.path.isfile(os.path.join(out2, 'mrope_s0', 'checkpoint-last.pth'))
    md = open(os.path.join(docs, 'video_qa.md')).read()
    assert '| mrope (seed 0) | yes | 95.0 |' in md and '**Partial**' not in md
    assert '| 1.0 | **learned** |' in md  # training minutes from the archived log: 2 x 30 s


def test_another_recipe_or_seed_is_not_restored(tmp_path):
    sweep = _sweep()
    out, docs = str(tmp_path / 'runs'), str(tmp_path / 'docs')
    _fake_run(out, 'mrope', 0, {4: 60., 8: 95., 16: 70., 32: 50.}, [0, 1, 2, 3] * 25)
    run, ev = os.path.join(out, 'mrope_s0'), os.path.join(out, 'eval', 'mrope_s0')
    archive = sweep.archive_dir(_args(out, docs))
    sweep.keep(run, ev, archive, sweep.run_parts('mrope', 0))
    assert sweep.archived(run, archive, sweep.run_parts('mrope', 0))
    assert not sweep.archived(run, archive, sweep.run_parts('mrope', 1))
    changed = dict(sweep.run_parts('mrope', 0), config=dict(sweep.run_parts('mrope', 0)['config'], epochs=12))
    assert not sweep.archived(run, archive, changed)
    # results restored for another recipe (no checkpoint, an archive of other parts) are refused before any training
    os.remove(os.path.join(run, 'checkpoint-last.pth'))
    sweep.keep(run, ev, archive, changed)
    sweep.make_data = lambda *a: None  # no data to write
    with pytest.raises(SystemExit, match='restored for another recipe'):
        sweep.main(['--out', out, '--docs', docs, '--schemes', 'mrope', '--noise-schemes', '--new-schemes'])


@pytest.mark.parametrize('frac,side', [(0.5, 16), (0.75, 24), (1.0, 32)])
def test_object_size_sets_the_square_side(frac, side):
    from zoo.datasets.synthetic_videoqa import _diagnostic
    frames, _, _, _, extra = _diagnostic('flash_position', 32, 32, 4, np.random.default_rng(0), frac)
    start, end = extra['events'][0]
    grey = (frames == 128).all(-1)
    assert grey[:start].all() and grey[end:].all()                 # nothing outside the event's block
    coloured = ~grey[start] & ~(frames[start] == 255).all(-1)      # the square without its white rim
    rows, cols = np.nonzero(coloured)
    assert (rows.max() - rows.min() + 1, cols.max() - cols.min() + 1) == (side, side)


def test_object_size_out_of_range_is_one_line_naming_the_option(tmp_path):
    from zoo.datasets.synthetic_videoqa import make_videoqa
    with pytest.raises(ValueError, match=r'--object-size must be in \(0, 1\]'):
        make_videoqa(str(tmp_path / 'x'), num_per_task=1, num_frames=32, size=32, clips_dir=None,
                     tasks=('flash_position',), object_size=1.5)


def test_docs_only_renders_the_archived_runs_on_a_fresh_checkout(tmp_path):
    sweep = _sweep()
    out, docs = str(tmp_path / 'runs'), str(tmp_path / 'docs')
    _fake_run(out, 'mrope', 0, {4: 60., 8: 95., 16: 70., 32: 50.}, [0, 1, 2, 3] * 25)
    sweep.keep(os.path.join(out, 'mrope_s0'), os.path.join(out, 'eval', 'mrope_s0'),
               sweep.archive_dir(_args(out, docs)), sweep.run_parts('mrope', 0))
    fresh = str(tmp_path / 'fresh')
    sweep.main(['--docs-only', '--out', fresh, '--docs', docs, '--schemes', 'mrope', '--noise-schemes',
                '--new-schemes'])
    md = open(os.path.join(docs, 'video_qa.md')).read()
    assert '| mrope (seed 0) | yes | 95.0 |' in md and '**Partial**' not in md
    assert len(open(os.path.join(docs, 'video_qa_results.csv')).read().splitlines()) == 1 + 4


def test_recipe_section_lists_the_kept_curves(tmp_path):
    sweep = _sweep()
    folder = tmp_path / sweep.ARCHIVE / 'recipe'
    folder.mkdir(parents=True)
    (folder / 'mrope_s0_object_size_1.0.csv').write_text('epoch,train_top1,val_top1\n1,28.0,16.0\n2,99.6,100.0\n')
    md = '\n'.join(sweep.recipe_section(str(tmp_path)))
    assert '- `--object-size 1.0`: 28 (16), 100 (100) (`video_qa_runs/recipe/mrope_s0_object_size_1.0.csv`' in md
    assert '--object-size 1.0; zoo train-vlm --config configs/vlm_mrope.yaml --data-dir data/x-sq100' in md
    assert sweep.recipe_section(str(tmp_path / 'none')) == []
