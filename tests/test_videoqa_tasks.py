"""The diagnostic video-QA tasks of ``zoo make-videoqa`` (object_colour, flash_position, flash_order): every event is
visible at the training frame count, the option order is fixed, the answers match what the decoded videos show."""
import json
import os

import numpy as np
import pytest

from zoo.datasets import FrameSampling, read_video
from zoo.datasets._synth import COLORS
from zoo.datasets.synthetic_videoqa import DIAGNOSTIC_TASKS, block_names, make_videoqa

FRAMES, SIZE, BLOCKS = 32, 32, 4


@pytest.fixture(scope='module')
def diag(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('diag'))
    make_videoqa(root, num_per_task=12, num_frames=FRAMES, size=SIZE, seed=3, clips_dir=None,
                 tasks=DIAGNOSTIC_TASKS, blocks=BLOCKS, progress=False)
    return root


def _items(root, task):
    with open(os.path.join(root, 'json', f'{task}.json')) as f:
        return json.load(f)


def _colour_share(frame: np.ndarray, colour: str) -> float:
    """Share of the frame's pixels within 60 levels of ``colour`` on every channel (MP4 chroma blur allowed)."""
    close = np.abs(frame.astype(np.int32) - np.array(COLORS[colour])).max(axis=-1) <= 60
    return float(close.mean())


def test_every_event_is_visible_at_the_training_frames(diag):
    """From the recorded [start, end) ranges: 8 training frames (random segment offsets, 200 draws per item) and
    the 4 / 8 / 16 / 32 evaluation midpoints all hit every event; each event is one whole block."""
    train = FrameSampling('uniform', 8, random=True)
    evals = [FrameSampling('uniform', n) for n in (4, 8, 16, 32)]
    rng = np.random.default_rng(0)
    checked = 0
    for task in ('flash_position', 'flash_order'):
        for it in _items(diag, task):
            assert it['blocks'] == BLOCKS and it['block_len'] == FRAMES // BLOCKS
            for start, end in it['events']:
                assert start % it['block_len'] == 0 and end - start == it['block_len']  # aligned to tubelets
                for _ in range(200):
                    idx = train.indices(FRAMES, 8.0, generator=rng)
                    assert ((idx >= start) & (idx < end)).sum() == 2  # both frames of one temporal patch
                for s in evals:
                    assert ((s.indices(FRAMES, 8.0) >= start) & (s.indices(FRAMES, 8.0) < end)).any(), s
                checked += 1
    assert checked == 12 + 24


def test_fixed_option_order(diag):
    expect = {'object_colour': list(COLORS), 'flash_position': block_names(BLOCKS),
              'flash_order': ['the red square', 'the blue square']}
    for task in DIAGNOSTIC_TASKS:
        items = _items(diag, task)
        assert all(it['candidates'] == expect[task] for it in items), task
        assert all(it['answer'] in it['candidates'] for it in items)
        assert len({it['answer'] for it in items}) > 1, f'{task}: every answer the same in 12 items'
    assert block_names(4) == ['in the first quarter', 'in the second quarter', 'in the third quarter',
                              'in the last quarter']


def test_answers_match_the_decoded_videos(diag):
    """Decode every frame; the square's colour is on screen exactly in the recorded blocks, the named colour is the
    drawn one, and the first-shown colour is the answer of flash_order."""
    every = FrameSampling('stride', FRAMES)
    for task in DIAGNOSTIC_TASKS:
        for it in _items(diag, task):
            frames = read_video(os.path.join(diag, 'video', task, it['video']), every).frames.numpy()
            assert frames.shape == (FRAMES, SIZE, SIZE, 3)
            if task == 'object_colour':
                shares = [_colour_share(f, it['answer']) for f in frames]
                assert min(shares) > 0.15, (it, min(shares))  # a 16 x 16 square is 25 % of the frame
                others = [c for c in COLORS if c != it['answer']]
                assert max(_colour_share(f, c) for f in frames for c in others) < 0.05
                continue
            colours = ([it['question'].split()[3]] if task == 'flash_position' else ['red', 'blue'])
            first_seen = {}
            for colour, (start, end) in zip(colours, it['events']):
                on = np.array([_colour_share(f, colour) > 0.15 for f in frames])
                assert on[start + 1:end - 1].all() and not on[:max(0, start - 1)].any() and not on[end + 1:].any(), \
                    (it, colour, on.nonzero())
                first_seen[colour] = int(on.argmax())
            if task == 'flash_position':
                assert it['candidates'].index(it['answer']) == it['events'][0][0] // it['block_len']
            else:
                assert it['answer'] == f'the {min(first_seen, key=first_seen.get)} square'
                assert first_seen['red'] != first_seen['blue']


def test_bad_blocks_and_old_tasks(tmp_path):
    with pytest.raises(ValueError, match='--blocks must be'):
        make_videoqa(str(tmp_path / 'x'), num_per_task=1, num_frames=30, size=32, clips_dir=None,
                     tasks=('flash_order',), blocks=4, progress=False)
    # the default tasks are the original ones: a folder written before the diagnostic tasks is written the same way
    from zoo.datasets.synthetic_videoqa import TASKS
    import inspect
    assert tuple(inspect.signature(make_videoqa).parameters['tasks'].default) == TASKS + ('vniah',)


def test_diagnostic_set_loads_and_batches(diag):
    """The MVBench reader reads the set; the VideoQA task turns it into prompts whose answer is the item's letter."""
    from zoo.datasets.videoqa import load_benchmark
    records, report = load_benchmark('mvbench', diag, tasks=list(DIAGNOSTIC_TASKS))
    assert len(records) == 36
    by_task = {t: [r for r in records if r.task == t] for t in DIAGNOSTIC_TASKS}
    for task, rs in by_task.items():
        items = {it['video']: it for it in _items(diag, task)}
        for r in rs:
            it = items[os.path.basename(r.video)]
            assert r.options == it['candidates'] and r.options[r.answer] == it['answer']


def test_train_predictions_read_the_letter_at_the_answer_position(diag):
    """VideoQATask.train_predictions (the training loop's per-epoch train accuracy and most-frequent-letter share):
    the option letter scored highest at each sample's first answer position, against the right option."""
    import torch
    from zoo.datasets.videoqa import VideoQADataset, collate_videoqa, load_benchmark
    from zoo.models.vlm import create_video_llm
    from zoo.tasks.videoqa import VideoQATask
    torch.manual_seed(0)
    model = create_video_llm('pe_vlm_tiny_mrope', dim=64, depth=1, num_heads=2, num_kv_heads=1, mlp_hidden=64,
                             tower_kwargs=dict(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2))
    records, _ = load_benchmark('mvbench', diag, tasks=['flash_position', 'flash_order'])
    ds = VideoQADataset(records[:3] + records[-3:], FrameSampling('uniform', 8), size=32)
    task = VideoQATask(model, num_options=4)
    assert task.train_outcomes == ('A', 'B', 'C', 'D') and VideoQATask(model).train_outcomes is None
    batch = task.to_batch(collate_videoqa([ds[i] for i in range(len(ds))]), torch.device('cpu'), train=True)
    assert batch.answer_counts == [2] * 6  # the letter, then <|im_end|>
    want = [(k + 1) % len(r.options) for k, r in enumerate(ds.records)]  # choose a letter other than the answer
    logits = torch.zeros(len(batch.targets), max(task.letter_ids) + 1)
    for k, w in enumerate(want):
        logits[2 * k, task.letter_ids[w]] = 5.  # first answer position of sample k
        logits[2 * k + 1, task.letter_ids[(w + 1) % 4]] = 9.  # the end-of-turn position must not count
    pred, true = task.train_predictions(logits, batch)
    assert pred.tolist() == want and true.tolist() == [r.answer for r in ds.records]
    with pytest.raises(ValueError, match='num_options'):
        VideoQATask(model, num_options=1)
