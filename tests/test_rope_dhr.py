"""RoPE-DHR (CoMemo) ids for tiled images: the official golden file (LALBJ/CoMemo, ``seeds/comemo_rope_dhr.json``)
through the public layout API with ``official=True``, and our default's defining property (every tile token takes
the position of the thumbnail token its centre lies on, tiles in crop order)."""
import json
import re

import pytest
import torch

from conftest import golden_path
from zoo.encodings.multimodal import get_layout_position_ids, get_scheme
from zoo.encodings.multimodal.schemes import IMAGE, Block


@pytest.fixture(scope='module')
def gold():
    with open(golden_path('seeds/comemo_rope_dhr.json')) as f:
        return json.load(f)


def _segments(case):
    """``T3 <image> T4`` with the case's tile grids as zoo layout segments (16 x 16 tokens per tile)."""
    grids = iter(case['tile_grid_per_image'])
    out = []
    for part in case['layout_text'].split():
        if part == '<image>':
            g = next(grids)
            out.append({'type': 'image', 'h': 16, 'w': 16, 'tiles': [g['cols'], g['rows']]})
        else:
            out.append({'type': 'text', 'len': int(re.fullmatch(r'T(\d+)', part).group(1))})
    return out


@pytest.mark.parametrize('name', ['D1_wide_2x1', 'D2_tall_1x2', 'D3_grid_2x2', 'D4_wide_3x2',
                                  'D5_single_tile_no_thumbnail', 'D6_two_images'])
def test_official_llm_and_memory_ids(gold, name):
    case = gold['cases'][name]
    segs = _segments(case)
    ids, delta = get_layout_position_ids('rope_dhr', segs, official=True)   # InternVL markers <img> ... </img>
    assert ids[0].tolist() == case['position_ids'][0]
    context = [i for i, t in enumerate(case['token_types'][0]) if t == 'img_context']
    assert ids[0, 0, context].tolist() == case['cross_attention_media_position_ids']
    assert int(delta) == case['position_ids'][0][0][-1] + 1 - len(case['token_types'][0])


@pytest.mark.parametrize('key', ['X2_Y1_bias0', 'X1_Y2_bias0', 'X2_Y2_bias0', 'X3_Y2_bias5', 'X1_Y1_bias0'])
def test_official_subimage_indices(gold, key):
    ref = gold['calculate_subimage_indices'][key]
    cols, rows, bias = ref['X_cols'], ref['Y_rows'], ref['position_bias']
    spec = get_scheme('rope_dhr')
    n = (cols * rows + (cols * rows > 1)) * 256
    got = spec.visual(spec.options(dict(official=True)), bias, Block(IMAGE, n, 1, 16, 16, tiles=(cols, rows)))
    assert got[0].tolist() == ref['ids']


def test_default_maps_tile_centres_in_crop_order():
    """Crop t = (row t // cols, col t % cols); its token (a, c) sits at thumbnail (floor((16 j + a + 1/2) / rows),
    floor((16 i + c + 1/2) / cols)): on 2x2, the top-right crop covers thumbnail rows 0-7, columns 8-15."""
    spec = get_scheme('rope_dhr')
    b = Block(IMAGE, 5 * 256, 1, 16, 16, tiles=(2, 2))
    ids = spec.visual(spec.options({}), 0, b)[0]
    top_right = ids[256:512].view(16, 16)
    assert top_right.div(16, rounding_mode='floor').unique().tolist() == list(range(8))
    assert (top_right % 16).unique().tolist() == list(range(8, 16))
    assert torch.equal(ids[-256:], torch.arange(256))                                   # the thumbnail
    for t in range(4):  # every crop covers its quarter exactly, each thumbnail cell by 2 x 2 tokens
        counts = torch.bincount(ids[256 * t:256 * (t + 1)], minlength=256).view(16, 16)
        j, i = divmod(t, 2)
        assert (counts[8 * j:8 * j + 8, 8 * i:8 * i + 8] == 4).all() and counts.sum() == 256
    official = spec.visual(spec.options(dict(official=True)), 0, b)[0]
    assert official[256:512].view(16, 16)[0, 0] == 16 * 7  # the official's second crop: bottom-left region, row 7


def test_tiles_refused_by_other_schemes_and_hf():
    seg = [{'type': 'text', 'len': 2}, {'type': 'image', 'h': 2, 'w': 2, 'tiles': [2, 1]}]
    with pytest.raises(ValueError, match=r"scheme 'mrope' cannot lay out tiled images .* use one of \['rope_dhr'\]"):
        get_layout_position_ids('mrope', seg)
    with pytest.raises(ValueError, match='tiles .* belong to an image'):
        get_layout_position_ids('rope_dhr', [{'type': 'video', 't': 2, 'h': 2, 'w': 2, 'tiles': [2, 1]}])
    from zoo.hf import patch_rope_index
    with pytest.raises(ValueError, match="'rope_dhr' cannot be patched into a Hugging Face model"):
        patch_rope_index(torch.nn.Linear(2, 2), 'rope_dhr')
