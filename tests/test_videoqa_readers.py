"""Video-QA benchmark readers on small files in each benchmark's real format, with bad rows and bad videos."""
import json
import os

import numpy as np
import pytest

from zoo.datasets._synth import write_mp4
from zoo.datasets.video import FrameSampling
from zoo.datasets.video_folder import BadVideo
from zoo.datasets.videoqa import (BenchmarkFormatError, VideoQADataset, list_benchmarks, load_benchmark,
                                  register_benchmark)


def _videos(folder, names):
    """good.mp4 (readable), corrupt.mp4 (random bytes), cut.mp4 (truncated) under ``folder`` with the given names."""
    os.makedirs(folder, exist_ok=True)
    good, corrupt, cut = (os.path.join(folder, n) for n in names)
    write_mp4(good, np.random.default_rng(0).integers(0, 255, (16, 32, 32, 3), dtype=np.uint8), fps=8)
    with open(corrupt, 'wb') as f:
        f.write(np.random.default_rng(1).bytes(3000))
    write_mp4(cut, np.random.default_rng(2).integers(0, 255, (12, 32, 32, 3), dtype=np.uint8), fps=8,
              faststart=True)
    data = open(cut, 'rb').read()
    with open(cut, 'wb') as f:
        f.write(data[:-200])


def _expect(report, **skipped):
    assert report.summary()['skipped'] == dict(sorted(skipped.items())), report.summary()


ALL_BAD = dict(missing_video=1, undecodable=1, truncated=1, answer_not_in_options=1, escapes_root=1)  # '..' names


def test_registry_names_and_duplicates():
    assert list_benchmarks() == ['egoschema', 'imageqa', 'longvideobench', 'mlvu', 'mvbench', 'nextqa_mc', 'videomme']
    with pytest.raises(ValueError, match='already registered'):
        register_benchmark('mvbench', 'x')(lambda root: None)
    with pytest.raises(ValueError, match='unknown benchmark'):
        load_benchmark('nope', '.')


def test_mvbench(tmp_path):
    root = tmp_path / 'mv'
    _videos(str(root / 'video' / 'task_a'), ['g.mp4', 'c.mp4', 't.mp4'])
    os.makedirs(tmp_path / 'outside')
    write_mp4(str(tmp_path / 'outside' / 'o.mp4'), np.zeros((4, 32, 32, 3), np.uint8))
    os.symlink(tmp_path / 'outside' / 'o.mp4', root / 'video' / 'task_a' / 'link.mp4')
    q = dict(question='q?', candidates=['x', 'y', 'z'], answer='y')
    rows = [dict(q, video='g.mp4', start=0.5, end=1.5), dict(q, video='none.mp4'), dict(q, video='c.mp4'),
            dict(q, video='t.mp4'), dict(q, video='g.mp4', answer='w'), dict(q, video='link.mp4'),
            dict(q, video='../../../outside/o.mp4'), dict(question='no candidates', video='g.mp4', answer='x')]
    (root / 'json').mkdir()
    (root / 'json' / 'task_a.json').write_text(json.dumps(rows))
    recs, rep = load_benchmark('mvbench', str(root), probe=True)
    _expect(rep, missing_video=1, undecodable=1, truncated=1, answer_not_in_options=1, outside_root=1,
            escapes_root=1, malformed_row=1)
    assert rep.rows == 8 and rep.kept == 1
    r = recs[0]
    assert (r.options, r.answer, r.start, r.end, r.task) == (['x', 'y', 'z'], 1, 0.5, 1.5, 'task_a')
    assert r.video == str(root / 'video' / 'task_a' / 'g.mp4')
    # without probing, bad videos surface when read: counted, never fatal
    recs, rep = load_benchmark('mvbench', str(root))
    ds = VideoQADataset(recs, FrameSampling('uniform', 4), size=16, report=rep)
    items = [ds[i] for i in range(len(ds))]
    assert sum(isinstance(x, BadVideo) for x in items) == 2 and dict(ds.bad_counts) == {'truncated': 1,
                                                                                         'undecodable': 1}
    good = next(x for x in items if not isinstance(x, BadVideo))
    assert good['frames'].shape == (4, 16, 16, 3)
    assert 4 <= int(good['frame_indices'].min()) and int(good['frame_indices'].max()) <= 12  # the 0.5-1.5 s window
    assert float(good['timestamps'].min()) >= 0.5


def test_mvbench_format_errors(tmp_path):
    with pytest.raises(BenchmarkFormatError, match='json/<task>.json'):
        load_benchmark('mvbench', str(tmp_path))
    (tmp_path / 'json').mkdir()
    (tmp_path / 'json' / 't.json').write_text(json.dumps({'not': 'a list'}))
    with pytest.raises(BenchmarkFormatError, match='list of objects'):
        load_benchmark('mvbench', str(tmp_path))
    (tmp_path / 'json' / 't.json').write_text(json.dumps([{'q_uid': 1}]))
    with pytest.raises(BenchmarkFormatError, match='no item has the fields'):
        load_benchmark('mvbench', str(tmp_path))
    (tmp_path / 'json' / 't.json').write_text('{broken')
    with pytest.raises(BenchmarkFormatError, match='not JSON'):
        load_benchmark('mvbench', str(tmp_path))
    with pytest.raises(FileNotFoundError):
        load_benchmark('mvbench', str(tmp_path / 'missing'))


def test_videomme_parquet_and_jsonl(tmp_path):
    pd = pytest.importorskip('pandas')
    pytest.importorskip('pyarrow')
    root = tmp_path / 'vm'
    _videos(str(root / 'data'), ['v1.mp4', 'v2.mp4', 'v3.mp4'])
    opts = ['A. red', 'B. blue', 'C. green', 'D. black']
    base = dict(duration='short', domain='d', sub_category='s', task_type='Counting Problem', question='q?',
                options=opts)
    rows = [dict(base, videoID='v1', question_id='001-1', answer='C'), dict(base, videoID='v0', question_id='2',
                                                                           answer='A'),
            dict(base, videoID='v2', question_id='3', answer='A'), dict(base, videoID='v3', question_id='4',
                                                                       answer='B'),
            dict(base, videoID='v1', question_id='5', answer='E'), dict(base, videoID='../../x', question_id='6',
                                                                       answer='A')]
    (tmp_path / 'x.mp4').write_bytes(b'')
    (root / 'videomme').mkdir()
    pd.DataFrame(rows).to_parquet(root / 'videomme' / 'test-00000-of-00001.parquet')
    recs, rep = load_benchmark('videomme', str(root), probe=True)
    _expect(rep, **ALL_BAD)
    r = recs[0]
    assert (r.id, r.options, r.answer, r.task, r.category) == ('001-1', ['red', 'blue', 'green', 'black'], 2,
                                                               'Counting Problem', 'short')
    os.remove(root / 'videomme' / 'test-00000-of-00001.parquet')
    with open(root / 'rows.jsonl', 'w') as f:
        for row in rows:
            f.write(json.dumps(row) + '\n')
    recs, rep = load_benchmark('videomme', str(root), probe=True)
    _expect(rep, **ALL_BAD)
    (root / 'rows.jsonl').write_text(json.dumps({'videoID': 'v1', 'question': 'q'}) + '\n')
    with pytest.raises(BenchmarkFormatError, match='columns'):
        load_benchmark('videomme', str(root))
    os.remove(root / 'rows.jsonl')
    with pytest.raises(BenchmarkFormatError, match='parquet'):
        load_benchmark('videomme', str(root))


def test_nextqa_mc_csv(tmp_path):
    root = tmp_path / 'nq'
    _videos(str(root / 'NExTVideo' / '0000'), ['11.mp4', '12.mp4', '13.mp4'])
    (root / 'map_vid_vidorID.json').write_text(json.dumps({'11': '0000/11', '12': '0000/12', '13': '0000/13',
                                                           '15': '../../../x'}))
    (tmp_path / 'x.mp4').write_bytes(b'')
    head = 'video,frame_count,width,height,question,answer,qid,type,a0,a1,a2,a3,a4\n'
    body = ''.join(f'{v},100,32,32,why?,{a},{q},CW,o0,o1,o2,o3,o4\n'
                   for v, a, q in (('11', 3, 1), ('14', 0, 2), ('12', 0, 3), ('13', 0, 4), ('11', 7, 5), ('15', 0, 6)))
    (root / 'val.csv').write_text(head + body)
    recs, rep = load_benchmark('nextqa_mc', str(root), probe=True)
    _expect(rep, **ALL_BAD)
    assert (recs[0].id, recs[0].answer, recs[0].options[3], recs[0].category) == ('11_1', 3, 'o3', 'C')
    (root / 'val.csv').write_text('a,b\n1,2\n')
    with pytest.raises(BenchmarkFormatError, match='columns'):
        load_benchmark('nextqa_mc', str(root))
    with pytest.raises(BenchmarkFormatError, match='test.csv'):
        load_benchmark('nextqa_mc', str(root), split='test')


def test_mlvu_json(tmp_path):
    root = tmp_path / 'ml'
    _videos(str(root / 'video' / '1_plotQA'), ['a.mp4', 'b.mp4', 'c.mp4'])
    (tmp_path / 'x.mp4').write_bytes(b'')
    q = dict(duration=30.0, question='q?', candidates=['p', 'q'], answer='q', question_type='plotQA')
    rows = [dict(q, video='a.mp4'), dict(q, video='zz.mp4'), dict(q, video='b.mp4'), dict(q, video='c.mp4'),
            dict(q, video='a.mp4', answer='r'), dict(q, video='../../../x.mp4')]
    (root / 'json').mkdir()
    (root / 'json' / '1_plotQA.json').write_text(json.dumps(rows))
    recs, rep = load_benchmark('mlvu', str(root), probe=True)
    _expect(rep, **ALL_BAD)
    assert (recs[0].answer, recs[0].task, recs[0].extra['duration']) == (1, 'plotQA', 30.0)
    with pytest.raises(BenchmarkFormatError, match='MLVU tasks'):
        load_benchmark('mlvu', str(root), tasks=['2_needle'])


def test_longvideobench_json(tmp_path):
    root = tmp_path / 'lvb'
    _videos(str(root / 'videos'), ['a.mp4', 'b.mp4', 'c.mp4'])
    (tmp_path / 'x.mp4').write_bytes(b'')
    q = dict(question='q?', candidates=['p', 'q', 'r'], correct_choice=2, duration=12.0, question_category='S2E')
    rows = [dict(q, id='1', video_path='a.mp4'), dict(q, id='2', video_path='zz.mp4'),
            dict(q, id='3', video_path='b.mp4'), dict(q, id='4', video_path='c.mp4'),
            dict(q, id='5', video_path='a.mp4', correct_choice=3), dict(q, id='6', video_path='../../x.mp4')]
    alt = {k: v for k, v in rows[0].items() if k != 'candidates'}
    rows.append(dict(alt, id='7', option0='p', option1='q', option2='r', option3='N/A', correct_choice=1))
    (root / 'lvb_val.json').write_text(json.dumps(rows))
    recs, rep = load_benchmark('longvideobench', str(root), probe=True)
    _expect(rep, **ALL_BAD)
    assert [(r.id, r.answer, len(r.options)) for r in recs] == [('1', 2, 3), ('7', 1, 3)]
    with pytest.raises(BenchmarkFormatError, match='lvb_test.json'):
        load_benchmark('longvideobench', str(root), split='test')


def test_egoschema_json(tmp_path):
    root = tmp_path / 'ego'
    _videos(str(root / 'videos'), ['u1.mp4', 'u3.mp4', 'u4.mp4'])
    q = {'question': 'q?', **{f'option {k}': f'o{k}' for k in range(5)}}
    rows = [dict(q, q_uid=u) for u in ('u1', 'u2', 'u3', 'u4', 'u5', 'u6')]
    (root / 'questions.json').write_text(json.dumps(rows))
    (root / 'subset_answers.json').write_text(json.dumps({'u1': 4, 'u2': 0, 'u3': 0, 'u4': 0, 'u5': 9}))
    recs, rep = load_benchmark('egoschema', str(root), probe=True)
    _expect(rep, missing_video=1, undecodable=1, truncated=1, answer_not_in_options=1, no_answer=1)
    assert (recs[0].id, recs[0].answer, recs[0].options[4]) == ('u1', 4, 'o4')
    os.remove(root / 'subset_answers.json')
    with pytest.raises(BenchmarkFormatError, match='subset_answers.json'):
        load_benchmark('egoschema', str(root))


def test_symlinked_video_folder_needs_allow_root_and_says_so(tmp_path):
    """Regression (issue 20, item 6): a benchmark whose video folder is a symlink (a common set-up) dropped every row
    as outside_root, and the final error named neither the symlink nor a fix."""
    store = tmp_path / 'store' / 'videos'
    _videos(str(store), ['g.mp4', 'c.mp4', 't.mp4'])
    root = tmp_path / 'mv'
    (root / 'json').mkdir(parents=True)
    os.symlink(store, root / 'video')
    q = dict(question='q?', candidates=['x', 'y'], answer='y')
    (root / 'json' / 'task_a.json').write_text(json.dumps([dict(q, video='g.mp4'), dict(q, video='g.mp4')]))
    recs, rep = load_benchmark('mvbench', str(root))
    assert not recs and rep.skipped == {'outside_root': 2}
    hint = rep.hint()
    assert f'{root}/video -> {store}' in hint and f'--allow-root {store}' in hint
    recs, rep = load_benchmark('mvbench', str(root), allow_roots=[str(store)])
    assert len(recs) == 2 and not rep.skipped and recs[0].video.startswith(str(root))


def test_data_root_that_is_a_file_and_options_a_reader_lacks(tmp_path):
    f = tmp_path / 'root.json'
    f.write_text('[]')
    with pytest.raises(NotADirectoryError, match='is a file, not a folder'):
        load_benchmark('mvbench', str(f))
    with pytest.raises(ValueError, match='mvbench takes no split option'):
        load_benchmark('mvbench', str(tmp_path), split='test')


def test_train_vlm_takes_allow_root(tmp_path):
    """Regression (item 6): ``zoo train-vlm`` had no ``--allow-root``, so a benchmark whose videos are symlinked out
    of --data-dir could not be trained on."""
    from zoo.tasks.videoqa import VideoQATraining
    from zoo.train.vlm import parse_vlm_args
    store = tmp_path / 'store' / 'videos'
    _videos(str(store), ['g.mp4', 'c.mp4', 't.mp4'])
    root = tmp_path / 'mv'
    (root / 'json').mkdir(parents=True)
    os.symlink(store, root / 'video')
    q = dict(question='q?', candidates=['x', 'y'], answer='y')
    (root / 'json' / 'task_a.json').write_text(json.dumps([dict(q, video='g.mp4'), dict(q, video='g.mp4')]))
    base = ['--model', 'pe_vlm_tiny_mrope', '--data-dir', str(root), '--output', str(tmp_path / 'run')]
    with pytest.raises(ValueError, match='usable record'):
        VideoQATraining(parse_vlm_args(base))._records()
    train, val = VideoQATraining(parse_vlm_args([*base, '--allow-root', str(store)]))._records()
    assert len(train) + len(val) == 2
