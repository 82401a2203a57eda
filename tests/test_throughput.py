"""benchmarks/throughput.py (issue 24's one benchmark command): encoding options in --pes entries, the reference
models a target needs, and one-line refusals. Tiny sizes: a check of the command, not a measurement."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'benchmarks'))
import throughput  # noqa: E402


def test_split_key_reads_encoding_options():
    assert throughput.split_key('rope_mixed') == ('rope_mixed', {})
    assert throughput.split_key('liere:per_layer=false,per_head=false') == (
        'liere', {'per_layer': False, 'per_head': False})
    assert throughput.split_key('irpe_k:query_block=256') == ('irpe_k', {'query_block': 256})
    with pytest.raises(ValueError):
        throughput.split_key('liere:per_layer')


def test_build_passes_the_options_to_the_encoding():
    model = throughput.build('liere:per_layer=false,per_head=false', 32)
    assert not model.pe.per_layer and not model.pe.per_head and len(model.pe.layers) == 1
    video = throughput.build('irpe_k:query_block=7', 32, frames=2)
    assert video.pe.query_block == 7


def test_an_option_row_gets_its_encodings_target_and_reference(tmp_path):
    out = tmp_path / 'page.md'
    throughput.main(['--no-train', '--pes', 'ape', 'liere:per_layer=false,per_head=false', '--sizes', '32',
                     '--batch-size', '1', '--runs', '1', '--repeats', '1', '--warmup', '0', '--out', str(out)])
    page = out.read_text()
    row = [line for line in page.splitlines() if '`liere:per_layer=false,per_head=false`' in line]
    assert row and 'our rope_mixed' in row[0] and '<= 1.05' in row[0]
    assert '| `rope_mixed` |' in page  # the reference the target needs was timed in the same run
    assert (tmp_path / 'page.json').exists()


def test_malformed_option_is_a_one_line_error(capsys):
    with pytest.raises(SystemExit):
        throughput.main(['--no-train', '--pes', 'liere:per_layer'])
    assert 'option=value items' in capsys.readouterr().err


@pytest.mark.parametrize('spec, message', [('liere:per_layer=maybe', 'per_layer must be True or False'),
                                           ('liere:bogus=1', 'unknown pe_kwargs'),
                                           ('nonsense:block_size=8', 'Unknown model')])
def test_bad_option_values_are_refused_before_timing(spec, message, capsys):
    with pytest.raises(SystemExit):
        throughput.main(['--no-train', '--pes', spec, '--sizes', '32'])
    assert message in capsys.readouterr().err
