"""RoPE-DHR's tiled images in the video-LLM: the AnyRes tiling rule (the official splitter's grids), tiles through the
token-id path (the golden ids), prompt and collate for batches of different tile grids, the KV cache and left padding,
and the refusals of the schemes that take no tiles."""
import json

import pytest
import torch

from conftest import golden_path
from zoo.encodings.multimodal import get_layout_position_ids, get_position_ids, list_schemes
from zoo.models.vlm import create_video_llm, list_video_llms
from zoo.models.vlm.tiling import choose_tile_grid, tile_grid_candidates, tile_image, tiles_per_image

TINY = dict(tower_kwargs=dict(img_size=32, patch_size=8, embed_dim=48, depth=1, num_heads=2), dim=64, depth=2,
            num_heads=4, num_kv_heads=2, mlp_hidden=128)


@pytest.fixture(scope='module')
def gold():
    with open(golden_path('seeds/comemo_rope_dhr.json')) as f:
        return json.load(f)


@pytest.fixture(scope='module')
def model():
    torch.manual_seed(0)
    return create_video_llm('pe_vlm_tiny_rope_dhr', **TINY).eval()


def _image(h, w, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (h, w, 3), dtype=torch.uint8, generator=g)


# ---- the tiling rule --------------------------------------------------------------------------------------------

def test_tile_grid_is_the_official_splitters(gold):
    """Every image of the golden file gets the grid LALBJ/CoMemo's dynamic_preprocess chose (448 px tiles, max 6
    tiles, split evenly over the images of a prompt)."""
    seen = []
    for case in gold['cases'].values():
        budget = tiles_per_image(case['max_dynamic_patch'], len(case['images_wh']))
        for (w, h), g in zip(case['images_wh'], case['tile_grid_per_image']):
            assert choose_tile_grid(w, h, 448, 1, budget) == (g['cols'], g['rows'])
            seen.append((g['cols'], g['rows']))
    assert {(2, 1), (1, 2), (2, 2), (3, 2), (1, 1)} <= set(seen)


def test_tile_grid_tie_rule_and_bounds():
    # aspect 2.5 is as close to 2:1 as to 3:1; the later (more tiles) wins only for an image larger than half of it
    assert choose_tile_grid(1000, 400, 448) == (3, 1)
    assert choose_tile_grid(200, 80, 448) == (2, 1)
    assert choose_tile_grid(5000, 100, 448, max_tiles=4) == (4, 1)     # the widest grid the budget allows
    assert choose_tile_grid(900, 900, 448, max_tiles=1) == (1, 1)
    assert choose_tile_grid(900, 900, 448, min_tiles=2, max_tiles=4) == (2, 2)
    assert tile_grid_candidates(1, 3) == sorted(tile_grid_candidates(1, 3), key=lambda g: g[0] * g[1])
    assert set(tile_grid_candidates(2, 3)) == {(1, 2), (2, 1), (1, 3), (3, 1)}
    with pytest.raises(ValueError, match='min_tiles=3 > max_tiles=2'):
        choose_tile_grid(10, 10, 4, 3, 2)


def test_tile_image_crops_row_major_then_thumbnail():
    x = torch.arange(4 * 6, dtype=torch.float32).view(1, 4, 6)
    crops = tile_image(x, 3, 2, 2)                        # no resize needed: 2 rows x 3 cols of 2 px tiles
    assert crops.shape == (7, 1, 2, 2)
    for t in range(6):
        j, i = divmod(t, 3)
        assert torch.equal(crops[t, 0], x[0, 2 * j:2 * j + 2, 2 * i:2 * i + 2])
    assert crops[6].shape == (1, 2, 2) and torch.allclose(crops[6].mean(), x.mean(), atol=0.5)   # the thumbnail
    assert tile_image(x, 1, 1, 2).shape == (1, 1, 2, 2)   # one tile: no thumbnail


# ---- ids through the token path ------------------------------------------------------------------------------------

@pytest.mark.parametrize('name', ['D1_wide_2x1', 'D3_grid_2x2', 'D4_wide_3x2', 'D6_two_images'])
def test_token_path_reproduces_golden_ids(gold, name):
    """get_position_ids on the golden token ids with image_grid_thw (one 448 px tile = 32 x 32 patches before the
    merge) and image_tiles equals the official ids with official=True, and the default equals the layout API's."""
    case = gold['cases'][name]
    ids = torch.tensor(case['input_ids'])
    tiles = torch.tensor([[g['cols'], g['rows']] for g in case['tile_grid_per_image']])
    grids = torch.tensor([[1, 32, 32]] * len(tiles))
    kw = dict(image_tiles=tiles, image_token_id=gold['constants']['img_context_id'], spatial_merge_size=2)
    pos, delta = get_position_ids('rope_dhr', ids, grids, official=True, **kw)
    assert pos.tolist() == case['position_ids']
    assert int(delta) == case['position_ids'][0][0][-1] + 1 - ids.shape[1]
    default, _ = get_position_ids('rope_dhr', ids, grids, **kw)
    segs, k = [], 0   # the same layout through the layout API (markers are text)
    for part in case['layout_text'].split():
        if part == '<image>':
            segs.append({'type': 'image', 'h': 16, 'w': 16, 'tiles': tiles[k].tolist()})
            k += 1
        else:
            segs.append({'type': 'text', 'len': int(part[1:])})
    layout, _ = get_layout_position_ids('rope_dhr', segs)
    assert torch.equal(default, layout)
    assert not torch.equal(default, pos)   # the official -1e-6 shift moves every tile after the first


def test_tiles_refused_by_other_schemes_naming_rope_dhr(model):
    ids = torch.tensor([[1, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 2]])
    grids, tiles = torch.tensor([[1, 4, 4]]), torch.tensor([[2, 1]])
    takers = [n for n in list_schemes() if n == 'rope_dhr']
    for scheme in ('mrope', 'rope1d', 'pype', 'vista', 'v2pe'):
        with pytest.raises(ValueError, match=rf"scheme '{scheme}' cannot lay out tiled images .* use one of "
                                             rf"\['rope_dhr'\]") as e:
            get_position_ids(scheme, ids, grids, image_tiles=tiles, image_token_id=7)
        assert '\n' not in str(e.value)
    assert takers == ['rope_dhr']
    # 1x1 tiles are plain images for every scheme
    plain, _ = get_position_ids('mrope', ids[:, :5], grids, image_tiles=torch.tensor([[1, 1]]), image_token_id=7)
    assert torch.equal(plain, get_position_ids('mrope', ids[:, :5], grids, image_token_id=7)[0])
    with pytest.raises(ValueError, match=r"max_tiles=4\); fix: use one of \['rope_dhr'\]"):
        create_video_llm('pe_vlm_tiny_mrope', max_tiles=4, **TINY)
    mrope = create_video_llm('pe_vlm_tiny_mrope', **TINY)
    with pytest.raises(ValueError, match=r"use one of \['rope_dhr'\]"):
        mrope.prepare_image(_image(32, 64), max_tiles=2)
    _, seg = model.prepare_image(_image(32, 64))
    with pytest.raises(ValueError, match=r"scheme 'mrope' cannot lay out tiled images .*\['rope_dhr'\]"):
        mrope.prompt([seg, 'q'])
    with pytest.raises(ValueError, match=r'image_tiles must be \(1, 2\)'):
        get_position_ids('rope_dhr', ids, grids, image_tiles=torch.tensor([[2, 1], [1, 1]]), image_token_id=7)


def test_rope_dhr_models_are_registered_and_hf_refuses_the_others():
    assert {'pe_vlm_tiny_rope_dhr', 'pe_vlm_small_rope_dhr'} <= set(list_video_llms())
    from zoo.hf import patch_rope_index
    for scheme in ('rope_dhr', 'pype', 'vista', 'cope', 'cope_rope'):
        with pytest.raises(ValueError, match=f"'{scheme}' cannot be patched into a Hugging Face model: ") as e:
            patch_rope_index(torch.nn.Linear(2, 2), scheme)
        assert '\n' not in str(e.value)


# ---- the model ----------------------------------------------------------------------------------------------------

def _samples(model):
    """Three prompts: a wide image (2x1 tiles), a square one (2x2 at 64 px), an untiled small one, each with text."""
    out = []
    for k, (h, w) in enumerate([(32, 70), (64, 64), (32, 32)]):
        pix, seg = model.prepare_image(_image(h, w, k))
        out.append((pix, model.prompt(['look:' * (k + 1), seg, 'which tile holds the circle?'])))
    return out


def test_prepare_image_and_prompt_layout(model):
    (p0, s0), (p1, s1), (p2, s2) = _samples(model)
    assert p0.shape == (3, 3, 32, 32) and s0.image_tiles.tolist() == [[2, 1]]
    assert p1.shape == (5, 3, 32, 32) and s1.image_tiles.tolist() == [[2, 2]]
    assert p2.shape == (3, 32, 32) and s2.image_tiles is None
    tok = model.tokenizer
    assert int((s1.input_ids == tok.image_id).sum()) == 5 * 4      # 4 tiles + thumbnail, 2x2 merged tokens each
    b = model.collate([s0, s1, s2])
    assert b['image_tiles'].tolist() == [[2, 1], [2, 2], [1, 1]]
    assert b['image_grid_thw'].tolist() == [[1, 4, 4]] * 3


def test_tile_tokens_carry_their_crops_features(model):
    """The embedding at a tiled image's slots is the projector of each crop's tower features, crop order then
    thumbnail (the tower sees every crop as an image of its own)."""
    pix, seg = model.prepare_image(_image(32, 70))
    p = model.prompt([seg])
    b = model.collate([p])
    with torch.no_grad():
        x = model.embed(b['input_ids'], images=[pix], image_grid_thw=b['image_grid_thw'],
                        image_tiles=b['image_tiles'])
        want = torch.cat([model.projector(f) for f in model.tower(list(pix))])
    slots = b['input_ids'][0] == model.tokenizer.image_id
    torch.testing.assert_close(x[0, slots], want)


def test_a_shape_moved_between_tiles_changes_those_tiles_only(model):
    """A red circle in the top-left, then the top-right tile of a 64 px 2x2 image on flat grey: the embeddings differ
    on every token of tiles 0 and 1 and on the thumbnail's top row only (2 x 2 merged tokens per crop)."""
    from zoo.datasets._synth import COLORS, paint, shape_mask
    embs = []
    for t in range(2):
        img = torch.full((64, 64, 3), 128, dtype=torch.uint8).numpy()
        paint(img, shape_mask('circle', 64, 32 * t + 16, 16, 4), COLORS['red'])
        pix, seg = model.prepare_image(torch.from_numpy(img))
        b = model.collate([model.prompt([seg])])
        with torch.no_grad():
            x = model.embed(b['input_ids'], images=[pix], image_grid_thw=b['image_grid_thw'],
                            image_tiles=b['image_tiles'])
        embs.append(x[0, b['input_ids'][0] == model.tokenizer.image_id])
    changed = ((embs[0] - embs[1]).norm(dim=-1) > 1e-3).view(5, 4)   # crops: 4 tiles, then the thumbnail
    assert changed[:2].all() and not changed[2:4].any()
    assert changed[4].tolist() == [True, True, False, False]


def test_batch_of_different_tile_grids_equals_each_alone(model):
    samples = _samples(model)
    pix = [p for p, _ in samples]
    b = model.collate([s for _, s in samples], 'right')
    with torch.no_grad():
        out = model(b['input_ids'], b['attention_mask'], images=pix, image_grid_thw=b['image_grid_thw'],
                    image_tiles=b['image_tiles'])
        for r, (p, s) in enumerate(samples):
            one = model.collate([s])
            alone = model(one['input_ids'], images=[p], image_grid_thw=one['image_grid_thw'],
                          image_tiles=one['image_tiles'])
            n = one['input_ids'].shape[1]
            assert torch.equal(out.position_ids[:, r, :n], alone.position_ids[:, 0])
            torch.testing.assert_close(out.logits[r, :n], alone.logits[0], atol=1e-4, rtol=1e-4)


def test_per_row_options_and_two_tiled_images_in_one_prompt(model):
    samples = _samples(model)
    b = model.collate([s for _, s in samples])
    args = (b['input_ids'], b['attention_mask'], b['image_grid_thw'])
    one, _ = model.position_ids(*args, image_tiles=b['image_tiles'])
    per_row, _ = model.position_ids(*args, scheme_options=[{}, {}, {}], image_tiles=b['image_tiles'])
    assert torch.equal(one, per_row)
    # two tiled images share the budget (max_tiles // 2 each); the second starts after the first's thumbnail positions
    (p1, s1), (p2, s2) = [model.prepare_image(_image(h, w, h), max_tiles=model.max_tiles // 2)
                          for h, w in ((32, 64), (96, 32))]
    assert (s1['tiles'], s2['tiles']) == ((2, 1), (1, 3))
    p = model.prompt([s1, 'and', s2, 'which?'])
    b = model.collate([p])
    pos, _ = model.position_ids(b['input_ids'], image_grid_thw=b['image_grid_thw'], image_tiles=b['image_tiles'])
    img = (b['input_ids'][0] == model.tokenizer.image_id).nonzero().flatten()
    n1 = (2 * 1 + 1) * 4                                        # the first image's tokens: 2 tiles + thumbnail
    start1, start2 = int(pos[0, 0, img[0]]), int(pos[0, 0, img[n1]])
    between = int(img[n1] - img[n1 - 1]) - 1                    # <|vision_end|> 'and' <|vision_start|>
    assert start2 == start1 + 4 + between                       # 4 = the thumbnail's 2 x 2 merged tokens
    out = model(b['input_ids'], images=[p1, p2], image_grid_thw=b['image_grid_thw'], image_tiles=b['image_tiles'])
    assert torch.equal(out.position_ids, pos)


def test_generate_kv_cache_positions_and_left_padding(model):
    samples = _samples(model)
    pix = [p for p, _ in samples]
    b = model.collate([s for _, s in samples], 'left')
    kw = dict(attention_mask=b['attention_mask'], images=pix, image_grid_thw=b['image_grid_thw'],
              image_tiles=b['image_tiles'], max_new_tokens=4, eos_token_id=-1, output_logits=True,
              output_positions=True)
    cached = model.generate(b['input_ids'], **kw)
    full = model.generate(b['input_ids'], use_cache=False, **kw)
    assert torch.equal(cached.new_tokens, full.new_tokens)
    torch.testing.assert_close(cached.logits, full.logits, atol=1e-4, rtol=1e-4)
    # decode positions are the positions of the whole sequence (generated tokens as text)
    mask = torch.cat([b['attention_mask'], torch.ones(3, 4, dtype=torch.int64)], 1)
    whole, _ = model.position_ids(cached.sequences, mask, b['image_grid_thw'], image_tiles=b['image_tiles'])
    real = mask.bool()
    assert torch.equal(cached.position_ids[:, real], whole[:, real])
    # the image occupies only its thumbnail's positions: the text after it continues from there
    for r, (p, s) in enumerate(samples):
        one = model.collate([s])
        alone = model.generate(one['input_ids'], images=[p], image_grid_thw=one['image_grid_thw'],
                               image_tiles=one['image_tiles'], max_new_tokens=4, eos_token_id=-1,
                               output_logits=True)
        assert torch.equal(alone.new_tokens[0], cached.new_tokens[r])
        torch.testing.assert_close(alone.logits[0], cached.logits[r], atol=1e-4, rtol=1e-4)
        assert torch.equal(alone.rope_deltas[0] + one['input_ids'].shape[1],
                           cached.rope_deltas[r] + b['input_ids'].shape[1])


def test_bad_tiled_inputs_are_one_line_errors(model):
    pix, seg = model.prepare_image(_image(32, 70))
    b = model.collate([model.prompt([seg])])
    with pytest.raises(ValueError, match=r'image #0 has tiles \[2, 1\], so 3 crop\(s\) .* shape \(3, 32, 32\)'):
        model(b['input_ids'], images=[pix[0]], image_grid_thw=b['image_grid_thw'], image_tiles=b['image_tiles'])
    with pytest.raises(ValueError, match=r'describes 4 merged image tokens .* input_ids hold 12'):
        model(b['input_ids'], images=[pix[0]], image_grid_thw=b['image_grid_thw'])   # tiles forgotten
    with pytest.raises(ValueError, match=r'tiles must be \[cols, rows\]'):
        model.prompt([dict(seg, tiles=(0, 2))])
