import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(min(2, torch.get_num_threads()))

SHARED = Path(__file__).resolve().parents[2] / 'shared'


@pytest.fixture(scope='session')
def golden_dir() -> Path:
    """``../shared/golden``; a missing folder fails the golden tests unless ZOO_ALLOW_MISSING_GOLDEN=1."""
    path = SHARED / 'golden'
    if not path.is_dir():
        if os.environ.get('ZOO_ALLOW_MISSING_GOLDEN') == '1':
            pytest.skip(f'golden data not found at {path} (ZOO_ALLOW_MISSING_GOLDEN=1)')
        pytest.fail(f'golden data not found at {path}; check out the shared folder next to the repo')
    return path
