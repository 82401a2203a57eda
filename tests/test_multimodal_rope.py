"""Tests for zoo.encodings.multimodal_rope: golden equivalence with the official implementations, properties
derived from the scheme definitions, decoding continuation, dtypes and bad input."""
from __future__ import annotations

import json
import math
import os
import random
import zlib
from pathlib import Path

import pytest
import torch

from zoo.encodings import multimodal_rope as mm

GOLDEN_DIR = Path(__file__).resolve().parents[1].parent / 'shared' / 'golden' / 'mm_rope'
QWEN = mm.QWEN_TOKEN_IDS


# ---------------------------------------------------------------------------------------------------------------
# golden files
# ---------------------------------------------------------------------------------------------------------------

def _golden_files():
    index = GOLDEN_DIR / 'index.json'
    if not index.is_file():
        return []
    return [e['file'] for e in json.loads(index.read_text())]


GOLDEN = _golden_files()


def _load(name):
    return json.loads((GOLDEN_DIR / name).read_text())


# Batch layouts (a dict) are checked through their model inputs in test_golden_position_ids; decoding continuation
# needs layouts whose rows end with two text tokens.
SINGLE_LAYOUTS = [n for n in GOLDEN if not isinstance(_load(n)['layout'], dict)]
ENDS_WITH_TEXT = [n for n in GOLDEN if all(row[-2:] == ['text'] * 2 for row in _load(n)['token_types'])]


def test_golden_data_present():
    if not GOLDEN:
        msg = (f'golden data for multimodal RoPE not found at {GOLDEN_DIR} (expected index.json and the JSON files '
               'next to the repository, in ../shared/golden/mm_rope); set ZOO_ALLOW_MISSING_GOLDEN=1 to skip')
        if os.environ.get('ZOO_ALLOW_MISSING_GOLDEN') == '1':
            pytest.skip(msg)
        pytest.fail(msg)
    for f in GOLDEN:
        assert (GOLDEN_DIR / f).is_file(), f'{f} listed in index.json but missing'


def _scheme_of(d):
    p = d['params']
    s = d['scheme']
    if s == 'qwen2_vl_mrope':
        return 'mrope', {}
    if s == 'qwen2_5_vl_mrope':
        tps = p.get('tokens_per_second', (d.get('hf_inputs') or {}).get('tokens_per_second', 2))
        return 'mrope', {'tokens_per_second': tps}
    if s == 'mrope_interleave':
        return 'mrope_interleave', {'spatial_reset': bool(p.get('spatial_reset', False)),
                                    'temporal_stride': int(p.get('temporal_stride', 1))}
    if s == 'vrope':
        return 'vrope', {}
    if s == 'v2pe':
        return 'v2pe', {'stride': p.get('rope_pos_id_stride', 64), 'num_image_token': p.get('num_image_token', 256)}
    if s == 'videorope':
        return 'videorope', {'delta': p['scale_factor']}
    if s == 'hope':
        return 'hope', {'gamma': p['temporal_scale_gamma']}
    raise AssertionError(f'golden scheme {s!r} has no mapping in this test')


def _fractional_seconds(d):
    secs = (d.get('hf_inputs') or {}).get('second_per_grid_ts') or d['params'].get('second_per_grid_ts') or []
    return any(float(s) != int(float(s)) for s in secs)


def _expected(d):
    """Positions to match: the original-Qwen (4.57.1) continuation where the file carries it, unless 4.57.1 hits its
    own int-cast bug (fractional second_per_grid_t); then the 5.24 field is used with the relation checked below."""
    ref = d.get('reference_transformers_4_57_1')
    if ref is not None and not _fractional_seconds(d):
        return torch.tensor(ref['position_ids']), torch.tensor(ref['rope_deltas']), 'exact'
    rd = d.get('rope_deltas')
    mode = 'exact' if ref is None else 'v5_continuation'
    return torch.tensor(d['position_ids']), (torch.tensor(rd) if rd is not None and mode == 'exact' and
                                             d['scheme'] in ('mrope_interleave', 'videorope', 'hope') else None), mode


_IDS_OF_TYPE = {'vision_start': QWEN['vision_start'], 'vision_end': QWEN['vision_end'], 'image': QWEN['image'],
                'video': QWEN['video'], 'pad': QWEN['pad']}


def _inputs(d, scheme):
    """Model inputs from the file: hf_inputs (Qwen family), official_inputs (V2PE), or token_types + grids."""
    if d.get('hf_inputs') is not None:
        h = d['hf_inputs']
        kw = dict(input_ids=torch.tensor(h['input_ids']), attention_mask=torch.tensor(h['attention_mask']),
                  image_grid_thw=None if h.get('image_grid_thw') is None else torch.tensor(h['image_grid_thw']),
                  video_grid_thw=None if h.get('video_grid_thw') is None else torch.tensor(h['video_grid_thw']),
                  spatial_merge_size=h.get('spatial_merge_size', 2))
        if scheme == 'mrope' and h.get('second_per_grid_ts') is not None and h.get('tokens_per_second') is not None:
            kw['second_per_grid_ts'] = torch.tensor(h['second_per_grid_ts'], dtype=torch.float32)
        return kw
    o = d['official_inputs']
    if scheme == 'v2pe':
        t = o['token_ids']
        return dict(input_ids=torch.tensor(o['input_ids']), attention_mask=torch.tensor(o['attention_mask']),
                    image_token_id=t['<IMG_CONTEXT>'], vision_start_token_id=t['<img>'])
    # VRoPE: rebuild Qwen-style ids from token_types and grids from the official data shapes (merged -> pre-merge)
    rows, k = [], 0
    for types in d['token_types']:
        row = []
        for typ in types:
            if typ in _IDS_OF_TYPE:
                row.append(_IDS_OF_TYPE[typ])
            else:
                row.append(1000 + k)
                k += 1
        rows.append(row)
    img, vid = [], []
    for shapes in o['data_shapes_per_row']:
        for sh in shapes:
            if sh[0] == 'image':
                img.append([1, 2 * sh[1], 2 * sh[2]])
            elif sh[0] == 'video':
                vid.append([sh[1], 2 * sh[2], 2 * sh[3]])
    return dict(input_ids=torch.tensor(rows), attention_mask=torch.tensor(o['attention_mask']),
                image_grid_thw=torch.tensor(img) if img else None, video_grid_thw=torch.tensor(vid) if vid else None)


def _check_v5_relation(ours, theirs, real, types):
    """transformers 5.x starts text after a visual block at s + max(h, w); we start at 1 + max so far. Check that
    the two agree up to a non-negative offset that only grows at a token right after a video block, where ours is
    1 + the largest id used before."""
    for b in range(ours.shape[1]):
        idx = real[b].nonzero().flatten().tolist()
        prev_diff = 0
        for n, i in enumerate(idx):
            diff = (ours[:, b, i] - theirs[:, b, i]).tolist()
            assert len(set(diff)) == 1 and diff[0] >= prev_diff, (b, i, diff)
            if diff[0] != prev_diff:
                assert n > 0 and types[b][idx[n - 1]] == 'video', (b, i)
                assert ours[:, b, i].max() == ours[:, b, idx[:n]].max() + 1
            prev_diff = diff[0]


@pytest.mark.parametrize('name', GOLDEN)
def test_golden_position_ids(name):
    d = _load(name)
    scheme, kw = _scheme_of(d)
    assert list(mm.scheme_axis_names(scheme)) == d['axis_names']
    expected, exp_deltas, mode = _expected(d)
    inputs = _inputs(d, scheme)
    pos, deltas = mm.get_position_ids(scheme, **inputs, **kw)
    mask = inputs['attention_mask']
    real = mask != 0
    assert pos.shape == expected.shape
    # VideoRoPE / HoPE positions are float32; the official text-only branch returns the same values as int64
    if d['position_dtype'] == 'float32' or mm.get_scheme(scheme).float_positions:
        assert pos.dtype == torch.float32
        torch.testing.assert_close(pos[:, real], expected[:, real].float(), atol=1e-6, rtol=0)
    else:
        assert pos.dtype == torch.int64
        if mode == 'exact':
            assert torch.equal(pos[:, real], expected[:, real]), (pos, expected)
        else:
            _check_v5_relation(pos, expected, real, d['token_types'])
    # our documented conventions: pads hold PAD_POSITION_ID; rope_deltas = next position - padded length
    assert (pos[:, ~real] == mm.PAD_POSITION_ID).all()
    length = pos.shape[-1]
    for b in range(pos.shape[1]):
        # the next position: 1 + the largest id (VideoRoPE / HoPE: 1 + the largest t, h/w may exceed it)
        last = pos[0, b, real[b]] if scheme in ('videorope', 'hope') else pos[:, b, real[b]]
        nxt = math.ceil(last.max().item()) + 1 if scheme != 'hope' else last.max().item() + 1
        assert deltas[b, 0].item() == nxt - length
    if exp_deltas is not None:
        torch.testing.assert_close(deltas, exp_deltas.to(deltas.dtype), atol=0, rtol=0)


@pytest.mark.parametrize('name', SINGLE_LAYOUTS)
def test_golden_layout_helper(name):
    d = _load(name)
    layout = d['layout']
    scheme, kw = _scheme_of(d)
    expected, _, mode = _expected(d)
    style = {'mrope_interleave': 'qwen3', 'v2pe': 'internvl'}.get(scheme, 'qwen2')
    ts = d['params'].get('timestamp_tokens_per_frame', 3)
    inputs = mm.layout_to_inputs(layout, style=style, timestamp_tokens_per_frame=ts)
    assert inputs['token_types'] == d['token_types'][0]
    pos, _ = mm.get_layout_position_ids(scheme, layout, style=style, timestamp_tokens_per_frame=ts, **kw)
    if mode == 'exact':
        torch.testing.assert_close(pos, expected.to(pos.dtype), atol=1e-6, rtol=0)
    else:
        _check_v5_relation(pos, expected, torch.ones(pos.shape[1:], dtype=torch.bool), d['token_types'])
    if 'hf_inputs' in d:  # the generated inputs are the ones the official function received
        h = d['hf_inputs']
        assert inputs['input_ids'].tolist() == h['input_ids']
        for key in ('image_grid_thw', 'video_grid_thw'):
            got = inputs[key]
            assert (None if got is None else got.tolist()) == h.get(key)


@pytest.mark.parametrize('name', GOLDEN)
def test_golden_axis_of_pair(name):
    d = _load(name)
    scheme, _ = _scheme_of(d)
    p = d['params']
    head_dim = p.get('head_dim', 128)
    got = mm.axis_of_pair(scheme, head_dim, p.get('mrope_section'))
    if d['axis_of_pair'] is None:
        assert (got == 0).all()
    else:
        assert got.tolist() == d['axis_of_pair']
    if 'position_ids_per_pair' in d:  # VRoPE's raw per-pair output = position_ids[axis_of_pair]
        per_pair = torch.tensor(d['position_ids_per_pair'])
        assert torch.equal(torch.tensor(d['position_ids'])[got], per_pair)


@pytest.mark.parametrize('name', ENDS_WITH_TEXT)
def test_golden_decoding_continuation(name):
    """Prefill all but the trailing text tokens, then decode them from rope_deltas and cache_position."""
    d = _load(name)
    scheme, kw = _scheme_of(d)
    expected, _, mode = _expected(d)
    inputs = _inputs(d, scheme)
    k = 2
    if mode != 'exact':
        expected, _ = mm.get_position_ids(scheme, **inputs, **kw)  # relation to 5.x checked in the other test
    length = inputs['input_ids'].shape[1]
    prompt = dict(inputs, input_ids=inputs['input_ids'][:, :-k], attention_mask=inputs['attention_mask'][:, :-k])
    _, deltas = mm.get_position_ids(scheme, **prompt, **kw)
    dec = mm.decode_position_ids(deltas, torch.arange(length - k, length), mm.scheme_num_axes(scheme))
    torch.testing.assert_close(dec.to(expected.dtype), expected[..., -k:], atol=1e-6, rtol=0)


# ---------------------------------------------------------------------------------------------------------------
# an independent per-token reference written from the definitions (golden README / papers)
# ---------------------------------------------------------------------------------------------------------------

def _ref_tokens(segments, style, ts_tokens=3):
    """Token list: ('text',) or ('vis', block_id, f, r, c, T, H, W, kind, sec)."""
    toks, bid = [], 0
    for seg in segments:
        if seg['type'] == 'text':
            toks += [('text',)] * seg['len']
            continue
        T, H, W = seg.get('t', 1), seg['h'], seg['w']
        frames = [(f, 1) for f in range(T)] if (style == 'qwen3' and seg['type'] == 'video') else [(None, T)]
        for _, tt in frames:
            if style == 'qwen3' and seg['type'] == 'video':
                toks += [('text',)] * ts_tokens
            toks.append(('text',))
            for f in range(tt):
                for r in range(H):
                    for c in range(W):
                        toks.append(('vis', bid, f, r, c, tt, H, W, seg['type'], seg.get('second_per_grid_t')))
            bid += 1
            toks.append(('text',))
    return toks


def _ref_positions(scheme, toks, tokens_per_second=None, spatial_reset=False, temporal_stride=1, stride=64):
    A = {'rope1d': 1, 'v2pe': 1, 'vrope': 4}.get(scheme, 3)
    out = []
    cur = 0
    i = 0
    while i < len(toks):
        tk = toks[i]
        if tk[0] == 'text':
            out.append([cur] * A)
            cur += 1
            i += 1
            continue
        j = i
        while j < len(toks) and toks[j][0] == 'vis' and toks[j][1] == tk[1]:
            j += 1
        block = toks[i:j]
        s = cur
        local = []
        for (_, _, f, r, c, T, H, W, kind, sec) in block:
            if scheme == 'rope1d':
                local.append([len(local)])
            elif scheme == 'v2pe':
                local.append([None])
            elif scheme == 'vrope':
                o = f * (H + W - 1)
                local.append([o + r + c, o + r + (W - 1 - c), o + (H - 1 - r) + c, o + (H - 1 - r) + (W - 1 - c)])
            else:
                if scheme == 'mrope' and tokens_per_second is not None and kind == 'video':
                    tau = int(math.floor(f * (1.0 if sec is None else sec) * tokens_per_second))
                elif scheme == 'mrope_interleave':
                    tau = f * temporal_stride
                else:
                    tau = f
                local.append([tau, r, c])
        if scheme == 'v2pe':
            p = s - 1
            n = len(block)
            delta = stride / 256
            for k in range(1, n + 1):
                out.append([p + k * delta])
            cur = p + math.ceil(n * delta) + 1
        elif scheme == 'mrope_interleave' and spatial_reset:
            for t_, r_, c_ in local:
                out.append([s + t_, r_, c_])
            cur = s + max(max(x) for x in local) + 1
        elif scheme == 'vrope':
            T, H, W = block[0][5:8]
            for x in local:
                out.append([s + v for v in x])
            cur = s + T * (H + W - 1)
        else:
            for x in local:
                out.append([s + v for v in x])
            cur = 1 + max(max(p) for p in out)  # 1 + the largest id used so far on any axis
        i = j
    return torch.tensor(out, dtype=torch.float64).T  # (A, L)


def _random_layout(rng, n_seg=4, allow_video=True, seconds=(None, 1.0, 0.5, 2 / 3, 1 / 3, 0.25, 1.5)):
    segs = [{'type': 'text', 'len': rng.randint(0, 3)}]
    for _ in range(n_seg):
        r = rng.random()
        if r < 0.35:
            segs.append({'type': 'image', 't': 1, 'h': rng.randint(1, 4), 'w': rng.randint(1, 5)})
        elif r < 0.75 and allow_video:
            seg = {'type': 'video', 't': rng.randint(1, 6), 'h': rng.randint(1, 3), 'w': rng.randint(1, 3)}
            sec = rng.choice(seconds)
            if sec is not None:
                seg['second_per_grid_t'] = sec
            segs.append(seg)
        segs.append({'type': 'text', 'len': rng.randint(0, 3)})
    return segs


_REF_CASES = [
    ('rope1d', {}, {}),
    ('mrope', {}, {}),
    ('qwen2_5_vl', {'tokens_per_second': 2}, {}),
    ('mrope', {'tokens_per_second': 4}, {'tokens_per_second': 4}),
    ('mrope_interleave', {'spatial_reset': False}, {}),
    ('mrope_interleave', {'spatial_reset': True}, {'spatial_reset': True}),
    ('vrope', {}, {}),
    ('v2pe', {'stride': 64}, {'stride': 64}),
    ('v2pe', {'stride': 16}, {'stride': 16}),
]


@pytest.mark.parametrize('scheme,ref_kw,kw', _REF_CASES)
def test_matches_definition_reference_on_random_layouts(scheme, ref_kw, kw):
    rng = random.Random(zlib.crc32((scheme + repr(sorted(kw.items()))).encode()))
    ref_scheme = {'qwen2_5_vl': 'mrope'}.get(scheme, scheme)
    style = 'qwen3' if scheme == 'mrope_interleave' else 'qwen2'
    for _ in range(12):
        segs = _random_layout(rng)
        ref = _ref_positions(ref_scheme, _ref_tokens(segs, style), **ref_kw)
        pos, deltas = mm.get_layout_position_ids(scheme, segs, **kw)
        torch.testing.assert_close(pos[:, 0].double(), ref, atol=1e-6, rtol=0)
        inp = mm.layout_to_inputs(segs, style=style)
        extra = {}
        if inp['second_per_grid_ts'] is not None and (scheme == 'qwen2_5_vl' or 'tokens_per_second' in kw):
            extra['second_per_grid_ts'] = torch.tensor(inp['second_per_grid_ts'], dtype=torch.float32)
        pos2, deltas2 = mm.get_position_ids(scheme, inp['input_ids'], inp['image_grid_thw'], inp['video_grid_thw'],
                                            **extra, **kw)
        torch.testing.assert_close(pos2, pos, atol=1e-6, rtol=0)
        assert torch.equal(deltas, deltas2)


# ---------------------------------------------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------------------------------------------

THREE_AXIS = [('mrope', {}), ('qwen2_5_vl', {}), ('mrope_interleave', {}), ('mrope_interleave',
                                                                             {'spatial_reset': True})]


@pytest.mark.parametrize('length', [1, 7, 40])
def test_text_only_identical_across_schemes(length):
    ids = torch.arange(length)[None] + 1000
    flat, d1 = mm.get_position_ids('rope1d', ids)
    assert torch.equal(flat[0, 0], torch.arange(length))
    for scheme, kw in THREE_AXIS + [('vrope', {})]:
        pos, d = mm.get_position_ids(scheme, ids, **kw)
        assert torch.equal(pos, flat.expand(pos.shape[0], -1, -1)), scheme
        assert torch.equal(d, d1)
    pos, d = mm.get_position_ids('v2pe', ids)
    assert torch.equal(pos, flat.float()) and torch.equal(d, d1)
    # also with left padding
    mask = torch.ones(1, length + 3, dtype=torch.long)
    mask[:, :3] = 0
    ids_p = torch.cat([torch.full((1, 3), QWEN['pad']), ids], 1)
    flat_p, _ = mm.get_position_ids('rope1d', ids_p, attention_mask=mask)
    for scheme, kw in THREE_AXIS:
        pos, _ = mm.get_position_ids(scheme, ids_p, attention_mask=mask, **kw)
        assert torch.equal(pos, flat_p.expand(3, -1, -1))


_SHIFT_LAYOUT = [{'type': 'text', 'len': 3}, {'type': 'image', 't': 1, 'h': 2, 'w': 3}, {'type': 'text', 'len': 1},
                 {'type': 'video', 't': 3, 'h': 2, 'w': 2, 'second_per_grid_t': 0.5}, {'type': 'text', 'len': 2}]


@pytest.mark.parametrize('scheme,kw', [('rope1d', {}), ('mrope', {}), ('qwen2_5_vl', {}), ('mrope_interleave', {}),
                                       ('vrope', {}), ('v2pe', {})])
def test_attention_score_invariant_to_sequence_shift(scheme, kw):
    pos, _ = mm.get_layout_position_ids(scheme, _SHIFT_LAYOUT, **kw)
    g = torch.Generator().manual_seed(0)
    L = pos.shape[-1]
    q = torch.randn(1, 2, L, 128, generator=g)
    k = torch.randn(1, 2, L, 128, generator=g)
    qr, kr = mm.apply_multimodal_rope(q, k, pos, scheme=scheme, theta=10000.0)
    qs, ks = mm.apply_multimodal_rope(q, k, pos + 37, scheme=scheme, theta=10000.0)
    s0 = qr @ kr.transpose(-1, -2)
    s1 = qs @ ks.transpose(-1, -2)
    torch.testing.assert_close(s1, s0, atol=2e-3, rtol=1e-4)
    # and the rotation does something position-dependent
    assert not torch.allclose(qr @ kr.transpose(-1, -2), q @ k.transpose(-1, -2), atol=1e-2)


def _batch_left_pad(rows, pad_id=QWEN['pad']):
    L = max(len(r) for r in rows)
    ids = torch.full((len(rows), L), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), L, dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, L - len(r):] = torch.tensor(r)
        mask[b, L - len(r):] = 1
    return ids, mask


@pytest.mark.parametrize('scheme,kw', [('rope1d', {}), ('mrope', {}), ('qwen2_5_vl', {}), ('mrope_interleave', {}),
                                       ('mrope_interleave', {'spatial_reset': True}), ('vrope', {}), ('v2pe', {})])
def test_left_padding_keeps_real_ids_and_decodes(scheme, kw):
    style = 'qwen3' if scheme == 'mrope_interleave' else 'qwen2'
    layouts = [_SHIFT_LAYOUT, [{'type': 'text', 'len': 2}, {'type': 'video', 't': 4, 'h': 1, 'w': 2,
                                                             'second_per_grid_t': 1.0}, {'type': 'text', 'len': 1}],
               [{'type': 'text', 'len': 4}]]
    singles = [mm.layout_to_inputs(l, style=style) for l in layouts]
    ids, mask = _batch_left_pad([s['input_ids'][0].tolist() for s in singles])
    grids = {key: [s[key] for s in singles if s[key] is not None] for key in ('image_grid_thw', 'video_grid_thw')}
    extra = {}
    if scheme == 'qwen2_5_vl':
        extra['second_per_grid_ts'] = [x for s in singles for x in (s['second_per_grid_ts'] or [])]
    pos, deltas = mm.get_position_ids(scheme, ids, torch.cat(grids['image_grid_thw']),
                                      torch.cat(grids['video_grid_thw']), attention_mask=mask, **extra, **kw)
    L = ids.shape[1]
    for b, s in enumerate(singles):
        alone, d_alone = mm.get_position_ids(scheme, s['input_ids'], s['image_grid_thw'], s['video_grid_thw'],
                                             second_per_grid_ts=s['second_per_grid_ts'] if extra else None, **kw)
        n = alone.shape[-1]
        assert torch.equal(pos[:, b, L - n:], alone[:, 0]), (scheme, b)
        assert (pos[:, b, :L - n] == mm.PAD_POSITION_ID).all()
        # same decode position whether the row was padded or not
        dec_pad = mm.decode_position_ids(deltas[b:b + 1], torch.tensor([L]), pos.shape[0])
        dec_alone = mm.decode_position_ids(d_alone, torch.tensor([n]), pos.shape[0])
        assert torch.equal(dec_pad, dec_alone)
        assert dec_alone[0, 0, 0].item() == math.ceil(alone.max().item()) + 1


@pytest.mark.parametrize('stride', mm.V2PE_STRIDES)
def test_v2pe_visual_block_spans_ceil_n_delta(stride):
    delta = stride / 256
    for n in (1, 3, 5, 100, 256, 257, 512, 1000):
        segs = [{'type': 'text', 'len': 2}, {'type': 'image', 't': 1, 'h': 1, 'w': n}, {'type': 'text', 'len': 1}]
        pos, _ = mm.get_layout_position_ids('v2pe', segs, markers=False, stride=stride)
        p = pos[0, 0]
        before, vis, after = p[1].item(), p[2:2 + n], p[2 + n].item()
        assert after - before == math.ceil(n * delta) + 1
        torch.testing.assert_close(vis.double(), before + delta * torch.arange(1, n + 1, dtype=torch.float64),
                                   atol=1e-6, rtol=0)
        assert vis.max().item() <= before + math.ceil(n * delta)


def test_v2pe_delta_and_sampler():
    rng = random.Random(0)
    draws = {mm.sample_v2pe_stride(rng) for _ in range(200)}
    assert draws == set(mm.V2PE_STRIDES)
    a, _ = mm.get_layout_position_ids('v2pe', _SHIFT_LAYOUT, stride=32)
    b, _ = mm.get_layout_position_ids('v2pe', _SHIFT_LAYOUT, delta=0.125)
    assert torch.equal(a, b)


def test_qwen25_temporal_scaling_above_2fps_no_int_cast():
    """fps > 2 means second_per_grid_t = temporal_patch_size / fps < 1; the temporal id must still advance."""
    for fps, expected_tau in [(4, [0, 1, 2, 3, 4, 5]), (6, [0, 0, 1, 2, 2, 3]), (2, [0, 2, 4, 6, 8, 10]),
                              (8, [0, 0, 1, 1, 2, 2])]:
        sec = 2 / fps
        for secs in ([sec], torch.tensor([sec], dtype=torch.float32), torch.tensor([sec], dtype=torch.float64)):
            segs = [{'type': 'text', 'len': 1}, {'type': 'video', 't': 6, 'h': 1, 'w': 2}, {'type': 'text', 'len': 1}]
            inp = mm.layout_to_inputs(segs)
            pos, deltas = mm.get_position_ids('qwen2_5_vl', inp['input_ids'], None, inp['video_grid_thw'],
                                              second_per_grid_ts=secs)
            t = pos[0, 0, 2:14].view(6, 2)
            s = 2
            assert (t[:, 0] - s).tolist() == expected_tau, (fps, secs)
            # the token after the block: 1 + largest id used so far on any axis (original Qwen code)
            assert pos[:, 0, 14].tolist() == [pos[:, 0, :14].max().item() + 1] * 3
    # Qwen2-VL ignores time: tau = frame index
    segs = [{'type': 'video', 't': 3, 'h': 1, 'w': 1}]
    pos, _ = mm.get_layout_position_ids('mrope', segs, markers=False)
    assert pos[0, 0].tolist() == [0, 1, 2]


def test_mrope_interleave_spatial_reset_definition():
    segs = [{'type': 'text', 'len': 2}, {'type': 'image', 't': 1, 'h': 2, 'w': 3}, {'type': 'text', 'len': 1},
            {'type': 'video', 't': 2, 'h': 3, 'w': 1}, {'type': 'text', 'len': 1}]
    pos, deltas = mm.get_layout_position_ids('mrope_interleave', segs, spatial_reset=True,
                                             timestamp_tokens_per_frame=1)
    t, h, w = pos[:, 0].tolist()
    # text 0,1, <vs> 2, image at s=3: t=3, h/w local; <ve> = s + max(local)+1 = 3+2+1 = 6
    assert t[:3] == [0, 1, 2] and t[3:9] == [3] * 6
    assert h[3:9] == [0, 0, 0, 1, 1, 1] and w[3:9] == [0, 1, 2, 0, 1, 2]
    assert [t[9], h[9], w[9]] == [6, 6, 6] and t[10] == 7
    # frame 1: ts 8, <vs> 9, tokens at s=10 (t=10, h=r, w=0), <ve> = 10 + 2 + 1 = 13
    assert t[11] == 8 and t[12] == 9 and t[13:16] == [10] * 3 and h[13:16] == [0, 1, 2] and w[13:16] == [0] * 3
    assert t[16] == 13
    assert deltas.item() == max(max(t), max(h), max(w)) + 1 - len(t)
    # without reset h/w are offset by s
    pos0, _ = mm.get_layout_position_ids('mrope_interleave', segs, timestamp_tokens_per_frame=1)
    assert pos0[1, 0, 3:9].tolist() == [3, 3, 3, 4, 4, 4]
    # temporal_stride scales tau when videos are not split (Qwen2-style input)
    pos_s, _ = mm.get_layout_position_ids('mrope_interleave', [{'type': 'video', 't': 3, 'h': 1, 'w': 1}],
                                          style='qwen2', markers=False, split_video_frames=False, temporal_stride=2)
    assert pos_s[0, 0].tolist() == [0, 2, 4]


def test_mrope_interleave_splits_unsplit_video_grid():
    segs = [{'type': 'text', 'len': 1}, {'type': 'video', 't': 3, 'h': 2, 'w': 2}]
    inp = mm.layout_to_inputs(segs, style='qwen3')
    assert inp['video_grid_thw'].tolist() == [[3, 4, 4]]
    pos, _ = mm.get_position_ids('mrope_interleave', inp['input_ids'], None, inp['video_grid_thw'])
    lay, _ = mm.get_layout_position_ids('mrope_interleave', segs)
    assert torch.equal(pos, lay)
    # a Qwen2-style contiguous video also works: each frame is its own block
    inp2 = mm.layout_to_inputs(segs, style='qwen2')
    pos2, _ = mm.get_position_ids('mrope_interleave', inp2['input_ids'], None, inp2['video_grid_thw'])
    assert pos2[0, 0, 2:14].view(3, 4)[:, 0].tolist() == [2, 4, 6]


@pytest.mark.parametrize('scheme,kw', [('rope1d', {}), ('mrope', {}), ('qwen2_5_vl', {}), ('mrope_interleave', {}),
                                       ('mrope_interleave', {'spatial_reset': True}), ('vrope', {}), ('v2pe', {})])
def test_packed_sequences_restart_per_document(scheme, kw):
    style = 'qwen3' if scheme == 'mrope_interleave' else 'qwen2'
    docs = [[{'type': 'text', 'len': 2}, {'type': 'image', 't': 1, 'h': 2, 'w': 2}, {'type': 'text', 'len': 1}],
            [{'type': 'text', 'len': 1}, {'type': 'video', 't': 2, 'h': 2, 'w': 1}, {'type': 'text', 'len': 3}],
            [{'type': 'image', 't': 1, 'h': 1, 'w': 3}, {'type': 'video', 't': 3, 'h': 1, 'w': 1}]]
    ins = [mm.layout_to_inputs(d, style=style) for d in docs]
    pad = 2
    ids = torch.cat([torch.full((1, pad), QWEN['pad'])] + [i['input_ids'] for i in ins], 1)
    mask = torch.cat([torch.zeros(1, pad, dtype=torch.long)] +
                     [torch.full_like(i['input_ids'], n + 1) for n, i in enumerate(ins)], 1)
    img = torch.cat([i['image_grid_thw'] for i in ins if i['image_grid_thw'] is not None])
    vid = torch.cat([i['video_grid_thw'] for i in ins if i['video_grid_thw'] is not None])
    pos, deltas = mm.get_position_ids(scheme, ids, img, vid, attention_mask=mask, **kw)
    at = pad
    for d in docs:
        alone, d_alone = mm.get_layout_position_ids(scheme, d, style=style, **kw)
        n = alone.shape[-1]
        assert torch.equal(pos[:, 0, at:at + n], alone[:, 0]), scheme
        at += n
    assert (pos[:, 0, :pad] == mm.PAD_POSITION_ID).all()
    # rope_deltas continue the last document
    last = alone[:, 0]
    assert deltas.item() == math.ceil(last.max().item()) + 1 - ids.shape[1]
    # the same packing given as cu_seqlens (flash-attention varlen offsets; the pads form their own first span)
    lens = [pad] + [i['input_ids'].shape[1] for i in ins]
    cu = torch.tensor([0] + lens).cumsum(0)
    pos_cu, deltas_cu = mm.get_position_ids(scheme, ids, img, vid, attention_mask=(mask != 0).long(), cu_seqlens=cu,
                                            **kw)
    assert torch.equal(pos_cu, pos) and torch.equal(deltas_cu, deltas)


def test_mm_token_type_ids_path_matches_ids_path():
    inp = mm.layout_to_inputs(_SHIFT_LAYOUT)
    ids = inp['input_ids']
    tt = torch.zeros_like(ids)
    tt[ids == QWEN['image']] = 1
    tt[ids == QWEN['video']] = 2
    a = mm.get_position_ids('mrope', ids, inp['image_grid_thw'], inp['video_grid_thw'])
    b = mm.get_position_ids('mrope', ids * 0 + 7, inp['image_grid_thw'], inp['video_grid_thw'], mm_token_type_ids=tt)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


# ---------------------------------------------------------------------------------------------------------------
# application: dtypes, decoding, allocation
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('dtype,tol', [(torch.float32, 1e-6), (torch.bfloat16, 2e-2), (torch.float16, 2e-3)])
@pytest.mark.parametrize('scheme', ['mrope', 'mrope_interleave', 'vrope', 'v2pe'])
def test_apply_dtypes(dtype, tol, scheme):
    pos, _ = mm.get_layout_position_ids(scheme, _SHIFT_LAYOUT)
    g = torch.Generator().manual_seed(1)
    L = pos.shape[-1]
    q = torch.randn(2, 4, L, 64, generator=g)
    k = torch.randn(2, 2, L, 64, generator=g)
    pos2 = pos.expand(-1, 2, -1)
    ref_q, ref_k = mm.apply_multimodal_rope(q, k, pos2, scheme=scheme)
    out_q, out_k = mm.apply_multimodal_rope(q.to(dtype), k.to(dtype), pos2, scheme=scheme)
    assert out_q.dtype == dtype and out_k.dtype == dtype and out_q.shape == q.shape and out_k.shape == k.shape
    torch.testing.assert_close(out_q.float(), ref_q, atol=tol * 4, rtol=tol)
    torch.testing.assert_close(out_k.float(), ref_k, atol=tol * 4, rtol=tol)
    # norms are preserved by the rotation
    torch.testing.assert_close(ref_q.norm(dim=-1), q.norm(dim=-1), atol=1e-4, rtol=1e-4)
    # (B, L, H, D) layout
    bq, bk = mm.apply_multimodal_rope(q.transpose(1, 2), k.transpose(1, 2), pos2, scheme=scheme, unsqueeze_dim=2)
    torch.testing.assert_close(bq.transpose(1, 2), ref_q)


def test_apply_matches_chunked_hf_style_reference():
    """Build cos/sin per axis, then pick chunks by mrope_section (the Qwen2-VL recipe), compare."""
    pos, _ = mm.get_layout_position_ids('mrope', _SHIFT_LAYOUT)
    head_dim, theta = 128, 1e6
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    ang = pos.float()[..., None] * inv                         # (3, B, L, 64)
    emb = torch.cat([ang, ang], -1)
    sec = [16, 24, 24] * 2
    cos = torch.cat([c[i % 3] for i, c in enumerate(emb.cos().split(sec, -1))], -1)
    sin = torch.cat([c[i % 3] for i, c in enumerate(emb.sin().split(sec, -1))], -1)
    c2, s2 = mm.multimodal_rope_cos_sin(pos, head_dim, 'mrope', theta=theta)
    torch.testing.assert_close(c2, cos)
    torch.testing.assert_close(s2, sin)


@pytest.mark.parametrize('scheme,kw', [('mrope', {}), ('qwen2_5_vl', {}), ('mrope_interleave', {}), ('vrope', {}),
                                       ('v2pe', {})])
def test_decoding_step_matches_full_prefill(scheme, kw):
    """Rotating a generated token from (rope_deltas, cache_position) equals rotating it inside a longer prefill."""
    style = 'qwen3' if scheme == 'mrope_interleave' else 'qwen2'
    inp = mm.layout_to_inputs(_SHIFT_LAYOUT, style=style)
    extra = {'second_per_grid_ts': inp['second_per_grid_ts']} if scheme == 'qwen2_5_vl' else {}
    ids = inp['input_ids']
    after_image = inp['token_types'].index('vision_end') + 1
    ids_pad, mask = _batch_left_pad([ids[0].tolist(), ids[0, after_image:].tolist()])  # row 1: no image
    img = inp['image_grid_thw']
    vid = torch.cat([inp['video_grid_thw'], inp['video_grid_thw']])
    ex = {'second_per_grid_ts': extra['second_per_grid_ts'] * 2} if extra else {}
    _, deltas = mm.get_position_ids(scheme, ids_pad, img, vid, attention_mask=mask, **ex, **kw)
    full_ids = torch.cat([ids_pad, torch.full((2, 3), 1999)], 1)
    full_mask = torch.cat([mask, torch.ones(2, 3, dtype=torch.long)], 1)
    full, _ = mm.get_position_ids(scheme, full_ids, img, vid, attention_mask=full_mask, **ex, **kw)
    L = ids_pad.shape[1]
    cp = torch.arange(L, L + 3)
    g = torch.Generator().manual_seed(2)
    q = torch.randn(2, 2, 3, 64, generator=g)
    k = torch.randn(2, 2, 3, 64, generator=g)
    dq, dk = mm.apply_multimodal_rope(q, k, rope_deltas=deltas, cache_position=cp, scheme=scheme)
    fq, fk = mm.apply_multimodal_rope(q, k, full[..., L:], scheme=scheme)
    torch.testing.assert_close(dq, fq)
    torch.testing.assert_close(dk, fk)


def test_axis_of_pair_allocations():
    assert mm.axis_of_pair('mrope', 128).tolist() == [0] * 16 + [1] * 24 + [2] * 24
    assert mm.axis_of_pair('mrope', 64).tolist() == [0] * 8 + [1] * 12 + [2] * 12
    il = mm.axis_of_pair('mrope_interleave', 128)
    assert [int((il == a).sum()) for a in range(3)] == [24, 20, 20] and il[:6].tolist() == [0, 1, 2, 0, 1, 2]
    assert il[60:].tolist() == [0, 0, 0, 0]
    assert mm.axis_of_pair('vrope', 128).tolist() == [i % 4 for i in range(64)]
    assert (mm.axis_of_pair('v2pe', 32) == 0).all() and (mm.axis_of_pair('rope1d', 32) == 0).all()
    assert mm.axis_of_pair('mrope', 16, [2, 3, 3]).tolist() == [0, 0, 1, 1, 1, 2, 2, 2]


# ---------------------------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------------------------

def _img_inputs():
    return mm.layout_to_inputs([{'type': 'text', 'len': 1}, {'type': 'image', 't': 1, 'h': 2, 'w': 2},
                                {'type': 'video', 't': 2, 'h': 1, 'w': 2}])


def test_error_unknown_scheme():
    with pytest.raises(ValueError, match=r"unknown multimodal RoPE scheme 'mrope3d'.*fix"):
        mm.get_position_ids('mrope3d', torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match='unknown multimodal RoPE scheme'):
        mm.axis_of_pair('nope', 128)
    with pytest.raises(ValueError, match='unknown option'):
        mm.get_position_ids('vrope', torch.zeros(1, 3, dtype=torch.long), spatial_reset=True)


def test_error_grid_count_mismatch():
    inp = _img_inputs()
    ids, img, vid = inp['input_ids'], inp['image_grid_thw'], inp['video_grid_thw']
    with pytest.raises(ValueError, match=r'more image tokens than image_grid_thw.*fix'):
        mm.get_position_ids('mrope', ids, None, vid)
    with pytest.raises(ValueError, match=r'more image grid.*fix'):
        mm.get_position_ids('mrope', ids, torch.cat([img, img]), vid)
    with pytest.raises(ValueError, match=r'does not fit the run of 4 consecutive image tokens.*fix'):
        mm.get_position_ids('mrope', ids, torch.tensor([[1, 4, 6]]), vid)
    with pytest.raises(ValueError, match='spatial_merge_size'):
        mm.get_position_ids('mrope', ids, torch.tensor([[1, 3, 4]]), vid)
    with pytest.raises(ValueError, match='more video tokens'):
        mm.get_position_ids('mrope_interleave', ids, img, torch.tensor([[1, 2, 4]]))


def test_error_mrope_section():
    with pytest.raises(ValueError, match=r'summing to head_dim/2 = 64.*fix'):
        mm.axis_of_pair('mrope', 128, [16, 24, 20])
    with pytest.raises(ValueError, match='summing to head_dim/2'):
        mm.apply_multimodal_rope(torch.zeros(1, 1, 2, 64), torch.zeros(1, 1, 2, 64),
                                 torch.zeros(3, 1, 2, dtype=torch.long), scheme='mrope_interleave',
                                 mrope_section=[24, 20, 20])
    with pytest.raises(ValueError, match='no exact default mrope_section'):
        mm.axis_of_pair('mrope', 20)


@pytest.mark.parametrize('bad', [0.0, -1.0, float('nan')])
def test_error_non_positive_second_per_grid_t(bad):
    inp = _img_inputs()
    with pytest.raises(ValueError, match=r'second_per_grid_t .*must be positive.*fix'):
        mm.get_position_ids('qwen2_5_vl', inp['input_ids'], inp['image_grid_thw'], inp['video_grid_thw'],
                            second_per_grid_ts=torch.tensor([bad]))
    with pytest.raises(ValueError, match='must be positive'):
        mm.get_layout_position_ids('qwen2_5_vl', [{'type': 'video', 't': 2, 'h': 1, 'w': 1,
                                                   'second_per_grid_t': bad}])


def test_error_bad_cu_seqlens():
    with pytest.raises(ValueError, match='cu_seqlens'):
        mm.get_position_ids('mrope', torch.zeros(1, 5, dtype=torch.long), cu_seqlens=torch.tensor([0, 3, 4]))


def test_error_second_per_grid_ts_misuse():
    inp = _img_inputs()
    with pytest.raises(ValueError, match='tokens_per_second'):
        mm.get_position_ids('mrope', inp['input_ids'], inp['image_grid_thw'], inp['video_grid_thw'],
                            second_per_grid_ts=[1.0])
    with pytest.raises(ValueError, match='one value per video'):
        mm.get_position_ids('qwen2_5_vl', inp['input_ids'], inp['image_grid_thw'], inp['video_grid_thw'],
                            second_per_grid_ts=[1.0, 1.0])
