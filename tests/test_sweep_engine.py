"""The sweep engine's output directory under crashes and bad files, on a model-free sweep (fast): a kill at every
rename of an update or of an ``--overwrite`` publication resumes to the rows of an uninterrupted sweep; an
interrupted ``--overwrite`` sweep is never deleted by a plain re-run; temp files are not published; failed cells
never replace good old values; a corrupt manifest or a hand-edited ``results.json`` is one clear error; a read-only
or full disk while taking the lock is one line and leaves no lock; the plan check names what changed."""
import errno
import json
import os

import pytest

from zoo.errors import OutputDirError
from zoo.runs.rundir import LOCK_NAME, RunDirLock
from zoo.sweep import report as report_mod
from zoo.sweep.engine import PUBLISHING, Sweep, SweepModel
from zoo.sweep.report import ResultSetError, read_result_set

SIZES = (8, 16, 24)


class Killed(BaseException):
    """Stands in for SIGKILL: escapes every ``except Exception`` and, with clean-ups disabled, leaves the files."""


def _page(state, models):
    def plot(path):
        with open(path, 'w') as f:
            f.write(f'plot of {len(state.rows)} rows\n')
    return {'report.md': f'{len(state.rows)} of {state.total}\n', 'scaling.png': plot}


def _sweep(out, offset=0, fail=(), **kw):
    """A sweep of one model over SIZES whose value is ``size + offset`` (a cell in ``fail`` raises)."""
    def evaluate(m, cell, state):
        if cell['size'] in fail:
            raise RuntimeError('out of memory (simulated)')
        return dict(value=cell['size'] + offset), dict(seen={str(cell['size']): offset})
    models = [SweepModel('m', None, dict(model='toy', checkpoint=None))]
    return Sweep('zoo toy', str(out), models, [(0, dict(size=s)) for s in SIZES], evaluate, _page,
                 dict(data_root='nowhere', offset=offset), progress=False, failed_row=dict(value=float('nan')), **kw)


def _values(out):
    rec = read_result_set(str(out))  # check=True: every file agrees with the manifest
    assert rec['status']['complete']
    return [(r['size'], r['value']) for r in rec['results']]


def _kill_at(monkeypatch, n):
    """SIGKILL-like stop before the n-th os.replace, without the writers' clean-up (temp files stay)."""
    real, calls = os.replace, [0]

    def replace(a, b):
        calls[0] += 1
        if calls[0] == n:
            raise Killed()
        return real(a, b)
    monkeypatch.setattr(os, 'replace', replace)
    monkeypatch.setattr(report_mod, 'remove_quietly', lambda p: None)
    return calls


def _count_replaces(monkeypatch, run):
    real, calls = os.replace, [0]
    monkeypatch.setattr(os, 'replace', lambda a, b: calls.__setitem__(0, calls[0] + 1) or real(a, b))
    run()
    monkeypatch.setattr(os, 'replace', real)
    return calls[0]


def test_a_kill_at_every_rename_of_an_update_resumes(tmp_path, monkeypatch):
    want = [(s, s) for s in SIZES]
    total = _count_replaces(monkeypatch, lambda: _sweep(tmp_path / 'count').run())
    assert total == 5 * len(SIZES)  # results.json, results.csv, report.md, scaling.png, manifest.json per update
    for n in range(1, total + 1):
        out = tmp_path / f'k{n}'
        with monkeypatch.context() as mp:
            _kill_at(mp, n)
            with pytest.raises(Killed):
                _sweep(out).run()
        result = _sweep(out, resume=True).run()  # never 'holds files but no results.json'
        assert _values(out) == want, n
        assert not any(name.startswith('.tmp-') for name in os.listdir(out))
        assert result['rows'] == [dict(label='m', size=s, value=s, error='') for s in SIZES]


def test_a_kill_while_publishing_an_overwrite_set_resumes_and_finishes(tmp_path, monkeypatch):
    base = tmp_path / 'base'
    _sweep(base).run()
    total = _count_replaces(monkeypatch, lambda: _sweep(base, offset=100, overwrite=True).run())
    for n in range(1, total + 1):
        out = tmp_path / f'p{n}'
        _sweep(out).run()
        with monkeypatch.context() as mp:
            _kill_at(mp, n)
            with pytest.raises(Killed):
                _sweep(out, offset=100, overwrite=True).run()
        if n == 1:  # killed before the staged set had any row: --resume finds only the old sweep (another plan)
            with pytest.raises(ValueError, match='protocol.offset was 0, now 100'):
                _sweep(out, offset=100, resume=True).run()
            assert not os.path.exists(out / 'incomplete')  # it held nothing
            result = _sweep(out, offset=100, overwrite=True).run()
        else:
            result = _sweep(out, offset=100, resume=True).run()
        assert _values(out) == [(s, s + 100) for s in SIZES], n
        assert not os.path.exists(out / 'incomplete') and result['published']
        assert json.load(open(out / 'results.json'))['seen'] == {str(s): 100 for s in SIZES}


def test_a_plain_rerun_keeps_an_interrupted_overwrite_sweep(tmp_path, monkeypatch):
    out = tmp_path / 'o'
    _sweep(out).run()
    with monkeypatch.context() as mp:
        _kill_at(mp, 5)  # the second update of the staged set
        with pytest.raises(Killed):
            _sweep(out, offset=100, overwrite=True).run()
    assert os.path.isfile(out / 'incomplete' / 'results.json')
    with pytest.raises(OutputDirError, match=r'interrupted --overwrite sweep \(1 of 3 cells done.*--resume.*'
                                             r'--overwrite'):
        _sweep(out, offset=100).run()
    assert os.path.isfile(out / 'incomplete' / 'results.json')  # nothing lost
    assert _values(out) == [(s, s) for s in SIZES]  # the old set untouched
    _sweep(out, offset=100, resume=True).run()
    assert _values(out) == [(s, s + 100) for s in SIZES]


def test_temp_files_in_the_staging_folder_are_removed_not_published(tmp_path, monkeypatch):
    out = tmp_path / 'o'
    _sweep(out).run()
    with monkeypatch.context() as mp:
        _kill_at(mp, 6)  # a temp file of the second update stays in incomplete/
        with pytest.raises(Killed):
            _sweep(out, offset=100, overwrite=True).run()
    assert any(n.startswith('.tmp-') for n in os.listdir(out / 'incomplete'))
    _sweep(out, offset=100, resume=True).run()
    assert not any(n.startswith('.tmp-') for n in os.listdir(out))
    assert set(os.listdir(out)) == {'results.json', 'results.csv', 'report.md', 'scaling.png', 'manifest.json'}


def test_failed_cells_of_an_overwrite_never_replace_good_old_values(tmp_path, caplog):
    out = tmp_path / 'o'
    _sweep(out).run()
    result = _sweep(out, offset=100, fail=(16,), overwrite=True).run()
    assert not result['published'] and result['failed'] == 1
    assert _values(out) == [(s, s) for s in SIZES]  # the old values stay
    assert 'm @ size 16' in caplog.text and '--resume' in caplog.text
    assert result['paths']['md'] == os.path.join(str(out), 'incomplete', 'report.md')
    again = _sweep(out, offset=100, resume=True).run()  # the failed cell succeeds now: published
    assert again['published'] and _values(out) == [(s, s + 100) for s in SIZES]
    fresh = tmp_path / 'f'  # a failed cell the old set had no value for: published as it is
    _sweep(fresh, fail=(16,)).run()
    assert _sweep(fresh, offset=100, fail=(16,), overwrite=True).run()['published']


def test_a_truncated_manifest_names_the_file_and_resume_rewrites_it(tmp_path):
    out = tmp_path / 'o'
    _sweep(out).run()
    text = open(out / 'manifest.json').read()
    with open(out / 'manifest.json', 'w') as f:
        f.write(text[:len(text) // 2])
    with pytest.raises(ResultSetError, match=r"manifest.json' is corrupt .*--resume"):
        read_result_set(str(out))
    _sweep(out, resume=True).run()
    assert _values(out) == [(s, s) for s in SIZES]


@pytest.mark.parametrize('edit,needle', [
    (lambda rec: rec['results'][1].pop('label'), 'row 1'),
    (lambda rec: rec['results'].__setitem__(2, 'size 24: 24'), 'row 2'),
    (lambda rec: rec.__setitem__('results', {'m': 1}), 'no "results" list'),
    (lambda rec: rec.__setitem__('spec', 'x'), '"spec" is not a dict'),
])
def test_hand_edited_results_are_one_clear_error(tmp_path, edit, needle):
    out = tmp_path / 'o'
    _sweep(out, fail=(24,)).run()
    rec = json.load(open(out / 'results.json'))
    edit(rec)
    with open(out / 'results.json', 'w') as f:
        json.dump(rec, f)
    with pytest.raises(ResultSetError, match=needle) as e:
        _sweep(out, resume=True).run()
    assert 'results.json' in str(e.value) and '--overwrite' in str(e.value)
    assert not os.path.exists(out / LOCK_NAME)


def test_plan_differences_name_old_and_new_values(tmp_path):
    out = tmp_path / 'o'
    _sweep(out).run()
    other = _sweep(out, resume=True)
    other.command = 'zoo other'
    with pytest.raises(ValueError, match="other command: command was 'zoo toy', now 'zoo other'"):
        other.run()
    with pytest.raises(ValueError, match='protocol.offset was 0, now 5'):
        _sweep(out, offset=5, resume=True).run()


def test_inputs_and_paths_are_compared_by_content_and_real_path(tmp_path, monkeypatch):
    data = tmp_path / 'data'
    os.makedirs(data / 'a')
    (data / 'a' / 'x.png').write_bytes(b'1234')
    out = data / 'eval'  # the output inside the data folder is not part of its fingerprint
    _sweep(out, inputs=[str(data)]).run()
    monkeypatch.chdir(tmp_path)
    _sweep(out, inputs=['data'], resume=True).run()  # relative path of the same folder: the same plan
    (data / 'a' / 'y.png').write_bytes(b'5')
    with pytest.raises(ValueError, match=r"data' changed since the sweep .* 1 files, 4 bytes then; 2 files, 5 bytes "
                                         r"now"):
        _sweep(out, inputs=['data'], resume=True).run()


def _failing(name, code):
    def fail(*a, **k):
        raise OSError(code, os.strerror(code))
    fail.__name__ = name
    return fail


@pytest.mark.parametrize('code,needle', [(errno.EROFS, 'read-only'), (errno.EACCES, 'no write permission')])
def test_a_read_only_output_dir_is_one_line(tmp_path, monkeypatch, code, needle):
    real_open, real_makedirs = os.open, os.makedirs
    lock = str(tmp_path / 'ro' / LOCK_NAME)
    monkeypatch.setattr(os, 'open', lambda p, *a, **k: _failing('open', code)() if str(p) == lock
                        else real_open(p, *a, **k))
    os.makedirs(tmp_path / 'ro')
    with pytest.raises(OutputDirError, match=f"output dir '.*ro' cannot be written .*{needle}.*choose another "
                                             "--output"):
        _sweep(tmp_path / 'ro').run()
    new = str(tmp_path / 'ro' / 'new')
    monkeypatch.setattr(os, 'makedirs', lambda p, *a, **k: _failing('makedirs', code)() if str(p) == new
                        else real_makedirs(p, *a, **k))
    with pytest.raises(OutputDirError, match=needle):
        RunDirLock(new, 'zoo toy').acquire()


def test_a_full_disk_while_taking_the_lock_leaves_no_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(os, 'fsync', _failing('fsync', errno.ENOSPC))
    with pytest.raises(OutputDirError, match='disk is full'):
        _sweep(tmp_path / 'full').run()
    assert not os.path.exists(tmp_path / 'full')  # created by the lock, removed again: no empty stale lock
    os.makedirs(tmp_path / 'kept')
    with pytest.raises(OutputDirError, match='disk is full'):
        RunDirLock(str(tmp_path / 'kept'), 'zoo toy').acquire()
    assert os.listdir(tmp_path / 'kept') == []


def test_a_disk_full_message_is_not_wrapped_twice(tmp_path, monkeypatch):
    from zoo.datasets.files import write_text_atomic
    from zoo.errors import OutputWriteError
    out = tmp_path / 'o'
    os.makedirs(out)

    def page(state, models):
        return {'report.md': 'x', 'scaling.png': lambda p: write_text_atomic(p + '.inner', 'x')}
    monkeypatch.setattr(os, 'replace', _failing('replace', errno.ENOSPC))
    with pytest.raises(OutputWriteError) as e:
        report_mod.write_result_set(str(out), [], dict(status={}, results=[]), page(None, None))
    assert str(e.value).count('cannot write') == 1 and 'free some space' in str(e.value)


def test_the_publication_marker_is_gone_after_publishing(tmp_path):
    out = tmp_path / 'o'
    _sweep(out).run()
    _sweep(out, offset=1, overwrite=True).run()
    assert not os.path.exists(out / 'incomplete') and not os.path.exists(out / PUBLISHING)


def test_sweep_output_dir_alias_is_back(tmp_path):
    from zoo.common.rundir import sweep_output_dir
    out = tmp_path / 'o'
    with sweep_output_dir(str(out), 'zoo toy', overwrite=False) as old:
        assert old is False and os.path.exists(out / LOCK_NAME)
        (out / 'results.csv').write_text('a\n')
    with pytest.raises(OutputDirError, match='--overwrite'):
        with sweep_output_dir(str(out), 'zoo toy', overwrite=False):
            pass
    with sweep_output_dir(str(out), 'zoo toy', overwrite=True) as old:
        assert old is True


def test_a_record_without_fingerprints_is_not_resumed_blindly(tmp_path):
    out = tmp_path / 'o'
    _sweep(out).run()
    rec = json.load(open(out / 'results.json'))
    del rec['spec']['inputs']  # as an older zoo wrote it
    with open(out / 'results.json', 'w') as f:
        json.dump(rec, f)
    with pytest.raises(ValueError, match='no plan with checkpoint and data fingerprints.*--overwrite'):
        _sweep(out, resume=True).run()


def test_resume_over_a_first_update_cut_before_results_json(tmp_path):
    out = tmp_path / 'o'  # what an older zoo left when killed between renaming results.csv and results.json
    os.makedirs(out)
    (out / 'results.csv').write_text('label,size,value\n')
    (out / 'scaling.png').write_text('x')
    assert len(_sweep(out, resume=True).run()['rows']) == len(SIZES)
    assert _values(out) == [(s, s) for s in SIZES]
    other = tmp_path / 'x'  # files of something else: never overwritten
    os.makedirs(other)
    (other / 'notes.txt').write_text('mine')
    with pytest.raises(OutputDirError, match=r"holds files \(notes.txt\) but no results.json"):
        _sweep(other, resume=True).run()
