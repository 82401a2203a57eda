"""The tiled-image QA task: ``zoo make-imageqa`` (which AnyRes tile holds the object), its reader (``imageqa``), the
batch with tiles, and a short ``zoo train-vlm --benchmark imageqa`` run of configs/vlm_rope_dhr_tiles.yaml."""
import json
import os

import numpy as np
import pytest
import torch

from zoo.datasets._synth import COLORS
from zoo.datasets.synthetic_imageqa import make_imageqa, tile_names
from zoo.datasets.videoqa import load_benchmark
from zoo.models.vlm.tiling import choose_tile_grid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def imageqa(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('iq') / 'set')
    make_imageqa(root, num_per_task=15, tile_size=32, seed=3)
    return root


def test_set_answers_are_where_the_target_is_drawn(imageqa):
    from zoo.tasks.imageqa import read_image
    records, report = load_benchmark('imageqa', imageqa)
    assert len(records) == 15 and report.kept == 15 and not report.skipped
    grids = set()
    for r in records:
        cols, rows = r.extra['cols'], r.extra['rows']
        grids.add((cols, rows))
        img = read_image(r.video).numpy()
        assert img.shape == (rows * 32, cols * 32, 3)
        assert choose_tile_grid(img.shape[1], img.shape[0], 32, 1, 4) == (cols, rows)   # the grid the model cuts
        assert r.options == tile_names(cols, rows)
        color = r.question.split()[-2]
        ys, xs = np.nonzero((img == np.array(COLORS[color], dtype=np.uint8)).all(-1))
        assert len(ys) > 4
        tiles = set((ys // 32 * cols + xs // 32).tolist())
        assert tiles == {r.answer} and r.extra['distractors'][0]['tile'] != r.answer
    assert grids == {(2, 1), (1, 2), (2, 2), (3, 1), (1, 3)}
    assert tile_names(2, 2) == ['top left', 'top right', 'bottom left', 'bottom right']


def test_set_is_deterministic_and_refuses_bad_options(imageqa, tmp_path):
    again = str(tmp_path / 'again')
    make_imageqa(again, num_per_task=15, tile_size=32, seed=3)
    for rel in ('json/tile_position.json', 'image/tile_position/00007.png'):
        with open(os.path.join(imageqa, rel), 'rb') as a, open(os.path.join(again, rel), 'rb') as b:
            assert a.read() == b.read()
    with pytest.raises(FileExistsError, match='--overwrite'):
        make_imageqa(again, num_per_task=2)
    with pytest.raises(ValueError, match='grids up to 3x3'):
        make_imageqa(str(tmp_path / 'x'), grids=[(4, 1)])
    with pytest.raises(ValueError, match='--tile-size must be an even number'):
        make_imageqa(str(tmp_path / 'y'), tile_size=15)
    with pytest.raises(ValueError, match=r'--object-size must be in \(0, 0.8\]'):
        make_imageqa(str(tmp_path / 'z'), object_size=0.9)
    big = str(tmp_path / 'big')
    make_imageqa(big, num_per_task=2, grids=[(2, 1)], distractors=0, object_size=0.75)
    from zoo.tasks.imageqa import read_image
    with open(os.path.join(big, 'json', 'tile_position.json')) as f:
        row = json.load(f)[0]
    img = read_image(os.path.join(big, 'image', row['image'])).numpy()
    color = row['question'].split()[-2]
    ys, xs = np.nonzero((img == np.array(COLORS[color], dtype=np.uint8)).all(-1))
    assert xs.max() - xs.min() >= 16 and set((xs // 32).tolist()) == {row['tile']} and not row['distractors']


def test_reader_counts_bad_rows(imageqa, tmp_path):
    root = tmp_path / 'r'
    (root / 'json').mkdir(parents=True)
    (root / 'image').mkdir()
    src = os.path.join(imageqa, 'image', 'tile_position', '00000.png')
    os.symlink(src, root / 'image' / 'a.png')   # a symlink out of the root: refused unless allowed
    rows = [{'image': 'a.png', 'question': 'q', 'candidates': ['left', 'right'], 'answer': 'left'},
            {'image': 'a.png', 'question': 'q', 'candidates': ['left', 'right'], 'answer': 'up'},
            {'image': 'none.png', 'question': 'q', 'candidates': ['left', 'right'], 'answer': 'left'},
            {'image': 'a.png', 'question': 'q', 'candidates': ['left']}]
    (root / 'json' / 't.json').write_text(json.dumps(rows))
    recs, rep = load_benchmark('imageqa', str(root))
    assert not recs and dict(rep.skipped) == {'outside_root': 1, 'answer_not_in_options': 1, 'missing_video': 1,
                                              'malformed_row': 1}
    hint = rep.hint()
    assert 'rows name images that lead outside the data root' in hint and 'video' not in hint, hint
    assert f"to read them, pass --allow-root {os.path.dirname(os.path.realpath(src))} (repeatable)" in hint, hint
    assert "1 rows name images that do not exist (e.g. 'none.png')" in hint, hint
    recs, _ = load_benchmark('imageqa', str(root), allow_roots=[imageqa])
    assert [r.answer for r in recs] == [0] and recs[0].extra['modality'] == 'image'


def test_batch_carries_each_samples_tiles(imageqa):
    from zoo.models.vlm import create_video_llm
    from zoo.tasks.imageqa import ImageQADataset, ImageQATask
    from zoo.datasets.videoqa import collate_videoqa
    model = create_video_llm('pe_vlm_tiny_rope_dhr', max_tiles=4, dim=64, depth=1, num_heads=2, num_kv_heads=1,
                             mlp_hidden=128, tower_kwargs=dict(img_size=32, patch_size=8, embed_dim=32, depth=1,
                                                               num_heads=2))
    records, _ = load_benchmark('imageqa', imageqa)
    ds = ImageQADataset(records[:5])
    batch = ImageQATask(model, 4).to_batch(collate_videoqa([ds[i] for i in range(5)]), torch.device('cpu'), True)
    assert batch.inputs['image_tiles'].tolist() == [[r.extra['cols'], r.extra['rows']] for r in records[:5]]
    assert [p.shape[0] for p in batch.inputs['images']] == [r.extra['cols'] * r.extra['rows'] + 1 for r in records[:5]]
    out = model(**batch.inputs)
    assert out.logits.shape[0] == len(batch.targets)


def test_train_vlm_recipe_runs_on_tiles(imageqa, tmp_path):
    from zoo.runs.checkpoints import load_checkpoint
    from zoo.train.vlm import train_vlm
    out = str(tmp_path / 'run')
    res = train_vlm(['--config', os.path.join(REPO, 'configs', 'vlm_rope_dhr_tiles.yaml'), '--data-dir', imageqa,
                     '--epochs', '1', '--output', out, '--no-progress', '--workers', '0'])
    assert res['epochs'] == 1 and os.path.isfile(os.path.join(out, 'model.safetensors'))
    ckpt = load_checkpoint(os.path.join(out, 'checkpoint-last.pth'))
    assert ckpt['meta']['max_tiles'] == 4 and ckpt['meta']['benchmark'] == 'imageqa'


def test_eval_video_refuses_the_image_set(imageqa, tmp_path, capsys):
    """zoo eval-video reads videos: the imageqa set is refused in one line naming where its accuracy is (it used to
    be accepted and its PNGs read as videos)."""
    from zoo.cli import main
    rc = main(['eval-video', '--benchmark', 'imageqa', '--data-root', imageqa, '--checkpoint', str(tmp_path / 'any.pth'),
               '--frames', '2', '--output', str(tmp_path / 'out')])
    err = capsys.readouterr().err
    assert rc == 2 and 'is a set of images' in err and 'train-vlm --benchmark imageqa' in err
    assert len(err.strip().splitlines()) == 1


def test_a_model_without_tiles_is_described_as_one_tile(imageqa, caplog):
    import logging
    from types import SimpleNamespace
    from zoo.models.vlm import create_video_llm
    from zoo.tasks.imageqa import ImageQATraining
    args = SimpleNamespace(model='pe_vlm_tiny_mrope', benchmark='imageqa', data_dir=imageqa, allow_root=[],
                           tasks=None, val_data_dir=None, val_fraction=0.2, max_train=None, max_val=None)
    tower = dict(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2)
    for name, kw, one in (('pe_vlm_tiny_mrope', {}, True), ('pe_vlm_tiny_rope_dhr', dict(max_tiles=4), False)):
        training = ImageQATraining(SimpleNamespace(**dict(vars(args), model=name)))
        training.img_size = 32
        model = create_video_llm(name, dim=64, depth=1, num_heads=2, num_kv_heads=1, mlp_hidden=128,
                                 tower_kwargs=tower, **kw)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger='zoo.train'):
            text = training.describe(training.open_data(model))
        logged = [r.getMessage() for r in caplog.records if 'one tile' in r.getMessage()]
        if one:
            assert text.startswith('images as one tile of 32 px (no thumbnail) | ') and '+ thumbnail' not in text
            assert logged == ['pe_vlm_tiny_mrope (scheme mrope) takes no tiles: each image is one tile, resized to '
                              '32 px, with no thumbnail']
        else:
            assert text.startswith('images in tiles of 32 px (at most 4 + thumbnail) | ') and not logged
