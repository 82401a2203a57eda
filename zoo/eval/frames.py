"""Alias of :mod:`zoo.sweep.frames` (``zoo eval-frames``; moved in round 3); the report writers are in
:mod:`zoo.sweep.report`."""
from zoo.sweep.frames import *  # noqa: F401,F403
from zoo.sweep.report import plot_frames_scaling, plot_grid_heatmap, write_frames_report  # noqa: F401
