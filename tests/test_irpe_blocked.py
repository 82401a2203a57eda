"""iRPE through the attention's blocked bias path (issue 24): at video sizes the bias is computed per block of queries
(``bias_rows``), never whole; the numbers equal the whole bias and the unblocked model."""
import pytest
import timm
import torch

import zoo  # noqa: F401
from zoo.encodings import Positions, create_pos_encoding

GEOM = dict(dim=64, num_heads=2, depth=2, num_prefix_tokens=1, num_class_tokens=1)


def _randomize(module, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if 'lookup_table' in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)


@pytest.mark.parametrize('kw', [dict(rpe_on='k'), dict(rpe_on='qk'), dict(rpe_on='qk', mode='bias', shared_head=False),
                                dict(rpe_on='qk', method='cross'), dict(rpe_on='q', method='euclidean')])
def test_bias_rows_equal_the_whole_bias(kw):
    pe = create_pos_encoding('irpe', dict(GEOM, grid_size=(5, 6)), dict(kw, block_above=10, query_block=7))
    _randomize(pe)
    pos = Positions.from_hw((5, 6), 1, 1)
    term = pe.attn_terms(pos, torch.float32, torch.device('cpu'))[0]
    assert term.query_block == 7
    q, k = torch.randn(2, 2, 31, 32), torch.randn(2, 2, 31, 32)
    whole = term.bias(q, k, 0.2)
    rows = torch.cat([term.bias_rows(q[:, :, s:s + 7], k, 0.2, s, min(31, s + 7)) for s in range(0, 31, 7)], dim=-2)
    whole, rows = torch.broadcast_tensors(whole, rows)
    torch.testing.assert_close(rows, whole, rtol=1e-6, atol=1e-6)  # a block's matmul may round differently


def test_small_grids_value_terms_and_tracing_do_not_block():
    pe = create_pos_encoding('irpe', dict(GEOM, grid_size=(5, 6)), dict(rpe_on='k'))  # default: above 1024 tokens
    pos = Positions.from_hw((5, 6), 1, 1)
    assert pe.attn_terms(pos, torch.float32, torch.device('cpu'))[0].query_block is None
    pe = create_pos_encoding('irpe', dict(GEOM, grid_size=(5, 6)), dict(rpe_on='kv', block_above=10))
    assert pe.attn_terms(pos, torch.float32, torch.device('cpu'))[0].query_block is None  # needs the weights
    with pytest.raises(ValueError, match='query_block must be >= 1'):
        create_pos_encoding('irpe', dict(GEOM, grid_size=(5, 6)), dict(query_block=0))


def _video(block_above):
    torch.manual_seed(0)
    model = timm.create_model('pe_video_vit_small_patch16_irpe_k_224', img_size=64, num_frames=8, depth=2,
                              num_classes=5, pe_kwargs=dict(block_above=block_above, query_block=20))
    _randomize(model)
    return model.eval()


def test_video_model_blocked_equals_whole_and_never_builds_the_whole_bias(monkeypatch):
    x = torch.randn(1, 3, 8, 64, 64)  # 4 x 4 x 4 = 64 tokens
    whole, blocked = _video(None), _video(32)
    blocked.load_state_dict(whole.state_dict())
    shapes = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, **kw):
        shapes.append(None if attn_mask is None else tuple(attn_mask.shape[-2:]))
        return sdpa(q, k, v, attn_mask=attn_mask, **kw)
    with torch.no_grad():
        want = whole(x)
        monkeypatch.setattr(torch.nn.functional, 'scaled_dot_product_attention', spy)
        got = blocked(x)
    assert shapes and set(shapes) == {(16, 64)}  # 64 queries in blocks of at most 20: 4 equal blocks of 16, per layer
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_video_blocked_empty_batch():
    # the per-block key count is explicit: an empty batch gives an empty result, as the whole path does
    with torch.no_grad():
        assert _video(32)(torch.zeros(0, 3, 8, 64, 64)).shape == (0, 5)
        assert _video(None)(torch.zeros(0, 3, 8, 64, 64)).shape == (0, 5)


def test_video_blocked_gradients_equal_whole():
    x = torch.randn(1, 3, 8, 64, 64)
    grads = []
    for block_above in (None, 32):
        model = _video(block_above).train()
        model(x).square().sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if 'lookup_table' in n})
    for n in grads[0]:
        torch.testing.assert_close(grads[1][n], grads[0][n], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('grid', [(4, 5, 6), (5, 7)])
def test_product_digits_blocks_equal_the_bucket_ids_and_never_build_them(grid):
    """Product method on keys without prefix tokens: the blocked path builds its rows from per-axis digits
    (ProductDigits); the rows equal the gather over the (L, L) ids bit for bit (float64), and the ids are never
    built."""
    pe = create_pos_encoding('irpe', dict(GEOM, grid_size=grid, num_prefix_tokens=0, num_class_tokens=0),
                             dict(rpe_on='k', block_above=10, query_block=7)).double()
    _randomize(pe)
    pos = Positions(grid if len(grid) == 3 else (1,) + grid, 0, 0)
    term = pe.attn_terms(pos, torch.float64, torch.device('cpu'))[0]
    assert term.digits is not None
    n = pos.num_tokens
    q, k = torch.randn(2, 2, n, 32, dtype=torch.float64), torch.randn(2, 2, n, 32, dtype=torch.float64)
    rows = torch.cat([term.bias_rows(q[:, :, s:s + 7], k, 0.2, s, min(n, s + 7)) for s in range(0, n, 7)], dim=-2)
    assert not any(key[0] != 'digits' for key in pe._buckets._store)  # no (L, L) ids
    term.digits = None  # the gather over the ids, block by block
    by_ids = torch.cat([term.bias_rows(q[:, :, s:s + 7], k, 0.2, s, min(n, s + 7)) for s in range(0, n, 7)], dim=-2)
    assert torch.equal(rows, by_ids)
    torch.testing.assert_close(rows, term.bias(q, k, 0.2).expand_as(rows), rtol=1e-12, atol=1e-12)


def test_product_digits_only_where_they_apply():
    video = dict(GEOM, grid_size=(2, 3, 4), num_prefix_tokens=0, num_class_tokens=0)
    pos = Positions((2, 3, 4), 0, 0)
    for kw in (dict(rpe_on='qk'), dict(rpe_on='k', method='cross'), dict(rpe_on='k', mode='bias')):
        pe = create_pos_encoding('irpe', video, dict(kw, block_above=10, query_block=7))
        assert pe.attn_terms(pos, torch.float32, torch.device('cpu'))[0].digits is None
    pe = create_pos_encoding('irpe', dict(GEOM, grid_size=(5, 6)), dict(rpe_on='k', block_above=10, query_block=7))
    assert pe.attn_terms(Positions.from_hw((5, 6), 1, 1), torch.float32, torch.device('cpu'))[0].digits is None
