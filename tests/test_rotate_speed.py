"""benchmarks/rotate_speed.py writes its page (tiny run) and refuses unknown encodings in one line."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'benchmarks'))
import rotate_speed  # noqa: E402


def test_page(tmp_path):
    out = tmp_path / 'rot.md'
    rotate_speed.main(['--pes', 'rope_mixed', 'comrope_ld', '--batch-size', '1', '--runs', '1', '--repeats', '1',
                       '--out', str(out)])
    page = out.read_text()
    assert '| `comrope_ld` | BasisRotation |' in page and '| `rope_mixed` | RotaryTerm |' in page


def test_unknown_pe_refused(capsys):
    with pytest.raises(SystemExit):
        rotate_speed.main(['--pes', 'nonsense'])
    assert 'no registered model' in capsys.readouterr().err


def test_non_rotary_encodings_refused(capsys):
    with pytest.raises(SystemExit):
        rotate_speed.main(['--pes', 'sincos', 'alibi'])
    assert 'do not rotate q and k' in capsys.readouterr().err
