"""Alias of zoo.datasets.splits and zoo.runs.models and zoo.datasets.video_folder (moved in round 3); import from there."""
from zoo.datasets.splits import *  # noqa: F401,F403
from zoo.runs.models import *  # noqa: F401,F403
from zoo.datasets.video_folder import *  # noqa: F401,F403
from zoo.datasets.video_folder import collate_video_skip_bad  # noqa: F401
