"""CoPE (contextual position encoding) in the video-LLM decoder: the official golden file (facebookresearch/RAM
``projects/cope``, ``seeds/cope.pt``) through the public API, and the defining properties (causal counting, the paper's
undivided form as default, KV-cache exactness, padding, alone and on top of RoPE)."""
import pytest
import torch

from conftest import load_golden
from zoo.encodings import Positions, create_pos_encoding
from zoo.encodings.multimodal.cope import cope_bias, cope_gates, cope_position_logits, cope_positions
from zoo.models.attention import Attention

VARIANTS = ['npos8_default', 'npos3_clamped', 'npos8_nodiv']


@pytest.fixture(scope='module')
def gold():
    return load_golden('seeds/cope.pt')


@pytest.mark.parametrize('name', VARIANTS)
def test_official_module(gold, name):
    """ContextPosSelfAttn alone: gates, positions, logits, attention and output from q, k, v."""
    v = gold['variants'][name]
    cfg, m = v['config'], v['module']
    q, k, val = m['query'].float(), m['key'].float(), m['val'].float()
    mask = m['attn_mask'].bool()
    table = m['state_dict']['pos_emb'][0]
    torch.testing.assert_close(cope_gates(q, k), m['gates_before_mask'], rtol=0, atol=1e-6)
    pos = cope_positions(cope_gates(q, k, mask), cfg['npos'])
    torch.testing.assert_close(pos, m['positions'], rtol=0, atol=1e-6)
    logits = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5 + cope_bias(q, k, table, mask, divide=not cfg['cope_nodiv'])
    logits = logits.masked_fill(~mask, float('-inf'))
    torch.testing.assert_close(logits, m['attn_logits'], rtol=0, atol=2e-6)
    attn = logits.softmax(-1)
    torch.testing.assert_close(attn, m['attn'], rtol=0, atol=1e-6)
    torch.testing.assert_close(attn @ val, m['out'], rtol=0, atol=1e-6)
    torch.testing.assert_close(cope_position_logits(q, table, pos).shape, pos.shape)


@pytest.mark.parametrize('name', VARIANTS)
def test_official_layer_through_the_encoding(gold, name):
    """MultiHeadAttn = the zoo Attention (fused qkv, SDPA) with the cope encoding's term."""
    v = gold['variants'][name]
    cfg, lay = v['config'], v['layer']
    sd = lay['state_dict']
    att = Attention(cfg['hid_sz'], cfg['nheads'], qkv_bias=True).eval()
    att.qkv.weight.data = torch.cat([sd[f'proj_{n}.weight'] for n in ('query', 'key', 'val')])
    att.qkv.bias.data = torch.cat([sd[f'proj_{n}.bias'] for n in ('query', 'key', 'val')])
    att.proj.weight.data, att.proj.bias.data = sd['proj_out.weight'], sd['proj_out.bias']
    pe = create_pos_encoding('multimodal_rope', dict(dim=cfg['hid_sz'], num_heads=cfg['nheads'], depth=1),
                             dict(scheme='cope', scheme_options=dict(npos=cfg['npos'], divide=not cfg['cope_nodiv'])))
    with torch.no_grad():
        pe.cope_pos_emb.copy_(sd['attn.pos_emb'])
    x = lay['input'].float()
    ids = torch.arange(x.shape[1]).expand(1, x.shape[0], -1)
    term = pe.attn_terms(Positions(None, ids=ids, is_causal=True), x.dtype, x.device)[0]
    with torch.no_grad():
        out = att(x, term, None, True)
    torch.testing.assert_close(out, lay['out'], rtol=0, atol=2e-6)


def test_default_is_the_paper_form():
    """Without ``divide`` the position term is added to the scaled q.k (paper, Eq. 5); with it, divided by sqrt(d)."""
    torch.manual_seed(0)
    q, k, table = torch.randn(1, 4, 8), torch.randn(1, 4, 8), torch.randn(8, 5)
    allowed = torch.ones(4, 4, dtype=torch.bool).tril()
    torch.testing.assert_close(cope_bias(q, k, table, allowed, divide=True) * 8 ** 0.5, cope_bias(q, k, table, allowed))
    pe = create_pos_encoding('multimodal_rope', dict(dim=16, num_heads=2, depth=1), dict(scheme='cope'))
    assert pe.spec.options(pe.scheme_options)['divide'] is False


def test_positions_count_gates_causally():
    """A query's positions count only keys at or before it: keys after it change nothing; positions are the
    number of (fully open) gates back to the key, up to npos - 1."""
    q = torch.full((1, 5, 2), 50.0)
    k = torch.ones(1, 5, 2)  # every gate ~1
    allowed = torch.ones(5, 5, dtype=torch.bool).tril()
    pos = cope_positions(cope_gates(q, k, allowed), npos=10)
    torch.testing.assert_close(pos[0, 4], torch.tensor([5.0, 4, 3, 2, 1]), atol=1e-4, rtol=0)
    torch.testing.assert_close(pos[0, 1, :2], torch.tensor([2.0, 1]), atol=1e-4, rtol=0)
    assert (pos[0].triu(1) == 0).all()
    assert cope_positions(cope_gates(q, k, allowed), npos=3).max() == 2


@pytest.mark.parametrize('scheme', ['cope', 'cope_rope'])
def test_decoder_cache_padding_and_rotation(scheme):
    """In the decoder: cached decoding = a full forward; left padding changes nothing for the real tokens; cope_rope
    rotates (relative positions) and cope does not; the table gets gradients and no weight decay."""
    from zoo.models.attention import KVCache
    from zoo.models.vlm.decoder import Decoder
    torch.manual_seed(0)
    dec = Decoder(40, 32, 2, 4, 2, mlp_hidden=64, scheme=scheme, theta=1e4,
                  scheme_options=dict(npos=6)).eval()
    with torch.no_grad():
        dec.pe.cope_pos_emb.normal_(std=1.0)
    ids = torch.randint(0, 40, (1, 8))
    pos = torch.arange(8)[None, None]
    with torch.no_grad():
        full = dec(dec.embed(ids), pos)
        cache = KVCache(2)
        parts = [dec(dec.embed(ids[:, :5]), pos[..., :5], None, cache)]
        parts += [dec(dec.embed(ids[:, i:i + 1]), pos[..., i:i + 1], torch.ones(1, i + 1, dtype=torch.bool), cache)
                  for i in range(5, 8)]
        torch.testing.assert_close(torch.cat(parts, 1), full, rtol=1e-5, atol=1e-5)
        padded = torch.cat([torch.zeros(1, 3, dtype=ids.dtype), ids], 1)
        mask = torch.tensor([[False] * 3 + [True] * 8])
        ppos = torch.cat([torch.ones(1, 1, 3, dtype=pos.dtype), pos], -1)
        out = dec(dec.embed(padded), ppos, mask)[:, 3:]
        torch.testing.assert_close(out, full, rtol=1e-5, atol=1e-5)
        shifted = dec(dec.embed(ids), pos + 100)
    moved = (shifted - full).abs().max().item()
    assert moved < 1e-4  # no absolute positions: CoPE counts, RoPE is relative
    term = dec.pe.attn_terms(Positions(None, ids=pos), torch.float32, torch.device('cpu'))[0]
    assert torch.equal(term.cos[0, 0, 3] == 1, torch.ones(8, dtype=torch.bool)) != (scheme == 'cope_rope')
    dec.train()
    dec(dec.embed(ids), pos).sum().backward()
    assert dec.pe.cope_pos_emb.grad.abs().sum() > 0
    assert dec.pe.no_weight_decay() == {'cope_pos_emb'}


def test_refusals():
    with pytest.raises(ValueError, match='npos .* must be an int >= 2'):
        create_pos_encoding('multimodal_rope', dict(dim=16, num_heads=2, depth=1),
                            dict(scheme='cope', scheme_options=dict(npos=1)))
    pe = create_pos_encoding('multimodal_rope', dict(dim=16, num_heads=2, depth=1), dict(scheme='cope'))
    with pytest.raises(ValueError, match='needs explicit position ids'):
        pe.attn_terms(Positions((1, 2, 2)), torch.float32, torch.device('cpu'))
    from zoo.hf import patch_rope_index
    with pytest.raises(ValueError, match="scheme 'cope_rope' cannot be patched into a Hugging Face model: CoPE"):
        patch_rope_index(torch.nn.Linear(2, 2), 'cope_rope')
