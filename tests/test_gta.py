"""GTA (``zoo.encodings.gta``): the official attention layer and rotation matrices of ``gta.pt`` through the public
API, GTA's defining properties, its options, and the image / video models.

Golden data: ``../shared/golden/seeds/gta.pt`` (README there): one official ``G.Attention`` (DiT branch, integer
positions) with its ``so2rep``, the same weights with values unrotated (the official "rope" mode) and without
positions, and the multi-view code's normalised-coordinate matrices. The whole-DiT output is not reproduced: the zoo
has no DiT.
"""
from __future__ import annotations

import pytest
import torch

import zoo  # noqa: F401
from zoo.encodings import Positions, create_pos_encoding
from zoo.encodings.gta import GroupTransformTerm, gta_frequencies
from zoo.models.attention import Attention, KVCache

from conftest import load_golden

CPU = torch.device('cpu')


@pytest.fixture(scope='module')
def gold():
    return load_golden('seeds/gta.pt')


def _pe(grid=(8, 8), dim=64, heads=2, npt=0, **kw):
    return create_pos_encoding('gta', dict(dim=dim, num_heads=heads, depth=1, grid_size=grid, num_prefix_tokens=npt,
                                           num_class_tokens=npt), kw).eval()


def _official_attention(gold, dtype=torch.float32) -> Attention:
    cfg = gold['config']['attn']
    attn = Attention(cfg['dim'], cfg['num_heads'], qkv_bias=cfg['qkv_bias']).to(dtype).eval()
    attn.load_state_dict({k: v.to(dtype) for k, v in gold['state_dict'].items()}, strict=True)
    return attn


def _term(pe, grid=(1, 8, 8), dtype=torch.float32, npt=0):
    return pe.attn_terms(Positions(grid, npt, npt), dtype, CPU)[0]


# ----------------------------------------------------------------------------------------------------- golden
def test_rotation_matrices_and_positions_match_the_official_code(gold):
    pe = _pe(positions='integer')
    coords = pe.grid_positions((1, 8, 8))
    torch.testing.assert_close(coords, gold['coords'], atol=0, rtol=0)
    torch.testing.assert_close(pe.rotation_matrices(coords), gold['so2rep'], atol=1e-6, rtol=0)
    # the multi-view code: (row / H, col / W) and 2 pi 2^k / 2^F, k = 1..F; 3 frequencies, head_dim 12
    nvs = _pe(grid=(4, 6), dim=12, heads=1, num_freqs=3)
    c = nvs.grid_positions((1, 4, 6))
    torch.testing.assert_close(c, gold['nvs_so2_coords_4x6'], atol=0, rtol=0)
    torch.testing.assert_close(nvs.rotation_matrices(c), gold['nvs_so2rep_4x6_nfreq3'], atol=1e-6, rtol=0)


@pytest.mark.parametrize('fused', [True, False])
def test_the_official_attention_layer(gold, fused):
    attn = _official_attention(gold)
    attn.fused_attn = fused
    x = gold['input'].float()
    with torch.no_grad():
        out = attn(x, _term(_pe(positions='integer')))
        rope = attn(x, _term(_pe(positions='integer', v_transform=False)))
        nope = attn(x, None)
    torch.testing.assert_close(out, gold['attn_out' if fused else 'attn_out_nonfused'], atol=2e-5, rtol=0)
    torch.testing.assert_close(rope, gold['attn_out_rope'], atol=2e-5, rtol=0)
    torch.testing.assert_close(nope, gold['attn_out_nope'], atol=2e-5, rtol=0)
    assert (out - nope).abs().max() > 1 and (out - rope).abs().max() > 1  # the positional terms matter


def test_the_official_attention_layer_in_float64(gold):
    attn = _official_attention(gold, torch.float64)
    with torch.no_grad():
        out = attn(gold['input'].double(), _term(_pe(positions='integer'), dtype=torch.float64))
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, gold['attn_out_fp64'], atol=1e-5, rtol=0)  # official so2rep stays float32


# ------------------------------------------------------------------------------------------ defining properties
def _attention_with_positions(positions: torch.Tensor, v_transform: bool = True):
    """A seeded layer and a term built from explicit positions ``(N, 2)`` (the encoding's public pieces)."""
    torch.manual_seed(0)
    attn = Attention(32, 2, qkv_bias=True).eval()
    pe = _pe(dim=32, heads=2, positions='integer', v_transform=v_transform)
    return attn, pe._term(positions[None], 0, torch.float32)


def test_relative_only_a_global_shift_changes_nothing():
    """Scores depend on x_j - x_i, and every value reaches query i transformed by R(x_j - x_i): shifting every
    position leaves the weights and the whole output unchanged; moving one token does not."""
    pos = torch.stack(torch.meshgrid(torch.arange(3.), torch.arange(4.), indexing='ij'), -1).reshape(-1, 2)
    x = torch.randn(2, 12, 32)
    attn, term = _attention_with_positions(pos)
    _, shifted = _attention_with_positions(pos + torch.tensor([3.0, -5.0]))
    _, moved = _attention_with_positions(pos.flip(0))
    with torch.no_grad():
        q, k, _ = attn.qkv(x).reshape(2, 12, 3, 2, 16).permute(2, 0, 3, 1, 4)
        w = [(a @ b.transpose(-2, -1)).softmax(-1) for a, b in (t.rotate(q, k) for t in (term, shifted))]
        torch.testing.assert_close(w[0], w[1], atol=1e-5, rtol=1e-5)
        out, out_shifted, out_moved = attn(x, term), attn(x, shifted), attn(x, moved)
    torch.testing.assert_close(out, out_shifted, atol=1e-5, rtol=1e-5)
    assert (out - out_moved).abs().max() > 1e-2


def test_the_group_action_is_orthogonal_and_a_homomorphism():
    pe = _pe(grid=(2, 5, 5), dim=48, heads=1, positions='integer')  # video: (row, col, t), 24 pairs = 3 x 8
    a, b = torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[-4.0, 0.5, 2.0]])
    ra, rb, rab = (pe.rotation_matrices(p)[0] for p in (a, b, a + b))
    eye = torch.eye(2).expand_as(ra)
    torch.testing.assert_close(ra @ ra.transpose(-2, -1), eye, atol=1e-6, rtol=0)
    torch.testing.assert_close(torch.linalg.det(ra), torch.ones(24), atol=1e-6, rtol=0)
    torch.testing.assert_close(ra @ rb, rab, atol=1e-5, rtol=0)  # rho(g_a) rho(g_b) = rho(g_a g_b)
    # pair p turns with axis p % 3 at frequency p // 3
    angle = torch.atan2(ra[:, 1, 0], ra[:, 0, 0])
    freqs = gta_frequencies(8, 'integer')
    want = torch.remainder(a[0].repeat(8) * freqs.repeat_interleave(3) + torch.pi, 2 * torch.pi) - torch.pi
    torch.testing.assert_close(angle, want, atol=1e-5, rtol=0)


def test_the_output_transform_inverts_the_value_transform_at_equal_positions():
    term = _term(_pe(npt=1), grid=(1, 8, 8), npt=1)
    v = torch.randn(2, 2, 65, 32)
    moved = term.transform_values(v)
    assert (moved - v)[:, :, 1:].abs().max() > 0.1 and torch.equal(moved[:, :, 0], v[:, :, 0])  # prefix: identity
    torch.testing.assert_close(term.transform_output(moved), v, atol=1e-5, rtol=0)
    plain = _term(_pe(v_transform=False))
    assert torch.equal(plain.transform_values(v[:, :, 1:]), v[:, :, 1:])  # v_transform=False: the rope mode


def test_the_complex_kernel_gives_the_bits_of_apply_rope():
    """Eager CPU inference rotates q, k, v and the output with RotaryTerm's complex multiply (the one kernel): the
    same bits as apply_rope with (sin, cos) and with (-sin, cos) for R^T, on the strided views of a fused qkv."""
    from zoo.encodings.rotation import apply_rope
    term = _term(_pe(npt=1), grid=(1, 8, 8), npt=1)
    qkv = torch.randn(2, 65, 3, 2, 32).permute(2, 0, 3, 1, 4)  # (3, B, H, L, D) views, as the attention has them
    q, k, v = qkv.unbind(0)
    with torch.inference_mode():
        rq, rk = term.rotate(q, k)
        assert torch.equal(rq, apply_rope(q, term.sin, term.cos)) and torch.equal(rk, apply_rope(k, term.sin, term.cos))
        assert term._rotary()._complex is not None  # the complex kernel ran
        assert torch.equal(term.transform_values(v), apply_rope(v, term.sin, term.cos))
        assert torch.equal(term.transform_output(v), apply_rope(v, -term.sin, term.cos))
        tail = v[:, :, -5:]  # a KV-cache step: the queries are the last tokens
        assert torch.equal(term.transform_output(tail), apply_rope(tail, -term.sin[..., -5:, :], term.cos[..., -5:, :]))


def test_equal_positions_make_gta_plain_attention():
    """All tokens at one position: every relative transform is the identity, so GTA equals no encoding."""
    pos = torch.full((6, 2), 3.0)
    attn, term = _attention_with_positions(pos)
    x = torch.randn(2, 6, 32)
    with torch.no_grad():
        torch.testing.assert_close(attn(x, term), attn(x, None), atol=1e-5, rtol=1e-5)


def test_kv_cache_steps_match_the_full_pass():
    torch.manual_seed(0)
    attn = Attention(64, 2, qkv_bias=True).eval()
    pe = _pe(grid=(1, 12), positions='integer')
    x = torch.randn(1, 12, 64)
    with torch.no_grad():
        full = attn(x, _term(pe, (1, 1, 12)), is_causal=True)
        whole = _term(pe, (1, 1, 12))
        first = GroupTransformTerm(whole.sin[..., :8, :], whole.cos[..., :8, :])
        cache = KVCache(1)
        attn(x[:, :8], first, is_causal=True, kv_cache=cache)
        step = attn(x[:, 8:], GroupTransformTerm(whole.sin[..., 8:, :], whole.cos[..., 8:, :]), is_causal=True,
                    kv_cache=cache)
    torch.testing.assert_close(step, full[:, 8:], atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------------------------------ options
def test_positions_and_frequencies():
    assert torch.allclose(gta_frequencies(3, 'normalized'), 2 * torch.pi * torch.tensor([0.25, 0.5, 1.0]))
    assert torch.allclose(gta_frequencies(4, 'integer'), 10000.0 ** -(torch.arange(4) / 4))
    norm = _pe(grid=(4, 6)).grid_positions((1, 4, 6))
    assert norm.max() < 1 and torch.equal(norm[7], torch.tensor([1 / 4, 1 / 6]))
    video = _pe(grid=(2, 4, 6)).grid_positions((2, 4, 6))  # axes (row, col, t)
    assert torch.equal(video[24 + 7], torch.tensor([1 / 4, 1 / 6, 1 / 2]))
    # head_dim 32 on a video: 16 pairs = 3 axes x 5 frequencies + 1 unrotated pair
    r = _pe(grid=(2, 4, 6)).rotation_matrices(video[-1:])[0]
    assert torch.equal(r[15], torch.eye(2)) and (r[:15] - torch.eye(2)).abs().amax() > 0


def test_p_rope_zeroes_the_lowest_frequencies():
    for positions in ('integer', 'normalized'):
        plain = _pe(positions=positions).frequencies()
        half = _pe(positions=positions, p_rope=0.5).frequencies()
        low = plain.argsort()[:4]  # the 4 lowest of 8
        assert (half[low] == 0).all() and torch.equal(half[plain.argsort()[4:]], plain[plain.argsort()[4:]])
    x = torch.randn(1, 1, 64, 32)
    assert torch.equal(_term(_pe(p_rope=0.0)).transform_values(x), x)


@pytest.mark.parametrize('bad, match', [(dict(positions='pixels'), 'positions must be one of'),
                                        (dict(num_freqs=9), r'num_freqs must be in \[1, 8\]'),
                                        (dict(theta=0), 'theta must be > 0'),
                                        (dict(p_rope=2), 'p_rope must be a fraction'),
                                        (dict(random_positions='shuffle'), 'unknown random_positions mode'),
                                        (dict(extrapolation='ntk'), 'does not apply to the .gta. encoding')])
def test_bad_options_are_one_line_errors(bad, match):
    with pytest.raises(ValueError, match=match) as err:
        _pe(**bad)
    assert '\n' not in str(err.value)


def test_odd_head_dim_and_video_grid_on_an_image_model_are_refused():
    with pytest.raises(ValueError, match='even head_dim'):
        _pe(dim=30, heads=2)
    with pytest.raises(ValueError, match='2D encoding'):
        _term(_pe(), grid=(2, 8, 8))


# ------------------------------------------------------------------------------------------------------- models
def test_image_and_video_models_inflation_and_a_new_size():
    import timm
    from zoo.models import inflate_2d_to_3d
    small = dict(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=2, num_classes=5)
    torch.manual_seed(0)
    image = timm.create_model('pe_vit_tiny_patch16_gta_224', dynamic_img_size=True, **small).eval()
    video = timm.create_model('pe_video_vit_tiny_patch16_gta_224', num_frames=4, **small).eval()
    assert not list(image.pe.parameters()) and video.pe.video and not image.pe.video
    video.load_state_dict(inflate_2d_to_3d(image.state_dict(), video), strict=True)
    with torch.no_grad():
        assert video(torch.randn(2, 3, 4, 32, 32)).shape == (2, 5)
        img = image(torch.randn(2, 3, 48, 40))
        assert torch.isfinite(img).all()
        official = timm.create_model('pe_vit_tiny_patch16_gta_224', pe_kwargs=dict(positions='integer'), **small)
        assert official.pe.positions == 'integer'
