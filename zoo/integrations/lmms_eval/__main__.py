"""``python -m zoo.integrations.lmms_eval``: print the folder of the shipped task YAMLs (for ``--include_path``)."""
from . import task_dir

print(task_dir())
