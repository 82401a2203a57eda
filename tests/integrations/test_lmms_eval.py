"""zoo in lmms-eval (zoo.integrations.lmms_eval, extra ``zoo[lmms]``): the ``--model zoo`` entry point, the shipped
task YAMLs run offline, the score equal to ``zoo eval-video``'s on the same items, frames and model, lmms-eval's CLI
with ``--limit`` and ``--log_samples``, one-line errors, and zoo's answer reader against lmms-eval's MVBench
extraction on the table of tests/test_answers.py.

These tests need lmms-eval, which lives in a venv of its own (``.ci/run``: ``pip install -e '.[lmms,test]'``); they
skip, saying so, where it is not importable, except the first one (zoo without lmms-eval). ``python
tests/integrations/test_lmms_eval.py --table`` prints the parser table of docs/lmms_eval.md.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

os.environ.setdefault('HF_HUB_OFFLINE', '1')         # nothing here may reach the hub
os.environ.setdefault('HF_DATASETS_OFFLINE', '1')

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / 'tests'))

try:
    import lmms_eval  # noqa: F401
    HAVE_LMMS = True
except ImportError:
    HAVE_LMMS = False

needs_lmms = pytest.mark.skipif(not HAVE_LMMS, reason="lmms-eval is not installed (pip install -e '.[lmms,test]' in "
                                "a venv of its own; .ci/run does)")

KW = dict(dim=64, depth=1, num_heads=2, num_kv_heads=1, mlp_hidden=64,
          tower_kwargs=dict(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2))


def test_without_lmms_eval_one_line_names_the_extra(monkeypatch):
    import zoo.integrations.lmms_eval as integ
    from zoo.errors import MissingDependencyError
    monkeypatch.setitem(sys.modules, 'lmms_eval', None)           # as if it were not installed
    for mod in ('zoo.integrations.lmms_eval.model', 'zoo.integrations.lmms_eval.videoqa_task'):
        monkeypatch.delitem(sys.modules, mod, raising=False)
    with pytest.raises(MissingDependencyError) as e:
        import zoo.integrations.lmms_eval.model  # noqa: F401
    msg = str(e.value)
    assert len(msg.splitlines()) == 1 and "pip install 'zoo[lmms]'" in msg and 'lmms_eval' in msg
    with pytest.raises(MissingDependencyError, match=r"zoo\[lmms\]"):
        integ.model_manifest()
    assert os.path.isfile(os.path.join(integ.task_dir(), 'zoo_mvbench.yaml'))


# ---- fixtures --------------------------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def data(tmp_path_factory):
    from zoo.datasets.synthetic_videoqa import make_videoqa
    root = tmp_path_factory.mktemp('vqa')
    make_videoqa(str(root), num_per_task=3, num_frames=12, size=32, clips_dir=None, tasks=('counting', 'vniah'),
                 niah_lengths=(16,), niah_depths=(0.0, 1.0), niah_per_cell=1, progress=False)
    return str(root)


@pytest.fixture(scope='module')
def ckpt(tmp_path_factory):
    from zoo.models.vlm import create_video_llm
    torch.manual_seed(0)
    model = create_video_llm('pe_vlm_tiny_mrope', **KW)
    meta = dict(model_name='pe_vlm_tiny_mrope', model_kwargs=KW, img_size=32, num_frames=4, args=dict(seed=0))
    path = tmp_path_factory.mktemp('ck') / 'mrope.pth'
    torch.save(dict(model=model.state_dict(), meta=meta), path)
    return str(path)


@pytest.fixture
def synthetic_root(data, monkeypatch):
    monkeypatch.setenv('ZOO_LMMS_SYNTHETIC_ROOT', data)
    monkeypatch.delenv('ZOO_LMMS_SYNTHETIC_TASKS', raising=False)
    return data


def _evaluate(ckpt, tasks, limit=None, batch_size=2, frames=4):
    """lmms-eval's evaluator on a ``--model zoo`` instance (kept, for its frame log): ``(results, model)``."""
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.tasks import TaskManager
    from zoo.integrations.lmms_eval import task_dir
    from zoo.integrations.lmms_eval.model import ZooVideoLLM
    model = ZooVideoLLM.create_from_arg_string(f'pretrained={ckpt},max_frames_num={frames}',
                                               dict(batch_size=batch_size, device='cpu'))
    out = simple_evaluate(model=model, tasks=tasks, limit=limit, log_samples=True, verbosity='WARNING',
                          task_manager=TaskManager('WARNING', include_path=task_dir(), model_name='zoo'))
    return out, model


# ---- the model and the tasks --------------------------------------------------------------------------------------

@needs_lmms
def test_entry_point_registers_the_model():
    from lmms_eval.models import get_model
    from zoo.integrations.lmms_eval.model import ZooVideoLLM
    assert get_model('zoo') is ZooVideoLLM


@needs_lmms
@pytest.mark.slow
def test_same_accuracy_as_eval_video(ckpt, synthetic_root, tmp_path):
    from zoo.sweep.videoqa import eval_video
    ev = eval_video(['--benchmark', 'mvbench', '--data-root', synthetic_root, '--checkpoint', ckpt, '--frames', '4',
                     '--output', str(tmp_path / 'ev'), '--no-progress', '-j', '0', '-b', '2'])
    zoo_row = ev['rows'][0]
    out, model = _evaluate(ckpt, ['zoo_synthetic'], batch_size=3)
    got = out['results']['zoo_synthetic']
    assert got['zoo_acc,none'] == pytest.approx(zoo_row['acc']) and got['zoo_fallback,none'] == zoo_row['fallback']
    ours = {s['doc']['id']: s for s in out['samples']['zoo_synthetic']}
    assert len(ours) == zoo_row['n'] == 5
    for p in ev['predictions']:                      # item by item: the same answer text, reading and score
        s = ours[p['id']]
        assert s['zoo_acc']['pred'] == p['pred'] and s['zoo_acc']['correct'] == p['correct']
        assert s['resps'][0][0].strip() == p['output'].strip()
    # the frames are zoo eval-video's (the segment midpoints of each item's window), item by item
    logged = json.loads((tmp_path / 'ev' / 'results.json').read_text())['frames']['4']
    assert model.frame_log == {k: v['indices'] for k, v in logged.items()}


@needs_lmms
@pytest.mark.slow
def test_lmms_protocol_side_by_side(ckpt, synthetic_root):
    out, model = _evaluate(ckpt, ['zoo_synthetic', 'zoo_synthetic_lmms'], limit=3)
    assert set(out['results']) >= {'zoo_synthetic', 'zoo_synthetic_lmms'}
    assert 'mvbench_accuracy,none' in out['results']['zoo_synthetic_lmms']
    lm = out['samples']['zoo_synthetic_lmms']
    assert len(lm) == 3
    prompt, gen = lm[0]['arguments'][:2]            # lmms-eval's MVBench prompt and settings, not zoo's
    assert prompt.startswith('Question:') and '\nOption:\n(A) ' in prompt and 'Only give the best option.' in prompt
    assert gen['frame_sampling'] == 'linspace' and gen['max_new_tokens'] == 16
    prompt, gen = out['samples']['zoo_synthetic'][0]['arguments'][:2]
    assert ' Options: (A) ' in prompt and "Answer with the option's letter" in prompt
    assert gen['frame_sampling'] == 'mvbench' and gen['max_new_tokens'] == 4


@needs_lmms
def test_linspace_rule_is_lmms_evals(data):
    import numpy as np
    from zoo.integrations.lmms_eval.model import LinspaceSampling
    s = LinspaceSampling('uniform', 4)
    assert s.indices(12, 8.0, start=0.5, end=0.9).tolist() == [0, 3, 7, 11]
    assert s.indices(12, 8.0).tolist() == np.linspace(0, 11, 4, dtype=int).tolist()


def readme_command():
    """The README's lmms-eval command (continuation lines joined)."""
    text = (ROOT / 'README.md').read_text()
    first = text.index('ZOO_LMMS_SYNTHETIC_ROOT=')
    block = text[first:text.index('```', first)]
    return ' '.join(line.rstrip('\\').strip() for line in block.strip().splitlines())


@needs_lmms
@pytest.mark.slow
def test_readme_command_runs_offline_with_limit_and_log_samples(ckpt, data, tmp_path):
    """The README's command as written, through lmms-eval's own CLI in a subprocess, on the tiny checkpoint and data
    (their paths put in place of the README's), offline; --limit and --log_samples work."""
    cmd = readme_command()
    for readme_path, here in (('runs/vlm/mrope', ckpt), ('data/vqa-diag-eval', data),
                              ('runs/lmms-eval', str(tmp_path / 'out'))):
        assert readme_path in cmd
        cmd = cmd.replace(readme_path, here)
    cmd = cmd.replace('--limit 64', '--limit 2') + ' --batch_size 2 --device cpu'
    cmd = cmd.replace('.venv-lmms/bin/', '')        # the README's venv: here the one running this test (PATH below)
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get('PATH', ''),
               HF_HOME=str(tmp_path / 'hf'), OMP_NUM_THREADS='1')
    env.pop('HF_HUB_OFFLINE', None)                  # the README's command sets them itself
    env.pop('HF_DATASETS_OFFLINE', None)
    r = subprocess.run(['bash', '-c', cmd], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    log = r.stdout[-4000:] + r.stderr[-4000:]
    assert r.returncode == 0 and 'Error during evaluation' not in r.stdout + r.stderr, log
    assert 'zoo_acc' in r.stdout and 'mvbench_accuracy' in r.stdout, log
    out = tmp_path / 'out'
    assert list(out.rglob('*results*.json')), sorted(map(str, out.rglob('*')))
    for task in ('zoo_synthetic', 'zoo_synthetic_lmms'):
        samples = list(out.rglob(f'*_samples_{task}.jsonl'))          # lmms-eval's <date>_samples_<task>.jsonl
        assert samples, sorted(map(str, out.rglob('*')))
        assert len(samples[0].read_text().splitlines()) == 2                  # --limit 2


def _layouts(root):
    """A tiny folder of every layout zoo eval-video reads (one readable video each): {zoo task: (env var, root)}."""
    import numpy as np
    import pandas as pd
    from zoo.datasets._synth import write_mp4

    def video(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_mp4(path, np.random.default_rng(0).integers(0, 255, (16, 32, 32, 3), dtype=np.uint8), fps=8)

    def write(path, obj):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Path(path).write_text(obj if isinstance(obj, str) else json.dumps(obj))

    r = {k: os.path.join(root, k) for k in ('mvbench', 'videomme', 'nextqa_mc', 'mlvu', 'longvideobench',
                                            'egoschema')}
    video(f'{r["mvbench"]}/video/action/a.mp4')
    write(f'{r["mvbench"]}/json/action.json', [dict(video='a.mp4', question='q?', candidates=['p', 'q'], answer='q',
                                                    start=0.5, end=1.5)])
    video(f'{r["videomme"]}/data/v1.mp4')
    os.makedirs(f'{r["videomme"]}/videomme')
    pd.DataFrame([dict(videoID='v1', duration='short', domain='d', sub_category='s', task_type='Counting Problem',
                       question_id='001-1', question='q?', options=['A. red', 'B. blue', 'C. green', 'D. black'],
                       answer='C')]).to_parquet(f'{r["videomme"]}/videomme/test-00000-of-00001.parquet')
    video(f'{r["nextqa_mc"]}/NExTVideo/0000/11.mp4')
    write(f'{r["nextqa_mc"]}/map_vid_vidorID.json', {'11': '0000/11'})
    write(f'{r["nextqa_mc"]}/val.csv', 'video,frame_count,width,height,question,answer,qid,type,a0,a1,a2,a3,a4\n'
          '11,16,32,32,why?,3,1,CW,o0,o1,o2,o3,o4\n')
    video(f'{r["mlvu"]}/video/1_plotQA/a.mp4')
    write(f'{r["mlvu"]}/json/1_plotQA.json', [dict(video='a.mp4', duration=2.0, question='q?', candidates=['p', 'q'],
                                                   answer='q', question_type='plotQA')])
    video(f'{r["longvideobench"]}/videos/a.mp4')
    write(f'{r["longvideobench"]}/lvb_val.json', [dict(id='1', video_path='a.mp4', question='q?',
                                                       candidates=['p', 'q', 'r'], correct_choice=2, duration=2.0,
                                                       question_category='S2E')])
    video(f'{r["egoschema"]}/videos/u1.mp4')
    write(f'{r["egoschema"]}/questions.json', [{'q_uid': 'u1', 'question': 'q?',
                                                **{f'option {k}': f'o{k}' for k in range(5)}}])
    write(f'{r["egoschema"]}/subset_answers.json', {'u1': 4})
    return r


@needs_lmms
def test_every_layout_loads_as_both_tasks_offline(tmp_path, monkeypatch, data):
    """Each shipped YAML (zoo's and lmms-eval's protocol) loads through lmms-eval's TaskManager from its variable's
    folder, with the docs zoo's reader gives, in id order; lmms-eval's prompt function takes zoo's docs."""
    from lmms_eval.tasks import TaskManager, get_task_dict
    from zoo.datasets.videoqa import load_benchmark
    from zoo.integrations.lmms_eval import BENCHMARKS, task_dir
    roots = dict(_layouts(str(tmp_path)), synthetic=data)
    for name, (reader, env) in BENCHMARKS.items():
        monkeypatch.setenv(env, roots[name])
    names = [f'zoo_{n}{mode}' for n in BENCHMARKS for mode in ('', '_lmms')]
    tasks = get_task_dict(names, TaskManager('WARNING', include_path=task_dir(), model_name='zoo'))
    assert set(tasks) == set(names)
    for name, (reader, env) in BENCHMARKS.items():
        records, _ = load_benchmark(reader, roots[name])
        want = sorted(r.id for r in records)
        for mode in ('', '_lmms'):
            task = tasks[f'zoo_{name}{mode}']
            docs = list(task.test_docs())
            assert [d['id'] for d in docs] == want and want
            text = task.doc_to_text(docs[0])
            assert ('Only give the best option.' in text) == (mode == '_lmms') and docs[0]['question'] in text


@needs_lmms
def test_unreadable_video_is_left_out_as_eval_video_does(ckpt, data, tmp_path):
    """A video that cannot be read: zoo's protocol marks it and leaves it out of zoo_acc (zoo eval-video leaves it
    out of acc); lmms-eval's protocol gets an empty answer, which lmms-eval's MVBench accuracy leaves out."""
    from types import SimpleNamespace
    from zoo.datasets.videoqa import load_benchmark
    from zoo.integrations.lmms_eval.model import ZooVideoLLM
    from zoo.integrations.lmms_eval.videoqa_task import UNREADABLE, zoo_accuracy, zoo_process_results
    good = load_benchmark('mvbench', data)[0][0]
    bad = tmp_path / 'bad.mp4'
    bad.write_bytes(os.urandom(3000))
    docs = [dict(id=good.id, video=good.video, start=good.start, end=good.end, candidates=good.options,
                 answer_index=good.answer), dict(id='bad/0', video=str(bad), start=None, end=None,
                                                 candidates=['p', 'q'], answer_index=0)]
    model = ZooVideoLLM(pretrained=ckpt, max_frames_num=4, batch_size=2, device='cpu')
    model.task_dict = {'t': {'test': docs}}
    for rule in ('mvbench', 'linspace'):
        reqs = [SimpleNamespace(args=('Question: q?', dict(max_new_tokens=2, until=[], frame_sampling=rule),
                                      lambda d: [d['video']], i, 't', 'test')) for i in range(2)]
        texts = model.generate_until(reqs)
        assert not texts[0].startswith(UNREADABLE)
        assert texts[1].startswith(UNREADABLE) if rule == 'mvbench' else texts[1] == ''
        if rule == 'mvbench':
            items = [zoo_process_results(d, [t])['zoo_acc'] for d, t in zip(docs, texts)]
            assert items[1]['unreadable'] == 1 and zoo_accuracy(items) == 100.0 * items[0]['correct']


# ---- bad input: the one-line errors of zoo eval-video ------------------------------------------------------------

@needs_lmms
def test_not_a_video_llm_checkpoint_is_eval_videos_error(tmp_path):
    from zoo.integrations.lmms_eval.model import ZooVideoLLM
    image = tmp_path / 'image.pth'
    torch.save(dict(model={'w': torch.zeros(1)}, meta=dict(model_name='pe_vit_tiny_patch16_ape_224')), image)
    with pytest.raises(ValueError) as e:
        ZooVideoLLM(pretrained=str(image), max_frames_num=4)
    msg = str(e.value)
    assert len(msg.splitlines()) == 1 and 'not a video-LLM checkpoint' in msg and 'pe_vit_tiny_patch16_ape_224' in msg
    with pytest.raises(ValueError, match='neither a zoo train-vlm run dir'):
        ZooVideoLLM(pretrained='no_such_model', max_frames_num=4)
    with pytest.raises(NotImplementedError, match='generate_until requests only'):
        ZooVideoLLM.loglikelihood(None, [])


@needs_lmms
def test_missing_task_files_are_eval_videos_errors(tmp_path, monkeypatch, ckpt):
    from zoo.integrations.lmms_eval.videoqa_task import load_docs
    from zoo.sweep.videoqa import eval_video
    monkeypatch.delenv('ZOO_LMMS_MVBENCH_ROOT', raising=False)
    with pytest.raises(ValueError, match=r'ZOO_LMMS_MVBENCH_ROOT.*not set') as e:
        load_docs('mvbench')
    assert len(str(e.value).splitlines()) == 1
    empty = tmp_path / 'empty'
    empty.mkdir()
    for root in (empty, tmp_path / 'missing'):
        monkeypatch.setenv('ZOO_LMMS_MVBENCH_ROOT', str(root))
        with pytest.raises(Exception) as ours:
            load_docs('mvbench')
        with pytest.raises(Exception) as theirs:
            eval_video(['--benchmark', 'mvbench', '--data-root', str(root), '--checkpoint', ckpt, '--frames', '4',
                        '--output', str(tmp_path / 'o')])
        assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)
        assert len(str(ours.value).splitlines()) == 1


# ---- zoo's answer reader against lmms-eval's MVBench extraction -------------------------------------------------

def lmms_reading(text, options):
    """The option lmms-eval's MVBench scoring credits for ``text`` (its ``mcq_acc`` against each letter), or
    ``None``; lmms-eval leaves an empty answer out of the accuracy."""
    from lmms_eval.tasks.mvbench.utils import mcq_acc
    hits = [k for k in range(len(options)) if mcq_acc(chr(65 + k), text)]
    return hits[0] if len(hits) == 1 else None


def parser_table():
    """Markdown: every row of tests/test_answers.py with zoo's reading and lmms-eval's, and the agreement counts."""
    from test_answers import CASES
    from zoo.tasks.answers import parse_choice

    def show(k, options):
        return '—' if k is None else f'{chr(65 + k)} ({options[k]})'

    rows, same = [], 0
    for text, options, expected in CASES:
        z, lm = parse_choice(text, options), lmms_reading(text, options)
        same += z == lm
        mark = '' if z == lm else ' ≠'
        rows.append(f'| `{text!r}` | {" / ".join(options)} | {show(expected, options)} | {show(z, options)} | '
                    f'{show(lm, options)}{mark} |')
        assert z == expected
    right = sum(lmms_reading(t, o) == e for t, o, e in CASES)
    head = ('| model output | options | a person reads | zoo | lmms-eval MVBench |\n|---|---|---|---|---|')
    summary = (f'{len(CASES)} outputs: zoo reads {len(CASES)} as a person does, lmms-eval {right}; '
               f'the two agree on {same}.')
    return head + '\n' + '\n'.join(rows) + '\n\n' + summary


@needs_lmms
def test_parser_table_is_in_the_docs():
    table = parser_table()
    doc = (ROOT / 'docs' / 'lmms_eval.md').read_text()
    assert table in doc, 'docs/lmms_eval.md is out of date: python tests/integrations/test_lmms_eval.py --table'


@needs_lmms
def test_lmms_extraction_examples():
    colors = ['red', 'green', 'blue', 'yellow']
    assert lmms_reading('B', colors) == 1 and lmms_reading('(C) blue', colors) == 2
    assert lmms_reading('2', ['1', '2', '3', '4']) is None           # lmms-eval reads letters only


if __name__ == '__main__':
    if '--table' in sys.argv:
        print(parser_table())
