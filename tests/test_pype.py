"""PyPE (pyramid-descent visual position encoding), the first per-layer scheme: the official golden file
(SakuraTroyChen/PyPE, ``seeds/pype.json``) through the public API with ``official=True``, and the defining properties
of our default (odd grids keep their centre ring, decoding continues every layer's ids, several images, batches)."""
import json

import pytest
import torch

from conftest import golden_path
from zoo.encodings import Positions, create_pos_encoding
from zoo.encodings.multimodal import QWEN_TOKEN_IDS, get_layout_position_ids, get_scheme, layout_to_inputs
from zoo.encodings.multimodal.encoding import image_block_mask

TOKENS = dict(spatial_merge_size=2, image_token_id=QWEN_TOKEN_IDS['image'], video_token_id=QWEN_TOKEN_IDS['video'])
REPRODUCED = ['P1_even4_j1', 'P2_odd5_j1', 'P3_even6_j2', 'P4_batch_even4_j1', 'P5_text_only',
              'P7_official_24x24_j1_32layers']


@pytest.fixture(scope='module')
def gold():
    with open(golden_path('seeds/pype.json')) as f:
        return json.load(f)


def _inputs(layout):
    rows = layout['batch'] if isinstance(layout, dict) else [layout]
    inp = [layout_to_inputs(r, markers=False) for r in rows]  # LLaVA-1.5: no markers around the image
    grids = [i['image_grid_thw'] for i in inp if i['image_grid_thw'] is not None]
    return torch.cat([i['input_ids'] for i in inp]), (torch.cat(grids) if grids else None)


def _encoding(depth, **options):
    return create_pos_encoding('multimodal_rope', dict(dim=16, num_heads=2, depth=depth),
                               dict(scheme='pype', theta=1e4, scheme_options=options))


def _official(case):
    p = case['params']
    pe = _encoding(p['num_hidden_layers'], jump=p['jump_num'], official=True)
    ids, grids = _inputs(case['layout'])
    pos, deltas = pe.position_ids(ids, grids, **TOKENS)
    return pe, pos, deltas


@pytest.mark.parametrize('name', REPRODUCED)
def test_official_ids_mask_and_decoding(gold, name):
    case = gold['cases'][name]
    depth = case['params']['num_hidden_layers']
    pe, pos, deltas = _official(case)
    assert pos.shape[0] == depth + 1 and deltas.shape[0] == depth
    assert pos[:depth, 0].tolist() == case['position_ids_per_layer']
    step = pe.decode_position_ids(deltas, torch.tensor([case['decode_step_cache_len']]))
    assert step[:depth, 0, :, 0].tolist() == case['decode_step_position_per_layer']  # the official +1 after layer 0
    terms = pe.attn_terms(Positions(None, ids=pos), torch.float32, torch.device('cpu'))
    for layer, term in enumerate(terms):
        for row, types in enumerate(case['token_types']):
            img = torch.tensor([t == 'image' for t in types])
            if not img.any():
                assert term.allowed is None and term.causal
                continue
            allowed = term.allowed[row]
            if case['image_block_allowed_per_layer'] is not None:
                assert allowed[img][:, img].int().tolist() == case['image_block_allowed_per_layer'][layer][row]
            outside = ~(img[:, None] & img[None, :])
            causal = torch.ones_like(allowed).tril()
            assert torch.equal(allowed[outside], causal[outside])  # plain causal outside the image block
        if case['image_level_grid_per_layer'] and 'image' in case['token_types'][0]:
            img = [i for i, t in enumerate(case['token_types'][0]) if t == 'image']
            g = case['params']['grid']
            levels = pos[layer, 0, 0, img] - pos[layer, 0, 0, img].min()
            assert levels.view(g, g).tolist() == case['image_level_grid_per_layer'][layer]


def test_layout_api_gives_the_same_ids(gold):
    case = gold['cases']['P3_even6_j2']
    for layer, ref in enumerate(case['position_ids_per_layer']):
        ids, delta = get_layout_position_ids('pype', case['layout'], markers=False, jump=2, layer=layer,
                                             official=True)
        assert ids[0].tolist() == ref


def test_official_limits_are_not_inherited(gold):
    """P4b (row 0's layout for every row) and P6 (a second image as text) are official bugs: each row gets its own
    layout, and every image its pyramid."""
    p4, p4b = gold['cases']['P4_batch_even4_j1'], gold['cases']['P4b_batch_default_position_ids_official_limit']
    _, pos, _ = _official(p4b)
    assert pos[:2, 0].tolist() == p4['position_ids_per_layer'] != p4b['position_ids_per_layer']
    p6 = gold['cases']['P6_two_images_official_limit']
    _, pos, _ = _official(p6)
    first = 2 + 16 + 2
    assert pos[0, 0, 0, :first].tolist() == p6['position_ids_per_layer'][0][0][:first]
    second = pos[0, 0, 0, first:first + 16] - pos[0, 0, 0, first]
    assert second.view(4, 4).tolist() == p6['image_level_grid_per_layer'][0]  # the same pyramid as the first


def test_default_odd_grid_keeps_the_centre_ring(gold):
    case = gold['cases']['P2_odd5_j1']
    pe = _encoding(3)
    ids, grids = _inputs(case['layout'])
    pos, deltas = pe.position_ids(ids, grids, **TOKENS)
    levels = pos[0, 0, 0, 2:27] - 2
    assert levels.view(5, 5)[2, 2] == 2 and levels.max() == 2  # official: 1 (centre merged into ring 1)
    assert [int(pos[layer, 0, 0, 27]) for layer in range(3)] == [5, 4, 3]  # text after: s + n_lev(layer)
    step = pe.decode_position_ids(deltas, torch.tensor([30]))
    assert step[:3, 0, 0, 0].tolist() == [int(pos[layer, 0, 0, -1]) + 1 for layer in range(3)]  # no skipped id


def test_non_square_grid_video_and_rule():
    spec = get_scheme('pype')
    opts = spec.options(dict(layer=0))
    from zoo.encodings.multimodal.schemes import VIDEO, Block
    b = Block(VIDEO, 2 * 3 * 5, 2, 3, 5)
    ids = spec.visual(opts, 10, b)[0]
    assert ids[:15].view(3, 5).tolist() == [[10] * 5, [10, 11, 11, 11, 10], [10] * 5]
    assert ids[15:].tolist() == (ids[:15] + 2).tolist() and spec.extent(opts, b) == 4  # frames follow one another
    frames = torch.tensor([[-1, 0, 0, 0, 0, -1]])
    allowed = image_block_mask(torch.tensor([[0, 1, 2, 2, 1, 3]]), frames)[0]
    assert allowed[1].tolist() == [True, True, False, False, True, False]  # border attends the later border token
    assert allowed[2].tolist() == [True, True, True, True, True, False]   # centre attends its whole frame
    assert image_block_mask(torch.tensor([[0, 1, 2]]), torch.tensor([[-1, 0, -1]])) is None


def test_bad_options_and_packed_documents():
    with pytest.raises(ValueError, match='pype jump must be an int >= 1'):
        _encoding(2, jump=0)
    pe = _encoding(2)
    ids, grids = _inputs([{'type': 'text', 'len': 2}, {'type': 'image', 't': 1, 'h': 2, 'w': 2}])
    with pytest.raises(ValueError, match='packed documents'):
        pe.position_ids(ids, grids, attention_mask=torch.tensor([[1, 1, 2, 2, 2, 2]]), **TOKENS)
    with pytest.raises(ValueError, match=r'Positions.ids must be \(depth \+ 1, A, B, L\)'):
        pe.attn_terms(Positions(None, ids=torch.arange(6)[None, None]), torch.float32, torch.device('cpu'))


def test_hf_adapter_refuses_per_layer_ids():
    from zoo.hf import patch_rope_index
    with pytest.raises(ValueError, match="scheme 'pype' cannot be patched into a Hugging Face model: PyPE gives every "
                                         'decoder layer its own ids'):
        patch_rope_index(torch.nn.Linear(2, 2), 'pype')
