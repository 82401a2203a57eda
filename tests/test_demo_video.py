"""zoo demo's video part (the ranking task in memory, a tiny rope3d video ViT, zoo eval-frames) and the colour scale of
its heatmaps."""
from __future__ import annotations

import os

import pytest

from zoo.sweep.report.plots import color_range


def test_color_range_shows_one_value_on_a_percent_scale():
    assert color_range([0., 0.]) == (0., 5.)      # was -1..1: a 0 % cell on a scale from -1 to 1
    assert color_range([100.]) == (95., 100.)
    assert color_range([25., 25., float('nan')]) == (20., 30.)
    assert color_range([20., 70.4]) == (20., 71.)
    assert color_range([]) == (0., 100.)


def test_video_demo_reduced_runs_the_pipeline(tmp_path):
    from zoo.demo import VIDEO_FRAMES, VIDEO_SIZE, _video_demo
    result = _video_demo(str(tmp_path), ['--threads', '1'], epochs=1)
    cells = {(r['frames'], r['size']) for r in result['rows']}
    assert cells == {(f, s) for f in (4, 8, 16) for s in (16, 24, 32)}
    assert {r['n'] for r in result['rows']} == {128}
    assert 0 <= result['top1'] <= 100 and (VIDEO_FRAMES, VIDEO_SIZE) in cells
    assert not result['failed'] and os.path.isfile(result['paths']['md'])
    assert not os.path.isdir(tmp_path / 'videos' / 'train')  # training clips rendered in memory only
    assert 'How small this run was' in open(result['paths']['md']).read()


@pytest.mark.slow
def test_video_demo_learns_the_order_of_events(tmp_path):
    """The demo's recipe as shipped (fixed seed): >= 75 % at its training clip (chance 25 %, no-position level 50 %)."""
    from zoo.demo import _video_demo
    result = _video_demo(str(tmp_path), ['--threads', '1'], epochs=None)
    assert result['top1'] >= 75, result['top1']
