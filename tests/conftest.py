import atexit
import os
import shutil
import tempfile
from pathlib import Path

# Nothing a test runs writes to the home directory: zoo's video index cache, matplotlib's font cache and any other
# XDG cache go to a folder of this session, removed at exit (subprocesses inherit it).
SESSION_CACHE = tempfile.mkdtemp(prefix='zoo-tests-cache-')
atexit.register(shutil.rmtree, SESSION_CACHE, True)
os.environ['ZOO_VIDEO_INDEX_CACHE'] = os.path.join(SESSION_CACHE, 'video-index')
os.environ['XDG_CACHE_HOME'] = SESSION_CACHE
os.environ['MPLCONFIGDIR'] = os.path.join(SESSION_CACHE, 'matplotlib')

# PyAV before anything imports decord: once decord's bundled FFmpeg is loaded first, PyAV's libvpx-vp9 encoder fails
# to open (EINVAL), so tests that write VP9 would pass alone and fail after a test that decoded with decord.
try:
    import av  # noqa: E402,F401
except ImportError:  # pragma: no cover - av is a core dependency
    pass
import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(min(2, torch.get_num_threads()))

GOLDEN = Path(__file__).resolve().parents[2] / 'shared' / 'golden'


def golden_path(name: str) -> Path:
    """``../shared/golden/<name>``; a missing file fails the test unless ZOO_ALLOW_MISSING_GOLDEN=1 (then it skips)."""
    path = GOLDEN / name
    if not path.exists():
        if os.environ.get('ZOO_ALLOW_MISSING_GOLDEN') == '1':
            pytest.skip(f'golden file {path} missing (ZOO_ALLOW_MISSING_GOLDEN=1)')
        pytest.fail(f'golden file {path} is missing: check out ../shared/golden next to the repo, '
                    f'or set ZOO_ALLOW_MISSING_GOLDEN=1 to skip the golden tests')
    return path


def load_golden(name: str) -> dict:
    """Load a golden ``.pt`` file with ``weights_only=True`` (see golden_path for a missing file)."""
    return torch.load(golden_path(name), weights_only=True)
