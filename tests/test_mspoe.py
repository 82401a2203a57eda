"""Ms-PoE (per-head position scales) as the ``mspoe`` extrapolation strategy of the decoder's ``multimodal_rope``:
the official golden file (VITA-Group/Ms-PoE) through the public API with ``official=True``, and the defining
properties of our default (relative positions under GQA, the paper's head order, KV-cache exactness)."""
import pytest
import torch
import torch.nn.functional as F

from conftest import load_golden
from zoo.encodings import Positions, create_pos_encoding
from zoo.encodings.multimodal.mspoe import mspoe_cos_sin, mspoe_head_order, mspoe_head_ratios, mspoe_ratios
from zoo.models.attention import Attention, KVCache
from zoo.models.vlm.decoder import Decoder

ATTN_CASES = ['attn_normal_gqa', 'attn_outlier_gqa', 'attn_normal_mha_r1_3']


@pytest.fixture(scope='module')
def gold():
    return load_golden('seeds/mspoe.pt')


def _encoding(h, hk, hd, depth=1, theta=10000.0, **mspoe):
    return create_pos_encoding('multimodal_rope', dict(dim=h * hd, num_heads=h, depth=depth),
                               dict(num_kv_heads=hk, scheme='rope1d', theta=theta, head_dim=hd,
                                    extrapolation=dict(strategy='mspoe', **mspoe)))


def _attention(case):
    cfg, sd = case['config'], case['state_dict']
    att = Attention(cfg['hidden_size'], cfg['num_attention_heads'], num_kv_heads=cfg['num_key_value_heads'],
                    head_dim=cfg['head_dim'], proj_bias=False).eval()
    att.qkv.weight.data = torch.cat([sd['q_proj.weight'], sd['k_proj.weight'], sd['v_proj.weight']])
    att.proj.weight.data = sd['o_proj.weight']
    return att


@pytest.mark.parametrize('name', ATTN_CASES)
def test_official_ratios_tables(gold, name):
    case = gold[name]
    cfg = case['config']
    r = mspoe_ratios(cfg['num_attention_heads'], cfg['compress_ratio_min'], cfg['compress_ratio_max'], official=True)
    torch.testing.assert_close(r, case['compress_ratio_per_ratio_index'], rtol=0, atol=0)
    cos, sin = mspoe_cos_sin(torch.arange(cfg['max_position_embeddings']), r, cfg['head_dim'], cfg['rope_theta'])
    torch.testing.assert_close(cos, case['cos_cached'], rtol=0, atol=2e-6)
    torch.testing.assert_close(sin, case['sin_cached'], rtol=0, atol=2e-6)


@pytest.mark.parametrize('name', ATTN_CASES)
def test_official_attention(gold, name):
    """Head order, the ratio of every query and key head, attention weights and output of the official layer."""
    case = gold[name]
    cfg = case['config']
    h, hk, hd = cfg['num_attention_heads'], cfg['num_key_value_heads'], cfg['head_dim']
    att = _attention(case)
    opts = dict(ratio_min=cfg['compress_ratio_min'], ratio_max=cfg['compress_ratio_max'], official=True)
    pe = _encoding(h, hk, hd, theta=cfg['rope_theta'], head_order=cfg['head_type'], **opts)
    x = case['input'].float()
    term = pe.attn_terms(Positions(None, ids=case['position_ids'][None], is_causal=True), x.dtype, x.device)[0]
    with torch.no_grad():
        out = att(x, term, None, True)
        q, k, _ = att.qkv(x).view(1, -1, h + 2 * hk, hd).transpose(1, 2).split([h, hk, hk], dim=1)
        qr, kr = term.rotate(q, k)
        w = (qr @ kr.repeat_interleave(h // hk, 1).transpose(-1, -2) / hd ** 0.5)
        w = w.masked_fill(~torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril(), float('-inf')).softmax(-1)
    assert term.state['order'][0].tolist() == case['head_order'].tolist()
    rq, rk = term.ratios(q, k)
    torch.testing.assert_close(rq[0], case['ratio_used_by_query_head'], rtol=0, atol=0)
    torch.testing.assert_close(rk[0], case['ratio_used_by_kv_head'], rtol=0, atol=0)
    torch.testing.assert_close(w, case['attn_weights'], rtol=0, atol=2e-6)
    torch.testing.assert_close(out, case['out'], rtol=0, atol=5e-6)
    if 'second_input' not in case:
        return
    # the second, shorter call of the official module reuses the first call's order: pass it explicitly
    pe2 = _encoding(h, hk, hd, theta=cfg['rope_theta'], head_order=case['head_order'].tolist(), **opts)
    x2 = case['second_input'].float()
    term2 = pe2.attn_terms(Positions(None, ids=case['second_position_ids'][None]), x2.dtype, x2.device)[0]
    with torch.no_grad():
        torch.testing.assert_close(att(x2, term2, None, True), case['second_out'], rtol=0, atol=5e-6)


def test_official_outlier_order_function(gold):
    case = gold['attn_outlier_gqa']
    cfg = case['config']
    h, hk, hd = cfg['num_attention_heads'], cfg['num_key_value_heads'], cfg['head_dim']
    att = _attention(case)
    with torch.no_grad():
        q, k, _ = att.qkv(case['input'].float()).view(1, -1, h + 2 * hk, hd).transpose(1, 2).split([h, hk, hk], 1)
    assert mspoe_head_order(q, k)[0].tolist() == case['head_order'].tolist() == [2, 0, 1]


def test_official_model_logits(gold):
    """The 2-layer official MsPoELlamaForCausalLM (Ms-PoE on layer 1, outlier order) as the zoo decoder."""
    case = gold['model_outlier']
    cfg, sd = case['config'], case['state_dict']
    dec = Decoder(cfg['vocab_size'], cfg['hidden_size'], cfg['num_hidden_layers'], cfg['num_attention_heads'],
                  cfg['num_key_value_heads'], mlp_hidden=cfg['intermediate_size'], scheme='rope1d',
                  theta=cfg['rope_theta'], eps=cfg['rms_norm_eps']).eval()
    mine = {'embed.weight': sd['model.embed_tokens.weight'], 'norm.weight': sd['model.norm.weight']}
    for i in range(cfg['num_hidden_layers']):
        p = f'model.layers.{i}.'
        a = p + 'self_attn.'
        qkv = torch.cat([sd[a + 'q_proj.weight'], sd[a + 'k_proj.weight'], sd[a + 'v_proj.weight']])
        mine.update({f'blocks.{i}.norm1.weight': sd[p + 'input_layernorm.weight'],
                     f'blocks.{i}.norm2.weight': sd[p + 'post_attention_layernorm.weight'],
                     f'blocks.{i}.attn.qkv.weight': qkv, f'blocks.{i}.attn.qkv.bias': torch.zeros(qkv.shape[0]),
                     f'blocks.{i}.attn.proj.weight': sd[a + 'o_proj.weight'],
                     f'blocks.{i}.mlp.fc1_g.weight': sd[p + 'mlp.gate_proj.weight'],
                     f'blocks.{i}.mlp.fc1_x.weight': sd[p + 'mlp.up_proj.weight'],
                     f'blocks.{i}.mlp.fc2.weight': sd[p + 'mlp.down_proj.weight']})
    dec.load_state_dict(mine, strict=True)
    dec.pe.set_extrapolation(dict(strategy='mspoe', ratio_min=cfg['compress_ratio_min'],
                                  ratio_max=cfg['compress_ratio_max'], head_order=cfg['head_type'],
                                  layers=cfg['apply_layers'], official=True))
    ids = case['input_ids']
    pos = torch.arange(ids.shape[1])[None, None]
    cache = KVCache(cfg['num_hidden_layers'])  # holds each layer's settled head order
    with torch.no_grad():
        logits = F.linear(dec(dec.embed(ids), pos, None, cache), sd['lm_head.weight'])
    torch.testing.assert_close(logits, case['logits'], rtol=0, atol=2e-5)
    for layer, order in case['head_order_per_applied_layer'].items():
        assert cache.term_state[int(layer)]['order'][0].tolist() == order.tolist()
    assert 0 not in cache.term_state  # layer 0 keeps plain RoPE


def test_default_ratios_and_inverse_order():
    r = mspoe_ratios(4, 1.2, 1.8)
    torch.testing.assert_close(r, torch.tensor([1.2, 1.4, 1.6, 1.8]))  # the top ratio is reached
    order = torch.tensor([[2, 0, 1]])
    r3 = torch.tensor([1.0, 2.0, 3.0])
    # paper: head order[m] gets r[m] (the most position-aware head, order[0] = 2, gets the smallest ratio)
    assert mspoe_head_ratios(order, r3).tolist() == [[2.0, 3.0, 1.0]]
    assert mspoe_head_ratios(order, r3, official=True).tolist() == [[3.0, 1.0, 2.0]]


@pytest.mark.parametrize('official', [False, True])
def test_gqa_relative_positions(official):
    """Our default keeps q.k a function of relative positions under GQA; the official assignment does not."""
    torch.manual_seed(0)
    h, hk, hd, n = 4, 2, 8, 6
    pe = _encoding(h, hk, hd, official=official)
    q, k = torch.randn(1, h, n, hd), torch.randn(1, hk, n, hd)
    q, k = q[:, :, :1].expand(-1, -1, n, -1), k[:, :, :1].expand(-1, -1, n, -1)  # the same content everywhere

    def logits(shift):
        ids = (torch.arange(n) + shift)[None, None]
        qr, kr = pe.attn_terms(Positions(None, ids=ids), q.dtype, q.device)[0].rotate(q, k)
        return qr @ kr.repeat_interleave(h // hk, 1).transpose(-1, -2)

    diff = (logits(0) - logits(7)).abs().max().item()
    assert (diff < 1e-4) != official, diff


def test_outlier_order_per_row_with_padding():
    torch.manual_seed(1)
    q, k = torch.randn(1, 4, 5, 8), torch.randn(1, 2, 5, 8)
    alone = mspoe_head_order(q, k, num_groups=2)
    pad = torch.zeros(1, 4, 2, 8)
    qp, kp = torch.cat([pad, q], 2), torch.cat([pad[:, :2], k], 2)
    mask = torch.tensor([[False, False, True, True, True, True, True]])
    both = mspoe_head_order(torch.cat([qp, qp]), torch.cat([kp, kp]), torch.cat([mask, mask]), num_groups=2)
    assert both.tolist() == [alone[0].tolist()] * 2


@pytest.mark.parametrize('head_order', ['normal', 'outlier'])
def test_kv_cache_equals_full_forward(head_order):
    """Decoding with the cache equals a full forward over the whole sequence with the same head orders (the outlier
    order is settled on the prompt, per row, and reused for the decoding steps)."""
    torch.manual_seed(0)
    dec = Decoder(40, 32, 2, 4, 2, mlp_hidden=64, scheme='rope1d', theta=1e4,
                  extrapolation=dict(strategy='mspoe', head_order=head_order)).eval()
    ids = torch.randint(0, 40, (2, 9))
    pos = torch.arange(9)[None, None].expand(1, 2, 9)
    with torch.no_grad():
        cache = KVCache(2)
        parts = [dec(dec.embed(ids[:, :6]), pos[..., :6], None, cache)]
        parts += [dec(dec.embed(ids[:, i:i + 1]), pos[..., i:i + 1], None, cache) for i in range(6, 9)]
        primed = KVCache(2)
        primed.term_state = {i: {'order': cache.term_state[i]['order']} for i in range(2)}
        full = dec(dec.embed(ids), pos, None, primed)
        fresh = dec(dec.embed(ids[:, :6]), pos[..., :6])
    torch.testing.assert_close(torch.cat(parts, 1), full, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(parts[0], fresh, rtol=1e-5, atol=1e-5)  # without a cache: the order of the prompt
    if head_order == 'normal':
        assert cache.term_state[0]['order'].tolist() == [[1, 0], [1, 0]]


def test_refusals():
    with pytest.raises(ValueError, match=r"taken only by the rotary encodings \(multimodal_rope, rope3d, rope_axial"):
        create_pos_encoding('sincos', dict(dim=64, grid_size=(4, 4)), dict(extrapolation='mspoe'))
    with pytest.raises(ValueError, match='not a permutation'):
        _encoding(4, 2, 8, head_order=[0, 0])
    with pytest.raises(ValueError, match='ratio_min <= ratio_max'):
        _encoding(4, 2, 8, ratio_min=2.0, ratio_max=1.0)
    with pytest.raises(ValueError, match="belong to extrapolation 'mspoe'"):
        create_pos_encoding('multimodal_rope', dict(dim=32, num_heads=4, depth=1),
                            dict(scheme='rope1d', extrapolation=dict(strategy='pi', ratio_min=1.0)))
    pe = _encoding(4, 2, 8, head_order=[1, 0, 2])
    with pytest.raises(ValueError, match='has 3 entries but the layer has 2 key heads'):
        pe.attn_terms(Positions(None, ids=torch.arange(3)[None, None]), torch.float32, 'cpu')[0].rotate(
            torch.zeros(1, 4, 3, 8), torch.zeros(1, 2, 3, 8))
    with pytest.raises(ValueError, match='needs explicit position ids'):
        pe.attn_terms(Positions((1, 2, 2)), torch.float32, 'cpu')


@pytest.mark.parametrize('scheme,head_order', [('mrope', 'outlier'), ('rope1d', 'normal')])
def test_video_llm_generates_left_padded_as_alone(scheme, head_order):
    """The video-LLM under Ms-PoE: a left-padded batch decodes as each sample alone (the order is per row, padding
    masked), and cached decoding equals a full forward's last logits at the first step."""
    from test_vlm import gen, scramble, tiny, two_prompts
    m = scramble(tiny(scheme, num_heads=4, num_kv_heads=2))
    m.decoder.pe.set_extrapolation(dict(strategy='mspoe', head_order=head_order, layers=[1]))
    prompts, clips = two_prompts(m)
    b, out = gen(m, prompts, clips, n=3, output_logits=True)
    tol = dict(atol=1e-3, rtol=1e-4)
    for i in range(2):
        _, one = gen(m, [prompts[i]], [clips[i]], n=3, output_logits=True)
        assert torch.equal(one.new_tokens[0], out.new_tokens[i])
        torch.testing.assert_close(one.logits[0], out.logits[i], **tol)
    with torch.no_grad():
        full = m(b['input_ids'], b['attention_mask'], videos=clips, video_grid_thw=b['video_grid_thw'])
    torch.testing.assert_close(out.logits[:, 0], full.logits[:, -1].float(), **tol)


def test_video_llm_takes_mspoe_at_construction():
    from zoo.models.vlm import create_video_llm
    from test_vlm import TOWER
    m = create_video_llm('pe_vlm_tiny_rope1d', tower_kwargs=dict(TOWER), dim=64, depth=2, num_heads=2, num_kv_heads=1,
                         mlp_hidden=64, extrapolation=dict(strategy='mspoe', head_order='outlier', layers=[1]))
    ext = m.decoder.pe.extrapolation
    assert ext.strategy == 'mspoe' and dict(ext.mspoe)['layers'] == (1,)
    assert 'mspoe (ratios 1.2..1.8, head order outlier)' == ext.describe()
