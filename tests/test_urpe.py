"""URPE (arXiv:2205.13401): the official 1D golden file (attention and 2-layer encoder) through the public encoding
and attention, the defining properties, options and errors."""
from __future__ import annotations

import pytest
import timm
import torch
import torch.nn.functional as F

from conftest import load_golden
from zoo.encodings import Positions, create_pos_encoding
from zoo.encodings.urpe import urpe_offset_index
from zoo.models.attention import Attention


@pytest.fixture(scope='module')
def golden():
    return load_golden('seeds/urpe.pt')


def _urpe(golden, depth=1, **kw):
    c = golden['config']
    return create_pos_encoding('urpe', dict(num_heads=c['heads'], depth=depth, grid_size=(1, c['max_seq_len'])), kw)


def _attention(golden, sd, prefix=''):
    c = golden['config']
    attn = Attention(c['dim'], c['heads'], qkv_bias=True).eval()
    w = torch.cat([sd[f'{prefix}{n}_proj.weight'] for n in 'qkv'])
    b = torch.cat([sd[f'{prefix}{n}_proj.bias'] for n in 'qkv'])
    attn.load_state_dict({'qkv.weight': w, 'qkv.bias': b, 'proj.weight': sd[f'{prefix}out_proj.weight'],
                          'proj.bias': sd[f'{prefix}out_proj.bias']})
    return attn


def _load_tables(pe, bias, mult):
    pe.load_state_dict({'bias_table': bias[None].clone(), 'mult_table': mult[None].clone()})


def test_tables_and_index_match_the_official_ones(golden):
    """The sequence is the grid (1, L): index j - i + L_max - 1, the official unique-mode buckets."""
    c = golden['config']
    idx = urpe_offset_index((1, c['seq_len']), (1, c['max_seq_len']))
    assert torch.equal(idx, golden['rp_bucket_ids']) and torch.equal(idx, golden['ur_bucket'])
    pe = _urpe(golden)
    _load_tables(pe, golden['rp_bias_weight'], golden['ur_rp_bias_weight'])
    bias, mult = pe.tables(Positions((1, 1, c['seq_len'])), torch.float32, torch.device('cpu'))
    torch.testing.assert_close(bias[0], golden['rel_pos_bias'], atol=0, rtol=0)
    torch.testing.assert_close(mult[0], golden['ur_multiplier'], atol=0, rtol=0)


@pytest.mark.parametrize('key,use_bias,use_mult', [('attn_out', True, True), ('attn_out_no_ur', True, False),
                                                   ('attn_out_ur_only', False, True),
                                                   ('attn_out_no_rpe', False, False)])
def test_official_attention(golden, key, use_bias, use_mult):
    c = golden['config']
    attn = _attention(golden, golden['state_dict'])
    pe = _urpe(golden)
    bias, mult = golden['rp_bias_weight'], golden['ur_rp_bias_weight']
    _load_tables(pe, bias if use_bias else torch.zeros_like(bias), mult if use_mult else torch.ones_like(mult))
    term = pe.attn_terms(Positions((1, 1, c['seq_len'])), torch.float32, torch.device('cpu'))[0]
    with torch.no_grad():
        out = attn(golden['input'].float(), term)
    torch.testing.assert_close(out, golden[key], atol=1e-5, rtol=0)
    assert (golden['attn_out'] - golden['attn_out_no_ur']).abs().max() > 0.5  # the multiplier matters


def test_official_encoder_shared_tables(golden):
    """The official 2-layer post-LN encoder: one pair of tables for every layer (shared_tables=True)."""
    c, sd = golden['config'], golden['encoder_state_dict']
    pe = _urpe(golden, depth=c['layers'], shared_tables=True)
    _load_tables(pe, sd['rp_bias.weight'], sd['ur_rp_bias.weight'])
    terms = pe.attn_terms(Positions((1, 1, c['seq_len'])), torch.float32, torch.device('cpu'))
    assert len(terms) == c['layers'] and terms[0] is terms[1]
    ln = lambda x, n: F.layer_norm(x, (c['dim'],), sd[f'{n}.weight'], sd[f'{n}.bias'], 1e-5)  # noqa: E731
    x = ln(golden['input'].float(), 'emb_layer_norm')
    with torch.no_grad():
        for i in range(c['layers']):
            p = f'layers.{i}.'
            x = ln(x + _attention(golden, sd, p + 'self_attn.')(x, terms[i]), p + 'self_attn_layer_norm')
            h = F.linear(F.gelu(F.linear(x, sd[p + 'fc1.weight'], sd[p + 'fc1.bias'])), sd[p + 'fc2.weight'],
                         sd[p + 'fc2.bias'])
            x = ln(x + h, p + 'final_layer_norm')
    torch.testing.assert_close(x, golden['encoder_out'], atol=1e-5, rtol=0)


def test_per_layer_tables_by_default():
    geo = dict(num_heads=2, depth=3, grid_size=(4, 4))
    pe = create_pos_encoding('urpe', geo)
    assert pe.bias_table.shape == (3, 49, 2) and pe.mult_table.shape == (3, 49, 2)
    terms = pe.attn_terms(Positions((1, 4, 4)), torch.float32, torch.device('cpu'))
    assert len(terms) == 3 and not torch.equal(terms[0].bias_table, terms[1].bias_table)
    assert create_pos_encoding('urpe', geo, dict(shared_tables=True)).bias_table.shape == (1, 49, 2)


def test_all_ones_multiplier_is_the_plain_relative_bias():
    """C = 1: URPE equals softmax(QK^T/sqrt(d) + B) V, computed by SDPA with the bias as attn_mask."""
    torch.manual_seed(0)
    pe = create_pos_encoding('urpe', dict(num_heads=2, depth=1, grid_size=(3, 4), num_prefix_tokens=1))
    assert torch.equal(pe.mult_table, torch.ones_like(pe.mult_table))  # the default start
    attn = Attention(16, 2, qkv_bias=True).eval()
    pos = Positions((1, 3, 4), num_prefix_tokens=1)
    term = pe.attn_terms(pos, torch.float32, torch.device('cpu'))[0]
    x = torch.randn(2, 13, 16)
    q, k, v = attn.qkv(x).reshape(2, 13, 3, 2, 8).permute(2, 0, 3, 1, 4)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=term.bias(q, k, attn.scale))
    want = attn.proj(o.transpose(1, 2).reshape(2, 13, 16))
    with torch.no_grad():
        torch.testing.assert_close(attn(x, term), want, atol=1e-5, rtol=1e-5)
        pe.mult_table.normal_()
        other = attn(x, pe.attn_terms(pos, torch.float32, torch.device('cpu'))[0])
    assert (other - want).abs().max() > 1e-2


def test_scores_depend_on_offsets_only():
    """Bias and multiplier of a pair depend on (drow, dcol) alone: shifting both tokens leaves them unchanged; prefix
    rows and columns get bias 0 and multiplier 1."""
    torch.manual_seed(0)
    pe = create_pos_encoding('urpe', dict(num_heads=2, depth=1, grid_size=(4, 5), num_prefix_tokens=1))
    with torch.no_grad():
        pe.mult_table.normal_()
    bias, mult = pe.tables(Positions((1, 4, 5), num_prefix_tokens=1), torch.float32, torch.device('cpu'))
    for t in (bias, mult):
        grid = t[0, :, 1:, 1:].reshape(2, 4, 5, 4, 5)  # (heads, r_q, c_q, r_k, c_k)
        torch.testing.assert_close(grid[:, 1:, 1:, 1:, 1:], grid[:, :-1, :-1, :-1, :-1], atol=0, rtol=0)
        assert len(torch.unique(t[0, 0, 1:, 1:])) == 7 * 9  # every offset its own entry
    assert torch.all(bias[0, :, 0] == 0) and torch.all(bias[0, :, :, 0] == 0)
    assert torch.all(mult[0, :, 0] == 1) and torch.all(mult[0, :, :, 0] == 1)


def test_new_grid_clamps_and_set_input_size_resamples():
    pe = create_pos_encoding('urpe', dict(num_heads=2, depth=1, grid_size=(3, 3)))
    idx = urpe_offset_index((5, 5), (3, 3))
    assert int(idx.max()) == 24 and int(idx.min()) == 0  # offsets beyond +-2 clamped to the table edge
    model = timm.create_model('pe_vit_tiny_patch16_urpe_224', img_size=32, patch_size=8, embed_dim=32, depth=2,
                              num_heads=2, num_classes=3, dynamic_img_size=True).eval()
    with torch.no_grad():
        y = model(torch.randn(1, 3, 48, 40))
        centre = model.pe.bias_table[:, 24].clone()  # offset (0, 0) of the 4x4 grid's 7x7 plane
        model.set_input_size((48, 48))
        assert model.pe.bias_table.shape == (2, 121, 2)
        torch.testing.assert_close(model.pe.bias_table[:, 60], centre)  # the zero offset stays the centre
        assert model(torch.randn(1, 3, 48, 48)).shape == y.shape
    assert pe.supported_extrapolations() == ('none',)


def test_video_refused():
    with pytest.raises(ValueError, match='urpe has no 3D form'):
        create_pos_encoding('urpe', dict(num_heads=2, depth=1, grid_size=(2, 4, 4)))
    pe = create_pos_encoding('urpe', dict(num_heads=2, depth=1, grid_size=(4, 4)))
    with pytest.raises(ValueError, match='2D encoding'):
        pe.attn_terms(Positions((2, 4, 4)), torch.float32, torch.device('cpu'))


def test_compiled_inference_gathers_tables_in_one_opaque_op():
    # inductor inlined the table gather into every consumer kernel (compiled 1.48x eager); in compiled inference the
    # gather is the op zoo::urpe_gather_rows, with the same numbers; training and export keep plain indexing
    model = timm.create_model('pe_vit_tiny_patch16_urpe_224', img_size=32, depth=2).eval()
    x = torch.randn(2, 3, 32, 32)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm.code)
        return gm.forward
    with torch.no_grad():
        want = model(x)
        got = torch.compile(model, backend=backend, fullgraph=True)(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert any('urpe_gather_rows' in g for g in graphs)
    graphs.clear()
    torch._dynamo.reset()
    torch.compile(model.train(), backend=backend, fullgraph=True)(x).sum().backward()  # gradients: plain indexing
    assert graphs and not any('urpe_gather_rows' in g for g in graphs)
    assert model.pe.bias_table.grad is not None
