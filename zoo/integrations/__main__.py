"""``python -m zoo.integrations``: rewrite the shipped open_clip configs (one per zoo image model)."""
from .open_clip import write_clip_configs

for path in write_clip_configs():
    print(path)
