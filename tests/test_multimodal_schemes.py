"""Tests for the scheme registry, the new schemes (VideoRoPE, HoPE, MHRoPE) and the registered ``multimodal_rope``
encoding (Positions.ids -> one RotaryTerm for every layer, decoding with a KV cache).

The golden files of VideoRoPE / HoPE are checked by the parametrised golden tests of test_multimodal_rope.py; here
the schemes are checked against their definitions on random layouts, with padding and decoding."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from zoo.encodings import Positions, create_pos_encoding
from zoo.encodings import multimodal_rope as mm
from zoo.models.attention import Attention, KVCache

GOLDEN_DIR = Path(__file__).resolve().parents[1].parent / 'shared' / 'golden' / 'mm_rope'
QWEN = mm.QWEN_TOKEN_IDS


# ---------------------------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------------------------

def test_aliases_are_the_same_object():
    assert mm.get_scheme('qwen2_vl') is mm.get_scheme('mrope')
    assert mm.get_scheme('mrope_i') is mm.get_scheme('mrope_interleave') is mm.get_scheme('qwen3_vl')
    assert mm.get_scheme('qwen2_5_vl') is not mm.get_scheme('mrope')  # other defaults (tokens_per_second=2)
    assert mm.get_scheme('qwen2_5_vl').defaults['tokens_per_second'] == 2
    for name in mm.list_schemes():
        assert isinstance(mm.get_scheme(name), mm.Scheme)
    assert {'videorope', 'hope', 'mhrope'} <= set(mm.list_schemes())


def test_scheme_objects_own_their_special_cases():
    """What used to be ``if scheme == ...`` outside the scheme classes: the clip timing, the KV heads a per-head split
    needs, the layout style of InternVL tiles."""
    assert [n for n in mm.list_schemes() if mm.get_scheme(n).uses_seconds({})] == ['qwen2_5_vl']
    assert mm.get_scheme('mrope').uses_seconds({'tokens_per_second': 2})
    assert not mm.get_scheme('qwen2_5_vl').uses_seconds({'tokens_per_second': None})
    assert [n for n in mm.list_schemes() if mm.get_scheme(n).fit_kv_heads(2) != 2] == ['mhrope']
    assert [mm.get_scheme('mhrope').fit_kv_heads(k) for k in (1, 8, 9)] == [8, 8, 16]
    tiles = [{'type': 'text', 'len': 2}, {'type': 'image', 'h': 1, 'w': 4, 'num_tiles': 2}]
    assert mm.get_scheme('v2pe').layout_style(tiles) == 'internvl' and mm.get_scheme('mrope').layout_style(tiles) == \
        'qwen2' and mm.get_scheme('mhrope').layout_style([]) == 'qwen3'
    assert mm.get_scheme(mm.get_scheme('hope')) is mm.get_scheme('hope')  # a Scheme object is its own resolution


def test_the_encoding_gives_the_ids_of_its_scheme():
    """``MultimodalRoPE.position_ids`` / ``draw_training_options`` / ``decode_position_ids``: the module functions for
    the encoding's scheme, with its evaluation options; clip timing only where the scheme uses it."""
    inp = mm.layout_to_inputs([{'type': 'text', 'len': 3}, {'type': 'video', 't': 3, 'h': 2, 'w': 2,
                                                            'second_per_grid_t': 2.0}, {'type': 'text', 'len': 2}])
    args = (inp['input_ids'], None, inp['video_grid_thw'], inp['attention_mask'])
    for scheme, opts in [('qwen2_5_vl', {}), ('mrope', {}), ('hope', {'gamma': 0.75})]:
        enc = create_pos_encoding('multimodal_rope', dict(dim=64, num_heads=2, depth=1),
                                  dict(scheme=scheme, scheme_options=opts))
        secs = inp['second_per_grid_ts'] if scheme == 'qwen2_5_vl' else None
        ref = mm.get_position_ids(scheme, *args, secs, **opts)
        got = enc.position_ids(*args, inp['second_per_grid_ts'])  # mrope / hope ignore the clip timing
        assert all(torch.equal(a, b) for a, b in zip(got, ref))
        torch.testing.assert_close(enc.decode_position_ids(ref[1], torch.tensor([7])),
                                   mm.decode_position_ids(ref[1], torch.tensor([7]), mm.scheme_num_axes(scheme)))
        drawn = enc.draw_training_options(4, random.Random(0))
        if scheme != 'hope':
            assert drawn is None
            continue
        assert [set(d) for d in drawn] == [{'gamma'}] * 4 and all(d['gamma'] in mm.HOPE_GAMMAS for d in drawn)
        other = enc.position_ids(*args, scheme_options=dict(gamma=1.5))[0]
        assert not torch.equal(other, got[0])


def test_golden_files_cover_new_schemes():
    index = json.loads((GOLDEN_DIR / 'index.json').read_text())
    schemes = {e['scheme'] for e in index}
    assert {'videorope', 'hope'} <= schemes  # the parametrised golden tests run on them


def test_training_options():
    rng = random.Random(0)
    assert {mm.training_options('hope', rng)['gamma'] for _ in range(200)} == set(mm.HOPE_GAMMAS)
    assert mm.training_options('v2pe', rng)['stride'] in mm.V2PE_STRIDES
    assert mm.training_options('mrope', rng) == {} and mm.training_options('videorope', rng) == {}
    assert {mm.sample_hope_gamma(rng) for _ in range(200)} == {0.5, 0.75, 1.0, 1.25, 1.5}
    with pytest.raises(ValueError, match='gammas must be a non-empty'):
        mm.sample_hope_gamma(rng, [])


# ---------------------------------------------------------------------------------------------------------------
# VideoRoPE / HoPE against their definitions
# ---------------------------------------------------------------------------------------------------------------

def _ref_diagonal(segments, scale):
    """Qwen2-style tokens (markers = text); block at s: t = s + scale*f, h = t + r - (H-1)//2, w = t + c - (W-1)//2;
    next token at s + scale*(T-1) + 1. Returns ((3, L) float64, next position)."""
    out, s = [], 0.0
    for seg in segments:
        if seg['type'] == 'text':
            for _ in range(seg['len']):
                out.append([s] * 3)
                s += 1
            continue
        out.append([s] * 3)  # <|vision_start|>
        s += 1
        T, H, W = seg.get('t', 1), seg['h'], seg['w']
        for f in range(T):
            for r in range(H):
                for c in range(W):
                    t = s + scale * f
                    out.append([t, t + r - (H - 1) // 2, t + c - (W - 1) // 2])
        s = s + scale * (T - 1) + 1
        out.append([s] * 3)  # <|vision_end|>
        s += 1
    return torch.tensor(out, dtype=torch.float64).T, s


def _random_layout(rng):
    segs = [{'type': 'text', 'len': rng.randint(0, 3)}]
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.4:
            segs.append({'type': 'image', 't': 1, 'h': rng.randint(1, 5), 'w': rng.randint(1, 5)})
        else:
            segs.append({'type': 'video', 't': rng.randint(1, 5), 'h': rng.randint(1, 4), 'w': rng.randint(1, 4)})
        segs.append({'type': 'text', 'len': rng.randint(0, 3)})
    return segs


DIAGONAL = [('videorope', {}, 2.0), ('videorope', {'delta': 1.5}, 1.5), ('hope', {}, 1.0),
            ('hope', {'gamma': 0.75}, 0.75), ('hope', {'gamma': 1.25}, 1.25)]


@pytest.mark.parametrize('scheme,kw,scale', DIAGONAL)
def test_diagonal_schemes_match_definition(scheme, kw, scale):
    rng = random.Random(hash((scheme, scale)) & 0xffff)
    for _ in range(8):
        segs = _random_layout(rng)
        ref, nxt = _ref_diagonal(segs, scale)
        pos, deltas = mm.get_layout_position_ids(scheme, segs, **kw)
        assert pos.dtype == torch.float32 and deltas.dtype == torch.float32
        torch.testing.assert_close(pos[:, 0].double(), ref, atol=0, rtol=0)
        assert deltas.item() == nxt - ref.shape[1]
        inp = mm.layout_to_inputs(segs)
        pos2, deltas2 = mm.get_position_ids(scheme, inp['input_ids'], inp['image_grid_thw'], inp['video_grid_thw'],
                                            **kw)
        assert torch.equal(pos2, pos) and torch.equal(deltas2, deltas)


def _left_pad(rows, pad_id=QWEN['pad']):
    L = max(len(r) for r in rows)
    ids = torch.full((len(rows), L), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), L, dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, L - len(r):] = torch.tensor(r)
        mask[b, L - len(r):] = 1
    return ids, mask


_LAYOUTS = [
    [{'type': 'text', 'len': 2}, {'type': 'video', 't': 3, 'h': 2, 'w': 3}, {'type': 'text', 'len': 2}],
    [{'type': 'text', 'len': 1}, {'type': 'image', 't': 1, 'h': 2, 'w': 2}, {'type': 'text', 'len': 1}],
    [{'type': 'text', 'len': 3}],
]


def _batch(scheme_style='qwen2', layouts=_LAYOUTS):
    singles = [mm.layout_to_inputs(lay, style=scheme_style) for lay in layouts]
    ids, mask = _left_pad([s['input_ids'][0].tolist() for s in singles])
    img = [s['image_grid_thw'] for s in singles if s['image_grid_thw'] is not None]
    vid = [s['video_grid_thw'] for s in singles if s['video_grid_thw'] is not None]
    return singles, ids, mask, torch.cat(img) if img else None, torch.cat(vid) if vid else None


@pytest.mark.parametrize('scheme,kw', [('videorope', {}), ('hope', {'gamma': 0.75}), ('hope', {'gamma': 1.5}),
                                       ('mhrope', {}), ('mrope', {}), ('qwen2_5_vl', {}), ('vrope', {}),
                                       ('v2pe', {})])
def test_decode_positions_equal_full_sequence(scheme, kw):
    """Left-padded batch: a prompt's rope_deltas continue exactly where the full sequence (prompt + generated text)
    puts the generated tokens, also for HoPE's fractional positions (no decoding from offset 0)."""
    style = mm.get_scheme(scheme).style
    singles, ids, mask, img, vid = _batch(style)
    pos, deltas = mm.get_position_ids(scheme, ids, img, vid, attention_mask=mask, **kw)
    L, k = ids.shape[1], 3
    full_ids = torch.cat([ids, torch.full((ids.shape[0], k), 1999)], 1)
    full_mask = torch.cat([mask, torch.ones(ids.shape[0], k, dtype=torch.long)], 1)
    full, _ = mm.get_position_ids(scheme, full_ids, img, vid, attention_mask=full_mask, **kw)
    dec = mm.decode_position_ids(deltas, torch.arange(L, L + k), mm.scheme_num_axes(scheme))
    # VideoRoPE/HoPE decode in float32 (fractional deltas); the others in long (V2PE's next position is an integer)
    assert dec.dtype == (torch.float32 if mm.get_scheme(scheme).float_deltas else torch.int64)
    torch.testing.assert_close(dec.to(full.dtype), full[..., L:], atol=0, rtol=0)
    assert torch.equal(full[..., :L], pos)
    # padding never changes a real token's ids
    for b, s in enumerate(singles):
        alone, _ = mm.get_position_ids(scheme, s['input_ids'], s['image_grid_thw'], s['video_grid_thw'], **kw)
        n = alone.shape[-1]
        assert torch.equal(pos[:, b, L - n:], alone[:, 0])
        assert (pos[:, b, :L - n] == mm.PAD_POSITION_ID).all()
    if scheme == 'hope' and kw['gamma'] == 0.75:  # the video row ends at a fractional position
        assert deltas[0].item() != int(deltas[0].item())


# ---------------------------------------------------------------------------------------------------------------
# allocations
# ---------------------------------------------------------------------------------------------------------------

def test_videorope_and_hope_allocation():
    v = mm.axis_of_pair('videorope', 64)
    assert v.tolist() == [1, 2] * 12 + [0] * 8   # [8, 12, 12] at head_dim 64: h/w alternate, lowest 8 on t
    h = mm.axis_of_pair('hope', 64)
    assert h.tolist() == [1, 2] * 12 + [-1] * 8
    assert mm.axis_of_pair('videorope', 32, [4, 6, 6]).tolist() == [1, 2] * 6 + [0] * 4
    with pytest.raises(ValueError, match=r'equal h and w shares.*fix'):
        mm.axis_of_pair('videorope', 64, [10, 12, 10])


def test_hope_temporal_pairs_are_not_rotated():
    pos, _ = mm.get_layout_position_ids('hope', _LAYOUTS[0], gamma=0.75)
    cos, sin = mm.multimodal_rope_cos_sin(pos, 64, 'hope', theta=1e4)
    nope = (mm.axis_of_pair('hope', 64) == -1).repeat(2)
    assert nope.sum() == 16
    assert (cos[..., nope] == 1).all() and (sin[..., nope] == 0).all()
    assert (sin[..., ~nope].abs() > 0).any()
    # the t row never enters attention: changing it changes nothing
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 2, pos.shape[-1], 64, generator=g), torch.randn(1, 2, pos.shape[-1], 64, generator=g)
    moved = pos.clone()
    moved[0] += 17.25
    a = mm.apply_multimodal_rope(q, k, pos, scheme='hope')
    b = mm.apply_multimodal_rope(q, k, moved, scheme='hope')
    torch.testing.assert_close(a, b, atol=0, rtol=0)
    # VideoRoPE does rotate those pairs with t
    c = mm.apply_multimodal_rope(q, k, moved, scheme='videorope')
    assert not torch.allclose(c[0], mm.apply_multimodal_rope(q, k, pos, scheme='videorope')[0])


def test_mhrope_allocation_per_key_head():
    t = mm.axis_table('mhrope', 16, 8)
    assert t.shape == (8, 8) and t[:, 0].tolist() == [0, 0, 1, 1, 1, 2, 2, 2] and (t == t[:, :1]).all()
    assert mm.axis_table('mhrope', 16, 16)[:, 0].tolist() == [0] * 4 + [1] * 6 + [2] * 6
    assert mm.axis_table('mhrope', 16, 4, [1, 1, 2])[:, 0].tolist() == [0, 1, 2, 2]
    with pytest.raises(ValueError, match=r'no exact default mrope_section.*num_kv_heads = 4.*fix'):
        mm.axis_table('mhrope', 16, 4)
    with pytest.raises(ValueError, match=r'summing to num_kv_heads = 4'):
        mm.axis_table('mhrope', 16, 4, [2, 3, 3])
    with pytest.raises(ValueError, match='per key head'):
        mm.axis_of_pair('mhrope', 16)
    assert mm.axis_table('mrope', 16, 8).shape == (1, 8)  # per-pair schemes: one row for every head


def test_mhrope_query_heads_follow_their_key_group():
    """Key head j (axis a) is 1-D RoPE on axis a over all pairs; query head i uses key head i // group."""
    pos, _ = mm.get_layout_position_ids('mhrope', _LAYOUTS[0])
    L, D, hq, hk = pos.shape[-1], 16, 16, 8
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, hq, L, D, generator=g), torch.randn(2, hk, L, D, generator=g)
    pos2 = pos.expand(-1, 2, -1)
    qr, kr = mm.apply_multimodal_rope(q, k, pos2, scheme='mhrope', theta=1e4)
    axis_of_head = mm.axis_table('mhrope', D, hk)[:, 0].tolist()
    for i in range(hq):
        a = axis_of_head[i // (hq // hk)]
        ref_q, _ = mm.apply_multimodal_rope(q[:, i:i + 1], q[:, i:i + 1], pos2[a:a + 1], scheme='rope1d', theta=1e4)
        torch.testing.assert_close(qr[:, i:i + 1], ref_q)
    for j in range(hk):
        a = axis_of_head[j]
        _, ref_k = mm.apply_multimodal_rope(k[:, j:j + 1], k[:, j:j + 1], pos2[a:a + 1], scheme='rope1d', theta=1e4)
        torch.testing.assert_close(kr[:, j:j + 1], ref_k)


# ---------------------------------------------------------------------------------------------------------------
# the registered encoding
# ---------------------------------------------------------------------------------------------------------------

ENC_CASES = [('mrope', {}), ('qwen2_5_vl', {}), ('qwen3_vl', {}), ('mhrope', {'num_kv_heads': 8}),
             ('vrope', {}), ('v2pe', {}), ('videorope', {}), ('hope', {}), ('rope1d', {})]


def _enc(scheme, extra, dim=256, heads=8, depth=3, theta=1e4):  # head_dim 32: every published split scales
    return create_pos_encoding('multimodal_rope', {'dim': dim, 'num_heads': heads, 'depth': depth},
                               {'scheme': scheme, 'theta': theta, **extra})


@pytest.mark.parametrize('scheme,extra', ENC_CASES)
def test_encoding_attn_terms_equal_apply(scheme, extra):
    enc = _enc(scheme, extra)
    singles, ids, mask, img, vid = _batch(mm.get_scheme(scheme).style)
    pos, _ = mm.get_position_ids(scheme, ids, img, vid, attention_mask=mask)
    terms = enc.attn_terms(Positions(grid=None, ids=pos, attn_mask=mask.bool(), is_causal=True), torch.float32,
                           torch.device('cpu'))
    assert len(terms) == 3 and all(t is terms[0] for t in terms)  # built once, shared by every layer
    term = terms[0]
    assert term.layout == 'half' and term.sin.dtype == torch.float32
    assert term.sin.shape == (3, extra.get('num_kv_heads', 1) if scheme == 'mhrope' else 1, ids.shape[1], 32)
    g = torch.Generator().manual_seed(1)
    hk = extra.get('num_kv_heads', 8)
    q, k = torch.randn(3, 8, ids.shape[1], 32, generator=g), torch.randn(3, hk, ids.shape[1], 32, generator=g)
    got = term.rotate(q, k)
    ref = mm.apply_multimodal_rope(q, k, pos, scheme=scheme, theta=1e4)
    torch.testing.assert_close(got[0], ref[0], atol=0, rtol=0)
    torch.testing.assert_close(got[1], ref[1], atol=0, rtol=0)
    # and the tables are the public cos/sin
    cos, sin = mm.multimodal_rope_cos_sin(pos, 32, scheme, theta=1e4, num_kv_heads=hk)
    torch.testing.assert_close(term.cos.squeeze(1) if scheme != 'mhrope' else term.cos, cos, atol=0, rtol=0)


@pytest.mark.parametrize('scheme', ['mrope', 'qwen3_vl', 'hope', 'mhrope'])
def test_kv_cache_decoding_matches_full_forward(scheme):
    """Attention with the encoding: prefill + cached decode from rope_deltas gives the full causal forward."""
    torch.manual_seed(0)
    kv = 4 if scheme != 'mhrope' else 8
    enc = _enc(scheme, {'num_kv_heads': kv, 'scheme_options': {'gamma': 0.75}} if scheme == 'hope' else
               {'num_kv_heads': kv}, dim=256, heads=8, depth=1)
    attn = Attention(256, 8, num_kv_heads=kv).eval()
    singles, ids, mask, img, vid = _batch(mm.get_scheme(scheme).style)
    opts = {'gamma': 0.75} if scheme == 'hope' else {}
    B, L, k = ids.shape[0], ids.shape[1], 3
    full_ids = torch.cat([ids, torch.full((B, k), 1999)], 1)
    full_mask = torch.cat([mask, torch.ones(B, k, dtype=torch.long)], 1).bool()
    full_pos, _ = mm.get_position_ids(scheme, full_ids, img, vid, attention_mask=full_mask.long(), **opts)
    x = torch.randn(B, L + k, 256)
    dev, f32 = torch.device('cpu'), torch.float32
    with torch.no_grad():
        term = enc.attn_terms(Positions(None, ids=full_pos), f32, dev)[0]
        full = attn(x, term, attn_mask=full_mask, is_causal=True)
        _, deltas = mm.get_position_ids(scheme, ids, img, vid, attention_mask=mask, **opts)
        cache = KVCache(1)
        term_p = enc.attn_terms(Positions(None, ids=full_pos[..., :L]), f32, dev)[0]
        attn(x[:, :L], term_p, attn_mask=full_mask[:, :L], is_causal=True, kv_cache=cache)
        outs = []
        for i in range(k):
            step = mm.decode_position_ids(deltas, torch.tensor([L + i]), mm.scheme_num_axes(scheme))
            term_s = enc.attn_terms(Positions(None, ids=step), f32, dev)[0]
            outs.append(attn(x[:, L + i:L + i + 1], term_s, attn_mask=full_mask[:, :L + i + 1], is_causal=True,
                             kv_cache=cache))
    torch.testing.assert_close(torch.cat(outs, 1), full[:, L:], atol=1e-5, rtol=1e-5)


def test_encoding_on_a_patch_grid_and_subset():
    """Without ids the grid is one visual block after the prefix tokens (text); subsets select rows."""
    enc = _enc('mrope', {}, dim=64, heads=4, depth=2)
    pos = Positions.from_hw((3, 4), num_prefix_tokens=1)
    term = enc.attn_terms(pos, torch.float32, torch.device('cpu'))[0]
    ids, _ = mm.get_layout_position_ids('mrope', [{'type': 'text', 'len': 1}, {'type': 'image', 't': 1, 'h': 3,
                                                                                'w': 4}], markers=False)
    cos, sin = mm.multimodal_rope_cos_sin(ids, 16, 'mrope', theta=1e4)
    torch.testing.assert_close(term.cos[:, 0], cos, atol=0, rtol=0)
    keep = torch.tensor([[0, 5, 11], [2, 3, 4]])
    sub = enc.attn_terms(Positions.from_hw((3, 4), 1, keep_indices=keep), torch.float32, torch.device('cpu'))[0]
    assert sub.cos.shape == (2, 1, 4, 16)
    torch.testing.assert_close(sub.cos[1, 0, 1:], cos[0, 1 + keep[1]], atol=0, rtol=0)
    # a video grid: frame f at t = s + f (M-RoPE)
    vid = enc.grid_position_ids((2, 2, 2), 0)
    assert vid[0, 0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1] and vid[2, 0].tolist() == [0, 1, 0, 1] * 2


def test_encoding_on_meta_device_then_cpu():
    with torch.device('meta'):
        enc = _enc('hope', {})
    term = enc.attn_terms(Positions.from_hw((2, 2)), torch.float32, torch.device('cpu'))[0]
    assert term.cos.device.type == 'cpu' and torch.isfinite(term.cos).all()


# ---------------------------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------------------------

def test_encoding_errors():
    with pytest.raises(ValueError, match=r"unknown multimodal RoPE scheme 'mrope4d'.*fix"):
        _enc('mrope4d', {})
    with pytest.raises(ValueError, match='unknown option'):
        _enc('videorope', {'scheme_options': {'gamma': 1.0}})
    with pytest.raises(ValueError, match=r'no exact default mrope_section.*num_kv_heads = 4'):
        _enc('mhrope', {'num_kv_heads': 4})
    with pytest.raises(ValueError, match='must divide num_heads'):
        _enc('mrope', {'num_kv_heads': 3})
    with pytest.raises(ValueError, match='head_dim must be a positive even int'):
        _enc('mrope', {'head_dim': 15})
    with pytest.raises(ValueError, match='theta must be > 0'):
        _enc('mrope', {}, theta=0)
    enc = _enc('mrope', {})
    wrong = torch.zeros(4, 1, 5, dtype=torch.long)  # VRoPE-shaped ids given to M-RoPE
    with pytest.raises(ValueError, match=r"A = 3 \(t, h, w\) for scheme 'mrope'.*fix"):
        enc.attn_terms(Positions(None, ids=wrong), torch.float32, torch.device('cpu'))
    with pytest.raises(ValueError, match='A = 3'):
        mm.multimodal_rope_cos_sin(wrong, 16, 'mrope')
    with pytest.raises(ValueError, match='needs Positions.ids'):
        enc.attn_terms(Positions(None), torch.float32, torch.device('cpu'))
    # A = 1 ids broadcast to every axis (text / decode steps)
    one = torch.arange(5)[None, None]
    t1 = enc.attn_terms(Positions(None, ids=one), torch.float32, torch.device('cpu'))[0]
    t3 = enc.attn_terms(Positions(None, ids=one.expand(3, -1, -1)), torch.float32, torch.device('cpu'))[0]
    assert torch.equal(t1.cos, t3.cos)


@pytest.mark.parametrize('scheme,bad', [('videorope', {'delta': 0}), ('videorope', {'delta': 'x'}),
                                        ('hope', {'gamma': -0.5}), ('hope', {'gamma': float('nan')})])
def test_bad_temporal_scale(scheme, bad):
    with pytest.raises(ValueError, match='temporal scale .* must be a positive number.*fix'):
        mm.get_layout_position_ids(scheme, _LAYOUTS[0], **bad)


def test_apply_rejects_bad_heads():
    with pytest.raises(ValueError, match='multiple of key heads'):
        mm.apply_multimodal_rope(torch.zeros(1, 3, 2, 16), torch.zeros(1, 2, 2, 16),
                                 torch.zeros(3, 1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match='unsqueeze_dim'):
        mm.apply_multimodal_rope(torch.zeros(1, 2, 2, 16), torch.zeros(1, 2, 2, 16),
                                 torch.zeros(3, 1, 2, dtype=torch.long), unsqueeze_dim=3)


@pytest.mark.parametrize('scheme', ['qwen3_vl', 'hope'])
def test_encoding_in_a_tiny_vit(scheme):
    """The grid path inside a backbone: forward/backward, a new input size, patch dropout."""
    from zoo.models.vit import PEVisionTransformer
    torch.manual_seed(0)
    m = PEVisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=2, num_classes=3,
                            pe='multimodal_rope', pe_kwargs={'scheme': scheme, 'theta': 100.0}, dynamic_img_size=True,
                            patch_drop_rate=0.5)
    m(torch.randn(2, 3, 32, 32)).sum().backward()
    assert m.eval()(torch.randn(1, 3, 48, 40)).shape == (1, 3)
