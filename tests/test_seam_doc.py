"""docs/seam.md's recipe for adding an encoding is real code: run it, then hold it to the encoding contract."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import test_encoding_contract as contract
from zoo.encodings import list_pos_encodings

DOC = Path(__file__).resolve().parents[1] / 'docs' / 'seam.md'


def _register_recipe() -> str:
    if 'alibi2d' not in list_pos_encodings():
        blocks = re.findall(r'```python\n(.*?)```', DOC.read_text(), flags=re.S)
        assert len(blocks) == 1, 'docs/seam.md should hold exactly one python recipe'
        exec(compile(blocks[0], str(DOC), 'exec'), {})
    return 'alibi2d'


KIND = _register_recipe()


@pytest.mark.parametrize('check', [
    contract.test_forward_backward_and_new_grid, contract.test_token_subsets, contract.test_meta_device_init,
    contract.test_torch_compile_dynamic_no_graph_breaks, contract.test_extrapolation_hook_matches_the_constructor,
    contract.test_checkpoint_hook_takes_its_own_zoo_layout_tensors_unchanged,
])
def test_recipe_meets_the_contract(check):
    check(KIND)


@pytest.mark.parametrize('grad', [False, True])
def test_recipe_exports(grad):
    contract.test_torch_export_dynamic_hw(KIND, grad)


@pytest.mark.parametrize('reentrant', [False, True])
def test_recipe_gradient_checkpointing(reentrant, monkeypatch):
    contract.test_gradient_checkpointing_same_gradients(KIND, reentrant, monkeypatch)


def test_recipe_state_dict(tmp_path):
    contract.test_state_dict_round_trip(KIND, tmp_path)
