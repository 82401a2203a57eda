"""Distance biases (alibi, kerple_log, kerple_power, fire): the official golden numbers through the public API (1D
sequence geometry, causal, ``convention='official'``), the paper's form against it, hand computations on 2D and 3D
grids, and the blocked attention path against the cached table."""
from __future__ import annotations

import math

import pytest
import torch

import zoo  # noqa: F401
from conftest import load_golden
from zoo.encodings import Positions, alibi_slopes, create_pos_encoding
from zoo.models.attention import Attention, KVCache, build_attn_mask

KINDS = ('alibi', 'kerple_log', 'kerple_power', 'fire')
CPU = torch.device('cpu')


@pytest.fixture(scope='module')
def golden():
    return load_golden('seeds/kerple_alibi.pt')  # ../shared/golden next to the repository; missing = a failure


def _seq(kind: str, heads: int, length: int, **kw):
    """A 1D sequence geometry of the encoding: the grid (1, 1, L)."""
    return create_pos_encoding(kind, dict(dim=heads * 8, num_heads=heads, depth=1, grid_size=(1, length)), kw)


def _bias(pe, length: int, causal: bool = True) -> torch.Tensor:
    term = pe.attn_terms(Positions((1, 1, length), is_causal=causal), torch.float32, CPU)[0]
    q = torch.zeros(1, pe.num_heads, length, 8)
    return term.bias(q, q, 8 ** -0.5)


# --------------------------------------------------------------------------------------------------------- ALiBi
def test_alibi_slopes_match_the_official_table(golden):
    a = golden['alibi']
    for n, want in a['slopes_table'].items():
        torch.testing.assert_close(alibi_slopes(int(n)), want.double(), atol=1e-12, rtol=0, msg=f'{n} heads')
        torch.testing.assert_close(alibi_slopes(int(n)), a['slopes_table_kerple_impl'][n].double(), atol=1e-12,
                                   rtol=0)
    torch.testing.assert_close(alibi_slopes(a['heads']).float(), a['slopes'], atol=0, rtol=0)


def test_alibi_official_convention_reproduces_the_future_mask(golden):
    """The released code's causal mask: +slope x key index below the diagonal, -inf above, laid out (B*H, L, L)."""
    a = golden['alibi']
    heads, length, batch = a['heads'], a['seq_len'], a['batch']
    pe = _seq('alibi', heads, length, convention='official')
    mask, _ = build_attn_mask(_bias(pe, length), None, True, length, length, torch.float32, CPU)
    got = mask.expand(batch, -1, -1, -1).reshape(batch * heads, length, length)
    torch.testing.assert_close(got, a['future_mask'], atol=1e-6, rtol=0)


def test_alibi_paper_form_equals_the_official_after_softmax(golden):
    """-slope (i - j) (the paper, bidirectional) differs from +slope j by a per-row constant: the same attention under
    the causal mask; its lower triangle is KERPLE's own ALiBi (``kerple_original_bias``), whose slopes KERPLE's forward
    clamps to >= 0.01 like its learned parameters (heads 6 and 7 of 8: 1/128 and 1/256 become 0.01)."""
    a = golden['alibi']
    heads, length = a['heads'], a['seq_len']
    paper, official = _seq('alibi', heads, length), _seq('alibi', heads, length, convention='official')
    bias = _bias(paper, length)[0]
    lower = torch.ones(length, length).tril().bool()
    slopes = alibi_slopes(heads).float()
    clamped = bias * (slopes.clamp(min=0.01) / slopes)[:, None, None]
    torch.testing.assert_close(clamped[:, lower], a['kerple_original_bias'][:, lower], atol=1e-6, rtol=0)
    assert (slopes < 0.01).sum() == 2
    torch.testing.assert_close(bias, bias.transpose(-1, -2))  # bidirectional: symmetric
    torch.manual_seed(0)
    attn = Attention(heads * 8, heads).eval()
    x = torch.randn(2, length, heads * 8)
    seq = Positions((1, 1, length), is_causal=True)
    with torch.no_grad():
        out_paper = attn(x, paper.attn_terms(seq, x.dtype, CPU)[0], is_causal=True)
        out_official = attn(x, official.attn_terms(seq, x.dtype, CPU)[0], is_causal=True)
        out_none = attn(x, None, is_causal=True)
    torch.testing.assert_close(out_paper, out_official, atol=1e-5, rtol=1e-5)
    assert (out_paper - out_none).abs().max() > 1e-2


# -------------------------------------------------------------------------------------------------------- KERPLE
@pytest.mark.parametrize('kind', ['kerple_log', 'kerple_power'])
def test_kerple_official_convention_reproduces_the_bias(kind, golden):
    """Official layout (H, 1, 1) through map_checkpoint('kerple'); also the unclamped parameters, clamped out of
    place at forward (the module's parameters stay as loaded)."""
    g = golden[kind]
    heads, length = g['heads'], g['seq_len']
    pe = _seq(kind, heads, length, convention='official')
    sd = {k: v.clone() for k, v in g['state_dict'].items()}
    pe.load_state_dict(pe.map_checkpoint('kerple', sd, ''), strict=True)
    assert not sd
    torch.testing.assert_close(_bias(pe, length)[0], g['bias'], atol=1e-6, rtol=0)
    with torch.no_grad():
        pe.bias_p.copy_(g['params_given']['bias_p'])
        pe.bias_a.copy_(g['params_given']['bias_a'])
    pe.eval()
    torch.testing.assert_close(_bias(pe, length)[0], g['bias'], atol=1e-6, rtol=0)
    torch.testing.assert_close(pe.params()[0], g['params_after_clamp']['bias_p'], atol=0, rtol=0)
    torch.testing.assert_close(pe.params()[1], g['params_after_clamp']['bias_a'], atol=0, rtol=0)
    assert torch.equal(pe.bias_p.detach(), g['params_given']['bias_p'])  # no in-place clamp


@pytest.mark.parametrize('kind', ['kerple_log', 'kerple_power'])
def test_kerple_decode_row_through_a_kv_cache(kind, golden):
    """Decoding one token with a KV cache uses the last row of the bias (the official ``bias_decode_row``)."""
    g = golden[kind]
    heads, length = g['heads'], g['seq_len']
    pe = _seq(kind, heads, length, convention='official')
    pe.load_state_dict(pe.map_checkpoint('kerple', dict(g['state_dict']), ''))
    term = pe.attn_terms(Positions((1, 1, length), is_causal=True), torch.float32, CPU)[0]
    row = term.bias(torch.zeros(1, heads, 1, 8), torch.zeros(1, heads, length, 8), 8 ** -0.5)
    torch.testing.assert_close(row[0], g['bias_decode_row'], atol=1e-6, rtol=0)
    torch.manual_seed(0)
    attn = Attention(heads * 8, heads).eval()
    x = torch.randn(1, length, heads * 8)
    with torch.no_grad():
        full = attn(x, term, is_causal=True)
        cache = KVCache(1)
        attn(x[:, :-1], pe.attn_terms(Positions((1, 1, length - 1), is_causal=True), x.dtype, CPU)[0],
             is_causal=True, kv_cache=cache)
        last = attn(x[:, -1:], term, is_causal=True, kv_cache=cache)
    torch.testing.assert_close(last, full[:, -1:], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('kind', ['kerple_log', 'kerple_power'])
def test_kerple_paper_form_is_the_bidirectional_official(kind, golden):
    """The paper's |i - j|: the official lower triangle, mirrored; the same causal attention."""
    g = golden[kind]
    heads, length = g['heads'], g['seq_len']
    pe = _seq(kind, heads, length)
    pe.load_state_dict(pe.map_checkpoint('kerple', dict(g['state_dict']), ''))
    bias = _bias(pe, length)[0]
    lower = torch.ones(length, length).tril().bool()
    torch.testing.assert_close(bias[:, lower], g['bias'][:, lower], atol=1e-6, rtol=0)
    torch.testing.assert_close(bias, bias.transpose(-1, -2))
    assert bias[:, ~lower].abs().min() > 0 and (g['bias'][:, ~lower] == 0).all()


# ------------------------------------------------------------------------------------ 2D / 3D hand computations
def _grid_pe(kind: str, grid, heads: int = 3, npt: int = 1, **kw):
    return create_pos_encoding(kind, dict(dim=heads * 8, num_heads=heads, depth=2, grid_size=grid,
                                          num_prefix_tokens=npt, num_class_tokens=npt), kw).eval()


def _coords(grid) -> torch.Tensor:
    t, h, w = grid
    return torch.stack(torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing='ij'),
                       -1).reshape(-1, 3).double()


@pytest.mark.parametrize('distance', ['euclidean', 'per_axis'])
@pytest.mark.parametrize('grid', [(1, 3, 4), (2, 3, 2)])
def test_alibi_and_kerple_on_grids_match_a_hand_computation(grid, distance):
    geometry = grid if grid[0] > 1 else grid[1:]
    c = _coords(grid)
    if grid[0] == 1:
        c = c[:, 1:]
    diff = (c[:, None] - c[None]).abs()
    d = diff.square().sum(-1, keepdim=True).sqrt() if distance == 'euclidean' else diff   # (N, N, K)
    slopes = alibi_slopes(3)
    want = {'alibi': -(slopes[:, None, None, None] * d).sum(-1)}
    for kind in ('kerple_log', 'kerple_power'):
        pe = _grid_pe(kind, geometry, distance=distance)
        p, a = (t.double()[:, None, None, None] for t in pe.params())
        want[kind] = -(p * torch.log1p(a * d)).sum(-1) if kind == 'kerple_log' else -(a * d ** p).sum(-1)
    for kind, table in want.items():
        pe = _grid_pe(kind, geometry, distance=distance)
        got = pe.attn_terms(Positions(grid, 1, 1), torch.float32, CPU)[0].table[0]
        assert (got[:, 0] == 0).all() and (got[:, :, 0] == 0).all(), f'{kind}: class token biased'
        torch.testing.assert_close(got[:, 1:, 1:].double(), table, atol=1e-5, rtol=1e-5, msg=kind)


def test_fire_matches_a_hand_computation_and_interpolates():
    pe = _grid_pe('fire', (3, 4), npt=0)
    with torch.no_grad():
        pe.c.fill_(0.7)
    c, thr, w1, b1, w2, b2 = (t.double() for t in pe.params())
    assert thr.item() == pytest.approx(math.hypot(2, 3))   # the training grid's largest distance
    for grid in [(1, 3, 4), (1, 6, 8)]:
        coords = _coords(grid)[:, 1:]
        d = (coords[:, None] - coords[None]).norm(dim=-1)
        reach = d.amax(1)
        u = torch.log1p(c * d) / torch.log1p(c * torch.maximum(reach, thr))[:, None]
        want = (torch.relu(u[..., None] * w1[:, 0] + b1) @ w2.T + b2).permute(2, 0, 1)
        got = pe.attn_terms(Positions(grid), torch.float32, CPU)[0].table[0]
        torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)
        assert u.max() <= 1 + 1e-9  # progressive interpolation: the MLP input stays in the trained range


def test_official_convention_is_for_sequences_only():
    with pytest.raises(ValueError, match="sequence geometry"):
        _grid_pe('alibi', (4, 4), convention='official')
    with pytest.raises(ValueError, match="only the paper's form"):
        _seq('fire', 2, 10, convention='official')
    pe = _seq('kerple_log', 2, 10, convention='official')
    with pytest.raises(ValueError, match=r'sequence grid \(1, 1, L\)'):
        pe.attn_terms(Positions((1, 3, 4)), torch.float32, CPU)


# ------------------------------------------------------------------------------------------------- blocked path
def _tiny(kind: str, grid, npt: int, **kw):
    from zoo.models.attention import Block
    torch.manual_seed(0)
    pe = _grid_pe(kind, grid if grid[0] > 1 else grid[1:], heads=2, npt=npt, **kw)
    blocks = torch.nn.ModuleList([Block(16, 2, qkv_bias=True) for _ in range(2)])
    return pe, blocks


def _run(pe, blocks, x, pos):
    terms = pe.attn_terms(pos, x.dtype, x.device)
    for blk, term in zip(blocks, terms):
        x = blk(x, term)
    return x


@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.parametrize('grid', [(1, 4, 5), (3, 3, 4)])
def test_blocked_bias_equals_the_cached_table(kind, grid):
    """block_above=0: the attention computes the bias per block of queries; outputs and gradients equal the cached
    table's, with a class token and with a per-sample token subset."""
    npt = 1
    pe, blocks = _tiny(kind, grid, npt)
    n = math.prod(grid)
    x = torch.randn(2, npt + n, 16, requires_grad=True)
    pos = Positions(grid, npt, npt)
    ref = _run(pe, blocks, x, pos)
    pe.block_above, pe.query_block = 0, 7
    terms = pe.attn_terms(pos, x.dtype, x.device)
    assert terms[0].query_block == 7 and not hasattr(terms[0], 'table')
    got = _run(pe, blocks, x, pos)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
    g_ref = torch.autograd.grad(ref.square().sum(), [x] + list(pe.parameters()))
    g_got = torch.autograd.grad(got.square().sum(), [x] + list(pe.parameters()))
    for a, b in zip(g_got, g_ref):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    keep = torch.stack([torch.tensor([0, 2, 5, 7, 11]), torch.tensor([1, 3, 4, 9, 10])])
    sub = Positions(grid, npt, npt, keep_indices=keep)
    xs = torch.randn(2, npt + 5, 16)
    with torch.no_grad():
        blocked = _run(pe, blocks, xs, sub)
        pe.block_above = None
        whole = _run(pe, blocks, xs, sub)
    torch.testing.assert_close(blocked, whole, atol=1e-5, rtol=1e-5)


def test_large_grids_take_the_blocked_path_by_default():
    pe = _grid_pe('alibi', (2, 4, 4), npt=0)
    small = pe.attn_terms(Positions((2, 4, 4)), torch.float32, CPU)[0]
    big = pe.attn_terms(Positions((16, 12, 12)), torch.float32, CPU)[0]
    assert small.query_block is None and big.query_block == pe.query_block
    assert big.coords.shape == (1, 16 * 12 * 12, 3)


# ------------------------------------------------------------------------------------------------------- models
@pytest.mark.parametrize('kind', KINDS)
def test_image_and_video_models_and_inflation(kind):
    """pe_vit_* / pe_video_vit_* models; an image checkpoint inflates into the video model (KERPLE's per-head and
    FIRE's parameters are the same tensors; the video adds the t axis to the distance)."""
    import timm
    from zoo.models import inflate_2d_to_3d
    small = dict(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=2, num_classes=5)
    torch.manual_seed(0)
    image = timm.create_model(f'pe_vit_tiny_patch16_{kind}_224', dynamic_img_size=True, **small).eval()
    with torch.no_grad():
        for p in image.pe.parameters():
            p.add_(torch.rand_like(p) * 0.1)
    video = timm.create_model(f'pe_video_vit_tiny_patch16_{kind}_224', num_frames=4, **small).eval()
    video.load_state_dict(inflate_2d_to_3d(image.state_dict(), video), strict=True)
    for name, p in image.pe.named_parameters():
        assert torch.equal(dict(video.pe.named_parameters())[name], p), name
    assert video.pe.video and not image.pe.video
    with torch.no_grad():
        out = video(torch.randn(2, 3, 4, 32, 32))
        img = image(torch.randn(2, 3, 48, 40))
    assert out.shape == (2, 5) and torch.isfinite(out).all() and torch.isfinite(img).all()
