"""3D (video) position encodings: the official reference outputs in ../shared/golden/video and the 3D properties.

Golden files (see ../shared/golden/video/README.md) are reproduced through the public encoding API
(``create_pos_encoding`` + ``Positions``) and the zoo's one ``Attention``; a missing file fails (set
ZOO_ALLOW_MISSING_GOLDEN=1 to skip). What a test computes outside the encoding is only the input to it (e.g.
TimeSformer's per-frame patch embedding) or a reorder between token layouts.
"""
from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F

from conftest import load_golden
from zoo.encodings import Positions, create_pos_encoding
from zoo.encodings._grid import resample_grid_table
from zoo.encodings.absolute import timesformer_checkpoint_resize
from zoo.encodings.irpe import irpe_bucket_ids, irpe_coefficients, irpe_num_buckets, piecewise_index
from zoo.models.attention import Attention

CPU = torch.device('cpu')


def _enc(kind: str, grid=(2, 4, 4), dim: int = 64, heads: int = 2, depth: int = 2, prefix: int = 0, **pe_kwargs):
    return create_pos_encoding(kind, dict(dim=dim, num_heads=heads, depth=depth, grid_size=grid,
                                          num_prefix_tokens=prefix, num_class_tokens=prefix), pe_kwargs)


def _max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item()


# ============================================================================================ golden: TimeSformer
_TS_CASES = ['a', 'b_more_frames', 'c_more_frames_bigger']


def _timesformer_tokens(g: dict, enc, case: str) -> torch.Tensor:
    """Tokens entering block 0 in TimeSformer's order ``[cls, (h w t) with t fastest]`` from ``enc.embed``."""
    sd = g['state_dict']
    x = g[f'input_{case}'].float()
    b, c, t, h, w = x.shape
    frames = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)  # TimeSformer embeds each frame with a Conv2d
    p = F.conv2d(frames, sd['patch_embed.proj.weight'], sd['patch_embed.proj.bias'], stride=16)
    gh, gw = p.shape[-2:]
    patches = p.flatten(2).transpose(1, 2).reshape(b, t * gh * gw, -1)  # zoo order: t-major, then row-major
    tokens = torch.cat([sd['cls_token'].expand(b, -1, -1), patches], dim=1)
    out = enc.embed(tokens, Positions((t, gh, gw), num_prefix_tokens=1, num_class_tokens=1))
    order = [0] + [1 + ti * gh * gw + n for n in range(gh * gw) for ti in range(t)]  # explicit reorder to (n, t)
    return out[:, order]


def _timesformer_st_ape(g: dict, **pe_kwargs):
    cfg = g['config']
    grid = (cfg['num_frames'], cfg['img_size'] // cfg['patch_size'], cfg['img_size'] // cfg['patch_size'])
    enc = _enc('st_ape', grid=grid, dim=cfg['embed_dim'], heads=cfg['num_heads'], depth=cfg['depth'], prefix=1,
               **pe_kwargs)
    enc.load_state_dict({k: g['state_dict'][k] for k in ('pos_embed', 'time_embed')}, strict=True)
    return enc


@pytest.mark.parametrize('case', _TS_CASES)
def test_timesformer_tokens_st_ape_nearest(case):
    """TimeSformer's tokens (trained size, 8 frames, 6 frames at 80x96) through st_ape with resize='nearest'."""
    g = load_golden('video/timesformer_st_embed.pt')
    enc = _timesformer_st_ape(g, resize='nearest')
    with torch.no_grad():
        ours = _timesformer_tokens(g, enc, case)
    ref = g[f'tokens_{case}']
    assert ours.shape == ref.shape
    torch.testing.assert_close(ours, ref, atol=1e-6, rtol=0)


def test_timesformer_default_resize_is_not_nearest():
    """The default (bicubic + linear) rule agrees at the trained size and differs where TimeSformer resizes."""
    g = load_golden('video/timesformer_st_embed.pt')
    enc = _timesformer_st_ape(g)
    with torch.no_grad():
        torch.testing.assert_close(_timesformer_tokens(g, enc, 'a'), g['tokens_a'], atol=1e-6, rtol=0)
        assert _max_err(_timesformer_tokens(g, enc, 'c_more_frames_bigger'), g['tokens_c_more_frames_bigger']) > 1e-2


def test_timesformer_checkpoint_load_resize():
    g = load_golden('video/timesformer_st_embed.pt')
    target = g['config']['loadpretrained_target']
    pos_embed, time_embed = timesformer_checkpoint_resize(g['state_dict']['pos_embed'], g['state_dict']['time_embed'],
                                                          target['num_patches'], target['num_frames'])
    torch.testing.assert_close(pos_embed, g['loadpretrained_pos_embed'], atol=0, rtol=0)
    torch.testing.assert_close(time_embed, g['loadpretrained_time_embed'], atol=0, rtol=0)
    # the loaded tables fit an st_ape of the target size (8 frames, 6x6 patches) with a strict load
    enc = _enc('st_ape', grid=(8, 6, 6), dim=32, prefix=1)
    enc.load_state_dict({'pos_embed': pos_embed, 'time_embed': time_embed}, strict=True)


# ============================================================================================= golden: VideoMAE
@pytest.mark.parametrize('key,grid,dim', [('table_small', (4, 5, 6), 96), ('table_vits_16f_224', (8, 14, 14), 384)])
def test_videomae_sincos1d_table(key, grid, dim):
    """Built in float64 (float32 angles would be off by 1e-4 at n ~ 1567)."""
    g = load_golden('video/videomae_sincos1d.pt')
    enc = _enc('sincos1d', grid=grid, dim=dim)
    n = math.prod(grid)
    with torch.no_grad():
        added = enc.embed(torch.zeros(1, n, dim), Positions(grid))
    torch.testing.assert_close(added, g[key], atol=1e-7, rtol=0)


def test_videomae_sincos1d_longer_clip_extends_the_table():
    enc = _enc('sincos1d', grid=(8, 14, 14), dim=32)
    short, long = enc.table((8, 14, 14)), enc.table((16, 14, 14))
    assert long.shape == (1, 3136, 32)
    assert torch.equal(long[:, :1568], short)


@pytest.mark.parametrize('key,grid', [('v2_resize_source_table', (8, 14, 14)), ('v2_resize_to_32f_224', (16, 14, 14)),
                                      ('v2_resize_to_16f_160', (8, 10, 10)), ('v2_resize_to_32f_160', (16, 10, 10))])
def test_videomae_v2_resize_block(key, grid):
    """resize='interpolate' is VideoMAE V2's fine-tuning resize of the 16-frame / 224 px table."""
    g = load_golden('video/videomae_sincos1d.pt')
    enc = _enc('sincos1d', grid=(8, 14, 14), dim=32, resize='interpolate')
    with torch.no_grad():
        added = enc.embed(torch.zeros(1, math.prod(grid), 32), Positions(grid))
    torch.testing.assert_close(added, g[key], atol=1e-6, rtol=0)


# ======================================================================================= golden: V-JEPA 2 3D RoPE
def _vjepa2_attention(g: dict, dtype=torch.float32) -> Attention:
    cfg = g['config']
    attn = Attention(cfg['dim'], cfg['num_heads'], qkv_bias=cfg['qkv_bias']).eval()
    attn.load_state_dict(g['state_dict'], strict=True)
    return attn.to(dtype)


def _vjepa2_rope(g: dict, pairing: str, angle_dtype: str = 'float32'):
    cfg = g['config']
    return _enc('rope3d', grid=(cfg['T'], cfg['H'], cfg['W']), dim=cfg['dim'], heads=cfg['num_heads'], depth=1,
                pairing=pairing, angle_dtype=angle_dtype)


def _grid(g: dict):
    return g['config']['T'], g['config']['H'], g['config']['W']


@pytest.mark.parametrize('pairing,suffix', [('vjepa2', ''), ('interleaved', '_fixed')])
def test_vjepa2_rope_attention(pairing, suffix):
    """Official RoPEAttention (head_dim 64: chunks 20 | 20 | 20 | 4) through rope3d + the zoo's Attention; the
    documented fix is the default pairing."""
    g = load_golden('video/vjepa2_rope_attn_hd64.pt')
    enc = _vjepa2_rope(g, pairing)
    assert (enc.sub, enc.rest) == (g['config']['d_dim'], g['config']['n_unrotated'])
    term = enc.attn_terms(Positions(_grid(g)), torch.float32, CPU)[0]
    q_rot, k_rot = term.rotate(g['q'], g['k'])
    torch.testing.assert_close(q_rot, g[f'q_rot{suffix}'], atol=1e-5, rtol=0)
    torch.testing.assert_close(k_rot, g[f'k_rot{suffix}'], atol=1e-5, rtol=0)
    attn = _vjepa2_attention(g)
    with torch.no_grad():
        out = attn(g['input'].float(), term)
        torch.testing.assert_close(out, g[f'out{suffix}'], atol=1e-5, rtol=0)
        if not suffix:
            torch.testing.assert_close(out, g['out_eager'], atol=1e-5, rtol=0)
            attn.fused_attn = False  # the explicit softmax path
            torch.testing.assert_close(attn(g['input'].float(), term), g['out_eager'], atol=1e-5, rtol=0)
    assert _max_err(g['out'], g['out_fixed']) > 0.1  # the two pairings really differ


def test_vjepa2_rope_attention_masked():
    """V-JEPA masking: kept tokens (per-sample mask_idx) rotate at their original (t, h, w) via keep_indices."""
    g = load_golden('video/vjepa2_rope_attn_hd64.pt')
    enc, idx = _vjepa2_rope(g, 'vjepa2'), g['mask_idx']
    assert not torch.equal(idx[0], idx[1])
    term = enc.attn_terms(Positions(_grid(g), keep_indices=idx), torch.float32, CPU)[0]
    heads, hd = g['q'].shape[1], g['q'].shape[-1]
    take = idx[:, None, :, None].expand(-1, heads, -1, hd)
    q_rot, k_rot = term.rotate(g['q'].gather(2, take), g['k'].gather(2, take))
    torch.testing.assert_close(q_rot, g['q_rot_masked'], atol=1e-5, rtol=0)
    torch.testing.assert_close(k_rot, g['k_rot_masked'], atol=1e-5, rtol=0)
    x = g['input'].float()
    x_kept = x.gather(1, idx[..., None].expand(-1, -1, x.shape[-1]))
    with torch.no_grad():
        out = _vjepa2_attention(g)(x_kept, term)
    torch.testing.assert_close(out, g['out_masked'], atol=1e-5, rtol=0)


def test_vjepa2_rope_attention_fp64():
    g = load_golden('video/vjepa2_rope_attn_hd64.pt')
    term = _vjepa2_rope(g, 'vjepa2').attn_terms(Positions(_grid(g)), torch.float64, CPU)[0]
    assert term.sin.dtype == torch.float64
    with torch.no_grad():
        out = _vjepa2_attention(g, torch.float64)(g['input'].double(), term)
    torch.testing.assert_close(out, g['out_fp64'], atol=1e-9, rtol=0)


def test_vjepa2_rope_attention_bf16():
    """bf16: angle_dtype='input' rotates by bf16 angles as the official code does; the float32 default is close."""
    g = load_golden('video/vjepa2_rope_attn_hd64.pt')
    attn = _vjepa2_attention(g, torch.bfloat16)
    x = g['input'].bfloat16()
    heads, hd = g['config']['num_heads'], g['config']['head_dim']
    with torch.no_grad():
        qkv = attn.qkv(x).reshape(x.shape[0], x.shape[1], 3 * heads, hd).transpose(1, 2)
        q, k = qkv[:, :heads], qkv[:, heads:2 * heads]
        exact = _vjepa2_rope(g, 'vjepa2', 'input').attn_terms(Positions(_grid(g)), torch.bfloat16, CPU)[0]
        assert exact.sin.dtype == torch.bfloat16
        torch.testing.assert_close(exact.rotate(q, k)[0].float(), g['q_rot_bf16'].float(), atol=2e-2, rtol=0)
        torch.testing.assert_close(attn(x, exact).float(), g['out_bf16'].float(), atol=2e-2, rtol=0)
        policy = _vjepa2_rope(g, 'vjepa2').attn_terms(Positions(_grid(g)), torch.bfloat16, CPU)[0]
        assert policy.sin.dtype == torch.float32
        torch.testing.assert_close(attn(x, policy).float(), g['out_bf16'].float(), atol=2e-2, rtol=0)


# V-JEPA 2's rotate_queries_or_keys on one chunk: chunk D is the t chunk of a head of head_dim hd; positions are the
# tubelet index of a (32, 1, 1) grid, so the h and w chunks turn by angle 0 and the test checks them unchanged.
_CHUNKS = [(20, 64), (26, 80), (28, 88)]


def _rotate_chunk(chunk: torch.Tensor, hd: int, pairing: str, dtype=torch.float32, angle_dtype: str = 'float32',
                  ids: torch.Tensor | None = None) -> torch.Tensor:
    """Put ``chunk`` ``(1, heads, 32, D)`` in the t channels of random heads, rotate, check the rest, return t."""
    b, heads, n, d = chunk.shape
    enc = _enc('rope3d', grid=(n, 1, 1), dim=heads * hd, heads=heads, depth=1, pairing=pairing,
               angle_dtype=angle_dtype)
    assert enc.sub == d
    x = torch.randn(b, heads, n, hd, generator=torch.Generator().manual_seed(0)).to(dtype)
    x[..., :d] = chunk.to(dtype)
    pos = Positions((n, 1, 1)) if ids is None else Positions(None, ids=ids)
    out, _ = enc.attn_terms(pos, dtype, CPU)[0].rotate(x, x)
    assert torch.equal(out[..., d:], x[..., d:]), 'the h, w chunks (position 0) and the rest must not change'
    return out[..., :d]


@pytest.mark.parametrize('d,hd', _CHUNKS)
def test_vjepa2_rotate_fn(d, hd):
    g = load_golden('video/vjepa2_rotate_fn.pt')
    assert torch.equal(g['pos'], torch.arange(32))
    x = g[f'x_D{d}'].float()
    torch.testing.assert_close(_rotate_chunk(x, hd, 'vjepa2'), g[f'out_D{d}'], atol=1e-5, rtol=0)
    torch.testing.assert_close(_rotate_chunk(x, hd, 'interleaved'), g[f'out_fixed_D{d}'], atol=1e-5, rtol=0)
    torch.testing.assert_close(_rotate_chunk(x.double(), hd, 'vjepa2', torch.float64), g[f'out_fp64_D{d}'],
                               atol=1e-9, rtol=0)
    bf16 = _rotate_chunk(x.bfloat16(), hd, 'vjepa2', torch.bfloat16, angle_dtype='input')
    torch.testing.assert_close(bf16.float(), g[f'out_bf16_D{d}'].float(), atol=2e-2, rtol=0)
    # non-integer positions (V-JEPA 2-AC grid rescaling) through explicit (t, row, col) ids
    ids = torch.stack([g['pos_float'], torch.zeros(32), torch.zeros(32)])[:, None]
    torch.testing.assert_close(_rotate_chunk(x, hd, 'vjepa2', ids=ids), g[f'out_posfloat_D{d}'], atol=1e-5, rtol=0)


@pytest.mark.parametrize('d,hd', _CHUNKS)
@pytest.mark.parametrize('pairing,key', [('vjepa2', 'operator_D{}'), ('interleaved', 'operator_fixed_D{}')])
def test_vjepa2_rotation_operator(d, hd, pairing, key):
    """The linear map at each position equals the official one; only the fixed pairing is orthogonal."""
    g = load_golden('video/vjepa2_rotate_fn.pt')
    basis = torch.eye(d).expand(32, d, d).permute(1, 0, 2)[None]  # head k holds basis vector e_k at every position
    op = _rotate_chunk(basis, hd, pairing).squeeze(0).permute(1, 2, 0)  # (32, D out, D in)
    ref = g[key.format(d)]
    torch.testing.assert_close(op, ref, atol=1e-6, rtol=0)
    defect = (op @ op.transpose(1, 2) - torch.eye(d)).abs().amax().item()
    assert (defect < 1e-5) if pairing == 'interleaved' else (defect > 0.5)


# ============================================================================================== 3D properties
def _rotated_scores(enc, grid, seed: int = 0) -> tuple:
    """Scores of one fixed q and k vector placed at every position of ``grid`` (per head), and the coordinates."""
    n = math.prod(grid)
    gen = torch.Generator().manual_seed(seed)
    term = enc.attn_terms(Positions(grid), torch.float64, CPU)[0]
    q, k = torch.randn(2, 1, 2, 1, term.sin.shape[-1], generator=gen, dtype=torch.float64).expand(2, 1, 2, n, -1)
    qr, kr = term.rotate(q, k)
    coords = torch.stack(torch.meshgrid(*[torch.arange(s) for s in grid], indexing='ij'), -1).reshape(n, 3)
    return qr @ kr.transpose(-1, -2), coords


def _relative_spread(scores: torch.Tensor, coords: torch.Tensor) -> float:
    """Largest spread of the scores over pairs that share one offset (dt, dr, dc); 0 for a relative-only encoding."""
    off = (coords[:, None] - coords[None]).reshape(-1, 3)
    key = ((off[:, 0] + 50) * 100 + off[:, 1] + 50) * 100 + off[:, 2] + 50
    s = scores.reshape(scores.shape[0], scores.shape[1], -1)
    spread = 0.0
    for v in key.unique():
        sel = s[..., key == v]
        spread = max(spread, (sel.amax(-1) - sel.amin(-1)).abs().max().item())
    return spread


def test_rope3d_scores_depend_on_offsets_only():
    grid = (3, 4, 5)
    scores, coords = _rotated_scores(_enc('rope3d', dim=64), grid)
    assert _relative_spread(scores, coords) < 1e-9
    # the released pairing is not a rotation: scores also depend on absolute positions
    scores, coords = _rotated_scores(_enc('rope3d', dim=64, pairing='vjepa2'), grid)
    assert _relative_spread(scores, coords) > 1e-3


def test_rope3d_layout_image_grid_and_prefix():
    enc = _enc('rope3d', dim=64)  # head_dim 32: sub 10, rest 2
    assert (enc.sub, enc.rest) == (10, 2)
    sin, cos = enc.term((1, 3, 3), 0, torch.float32, CPU).sin, enc.term((1, 3, 3), 0, torch.float32, CPU).cos
    assert torch.equal(sin[..., :10], torch.zeros_like(sin[..., :10]))  # t chunk: identity on an image grid
    assert torch.equal(sin[..., 30:], torch.zeros_like(sin[..., 30:])) and torch.equal(cos[..., 30:],
                                                                                       torch.ones_like(cos[..., 30:]))
    # a prefix token (class / register) is not rotated
    term = enc.attn_terms(Positions((2, 2, 2), num_prefix_tokens=1), torch.float32, CPU)[0]
    assert term.sin.shape[-2] == 9 and not term.sin[..., 0, :].any() and (term.cos[..., 0, :] == 1).all()
    assert term.sin[..., 1:, :].any()


@pytest.mark.parametrize('variant', ['ap', 'ld'])
def test_comrope_3d_commutes_and_is_relative(variant):
    """Generators of the three axes commute, so R(x)^T R(y) = R(y - x) over (row, col, t)."""
    enc = _enc('comrope', grid=(3, 4, 4), dim=64, variant=variant, block_size=4)  # head_dim 32: 8 blocks
    a = enc.generators(0, torch.float64)  # (H, 3, m, b, b)
    assert a.shape[1] == 3
    for i in range(3):
        for j in range(3):
            torch.testing.assert_close(a[:, i] @ a[:, j], a[:, j] @ a[:, i], atol=1e-10, rtol=0)
    gen = torch.Generator().manual_seed(0)
    x, y = torch.rand(5, 3, generator=gen, dtype=torch.float64), torch.rand(5, 3, generator=gen, dtype=torch.float64)
    lhs = enc.rotation_blocks(0, x).transpose(-1, -2) @ enc.rotation_blocks(0, y)
    torch.testing.assert_close(lhs, enc.rotation_blocks(0, y - x), atol=1e-9, rtol=0)
    if variant == 'ap':  # block j turns with axis j mod 3 only (8 blocks: row 3, col 3, t 2)
        used = (a.abs().sum((0, 3, 4)) > 0)  # (3, m)
        expected = torch.arange(a.shape[2])[None] % 3 == torch.arange(3)[:, None]
        assert torch.equal(used, expected)


def test_liere_3d_does_not_commute():
    enc = _enc('liere', grid=(3, 4, 4), dim=64, block_size=4)
    a = enc.generators(0, torch.float64)
    assert a.shape[1] == 3 and (a[:, 0] @ a[:, 2] - a[:, 2] @ a[:, 0]).abs().max() > 1e-3


def test_comrope_3d_rotations_match_the_definition():
    """The fast path (exp per distinct coordinate, gathers) equals exp(sum_i x_i A_i) at normalised centres."""
    grid = (3, 2, 4)
    for variant, block in [('ap', 8), ('ap', 4), ('ld', 4), ('liere', 4), ('ld', 2)]:
        enc = _enc('comrope', grid=grid, dim=64, variant=variant, block_size=block).double()
        term = enc.attn_terms(Positions(grid), torch.float64, CPU)[0]
        centres = [((torch.arange(n) + 0.5) / n).double() for n in grid]  # built in float32, as documented
        t, h, w = torch.meshgrid(*centres, indexing='ij')
        coords = torch.stack([h, w, t], -1).reshape(-1, 3)  # (row, col, t) at every token, t-major order
        ref = enc.rotation_blocks(0, coords)  # (L, H, m, b, b)
        x = torch.randn(1, 2, coords.shape[0], 32, dtype=torch.float64)
        want = torch.einsum('lhmij,nhlmj->nhlmi', ref, x.unflatten(-1, (32 // block, block))).flatten(-2)
        torch.testing.assert_close(term.rotate(x, x)[0], want, atol=1e-9, rtol=0, msg=f'{variant} b={block}')


@pytest.mark.parametrize('kind,kwargs', [('rope_mixed', {}), ('comrope', dict(variant='ld')), ('liere', {}),
                                         ('fourier', {})])
def test_2d_parameters_are_the_t0_slice_of_3d(kind, kwargs):
    """Time parameters come last: a 3D encoding holding a 2D one's parameters plus zero time parameters gives every
    frame the image encoding (the inflation rule of the docs)."""
    torch.manual_seed(0)
    e2, e3 = _enc(kind, grid=(4, 4), **kwargs), _enc(kind, grid=(3, 4, 4), **kwargs)
    sd = {}
    for name, p3 in e3.state_dict().items():
        p2 = e2.state_dict()[name]
        if p2.shape == p3.shape:
            sd[name] = p2
            continue
        axis = next(i for i, (a, b) in enumerate(zip(p2.shape, p3.shape)) if a != b)
        pad = list(p3.shape)
        pad[axis] = p3.shape[axis] - p2.shape[axis]
        sd[name] = torch.cat([p2, p2.new_zeros(pad)], axis)
    e3.load_state_dict(sd)
    e2.eval(), e3.eval()
    with torch.no_grad():
        if kind == 'fourier':
            t2 = e2.table((4, 4), CPU)
            torch.testing.assert_close(e3.table((3, 4, 4), CPU), t2.repeat(1, 3, 1), atol=1e-6, rtol=0)
            return
        x = torch.randn(1, 2, 16, 32)
        r2 = e2.attn_terms(Positions((1, 4, 4)), torch.float32, CPU)[0].rotate(x, x)[0]
        r3 = e3.attn_terms(Positions((3, 4, 4)), torch.float32, CPU)[0].rotate(x.repeat(1, 1, 3, 1),
                                                                                x.repeat(1, 1, 3, 1))[0]
    torch.testing.assert_close(r3, r2.repeat(1, 1, 3, 1), atol=1e-5, rtol=0)


def test_rope_mixed_3d_init_and_shapes():
    torch.manual_seed(0)
    enc = _enc('rope_mixed', grid=(2, 4, 4), dim=96, heads=2)  # head_dim 48: 24 pairs, three groups of 8
    f = enc.freqs.detach()
    assert f.shape == (3, 2, 2, 24)
    mags = f.norm(dim=0)
    torch.testing.assert_close(mags[0, 0, :8], 10.0 ** (-torch.arange(8) / 8.0), atol=1e-6, rtol=0)
    d = f[:, 0, 0].t()  # (24, 3) directions of each pair
    groups = [d[g * 8] / d[g * 8].norm() for g in range(3)]
    gram = torch.stack(groups) @ torch.stack(groups).t()
    torch.testing.assert_close(gram, torch.eye(3), atol=1e-5, rtol=0)  # orthonormal directions per head
    assert _enc('rope_mixed', grid=(4, 4), dim=96).freqs.shape == (2, 2, 2, 24)  # 2D layout unchanged


@pytest.mark.parametrize('kind,kwargs', [('sincos3d', {}), ('sincos3d', dict(uniform_power=True)), ('fourier', {}),
                                         ('sincos1d', {})])
def test_fixed_tables_at_more_frames_and_bigger_frames(kind, kwargs):
    enc = _enc(kind, grid=(4, 6, 6), **kwargs)
    base, big = enc.table((4, 6, 6), CPU), enc.table((8, 9, 9), CPU)  # 2x frames, 1.5x frame size
    assert base.shape == (1, 144, 64) and big.shape == (1, 648, 64)
    assert torch.isfinite(big).all()
    if kind == 'sincos3d':  # integer positions: the trained cells keep their rows (extrapolation)
        t, h, w = torch.meshgrid(torch.arange(4), torch.arange(6), torch.arange(6), indexing='ij')
        rows = ((t * 9 + h) * 9 + w).reshape(-1)
        torch.testing.assert_close(big[:, rows], base, atol=0, rtol=0)


def test_sincos3d_channel_layout():
    """[t | h | w] blocks of [sin | cos] halves; uniform_power=False gives t D/2, h and w D/4."""
    enc = _enc('sincos3d', dim=64)
    tab = enc.table((3, 4, 5), CPU)[0].reshape(3, 4, 5, 64)
    assert torch.equal(tab[0, 0, 0], torch.cat([torch.zeros(16), torch.ones(16)] + [torch.zeros(8), torch.ones(8)] * 2))
    assert (tab[:, :1, :1, :32] == tab[:, :, :, :32]).all()   # t block depends on t only
    assert (tab[:1, :, :1, 32:48] == tab[:, :, :, 32:48]).all()  # h block on h only
    assert (tab[:1, :1, :, 48:] == tab[:, :, :, 48:]).all()    # w block on w only
    torch.testing.assert_close(tab[1, 0, 0, 1], torch.tensor(math.sin(10000 ** (-1 / 16))), atol=1e-7, rtol=0)
    up = _enc('sincos3d', dim=64, uniform_power=True).table((3, 4, 5), CPU)[0].reshape(3, 4, 5, 64)
    assert (up[:, :1, :1, :22] == up[:, :, :, :22]).all()  # ceil(64 / 6) * 2 = 22 channels per block


def test_ape_3d_trilinear_resample():
    torch.manual_seed(0)
    enc = _enc('ape', grid=(2, 4, 4))
    assert enc.pos_embed.shape == (1, 32, 64)  # no prefix entries for video tables
    assert enc.table((2, 4, 4)) is enc.pos_embed
    same = resample_grid_table(enc.pos_embed.detach(), (2, 4, 4), (2, 4, 4))
    assert torch.equal(same, enc.pos_embed.detach())  # interpolation at the same grid is the identity
    big = enc.table((4, 6, 6))
    assert big.shape == (1, 144, 64) and torch.isfinite(big).all()
    with torch.no_grad():
        enc.pos_embed.copy_(torch.linspace(-1, 1, 64).expand(1, 32, 64))  # constant over cells stays constant
    torch.testing.assert_close(enc.table((5, 3, 7)), torch.linspace(-1, 1, 64).expand(1, 105, 64))
    x = torch.zeros(1, 1 + 144, 64)  # a prefix token gets no embedding
    out = enc.embed(x, Positions((4, 6, 6), num_prefix_tokens=1, num_class_tokens=1))
    assert torch.equal(out[:, 0], x[:, 0])
    enc.set_grid_size((4, 6, 6))
    assert enc.pos_embed.shape == (1, 144, 64) and enc.grid_size == (4, 6, 6)


def test_st_ape_tables_class_and_register_tokens():
    torch.manual_seed(0)
    enc = _enc('st_ape', grid=(2, 3, 3), prefix=1)
    assert enc.pos_embed.shape == (1, 10, 64) and enc.time_embed.shape == (1, 2, 64)
    with torch.no_grad():
        enc.time_embed.normal_()
    x = torch.zeros(1, 2 + 18, 64)  # class token, one register, 2 x 3 x 3 patches
    out = enc.embed(x, Positions((2, 3, 3), num_prefix_tokens=2, num_class_tokens=1))
    assert torch.equal(out[:, 0], enc.pos_embed[:, 0].detach())  # class: its spatial row, no time entry
    assert torch.equal(out[:, 1], x[:, 1])  # register: nothing
    want = enc.pos_embed[:, 1:, None].detach() + enc.time_embed[:, None].detach()  # (1, 9, 2, C) -> t-major
    torch.testing.assert_close(out[:, 2:], want.transpose(1, 2).reshape(1, 18, 64))
    with pytest.raises(ValueError, match='class rows'):
        enc.embed(x[:, 1:], Positions((2, 3, 3)))
    enc.set_grid_size((4, 5, 5))
    assert enc.pos_embed.shape == (1, 26, 64) and enc.time_embed.shape == (1, 4, 64)


def test_peg_3d_is_a_depthwise_conv3d():
    torch.manual_seed(0)
    enc = _enc('peg', grid=(2, 4, 4))
    assert enc.pegs['0'].weight.shape == (64, 1, 3, 3, 3)
    assert _enc('peg', grid=(4, 4)).pegs['0'].weight.shape == (64, 1, 3, 3)  # images keep Conv2d and its keys
    x = torch.randn(2, 32, 64)
    out = enc.mix(x, Positions((2, 4, 4)), 0)
    vol = x.reshape(2, 2, 4, 4, 64).permute(0, 4, 1, 2, 3)
    conv = enc.pegs['0']
    want = (F.conv3d(vol, conv.weight, conv.bias, padding=1, groups=64) + vol).permute(0, 2, 3, 4, 1).reshape(2, 32, 64)
    torch.testing.assert_close(out, want)
    with pytest.raises(ValueError, match='full patch grid'):
        enc.mix(x[:, :8], Positions((2, 4, 4), keep_indices=torch.arange(8).expand(2, -1)), 0)


def test_irpe_3d_product_buckets():
    alpha, beta, gamma = irpe_coefficients(1.9)
    b, k = int(beta), 2 * int(beta) + 1
    ids = irpe_bucket_ids('product', 3, 4, ratio=1.9, skip=1, frames=5)
    assert ids.shape == (61, 61) and irpe_num_buckets('product', 1.9, skip=1, num_axes=3) == k ** 3 + 1
    assert (ids[0] == k ** 3).all() and (ids[:, 0] == k ** 3).all()  # prefix pairs: the extra bucket
    t, r, c = torch.meshgrid(torch.arange(5), torch.arange(3), torch.arange(4), indexing='ij')
    t, r, c = t.reshape(-1), r.reshape(-1), c.reshape(-1)
    i, j = 7, 50
    g = [piecewise_index(d, alpha, beta, gamma).item() + b for d in (t[i] - t[j], r[i] - r[j], c[i] - c[j])]
    assert ids[1 + i, 1 + j].item() == (g[0] * k + g[1]) * k + g[2]
    same_frame = irpe_bucket_ids('product', 3, 4, ratio=1.9)  # dt = 0 slice: the image buckets, shifted by b K^2
    assert torch.equal(ids[1:13, 1:13], same_frame + b * k * k)
    # with ratio 1.9 every axis saturates at |offset| >= 4: a larger clip reuses the trained buckets
    trained = set(irpe_bucket_ids('product', 6, 6, ratio=1.9, frames=6).unique().tolist())
    assert set(irpe_bucket_ids('product', 9, 9, ratio=1.9, frames=12).unique().tolist()) == trained
    enc = _enc('irpe', grid=(2, 4, 4), method='cross')
    assert [tb.part for tb in enc.layers[0].tables('k')] == ['cross_rows', 'cross_cols', 'cross_time']
    assert enc.layers[0].rpe_k.rp_time.lookup_table_weight.shape == (1, 32, k)


# ============================================================================================== errors
@pytest.mark.parametrize('kind,kwargs,dim,grid,match', [
    ('sincos', {}, 64, (2, 4, 4), 'sincos1d'),
    ('rope_axial', {}, 64, (2, 4, 4), 'rope3d'),
    ('rope3d', dict(pairing='half'), 64, (2, 4, 4), 'pairing'),
    ('rope3d', dict(angle_dtype='bf16'), 64, (2, 4, 4), 'angle_dtype'),
    ('rope3d', {}, 10, (2, 4, 4), 'even head_dim'),  # head_dim 5
    ('st_ape', dict(resize='bicubic'), 64, (2, 4, 4), 'resize'),
    ('sincos1d', dict(resize='nearest'), 64, (2, 4, 4), 'resize'),
    ('sincos3d', {}, 36, (2, 4, 4), 'divisible by 8'),
    ('comrope', dict(variant='ap', block_size=8), 32, (2, 4, 4), 'at least one per axis'),  # 2 blocks, 3 axes
    ('ape', {}, 64, (2, 0, 4), 'grid_size'),
    ('ape', {}, 64, (2, 3, 4, 4), 'grid_size'),
])
def test_bad_video_configs_raise(kind, kwargs, dim, grid, match):
    with pytest.raises(ValueError, match=match):
        _enc(kind, grid=grid, dim=dim, **kwargs)


def test_sincos1d_interpolate_needs_grid_size():
    with pytest.raises(ValueError, match='pass grid_size'):
        create_pos_encoding('sincos1d', dict(dim=32), dict(resize='interpolate'))


@pytest.mark.parametrize('kind', ['ape', 'fourier', 'comrope', 'irpe', 'rope_mixed', 'peg'])
def test_image_encoding_refuses_a_video_grid(kind):
    """An encoding built for images (2-tuple grid_size) gets a video grid: a clear error, not a silent 2D result."""
    enc = _enc(kind, grid=(4, 4))
    pos = Positions((2, 4, 4))

    def run():
        x = enc.embed(torch.zeros(1, 32, 64), pos)
        enc.attn_terms(pos, torch.float32, CPU)
        enc.mix(x, pos, 0)
    if kind == 'peg':  # a 2D PEG convolves each frame: documented, no error
        run()
        return
    with pytest.raises(ValueError, match=r'\(1, H, W\)|T=2'):
        run()


def test_rope3d_bad_ids_raise():
    enc = _enc('rope3d')
    with pytest.raises(ValueError, match=r'\(3, B, L\)'):
        enc.attn_terms(Positions(None, ids=torch.zeros(2, 1, 5)), torch.float32, CPU)


@pytest.mark.parametrize('method', ['euclidean', 'quant', 'cross_rows', 'cross_cols', 'cross_time'])
def test_irpe_3d_distance_buckets_match_the_definition(method):
    alpha, beta, gamma = irpe_coefficients(2.5)
    t, r, c = torch.meshgrid(torch.arange(3), torch.arange(4), torch.arange(5), indexing='ij')
    d = [(a.reshape(-1)[:, None] - a.reshape(-1)[None]) for a in (r, c, t)]
    sq = d[0] ** 2 + d[1] ** 2 + d[2] ** 2
    arg = {'euclidean': sq.float().sqrt().round(), 'quant': sq, 'cross_rows': d[0], 'cross_cols': d[1],
           'cross_time': d[2]}[method]
    want = piecewise_index(arg, alpha, beta, gamma) + int(beta)
    assert torch.equal(irpe_bucket_ids(method, 4, 5, ratio=2.5, frames=3), want)


@pytest.mark.parametrize('kind', ['ape', 'st_ape', 'sincos1d', 'sincos3d', 'fourier', 'rope_mixed', 'comrope', 'irpe'])
def test_grid_encodings_refuse_explicit_ids(kind):
    """Explicit-id positions (video-LLM sequences) carry no grid: grid encodings say so."""
    enc = _enc(kind, grid=(2, 4, 4))
    pos = Positions(None, ids=torch.zeros(3, 1, 32))
    with pytest.raises(ValueError, match='patch grid'):
        enc.embed(torch.zeros(1, 32, 64), pos)
        enc.attn_terms(pos, torch.float32, CPU)


def test_ape_set_grid_size_keeps_the_table_kind():
    with pytest.raises(ValueError, match='3D'):
        _enc('ape', grid=(2, 4, 4)).set_grid_size((4, 4))
    with pytest.raises(ValueError, match='2D'):
        _enc('ape', grid=(4, 4)).set_grid_size((2, 4, 4))


# ==================================================================================== the inflation hook (2D -> 3D)
def _inflated(e2, e3, image_grid=(4, 4)) -> dict:
    """Every parameter of ``e3`` from ``e2`` through the encoding's own hook (what ``inflate_2d_to_3d`` does)."""
    own, image = e3.state_dict(), e2.state_dict()
    return {k: e3.inflate_param(k, image.get(k), own[k], image_grid, 'pe.') for k in own}


def test_inflate_param_default_keeps_or_appends_a_zero_time_part():
    torch.manual_seed(0)
    e2, e3 = _enc('comrope', grid=(4, 4), variant='ld'), _enc('comrope', grid=(3, 4, 4), variant='ld')
    out = _inflated(e2, e3)
    src, got = e2.layers[0].multiplier.detach(), out['layers.0.multiplier']
    assert got.shape == (1, 3, 4, 1, 1) and torch.equal(got[:, :2], src) and got[:, 2].abs().max() == 0
    assert torch.equal(out['layers.0.freqs'], e2.layers[0].freqs)  # same shape: kept
    target = e3.state_dict()['layers.0.freqs']
    assert e3.inflate_param('layers.0.freqs', torch.zeros(4, 1, 8, 4, 4), target, (4, 4)) is None  # unrelated
    assert e3.inflate_param('layers.0.freqs', None, target, (4, 4)) is None  # nothing to start from


def test_inflate_param_tables_kernels_and_buckets():
    torch.manual_seed(0)
    # learned table: the frame table repeated over the tubelets (a child APE too), resampled for another frame grid
    e2, e3 = _enc('irpe', grid=(4, 4), prefix=1), _enc('irpe', grid=(2, 4, 4), prefix=1)
    out = _inflated(e2, e3)
    frame = e2.ape.pos_embed.detach()[:, 1:]
    torch.testing.assert_close(out['ape.pos_embed'], frame.repeat(1, 2, 1))
    # iRPE product tables: every dt slice starts as the image table, the class bucket kept
    k = 2 * int(irpe_coefficients(1.9)[1]) + 1
    src, got = e2.layers[0].rpe_k.lookup_table_weight.detach(), out['layers.0.rpe_k.lookup_table_weight']
    assert got.shape[-1] == k ** 3 + 1
    for dt in range(k):
        torch.testing.assert_close(got[..., dt * k * k:(dt + 1) * k * k], src[..., :k * k])
    torch.testing.assert_close(got[..., -1], src[..., -1])
    with pytest.raises(ValueError, match=r'pe\.ape\.pos_embed \(1, 17, 64\) does not hold a 5x5 patch table'):
        _inflated(e2, e3, image_grid=(5, 5))
    # space + time tables: the spatial table is the image one, the time table starts at zero
    st2, st3 = _enc('ape', grid=(4, 4)), _enc('st_ape', grid=(3, 4, 4))
    out = e3_out = {k: st3.inflate_param(k, {'pos_embed': st2.pos_embed.detach()}.get(k), v, (4, 4))
                    for k, v in st3.state_dict().items()}
    torch.testing.assert_close(e3_out['pos_embed'], st2.pos_embed.detach())
    assert out['time_embed'].shape == (1, 3, 64) and out['time_embed'].abs().max() == 0
    # PEG: the k x k kernel is the middle time slice of the k x k x k one
    p2, p3 = _enc('peg', grid=(4, 4)), _enc('peg', grid=(2, 4, 4))
    out = _inflated(p2, p3)
    w = out['pegs.0.weight']
    torch.testing.assert_close(w[:, :, 1], p2.pegs['0'].weight.detach())
    assert w[:, :, 0].abs().max() == 0 and w[:, :, 2].abs().max() == 0
    assert torch.equal(out['pegs.0.bias'], p2.pegs['0'].bias.detach())


def test_inflate_module_has_no_encoding_knowledge():
    """``zoo/models/inflate.py`` calls the encoding's hook: no parameter name of any encoding in its code."""
    import ast
    from pathlib import Path
    import zoo.models.inflate as inflate
    tree = ast.parse(Path(inflate.__file__).read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.FunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    words = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and id(n) not in docs] + [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)] + \
        [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    known = re.compile(r'pos_embed|time_embed|lookup_table|irpe|freqs|multiplier|rope|\b(ape|peg|pegs|w_r)\b')
    assert not [w for w in words if known.search(w.lower())]
