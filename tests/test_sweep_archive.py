"""The run archive the sweeps share (benchmarks/cifar10_sweep.py: archive_run / restore_run): a stale local run
folder never outranks the archive of the same run, and a cut, emptied or hand-edited archive is a one-line error
naming the file (never a traceback, a half-restored folder or a silently published number)."""
import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def sweep():
    spec = importlib.util.spec_from_file_location('cifar10_sweep_under_test',
                                                  os.path.join(ROOT, 'benchmarks', 'cifar10_sweep.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PARTS = dict(recipe='model: x', seed=0)
FILES = ['metrics.csv', 'sweep_timing.json', 'eval/results.json']


def _archived(sweep, tmp_path):
    run = tmp_path / 'runs' / 'ape_s0'
    (run / 'eval').mkdir(parents=True)
    (run / 'metrics.csv').write_text('epoch,val_top1\n1,40.0\n2,48.5\n')
    (run / 'sweep_timing.json').write_text(json.dumps(dict(train_s=1.0, total_s=2.0)))
    (run / 'eval' / 'results.json').write_text(json.dumps(dict(results=[])))
    archive = tmp_path / 'archive'
    sweep.archive_run(str(run), str(archive), PARTS, FILES)
    return archive


def test_the_archive_outranks_a_stale_local_run(sweep, tmp_path):
    archive = _archived(sweep, tmp_path)
    out = tmp_path / 'fresh' / 'ape_s0'
    out.mkdir(parents=True)
    (out / 'metrics.csv').write_text('epoch,val_top1\n1,11.11\n')      # a leftover smoke run under the same name
    assert sweep.restore_run(str(out), str(archive), PARTS)
    assert '48.5' in (out / 'metrics.csv').read_text() and (out / 'eval' / 'results.json').is_file()
    assert not sweep.restore_run(str(tmp_path / 'x' / 'ape_s0'), str(archive), dict(PARTS, seed=1))  # another run


@pytest.mark.parametrize('damage,problem', [
    (lambda a: (a / 'fingerprint.json').write_text('{"fingerpr'), 'not a readable fingerprint'),
    (lambda a: (a / 'sweep_timing.json').unlink(), 'listed in fingerprint.json but missing'),
    (lambda a: (a / 'metrics.csv').write_text('epoch,val_top1\n1,99.99\n'), 'changed after the run was archived'),
], ids=['cut-fingerprint', 'missing-file', 'edited-result'])
def test_a_damaged_archive_is_one_line_naming_the_file(sweep, tmp_path, damage, problem):
    archive = _archived(sweep, tmp_path)
    damage(archive / 'ape_s0')
    out = tmp_path / 'fresh' / 'ape_s0'
    with pytest.raises(SystemExit) as e:
        sweep.restore_run(str(out), str(archive), PARTS)
    msg = str(e.value)
    assert problem in msg and str(archive / 'ape_s0') in msg and '\n' not in msg and 'fix:' in msg
    assert not out.exists()                                            # nothing half-restored


def test_an_emptied_result_file_of_an_old_archive_is_refused(sweep, tmp_path):
    """Archives written before the hashes (no sha256 in fingerprint.json) still get the parse check."""
    archive = _archived(sweep, tmp_path)
    fp = archive / 'ape_s0' / 'fingerprint.json'
    info = json.loads(fp.read_text())
    del info['sha256']
    fp.write_text(json.dumps(info))
    (archive / 'ape_s0' / 'metrics.csv').write_text('epoch,val_top1\n')
    with pytest.raises(SystemExit, match='unreadable'):
        sweep.restore_run(str(tmp_path / 'fresh' / 'ape_s0'), str(archive), PARTS)
