"""benchmarks/gpu_speed.py (issue 24, part 7): the prepared GPU check runs end to end on the CPU with tiny sizes, so
it works the first time a device is lent, and refuses CUDA in one line where there is none."""
from __future__ import annotations

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'benchmarks'))
import gpu_speed  # noqa: E402


@pytest.mark.filterwarnings('ignore')
def test_quick_cpu_run_writes_every_row(tmp_path):
    out = tmp_path / 'gpu.md'
    gpu_speed.main(['--device', 'cpu', '--quick', '--repeats', '1', '--warmup', '0', '--out', str(out)])
    page = out.read_text()
    assert 'QUICK SMOKE RUN' in page and 'float bias' in page
    for pe in gpu_speed.IMAGE_PES + gpu_speed.VIDEO_PES:
        assert f'| `{pe}` |' in page, pe
    assert 'Video ViT-S, 4 x 64², batch 1' in page


@pytest.mark.skipif(torch.cuda.is_available(), reason='a CUDA device is present')
def test_cuda_without_a_device_is_a_one_line_error(capsys):
    with pytest.raises(SystemExit):
        gpu_speed.main(['--repeats', '1'])
    assert 'no CUDA device here' in capsys.readouterr().err


@pytest.mark.parametrize('device', ['nonsense', 'meta'])
def test_other_devices_are_one_line_errors(device, capsys):
    with pytest.raises(SystemExit):
        gpu_speed.main(['--device', device])
    assert 'use cuda (the check) or cpu' in capsys.readouterr().err
