"""iRPE (zoo/encodings/irpe.py, zoo/models/convert_irpe.py): golden equivalence with the official code, properties.

Golden files: ``../shared/golden/irpe_*.pt`` (see the README there), produced by the official DeiT-with-iRPE code.
"""
from __future__ import annotations

import math

import pytest
from conftest import load_golden
import torch
import timm

import zoo  # noqa: F401  (registers the models)
import zoo.encodings.irpe  # noqa: F401  (registers 'irpe')
from zoo.encodings import Positions, create_pos_encoding
from zoo.encodings.irpe import irpe_bucket_ids, irpe_coefficients, irpe_num_buckets, piecewise_index
from zoo.models.checkpoint_filters import CheckpointMismatchError
from zoo.models.convert_irpe import filter_deit_irpe, load_official_irpe_checkpoint

GEOM = dict(dim=64, num_heads=2, depth=2, grid_size=(14, 14), num_prefix_tokens=1, num_class_tokens=1)
TINY = dict(embed_dim=64, depth=2, num_heads=2, num_classes=10)


def _golden(name: str) -> dict:
    return load_golden(name)


def _randomize(module: torch.nn.Module, seed: int = 0, std: float = 0.5) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if 'lookup_table' in name:
                p.copy_(torch.randn(p.shape, generator=gen) * std)


def _tiny(rpe_on='k', seed=0, model_kwargs=None, **pe_kwargs) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = timm.create_model('pe_vit_tiny_patch16_irpe_k_224', pe_kwargs=dict(rpe_on=rpe_on, **pe_kwargs),
                              **TINY, **(model_kwargs or {}))
    _randomize(model, seed)
    return model.eval()


def _set_fused(model, fused: bool) -> None:
    for blk in model.blocks:
        blk.attn.fused_attn = fused


# ------------------------------------------------------------------------------------------------ golden: buckets
def test_piecewise_index_golden():
    g = _golden('irpe_buckets.pt')
    abg = irpe_coefficients(1.9)
    assert list(abg) == pytest.approx(g['piecewise_r1.9_alpha_beta_gamma'])
    x = g['piecewise_r1.9_input']
    assert torch.equal(piecewise_index(x, *abg), g['piecewise_r1.9_output'])
    assert torch.equal(piecewise_index(x.float(), *abg), g['piecewise_r1.9_output_from_float_input'])


def test_bucket_ids_7x9_golden():
    g = _golden('irpe_buckets.pt')
    assert torch.equal(irpe_bucket_ids('product', 7, 9, ratio=1.9, skip=1), g['bucket_ids_7x9_product_r1.9'])
    assert irpe_num_buckets('product', 1.9, skip=1) == g['num_buckets_7x9_product_r1.9'] == 50
    assert torch.equal(irpe_bucket_ids('euclidean', 7, 9, ratio=20, skip=1), g['bucket_ids_7x9_euc_r20'])
    assert irpe_num_buckets('euclidean', 20, skip=1) == g['num_buckets_7x9_euc_r20'] == 82


def test_bucket_ids_14x14_golden_through_the_module():
    g = _golden('irpe_product_ctx_k.pt')
    pe = create_pos_encoding('irpe', GEOM, dict(ratio=1.9, method='product', skip=1))
    ids = pe.bucket_ids((14, 14), torch.device('cpu'))['product']
    assert torch.equal(ids, g['bucket_ids'])
    assert pe.num_buckets == g['num_buckets'] == 50
    assert pe.bucket_ids((14, 14), torch.device('cpu'))['product'] is ids  # cached
    assert not any('bucket' in k for k in pe.state_dict())


# ------------------------------------------------------------------------------------------------ golden: models
@pytest.mark.parametrize('case', ['k', 'qkv'])
def test_golden_logits_through_pretrained_path(case, tmp_path):
    g = _golden(f'irpe_product_ctx_{case}.pt')
    c = g['config']
    path = tmp_path / f'deit_irpe_{case}.pth'
    torch.save(g['state_dict'], path)
    model = timm.create_model(
        'pe_vit_tiny_patch16_irpe_k_224', pretrained=True,
        pretrained_cfg_overlay=dict(file=str(path), num_classes=c['num_classes']),
        embed_dim=c['embed_dim'], depth=c['depth'], num_heads=c['num_heads'], num_classes=c['num_classes'],
        pe_kwargs=dict(ratio=c['ratio'], method=c['method'], mode=c['mode'], shared_head=c['shared_head'],
                       skip=c['skip'], rpe_on=c['rpe_on'])).eval()
    x = g['input'].float()
    with torch.no_grad():
        out = model(x)
        assert (out - g['logits']).abs().max().item() <= 1e-4
        _set_fused(model, False)
        assert (model(x) - g['logits']).abs().max().item() <= 1e-4
    # the positional terms matter far more than the tolerance
    assert (g['logits'] - g['logits_without_rpe']).abs().max().item() > 1e-2


def test_filter_reports_mismatched_sides():
    g = _golden('irpe_product_ctx_qkv.pt')
    model = timm.create_model('pe_vit_tiny_patch16_irpe_k_224', embed_dim=128, depth=2, num_heads=2, num_classes=10)
    with pytest.raises(CheckpointMismatchError, match="rpe_on='qkv'"):
        filter_deit_irpe(g['state_dict'], model)


def test_encoding_maps_the_official_keys_itself():
    """``IRPE.map_checkpoint``: the DeiT-iRPE tables and APE leave the checkpoint under the encoding's names (the
    filter only detects the layout); DeiT's backbone keys stay for the backbone."""
    pe = create_pos_encoding('irpe', dict(GEOM, grid_size=(4, 4)), dict(rpe_on='qk'))
    sd = {'blocks.0.norm1.weight': torch.ones(64), 'pos_embed': torch.randn(1, 1 + 9, 64),
          **{f'blocks.{i}.attn.rpe_{s}.lookup_table_weight': torch.randn(1, 32, 50) for i in range(2) for s in 'qk'}}
    out = pe.map_checkpoint('deit_irpe', sd, 'pe.')
    assert list(sd) == ['blocks.0.norm1.weight']
    assert sorted(out) == ['pe.ape.pos_embed'] + [f'pe.layers.{i}.rpe_{s}.lookup_table_weight' for i in range(2)
                                                   for s in 'kq']
    assert out['pe.ape.pos_embed'].shape == (1, 17, 64)  # the 3 x 3 table resampled to the encoding's 4 x 4 grid
    with pytest.raises(CheckpointMismatchError, match="iRPE on 'k' but the model on 'qk'"):
        pe.map_checkpoint('deit_irpe', {'blocks.0.attn.rpe_k.lookup_table_weight': torch.zeros(1, 32, 50)})
    no_ape = create_pos_encoding('irpe', GEOM, dict(ape=False))
    with pytest.raises(CheckpointMismatchError, match='learned APE .* but the model has none'):
        no_ape.map_checkpoint('deit_irpe', {'pos_embed': torch.zeros(1, 197, 64)})
    with pytest.raises(ValueError, match="unknown checkpoint layout 'deit'"):
        pe.map_checkpoint('deit', {})


class _Opaque:  # not allow-listed by torch.load(weights_only=True)
    pass


def test_load_official_checkpoint(tmp_path):
    sd = {'cls_token': torch.zeros(1, 1, 4), 'blocks.0.attn.rpe_k.lookup_table_weight': torch.zeros(1, 2, 50)}
    torch.save({'model': sd, 'epoch': 3}, tmp_path / 'ok.pth')
    loaded = load_official_irpe_checkpoint(tmp_path / 'ok.pth')
    assert set(loaded) == set(sd)
    torch.save({'model': sd, 'args': _Opaque()}, tmp_path / 'bad.pth')
    with pytest.raises(RuntimeError, match='weights_only=True'):
        load_official_irpe_checkpoint(tmp_path / 'bad.pth')


# ------------------------------------------------------------------------------------------------ properties
def _g_ref(x: float, ratio: float) -> int:
    """Independent scalar piecewise function (float64), for small offsets away from rounding ties."""
    alpha, beta, gamma = ratio, 2 * ratio, 8 * ratio
    if abs(x) <= alpha:
        return round(x)
    mag = min(round(alpha + math.log(abs(x) / alpha) / math.log(gamma / alpha) * (beta - alpha)), beta)
    return int(math.copysign(mag, x))


@pytest.mark.parametrize('method', ['product', 'euclidean', 'quant', 'cross_rows', 'cross_cols'])
def test_non_square_bucket_ids_match_scalar_reference(method):
    h, w, ratio, skip = 5, 8, 1.9, 1
    ids = irpe_bucket_ids(method, h, w, ratio=ratio, skip=skip)
    bi = int(2 * ratio)
    n = skip + h * w
    assert ids.shape == (n, n)
    extra = irpe_num_buckets(method, ratio, skip) - 1
    assert (ids[:skip] == extra).all() and (ids[:, :skip] == extra).all()
    for i in range(h * w):
        ri, ci = divmod(i, w)  # row-major on a W-wide grid, never sqrt(L)
        for j in range(h * w):
            rj, cj = divmod(j, w)
            dr, dc = ri - rj, ci - cj  # query minus key
            if method == 'product':
                want = (_g_ref(dr, ratio) + bi) * (2 * bi + 1) + _g_ref(dc, ratio) + bi
            elif method == 'euclidean':
                want = _g_ref(float(round(math.sqrt(dr * dr + dc * dc))), ratio) + bi
            elif method == 'quant':
                want = _g_ref(dr * dr + dc * dc, ratio) + bi
            else:
                want = _g_ref(dr if method == 'cross_rows' else dc, ratio) + bi
            assert ids[skip + i, skip + j].item() == want, (method, i, j)


def test_product_saturates_at_offset_4():
    ids = irpe_bucket_ids('product', 24, 24, ratio=1.9)
    rows = torch.arange(24).repeat_interleave(24)
    dr = (rows[:, None] - rows[None, :])
    r_comp = ids // 7 - 3
    assert (r_comp[dr >= 4] == 3).all() and (r_comp[dr <= -4] == -3).all()
    assert set(ids.unique().tolist()) == set(irpe_bucket_ids('product', 14, 14, ratio=1.9).unique().tolist())
    assert ids.max().item() == 48 and ids.min().item() == 0


def _naive_terms(pe, layer_idx, q, k, attn, ids, scale):
    """Per-pair reference (materialises (L, L) embeddings per head; small sizes only)."""
    layer = pe.layers[layer_idx]
    logits, value = 0., 0.
    for side in 'qkv':
        for table in layer.tables(side):
            bid = ids[table.part]
            if side == 'v':
                emb = table.lookup_table_weight[:, bid]  # (H', L, L, D)
                value = value + torch.einsum('bhij,hijd->bhid', attn, emb.expand(q.shape[1], -1, -1, -1))
            elif table.mode == 'bias':
                tb = table.lookup_table_bias[:, bid if side == 'k' else bid.t()]
                logits = logits + tb.unsqueeze(0)
            else:
                emb = table.lookup_table_weight[:, :, bid].expand(q.shape[1], -1, -1, -1)  # (H, D, L, L)
                if side == 'k':
                    logits = logits + torch.einsum('bhid,hdij->bhij', q * scale, emb)
                else:
                    logits = logits + torch.einsum('bhjd,hdji->bhij', k * scale, emb)
    return logits, value


@pytest.mark.parametrize('method,mode,rpe_on,shared', [
    ('product', 'contextual', 'qkv', True),
    ('product', 'contextual', 'qkv', False),
    ('euclidean', 'contextual', 'qk', True),
    ('quant', 'contextual', 'kv', False),
    ('cross', 'contextual', 'qkv', True),
    ('product', 'bias', 'qk', False),
    ('cross', 'bias', 'k', True),
])
def test_terms_match_naive_per_pair_reference(method, mode, rpe_on, shared):
    h, w = 3, 5  # non-square
    pe = create_pos_encoding('irpe', dict(GEOM, grid_size=(h, w)),
                             dict(method=method, mode=mode, rpe_on=rpe_on, shared_head=shared, ratio=1.9))
    _randomize(pe, 1)
    pos = Positions.from_hw((h, w), 1, 1)
    terms = pe.attn_terms(pos, torch.float32, torch.device('cpu'))
    gen = torch.Generator().manual_seed(2)
    q, k = (torch.randn(2, 2, pos.num_tokens, 32, generator=gen) for _ in range(2))
    attn = torch.softmax(torch.randn(2, 2, pos.num_tokens, pos.num_tokens, generator=gen), -1)
    scale = 32 ** -0.5
    ids = pe.bucket_ids((h, w), torch.device('cpu'))
    want_logits, want_value = _naive_terms(pe, 0, q, k, attn, ids, scale)
    got = terms[0].bias(q, k, scale)
    if 'q' in rpe_on or 'k' in rpe_on:
        got, want = torch.broadcast_tensors(got, want_logits)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert terms[0].needs_attn_weights == ('v' in rpe_on)
    if 'v' in rpe_on:
        torch.testing.assert_close(terms[0].value_term(attn), want_value, atol=1e-5, rtol=1e-5)
    else:
        assert terms[0].value_term(attn) is None


def test_q_side_uses_transposed_buckets():
    """A q-only bias table that is nonzero at one bucket: the logit lands at [key-side owner transposed]."""
    pe = create_pos_encoding('irpe', dict(GEOM, grid_size=(2, 3)), dict(mode='bias', rpe_on='q', ratio=1.9))
    ids = pe.bucket_ids((2, 3), torch.device('cpu'))['product']
    target = ids[1 + 0, 1 + 4].item()  # offset (0,0)-(1,1) = (-1,-1)
    with torch.no_grad():
        pe.layers[0].rpe_q.lookup_table_bias[0, target] = 1.
    term = pe.attn_terms(Positions.from_hw((2, 3), 1, 1), torch.float32, torch.device('cpu'))[0]
    bias = term.bias(torch.zeros(1, 2, 7, 32), torch.zeros(1, 2, 7, 32), 1.)[0, 0]
    assert bias[1 + 4, 1 + 0] == 1. and bias[1 + 0, 1 + 4] == 0.  # query 4, key 0 reads bucket(0, 4)


# ------------------------------------------------------------------------------------------------ model level
def test_resolution_change_keeps_parameters():
    model = _tiny('qkv', model_kwargs=dict(dynamic_img_size=True))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert all('lookup_table' in k or k == 'pe.ape.pos_embed' for k in before if k.startswith('pe.'))  # no buffers
    with torch.no_grad():
        for size in [(224, 224), (384, 384), (224, 320)]:
            out = model(torch.randn(1, 3, *size))
            assert out.shape == (1, 10) and torch.isfinite(out).all()
            feats = model.forward_features(torch.randn(1, 3, *size))
            assert feats.shape[1] == 1 + (size[0] // 16) * (size[1] // 16)
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    model.set_input_size((384, 384))  # APE resampled, tables untouched
    assert model.pe.ape.pos_embed.shape[1] == 1 + 24 * 24
    assert torch.isfinite(model(torch.randn(1, 3, 384, 384))).all()


@pytest.mark.parametrize('pe_kwargs', [dict(rpe_on='k'), dict(rpe_on='qk', mode='bias'),
                                       dict(rpe_on='k', method='cross')])
def test_fused_matches_explicit(pe_kwargs):
    model = _tiny(**pe_kwargs)
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        _set_fused(model, True)
        fused = model(x)
        _set_fused(model, False)
        explicit = model(x)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('rpe_on', ['k', 'qkv'])  # fused (attn_mask) and explicit paths
def test_gradients_reach_every_table(rpe_on):
    model = _tiny(rpe_on)
    model.train()
    model(torch.randn(2, 3, 224, 224)).sum().backward()
    for name, p in model.named_parameters():
        if name.startswith('pe.'):
            assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert {n for n, _ in model.named_parameters() if n.startswith('pe.')} <= model.no_weight_decay()


@pytest.mark.parametrize('rpe_on', ['k', 'qkv'])
def test_low_precision(rpe_on):
    model = _tiny(rpe_on)
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        ref = model(x)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            bf16 = model(x)
        half = model.half()(x.half())
    assert torch.isfinite(bf16).all() and torch.isfinite(half).all()
    scale = ref.abs().max().item()
    assert (bf16.float() - ref).abs().max().item() < 0.1 * scale + 0.05
    assert (half.float() - ref).abs().max().item() < 0.02 * scale + 0.01


# ------------------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize('kwargs,match', [
    (dict(method='polar'), 'unknown iRPE method'),
    (dict(mode='additive'), 'unknown iRPE mode'),
    (dict(mode='bias', rpe_on='kv'), 'bias mode is not defined on values'),
    (dict(rpe_on='kx'), 'rpe_on'),
])
def test_bad_config_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        create_pos_encoding('irpe', GEOM, kwargs)


def test_token_count_mismatch_raises():
    pe = create_pos_encoding('irpe', GEOM, dict(skip=1, rpe_on='kv'))
    with pytest.raises(ValueError, match='skip=2'):
        pe.attn_terms(Positions.from_hw((14, 14), 2, 1), torch.float32, torch.device('cpu'))
    term = pe.attn_terms(Positions.from_hw((7, 9), 1, 1), torch.float32, torch.device('cpu'))[0]
    q = torch.randn(1, 2, 1 + 8 * 8, 32)  # 65 tokens, but 7x9 + 1 = 64
    with pytest.raises(ValueError, match=r'H\*W \+ skip'):
        term.bias(q, q, 1.)
    with pytest.raises(ValueError, match=r'H\*W \+ skip'):
        term.value_term(torch.rand(1, 2, 65, 65))
