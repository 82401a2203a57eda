"""LOOPE (zoo/encodings/loope.py): the official golden file ``loope.pt`` through the public API, the Gilbert curve's
defining property on square and non-square grids, the learned offset and its resampling, and the official ArtPE
option's refusals."""
from __future__ import annotations

import pytest
import torch

import zoo  # noqa: F401  (registers the models)
from zoo.encodings import CheckpointMismatchError, Positions, create_pos_encoding
from zoo.encodings.loope import gilbert_index_grid, gilbert_order, hilbert_sincos
from zoo.models.vit import PEVisionTransformer

from conftest import load_golden


@pytest.fixture(scope='module')
def golden():
    return load_golden('seeds/loope.pt')


def _geom(dim=16, grid=(4, 4), prefix=1, cls=1):
    return dict(dim=dim, grid_size=grid, num_prefix_tokens=prefix, num_class_tokens=cls)


# ---------------------------------------------------------------------------------------------------- golden
def test_golden_gilbert_grids(golden):
    """The official gilbert_2d (width always the major axis) on square, wide, tall and odd grids."""
    assert len(golden['gilbert_2d']) == 7
    for key, case in golden['gilbert_2d'].items():
        h, w = case['height'], case['width']
        grid = gilbert_index_grid(h, w, major_axis='width')
        assert torch.equal(grid, case['index_grid']), key
        assert torch.equal(gilbert_order(h, w, major_axis='width'), case['visit_order_row_col']), key


def test_golden_hilbert_grid_is_gilbert_minus_one(golden):
    """generate_hilbert_grid (0-based classic Hilbert curve, N a power of 2) equals the Gilbert grid minus 1, with
    either major-axis rule (square grids)."""
    for key, grid in golden['generate_hilbert_grid'].items():
        n = grid.shape[0]
        for major in ('width', 'longer'):
            assert torch.equal(gilbert_index_grid(n, n, major) - 1, grid), (key, major)


def test_golden_hilbert_pos_embed_through_the_encoding(golden):
    """get_hilbert_pos_embed = loope with offset='none': class token at position 0, patch t at its Gilbert step."""
    for key, case in golden['get_hilbert_pos_embed'].items():
        n = int(round((case['seq_length'] - 1) ** 0.5))
        pe = create_pos_encoding('loope', _geom(case['embed_dim'], (n, n)), dict(offset='none', major_axis='width'))
        x = torch.zeros(1, case['seq_length'], case['embed_dim'])
        out = pe.embed(x, Positions.from_hw((n, n), 1, 1))
        torch.testing.assert_close(out, case['pos_embed'], atol=1e-6, rtol=0, msg=key)


def test_golden_art_pe_official_module(golden):
    """The official ArtPE (offset='official'): state dict loaded by its own names, image -> pos_embedding, both
    through the encoding and through the model's embed hook (the image handed over in Positions.images)."""
    case = golden['art_pe']
    cfg = case['config']
    side = cfg['img_size'] // cfg['patch_size']
    assert cfg['seq_length'] == 1 + side * side and cfg['eval']
    pe = create_pos_encoding('loope', _geom(cfg['hidden_dim'], (side, side)),
                             dict(offset='official', major_axis='width')).eval()
    pe.load_official_state_dict(case['state_dict_without_cord'])
    images = case['input'].float()
    torch.testing.assert_close(pe.art.offsets(images), case['art_conv_sigmoid_output'], atol=1e-6, rtol=0)
    torch.testing.assert_close(pe.official_pos_embed(images), case['pos_embedding'], atol=1e-6, rtol=0)

    model = PEVisionTransformer(img_size=cfg['img_size'], patch_size=16, embed_dim=cfg['hidden_dim'], depth=1,
                                num_heads=2, num_classes=3, pe='loope',
                                pe_kwargs=dict(offset='official', major_axis='width')).eval()
    model.pe.load_official_state_dict(case['state_dict_without_cord'])
    zeros = torch.zeros(images.shape[0], cfg['seq_length'], cfg['hidden_dim'])
    out = model.pe.embed(zeros, Positions((1, side, side), 1, 1, images=images))
    torch.testing.assert_close(out, case['pos_embedding'], atol=1e-6, rtol=0)
    with torch.no_grad():
        assert torch.isfinite(model(images)).all()


def test_official_state_dict_mismatch_names_the_keys(golden):
    sd = dict(golden['art_pe']['state_dict_without_cord'])
    pe = create_pos_encoding('loope', _geom(16, (4, 4)), dict(offset='official'))
    sd.pop('cls_token')
    sd['extra.weight'] = torch.zeros(1)
    with pytest.raises(CheckpointMismatchError, match=r"missing \['cls_token'\].*extra \['extra.weight'\]"):
        pe.load_official_state_dict(sd)
    with pytest.raises(ValueError, match="offset='official'"):
        create_pos_encoding('loope', _geom(16, (4, 4))).load_official_state_dict(sd)


# ------------------------------------------------------------------------------------------------- properties
@pytest.mark.parametrize('major', ['width', 'longer'])
def test_gilbert_order_is_a_hamiltonian_path_with_unit_steps(major):
    """Every grid up to 24 x 24, square and not: each cell visited once, consecutive cells adjacent. The one exception
    is forced by parity: a curve from (0, 0) to the far end of its major side cannot use unit steps only when the
    major side is odd and the minor side even (a 2-wide minor side excepted); there it takes exactly one diagonal
    step."""
    for h in range(1, 25):
        for w in range(1, 25):
            order = gilbert_order(h, w, major)
            assert order.shape == (h * w, 2)
            assert torch.equal(torch.sort(order[:, 0] * w + order[:, 1]).values, torch.arange(h * w)), (h, w)
            assert tuple(order[0].tolist()) == (0, 0)
            step = (order[1:] - order[:-1]).abs()
            non_unit = step.sum(-1) != 1
            major_len, minor_len = (h, w) if major == 'longer' and h > w else (w, h)
            forced = major_len % 2 == 1 and minor_len % 2 == 0
            assert int(non_unit.sum()) == 0 or (forced and int(non_unit.sum()) == 1), (h, w, major)
            assert bool((step[non_unit] == 1).all()), (h, w, major)  # a diagonal step, never a jump
            if h == w and h & (h - 1) == 0:
                assert not bool(non_unit.any())


def test_major_axis_only_changes_tall_grids():
    assert torch.equal(gilbert_index_grid(4, 6, 'width'), gilbert_index_grid(4, 6, 'longer'))
    assert not torch.equal(gilbert_index_grid(6, 4, 'width'), gilbert_index_grid(6, 4, 'longer'))
    # the reference rule on a tall grid is the wide grid's curve transposed
    assert torch.equal(gilbert_index_grid(6, 4, 'longer'), gilbert_index_grid(4, 6, 'width').t())


def test_sincos_interleaved():
    p = torch.tensor([0., 3.])
    pe = hilbert_sincos(p, 8)
    w = torch.exp(torch.arange(0, 8, 2).float() * (-torch.log(torch.tensor(10000.)) / 8))
    torch.testing.assert_close(pe[:, 0::2], torch.sin(p[:, None] * w))
    torch.testing.assert_close(pe[:, 1::2], torch.cos(p[:, None] * w))


def test_learned_offset_starts_at_the_gilbert_order_and_moves_positions_within_one_step():
    fixed = create_pos_encoding('loope', _geom(32, (4, 6)), dict(offset='none'))
    learned = create_pos_encoding('loope', _geom(32, (4, 6)))
    torch.testing.assert_close(learned.table((4, 6)), fixed.table((4, 6)))  # zero logits: offset 0
    with torch.no_grad():
        learned.offset_logit.normal_(0, 3)
    off = learned.offsets((4, 6))
    assert off.shape == (24,) and bool((off.abs() < 1).all()) and bool((off != 0).all())
    expect = hilbert_sincos(gilbert_index_grid(4, 6, 'longer').reshape(-1).float() + off, 32).unsqueeze(0)
    torch.testing.assert_close(learned.table((4, 6)), expect)


def test_offset_table_resampled_to_new_grids():
    pe = create_pos_encoding('loope', _geom(16, (4, 4))).eval()
    with torch.no_grad():
        pe.offset_logit.fill_(0.7)
    off = pe.offsets((6, 10))
    torch.testing.assert_close(off, torch.full((60,), 2 * torch.sigmoid(torch.tensor(0.7)).item() - 1))
    table = pe.table((6, 10))
    assert table.shape == (1, 60, 16) and torch.isfinite(table).all()
    steps = gilbert_index_grid(6, 10, 'longer').reshape(-1)
    assert int(steps.max()) == 60  # the new grid's own order: positions extrapolate to H*W
    before = pe.table((4, 4)).clone()
    pe.set_grid_size((4, 4))
    torch.testing.assert_close(pe.table((4, 4)), before)
    pe.set_grid_size((8, 8))
    assert pe.offset_logit.shape == (1, 64, 1)


def test_eval_table_cached_and_refreshed_after_an_update():
    pe = create_pos_encoding('loope', _geom(16, (4, 4))).eval()
    a = pe.table((4, 4))
    assert pe.table((4, 4)) is a
    with torch.no_grad():
        pe.offset_logit.add_(1.0)
    assert not torch.equal(pe.table((4, 4)), a)


def test_class_token_at_position_zero_and_registers_untouched():
    pe = create_pos_encoding('loope', _geom(16, (2, 2), prefix=3, cls=1))
    x = torch.zeros(1, 3 + 4, 16)
    out = pe.embed(x, Positions.from_hw((2, 2), 3, 1))
    torch.testing.assert_close(out[0, 0], hilbert_sincos(torch.zeros(1), 16)[0])
    assert bool((out[0, 1:3] == 0).all())


# ---------------------------------------------------------------------------------------------------- refusals
def test_official_option_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match='square grid'):
        create_pos_encoding('loope', _geom(16, (4, 6)), dict(offset='official'))
    with pytest.raises(ValueError, match='16-px patches'):
        create_pos_encoding('loope', _geom(16, (4, 4)), dict(offset='official', patch_size=8))
    pe = create_pos_encoding('loope', _geom(16, (4, 4)), dict(offset='official'))
    with pytest.raises(ValueError, match='training grid'):
        pe.embed(torch.zeros(1, 26, 16), Positions.from_hw((5, 5), 1, 1))
    with pytest.raises(ValueError, match='Positions.images'):
        pe.embed(torch.zeros(1, 17, 16), Positions.from_hw((4, 4), 1, 1))
    with pytest.raises(ValueError, match='64x64'):
        pe.official_pos_embed(torch.zeros(1, 3, 32, 32))
    with pytest.raises(ValueError, match='training grid'):
        pe.set_grid_size((5, 5))
    model = PEVisionTransformer(img_size=64, patch_size=16, embed_dim=16, depth=1, num_heads=2, num_classes=3,
                                pe='loope', pe_kwargs=dict(offset='official')).eval()
    with pytest.raises(Exception, match="cannot be traced or exported"):
        torch.export.export(model, (torch.zeros(1, 3, 64, 64),))


def test_bad_options_and_video_refused():
    with pytest.raises(ValueError, match='offset must be one of'):
        create_pos_encoding('loope', _geom(), dict(offset='conv'))
    with pytest.raises(ValueError, match='major_axis'):
        create_pos_encoding('loope', _geom(), dict(major_axis='height'))
    with pytest.raises(ValueError, match='even'):
        create_pos_encoding('loope', _geom(dim=15))
    with pytest.raises(ValueError, match='2D image encoding'):
        create_pos_encoding('loope', _geom(grid=(2, 4, 4)))
    pe = create_pos_encoding('loope', _geom())
    with pytest.raises(ValueError, match='2D encoding'):
        pe.embed(torch.zeros(1, 33, 16), Positions((2, 4, 4), 1, 1))


@pytest.mark.parametrize('hw', [(1, 1), (2, 4095), (8, 4095), (3, 700), (129, 200), (257, 257), (200, 129), (65, 33)])
@pytest.mark.parametrize('major', ['width', 'longer'])
def test_fixed_depth_descent_of_exported_graphs_equals_eager(hw, major):
    """Exported graphs (ONNX) run the descent for EXPORT_LEVELS levels without reading values; it places every cell
    of these grids (the deepest measured: sides near powers of two need about 2 log2(side) + 1 levels)."""
    from zoo.encodings.loope import EXPORT_LEVELS, _gilbert_steps
    h, w = hw
    eager = _gilbert_steps(h, w, major == 'longer', torch.device('cpu'))
    assert torch.equal(_gilbert_steps(h, w, major == 'longer', torch.device('cpu'), EXPORT_LEVELS), eager)


def test_export_holds_the_descent_and_reruns_at_other_sizes():
    from torch.export import Dim
    pe = create_pos_encoding('loope', dict(dim=32, grid_size=(4, 6)), {})

    class Grid(torch.nn.Module):
        def forward(self, x):
            h, w = x.shape[-2], x.shape[-1]
            return pe.table((h, w))

    prog = torch.export.export(Grid(), (torch.zeros(4, 6),), dynamic_shapes=({0: Dim('h', min=2, max=64),
                                                                               1: Dim('w', min=2, max=64)},))
    assert 'gilbert_index_grid' not in str(prog.graph)
    for h, w in [(4, 6), (7, 3), (16, 16), (5, 40)]:
        pe._cache.clear()
        torch.testing.assert_close(prog.module()(torch.zeros(h, w)), pe.table((h, w)), rtol=0, atol=1e-6)
