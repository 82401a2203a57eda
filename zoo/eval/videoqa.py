"""Alias of :mod:`zoo.sweep.videoqa` (``zoo eval-video``; moved in round 3); answer parsing is in
:mod:`zoo.tasks.answers`, model loading in :mod:`zoo.runs.models`, the report in :mod:`zoo.sweep.report`."""
from zoo.runs.models import load_video_llm  # noqa: F401
from zoo.sweep.report import plot_accuracy, plot_vniah, write_video_report  # noqa: F401
from zoo.sweep.videoqa import *  # noqa: F401,F403
from zoo.tasks.answers import fallback_choice, parse_choice  # noqa: F401
