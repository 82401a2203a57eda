"""ComRoPE-AP, ComRoPE-LD and LieRE: properties, official golden outputs, bad inputs, caching and low precision.

Golden files come from the official code (see ``shared/golden/README.md``). They are required: a missing folder fails
unless ``ZOO_ALLOW_MISSING_GOLDEN=1`` is set, which skips the golden tests instead.
"""
from __future__ import annotations

from functools import partial

import pytest
from conftest import load_golden
import torch
from torch import nn

import zoo  # noqa: F401  (registers the models with timm)
import zoo.encodings.comrope  # noqa: F401  (registers 'comrope' and 'liere')
from zoo.encodings import Positions, create_pos_encoding
from zoo.encodings.comrope import ComRoPE, LieRE

COMMUTING = ('ap', 'ld')


def _golden(block_size: int) -> dict:
    return load_golden(f'comrope_ap_b{block_size}.pt')


def _pe(variant: str, block_size: int, dim: int = 64, heads: int = 2, depth: int = 2, seed: int = 0, **kw):
    torch.manual_seed(seed)
    cls = LieRE if variant == 'liere' else ComRoPE
    return cls(dim=dim, num_heads=heads, depth=depth, grid_size=(6, 5), variant=variant, block_size=block_size, **kw)


def _rotate(pe, pos: Positions, x: torch.Tensor, layer: int = 0) -> torch.Tensor:
    return pe.attn_terms(pos, x.dtype, x.device)[layer].rotate(x, x)[0]


# ------------------------------------------------------------------------------------------------------ properties
@pytest.mark.parametrize('variant', COMMUTING)
@pytest.mark.parametrize('block_size', [2, 4, 8])
def test_generators_commute(variant, block_size):
    pe = _pe(variant, block_size)
    for layer in range(pe.depth):
        a = pe.generators(layer, torch.float64)  # (H, 2, m, b, b)
        comm = a[:, 0] @ a[:, 1] - a[:, 1] @ a[:, 0]
        assert comm.abs().max() < 1e-6
        assert torch.allclose(a, -a.transpose(-1, -2))  # skew-symmetric


@pytest.mark.parametrize('variant', COMMUTING)
@pytest.mark.parametrize('block_size', [2, 4, 8])
def test_rope_equation(variant, block_size):
    """R(x)^T R(y) = R(y - x) for the commuting variants, at arbitrary (also negative, off-grid) positions."""
    pe = _pe(variant, block_size)
    g = torch.Generator().manual_seed(1)
    x, y = torch.rand(16, 2, generator=g, dtype=torch.float64) * 3 - 1, torch.rand(16, 2, generator=g,
                                                                                   dtype=torch.float64) * 3 - 1
    with torch.no_grad():
        rx, ry, rd = (pe.rotation_blocks(1, p) for p in (x, y, y - x))
    assert torch.allclose(rx.transpose(-1, -2) @ ry, rd, atol=1e-10)


@pytest.mark.parametrize('block_size', [4, 8])
def test_liere_violates_rope_equation(block_size):
    pe = _pe('liere', block_size)
    x, y = torch.tensor([[0.2, 0.9]], dtype=torch.float64), torch.tensor([[0.7, 0.1]], dtype=torch.float64)
    with torch.no_grad():
        lhs = pe.rotation_blocks(0, x).transpose(-1, -2) @ pe.rotation_blocks(0, y)
        rhs = pe.rotation_blocks(0, y - x)
    assert (lhs - rhs).abs().max() > 1e-2
    a = pe.generators(0, torch.float64)
    assert (a[:, 0] @ a[:, 1] - a[:, 1] @ a[:, 0]).abs().max() > 1e-2


def _shift_gap(pe, grid=(5, 6), dtype=torch.float64) -> float:
    """Largest change of q.k scores under a common shift of query and key positions (same q, k at every token)."""
    h, w = grid
    heads, d = pe.num_heads, pe.head_dim
    g = torch.Generator().manual_seed(2)
    q = torch.randn(1, heads, 1, d, generator=g, dtype=dtype).expand(1, heads, 1 + h * w, d)
    k = torch.randn(1, heads, 1, d, generator=g, dtype=dtype).expand(1, heads, 1 + h * w, d)
    with torch.no_grad():
        qr, kr = pe.attn_terms(Positions.from_hw(grid, 1, 1), dtype, torch.device('cpu'))[0].rotate(q, k)
    s = (qr[:, :, 1:] @ kr[:, :, 1:].transpose(-1, -2)).reshape(heads, h, w, h, w)
    # score(query (r, c), key (r2, c2)) vs score(query (r+1, c+1), key (r2+1, c2+1))
    return (s[:, :-1, :-1, :-1, :-1] - s[:, 1:, 1:, 1:, 1:]).abs().max().item()


@pytest.mark.parametrize('variant', COMMUTING)
@pytest.mark.parametrize('block_size', [2, 4, 8])
def test_scores_depend_only_on_relative_position(variant, block_size):
    # positions are float32 patch centres (as in the official code), hence not 1e-12
    assert _shift_gap(_pe(variant, block_size).eval()) < 1e-5


def test_liere_scores_are_not_relative():
    assert _shift_gap(_pe('liere', 4).eval()) > 1e-3
    assert _shift_gap(_pe('liere', 2).eval()) < 1e-5  # so(2) is commutative: LieRE-b2 is relative


@pytest.mark.parametrize('variant', ['ap', 'ld', 'liere'])
@pytest.mark.parametrize('block_size', [2, 4, 8])
def test_fast_path_matches_definition(variant, block_size):
    """The blockwise fast path equals exp(sum_i x_i A_i) at the documented positions; registers get the identity."""
    pe = _pe(variant, block_size, heads=2, dim=64).eval()
    h, w, n_reg = 3, 4, 2
    pos = Positions.from_hw((h, w), 1 + n_reg, 1)
    rows, cols = torch.meshgrid(torch.arange(h), torch.arange(w), indexing='ij')
    coords = torch.stack([(rows.reshape(-1) + 0.5) / h, (cols.reshape(-1) + 0.5) / w], -1).double()
    coords = torch.cat([torch.tensor([[0.5, 0.5]], dtype=torch.float64), coords])
    x = torch.randn(2, 2, pos.num_tokens, 32, dtype=torch.float64)
    with torch.no_grad():
        got = _rotate(pe, pos, x, layer=1)
        r = pe.rotation_blocks(1, coords)  # (L', H, m, b, b)
        xr = torch.cat([x[:, :, :1], x[:, :, 1 + n_reg:]], 2).unflatten(-1, (-1, block_size))
        want = torch.einsum('lhmij,nhlmj->nhlmi', r, xr).flatten(-2)
    assert torch.allclose(got[:, :, :1], want[:, :, :1], atol=1e-10)
    assert torch.equal(got[:, :, 1:1 + n_reg], x[:, :, 1:1 + n_reg])
    assert torch.allclose(got[:, :, 1 + n_reg:], want[:, :, 1:], atol=1e-10)


def test_training_perturbation():
    pe = _pe('ld', 4, perturb_intensity=1.0)
    pos = Positions.from_hw((4, 4), 1, 1)
    x = torch.randn(1, 2, 17, 32, dtype=torch.float64)
    ref = _rotate(pe.eval(), pos, x)
    pe.train()
    torch.manual_seed(3)
    got = _rotate(pe, pos, x)
    torch.manual_seed(3)
    noise = (torch.randn(16, 2) * 0.5).clamp(-0.5, 0.5)
    rows, cols = torch.meshgrid(torch.arange(4.), torch.arange(4.), indexing='ij')
    coords = torch.stack([(rows.reshape(-1) + 0.5 + noise[:, 0]) / 4, (cols.reshape(-1) + 0.5 + noise[:, 1]) / 4], -1)
    with torch.no_grad():
        r = pe.rotation_blocks(0, coords.double())
    want = torch.einsum('lhmij,nhlmj->nhlmi', r, x[:, :, 1:].unflatten(-1, (-1, 4))).flatten(-2)
    assert torch.allclose(got[:, :, 1:], want, atol=1e-6)
    assert torch.allclose(got[:, :, :1], ref[:, :, :1], atol=1e-12)  # the class token is not perturbed
    assert not torch.allclose(got, ref, atol=1e-3)
    assert torch.equal(_rotate(pe.eval(), pos, x), ref)  # eval never perturbs


@pytest.mark.parametrize('variant', ['ap', 'ld', 'liere'])
@pytest.mark.parametrize('block_size', [2, 4])
def test_gradients_reach_every_frequency(variant, block_size):
    pe = _pe(variant, block_size, depth=1).train()
    q = torch.randn(2, 2, 1 + 12, 32, requires_grad=True)
    qr, kr = pe.attn_terms(Positions.from_hw((3, 4), 1, 1), q.dtype, q.device)[0].rotate(q, q * 2)
    (qr @ kr.transpose(-1, -2)).square().mean().backward()
    for name, p in pe.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert q.grad is not None


def test_parameters_and_weight_decay():
    pe = _pe('ld', 4, dim=96, heads=3, depth=2)
    shapes = {k: tuple(v.shape) for k, v in pe.state_dict().items()}
    assert shapes == {'layers.0.freqs': (3, 1, 8, 4, 4), 'layers.0.multiplier': (1, 2, 8, 1, 1),
                      'layers.1.freqs': (3, 1, 8, 4, 4), 'layers.1.multiplier': (1, 2, 8, 1, 1)}
    assert pe.no_weight_decay() == set(shapes)
    assert tuple(_pe('ap', 8, dim=96, heads=3).layers[0].freqs.shape) == (3, 1, 4, 8, 8)
    assert tuple(_pe('liere', 2, dim=96, heads=3).layers[0].freqs.shape) == (3, 2, 16, 2, 2)
    ape = _pe('ap', 4, ape=True)
    assert 'ape.pos_embed' in ape.state_dict() and 'ape.pos_embed' in ape.no_weight_decay()


def test_factory_names_and_variants():
    geo = dict(dim=64, num_heads=2, depth=1, grid_size=(4, 4), num_prefix_tokens=1, num_class_tokens=1)
    assert create_pos_encoding('comrope', geo, dict(variant='ld', block_size=4)).variant == 'ld'
    assert create_pos_encoding('comrope', geo).variant == 'ap'
    assert create_pos_encoding('liere', geo, dict(block_size=4, init_std=0.5, perturb_intensity=0.5)).variant == 'liere'


# --------------------------------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize('kwargs, match', [
    (dict(block_size=3), 'block_size must be one of'),
    (dict(block_size=16), 'block_size must be one of'),
    (dict(dim=96, num_heads=8, block_size=8), 'does not divide the head dim 12'),
    (dict(variant='rope'), 'unknown ComRoPE variant'),
    (dict(dim=64, num_heads=2, block_size=8, variant='ap', depth=1, ape=False, init_std=1.0, perturb_intensity=-1),
     'perturb_intensity'),
])
def test_bad_arguments(kwargs, match):
    args = dict(dim=64, num_heads=2, depth=1, grid_size=(4, 4))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        ComRoPE(**args)


def test_bad_liere_variant_and_ap_odd_blocks():
    with pytest.raises(ValueError, match="only has variant 'liere'"):
        LieRE(dim=64, num_heads=2, depth=1, variant='ap')
    with pytest.raises(ValueError, match='even number of blocks'):
        ComRoPE(dim=48, num_heads=2, depth=1, variant='ap', block_size=8)  # 3 blocks of 8 per head
    ComRoPE(dim=48, num_heads=2, depth=1, variant='ld', block_size=8)  # LD has no axis split


def test_bad_positions():
    pe = _pe('ap', 4).eval()
    with pytest.raises(ValueError, match='2D'):
        pe.attn_terms(Positions((2, 3, 3), 1, 1), torch.float32, torch.device('cpu'))
    term = pe.attn_terms(Positions.from_hw((3, 3), 1, 1), torch.float32, torch.device('cpu'))[0]
    with pytest.raises(ValueError, match='10 tokens'):
        term.rotate(torch.randn(1, 2, 11, 32), torch.randn(1, 2, 11, 32))


# -------------------------------------------------------------------------------------------------------- cache
def test_eval_cache_is_never_stale():
    pe = _pe('ld', 4).eval()
    pos = Positions.from_hw((3, 3), 1, 1)
    x = torch.randn(1, 2, 10, 32)
    with torch.no_grad():
        t1 = pe.attn_terms(pos, x.dtype, x.device)
        assert pe.attn_terms(pos, x.dtype, x.device) is t1  # cached
        before = t1[0].rotate(x, x)[0]
        other = _pe('ld', 4, seed=7)
        pe.load_state_dict(other.state_dict())
        after = _rotate(pe, pos, x)
        assert torch.allclose(after, _rotate(other.eval(), pos, x), atol=1e-6)
        assert not torch.allclose(after, before, atol=1e-3)
        pe.layers[0].multiplier.mul_(2.0)  # an optimizer step writes in place, like this
        assert not torch.allclose(_rotate(pe, pos, x), after, atol=1e-3)
    # an optimizer step through autograd
    pe.train()
    opt = torch.optim.SGD(pe.parameters(), lr=0.5)
    qr, kr = pe.attn_terms(pos, x.dtype, x.device)[0].rotate(x, x.flip(-1))
    (qr * kr).sum().backward()
    opt.step()
    pe.eval()
    with torch.no_grad():
        stepped = _rotate(pe, pos, x)
        fresh = _pe('ld', 4).eval()
        fresh.load_state_dict(pe.state_dict())
        assert torch.allclose(stepped, _rotate(fresh, pos, x), atol=1e-6)
    # with autograd on, nothing is cached and tables carry gradients
    assert all(t.requires_grad for t in pe.attn_terms(pos, x.dtype, x.device)[0].tensors())


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
@pytest.mark.parametrize('block_size', [2, 4])
def test_low_precision(dtype, block_size):
    pe = _pe('ap', block_size).eval()
    pos = Positions.from_hw((4, 4), 1, 1)
    x = torch.randn(2, 2, 17, 32)
    with torch.no_grad():
        ref = _rotate(pe, pos, x)
        got = _rotate(pe, pos, x.to(dtype))
    assert got.dtype == dtype
    tol = 2e-2 if dtype == torch.bfloat16 else 4e-3
    assert torch.allclose(got.float(), ref, atol=tol * ref.abs().max().item())


# ------------------------------------------------------------------------------------------------------- golden
@pytest.mark.parametrize('block_size', [2, 4])
def test_golden_rotation(block_size):
    d = _golden(block_size)
    pe = ComRoPE(dim=128, num_heads=2, depth=2, grid_size=(14, 14), variant='ap', block_size=block_size).eval()
    with torch.no_grad():
        pe.layers[0].freqs.copy_(d['state_dict'][f'vision_model.encoder.layers.{d["rope_layer"]}.self_attn.freqs'])
    assert torch.equal(pe.generators(0), d['rope_exponent_matrix'])
    pos = Positions.from_hw((14, 14), 1, 1)
    with torch.no_grad():
        got = _rotate(pe, pos, d['rope_q'])
        got64 = _rotate(pe, pos, d['rope_q'].double())
    assert (got - d['rope_q_rot']).abs().max() <= 2e-5
    assert (got64 - d['rope_q_rot_fp64']).abs().max() <= 1e-10


def _official_like_model(block_size: int, ape: bool, file: str, model_name: str = 'pe_vit_tiny_patch16_comrope_ap_224'):
    import timm
    return timm.create_model(
        model_name, pretrained=True, pretrained_cfg_overlay=dict(file=file, num_classes=10),
        embed_dim=128, depth=2, num_heads=2, num_classes=10, mlp_ratio=4, pre_norm=True, fc_norm=True,
        act_layer='quick_gelu', norm_layer=partial(nn.LayerNorm, eps=1e-5), dynamic_img_size=True,
        pe_kwargs=dict(block_size=block_size, ape=ape)).eval()


@pytest.mark.parametrize('block_size', [2, 4])
def test_golden_logits(block_size, tmp_path):
    d = _golden(block_size)
    file = str(tmp_path / 'official.pt')
    torch.save(d['state_dict'], file)
    cases = [(True, 'input', 'logits'), (False, 'input', 'logits_no_ape'), (False, 'input_320', 'logits_320_no_ape')]
    for ape, inp, key in cases:
        model = _official_like_model(block_size, ape, file)
        with torch.no_grad():
            out = model(d[inp].float())
        assert (out - d[key]).abs().max() <= 1e-4, key
    # the positional terms matter: an identity rotation moves the logits far more than the tolerance
    assert (d['logits'] - d['logits_identity_rotation']).abs().max() > 1e-2


def test_golden_ape_fold_matches_official_rule():
    """The folded table gives every token of a row the row-lerp of the mean of the two centre columns."""
    from zoo.models.convert_comrope import fold_official_ape
    t = torch.randn(1, 14, 14, 8, dtype=torch.float64)
    table = fold_official_ape(t, (14, 14))
    centre = 0.5 * (t[0, :, 6] + t[0, :, 7])
    assert torch.allclose(table[0, 0], 0.25 * (t[0, 6, 6] + t[0, 6, 7] + t[0, 7, 6] + t[0, 7, 7]))
    u = (2 + 0.5) / 14 * 13  # row 2
    want = centre[int(u)] * (1 - (u - int(u))) + centre[int(u) + 1] * (u - int(u))
    assert torch.allclose(table[0, 1 + 2 * 14: 1 + 3 * 14], want.expand(14, -1))


def test_golden_bad_checkpoint_shapes(tmp_path):
    d = _golden(2)
    file = str(tmp_path / 'official_b2.pt')
    torch.save(d['state_dict'], file)
    with pytest.raises(ValueError, match=r'freqs: checkpoint \(2, 1, 32, 2, 2\) vs model \(2, 1, 16, 4, 4\)'):
        _official_like_model(4, False, file)
    with pytest.raises(ValueError, match='multiplier: missing'):
        _official_like_model(2, False, file, 'pe_vit_tiny_patch16_comrope_ld_224')
    sd = dict(d['state_dict'])
    sd['vision_model.encoder.layers.1.self_attn.freqs'] = sd['vision_model.encoder.layers.1.self_attn.freqs'][:1]
    torch.save(sd, file)
    with pytest.raises(ValueError, match=r'layers\.1\.freqs: checkpoint \(1, 1, 32, 2, 2\)'):
        _official_like_model(2, False, file)


def test_encoding_maps_the_official_keys_itself():
    """``ComRoPE.map_checkpoint``: the generators and the official APE leave the checkpoint under the encoding's
    names (the converter only renames the CLIP backbone); the APE is folded at the encoding's grid."""
    d = _golden(4)
    pe = ComRoPE(dim=128, num_heads=2, depth=2, grid_size=(7, 7), variant='ap', block_size=4, ape=True)
    sd = dict(d['state_dict'])
    out = pe.map_checkpoint('comrope_hf_clip', sd, 'pe.')
    assert sorted(out) == ['pe.ape.pos_embed', 'pe.layers.0.freqs', 'pe.layers.1.freqs']
    assert not [k for k in sd if k.endswith(('self_attn.freqs', 'position_embedding'))]
    assert 'vision_model.encoder.layers.0.self_attn.q_proj.weight' in sd  # the backbone's, left for the converter
    from zoo.encodings.comrope import fold_official_ape
    table = d['state_dict']['vision_model.embeddings.position_embedding']
    torch.testing.assert_close(out['pe.ape.pos_embed'], fold_official_ape(table, (7, 7), 1))
    pe.load_state_dict({k[3:]: v for k, v in out.items()})
    assert pe.map_checkpoint('timm_vit', {'rope.freqs': torch.zeros(1)}) == {}  # other layouts: not its keys


@pytest.mark.parametrize('variant', ['ld', 'liere'])
def test_converter_ld_and_liere_layouts(variant, tmp_path):
    """LD adds ``multiplier (1, 2, m, 1, 1)``; LieRE has ``freqs (H, 2, m, b, b)``: both land in ``pe.layers.N``."""
    sd = dict(_golden(4)['state_dict'])
    g = torch.Generator().manual_seed(5)
    for i in range(2):
        pre = f'vision_model.encoder.layers.{i}.self_attn.'
        if variant == 'ld':
            sd[pre + 'multiplier'] = torch.randn(1, 2, 16, 1, 1, generator=g)
        else:
            sd[pre + 'freqs'] = torch.randn(2, 2, 16, 4, 4, generator=g)
    file = str(tmp_path / f'official_{variant}.pt')
    torch.save(sd, file)
    name = 'pe_vit_tiny_patch16_comrope_ld_224' if variant == 'ld' else 'pe_vit_tiny_patch16_liere_224'
    model = _official_like_model(4, False, file, name)
    for i in range(2):
        pre = f'vision_model.encoder.layers.{i}.self_attn.'
        assert torch.equal(model.pe.layers[i].freqs, sd[pre + 'freqs'])
        if variant == 'ld':
            assert torch.equal(model.pe.layers[i].multiplier, sd[pre + 'multiplier'])
    with torch.no_grad():
        assert torch.isfinite(model(torch.randn(1, 3, 224, 224))).all()


@pytest.mark.parametrize('block_size', [4, 8])
def test_liere_training_path_matches_definition(block_size):
    """In training LieRE uses a Taylor scaling-and-squaring exponential; values and gradients match matrix_exp."""
    pe = _pe('liere', block_size, depth=1).double().train()
    h, w = 3, 4
    pos = Positions.from_hw((h, w), 1, 1)
    rows, cols = torch.meshgrid(torch.arange(h), torch.arange(w), indexing='ij')
    coords = torch.stack([(rows.reshape(-1) + 0.5) / h, (cols.reshape(-1) + 0.5) / w], -1).double()
    coords = torch.cat([torch.tensor([[0.5, 0.5]], dtype=torch.float64), coords])
    x = torch.randn(2, 2, pos.num_tokens, 32, dtype=torch.float64)
    wgt = torch.randn_like(x)
    got = _rotate(pe, pos, x)
    g_got = torch.autograd.grad((got * wgt).sum(), pe.layers[0].freqs)[0]
    r = pe.rotation_blocks(0, coords)
    want = torch.einsum('lhmij,nhlmj->nhlmi', r, x.unflatten(-1, (-1, block_size))).flatten(-2)
    g_want = torch.autograd.grad((want * wgt).sum(), pe.layers[0].freqs)[0]
    assert torch.allclose(got, want, atol=1e-10)
    assert torch.allclose(g_got, g_want, atol=1e-8)


# ------------------------------------------------------------------------------------- exponential, compile (#24)
@pytest.mark.parametrize('dtype, tol', [(torch.float32, 2e-5), (torch.float64, 1e-12)])
@pytest.mark.parametrize('traced', [False, True])
def test_expm_taylor_matches_matrix_exp(dtype, tol, traced, monkeypatch):
    """The matmul-only exponential (ONNX's form) equals torch.linalg.matrix_exp for skew-symmetric blocks (rotations)
    over norms from 0 to ~400 and general matrices up to ~10, with the eager squaring count and the fixed traced one."""
    import zoo.encodings.comrope as cr
    monkeypatch.setattr(cr, '_tracing', lambda: traced)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 8, 8, generator=g, dtype=dtype)
    scales = torch.logspace(-3, 1.5, 64, dtype=dtype)[:, None, None]
    # rotations (the use) over every norm; general matrices up to norm ~10 (beyond, exp overflows float32 rounding)
    for m in ((a - a.transpose(-1, -2)) * scales, a * scales.clamp_max(1.0)):
        want = torch.linalg.matrix_exp(m.double())
        got = cr.expm_taylor(m)
        assert got.dtype == dtype

        def rel(e):
            return ((e.double() - want).abs().amax((-2, -1)) / want.abs().amax((-2, -1))).max().item()
        # as exact as torch.linalg.matrix_exp in the same dtype (float32 rounding grows with the squarings)
        assert rel(got) < max(tol, 3 * rel(torch.linalg.matrix_exp(m))), (rel(got), rel(torch.linalg.matrix_exp(m)))
    assert torch.equal(cr.expm_taylor(torch.zeros(2, 4, 4, dtype=dtype)), torch.eye(4, dtype=dtype).expand(2, 4, 4))


@pytest.mark.filterwarnings('ignore')
@pytest.mark.parametrize('pe', ['liere', 'comrope', 'comrope_ld'])
def test_compiled_inference_reads_the_eager_cache(pe):
    """torch.compile in inference: the matrix exponentials (LieRE's per token, AP / LD's per axis) stay out of the
    graph (the op reads the eager cache), outputs equal eager, and a changed parameter is seen (the cache key holds
    parameter versions)."""
    from zoo.models.vit import PEVisionTransformer
    torch.manual_seed(0)
    kind, kwargs = ('comrope', dict(variant='ld')) if pe == 'comrope_ld' else (pe, {})
    model = PEVisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=2, num_classes=5,
                                pe=kind, pe_kwargs=kwargs).eval()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(str(gm.graph))
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
        assert graphs and 'comrope_cached_tables' in graphs[0] and 'matrix_exp' not in graphs[0]
        model.pe.layers[0].freqs.mul_(1.5)
        if model.pe.layers[1].multiplier is not None:
            model.pe.layers[1].multiplier.mul_(-0.5)
        torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('dtype, tol', [(torch.float32, 2e-5), (torch.float64, 1e-12)])
def test_expm_ps_matches_matrix_exp(dtype, tol):
    """The eager LieRE exponential (Paterson-Stockmeyer Taylor, scaling and squaring) against torch.linalg.matrix_exp
    on skew-symmetric 8 x 8 blocks from tiny to large norms, relative to the norm of the result (1 for rotations)."""
    from zoo.encodings.comrope import expm_ps
    gen = torch.Generator().manual_seed(0)
    p = torch.randn(64, 3, 8, 8, generator=gen, dtype=torch.float64)
    a = (p - p.transpose(-1, -2)) * torch.tensor([1e-3, 0.3, 3.0, 30.0], dtype=torch.float64).repeat(16)[:, None,
                                                                                                        None, None]
    want = torch.linalg.matrix_exp(a)
    got = expm_ps(a.to(dtype))
    assert got.dtype == dtype and got.shape == a.shape
    assert (got.double() - want).abs().max().item() < tol * (1 if dtype == torch.float64 else 4)
    assert expm_ps(torch.zeros(0, 8, 8, dtype=dtype)).shape == (0, 8, 8)


@pytest.mark.parametrize('dtype, tol', [(torch.float32, 2e-6), (torch.float64, 1e-13)])
@pytest.mark.parametrize('block_size', [4, 8])
def test_expm_skew_matches_matrix_exp(dtype, tol, block_size):
    """LieRE's eager exponential (spectral scaling, one squaring count per batch) against float64 matrix_exp on
    skew-symmetric blocks with spectral radii from 1e-4 to ~300 (up to 8 squarings), mixed in one batch (the small ones
    take the squarings of the largest) and each norm alone; error relative to the norm of the result (1)."""
    from zoo.encodings.comrope import expm_skew
    gen = torch.Generator().manual_seed(0)
    p = torch.randn(96, block_size, block_size, generator=gen, dtype=torch.float64)
    a = (p - p.mT) * torch.logspace(-4, 1.7, 96, dtype=torch.float64)[:, None, None]
    want = torch.linalg.matrix_exp(a)
    assert torch.linalg.eigvals(a).imag.abs().amax() > 100  # large enough to need several squarings

    def err(got):
        return (got.double() - want[:got.shape[0]]).abs().amax((-2, -1))

    got = expm_skew(a.to(dtype))
    assert got.dtype == dtype and got.shape == a.shape
    # float32 rounding grows with the squarings (2^s u): bound each matrix by its own spectral radius' squaring count
    rho = torch.linalg.eigvals(a).imag.abs().amax(-1)
    squarings = torch.ceil(torch.log2(rho / 1.7)).clamp_min(0)
    assert (err(got) < tol * 2.0 ** squarings.max()).all(), err(got).max()
    alone = torch.cat([expm_skew(m[None].to(dtype)) for m in a])
    assert (err(alone) < tol * 2.0 ** squarings).all(), (err(alone) / 2.0 ** squarings).max()
    assert expm_skew(torch.zeros(0, 8, 8, dtype=dtype)).shape == (0, 8, 8)
    assert torch.equal(expm_skew(torch.zeros(2, 8, 8, dtype=dtype)), torch.eye(8, dtype=dtype).expand(2, 8, 8))
    with pytest.raises(ValueError, match='non-finite generator'):
        expm_skew(torch.full((1, 8, 8), float('nan'), dtype=dtype))


@pytest.mark.parametrize('dtype, tol', [(torch.float32, 1e-5), (torch.float64, 1e-11)])
@pytest.mark.parametrize('prefix', [(1, 1), (3, 1), (0, 0)])
def test_liere_chunked_inference_matches_definition(dtype, tol, prefix, monkeypatch):
    """The video-size LieRE path (blocks built inside the attention, chunk by chunk, eager inference) rotates q and k
    as the definition (float64 matrix_exp of each token's generator), class and register tokens included, with
    large generators (several squarings)."""
    num_prefix, num_class = prefix
    pe = LieRE(dim=64, num_heads=2, depth=1, grid_size=(2, 3, 4), num_prefix_tokens=num_prefix,
               num_class_tokens=num_class, block_size=8, init_std=4.0).to(dtype).eval()
    monkeypatch.setattr(LieRE, 'dense_cache_bytes', 0)  # always the chunked LieRotation
    monkeypatch.setattr(zoo.encodings.comrope.LieRotation, 'chunk_elements', 7 * 2 * 4 * 64)  # 7 tokens a chunk
    t, h, w = 2, 3, 4
    pos = Positions((t, h, w), num_prefix, num_class)
    q = torch.randn(2, 2, pos.num_tokens, 32, dtype=dtype)
    k = torch.randn_like(q)
    with torch.no_grad():
        term = pe.attn_terms(pos, dtype, q.device)[0]
        assert isinstance(term, zoo.encodings.comrope.LieRotation)
        got_q, got_k = term.rotate(q, k)
        tt, rr, cc = torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing='ij')
        coords = torch.stack([(rr.reshape(-1) + 0.5) / h, (cc.reshape(-1) + 0.5) / w, (tt.reshape(-1) + 0.5) / t], -1)
        coords = torch.cat([torch.full((num_class, 3), 0.5), coords]).double()
        r = pe.rotation_blocks(0, coords)  # (L_rot, H, m, b, b)
        eye = torch.eye(8, dtype=r.dtype).expand(num_prefix - num_class, *r.shape[1:])
        r = torch.cat([r[:num_class], eye, r[num_class:]])
        assert pe.generators(0).abs().sum(-2).amax() > 8  # the blocks need squarings
    for x, got in ((q, got_q), (k, got_k)):
        want = torch.einsum('lhmij,nhlmj->nhlmi', r, x.double().unflatten(-1, (-1, 8))).flatten(-2)
        assert got.dtype == dtype
        torch.testing.assert_close(got.double(), want, atol=tol, rtol=0)


def test_exponentials_refuse_non_finite_generators_in_one_line():
    """A NaN or inf generator (a diverged run) is a clear ValueError, not 'cannot convert float NaN to integer'."""
    from zoo.encodings.comrope import expm_ps, expm_taylor
    for bad in (float('nan'), float('inf')):
        g = torch.zeros(3, 4, 4)
        g[1, 0, 1] = bad
        for fn in (expm_ps, expm_taylor):
            with pytest.raises(ValueError, match='non-finite generator'):
                fn(g)


# ------------------------------------------------------------------------- LieRE's shared generators (#24)
@pytest.mark.parametrize('grid', [(4, 4), (3, 4, 4)])
@pytest.mark.parametrize('per_layer, per_head', [(False, False), (False, True), (True, False)])
def test_liere_shared_generators_equal_copied_ones(grid, per_layer, per_head):
    """per_layer / per_head = False (the LieRE authors' sharing) rotate q and k exactly as a per-layer, per-head LieRE
    whose generators are all copies of the shared ones: cached dense blocks, training (autograd), and the chunked
    path; with per_layer=False every layer gets the same term (the blocks are computed once per forward)."""
    from zoo.encodings.comrope import LieRE
    torch.manual_seed(0)
    shared = LieRE(dim=64, num_heads=4, depth=3, grid_size=grid, per_layer=per_layer, per_head=per_head)
    full = LieRE(dim=64, num_heads=4, depth=3, grid_size=grid)
    assert len(shared.layers) == (3 if per_layer else 1)
    assert shared.layers[0].freqs.shape[0] == (4 if per_head else 1)
    with torch.no_grad():
        for i, layer in enumerate(full.layers):
            layer.freqs.copy_(shared.layers[i if per_layer else 0].freqs.expand_as(layer.freqs))
    t, h, w = (1,) + grid if len(grid) == 2 else grid
    pos = Positions((t, h, w), 1, 1)
    q, k = torch.randn(2, 4, 1 + t * h * w, 16), torch.randn(2, 4, 1 + t * h * w, 16)
    for chunked in (False, True):
        if chunked:  # every layer computes its blocks inside the attention, chunk by chunk
            shared.dense_cache_bytes = full.dense_cache_bytes = 0
            shared._cache.clear()
            full._cache.clear()
        for grad in (False, True):
            with torch.set_grad_enabled(grad):
                got, want = shared.attn_terms(pos, q.dtype, q.device), full.attn_terms(pos, q.dtype, q.device)
            assert len(got) == 3 and (per_layer or all(t is got[0] for t in got))
            for a, b in zip(got, want):
                for x, y in zip(a.rotate(q, k), b.rotate(q, k)):
                    torch.testing.assert_close(x, y, atol=2e-6, rtol=1e-5)


def test_liere_shared_generators_train_and_refuse_comrope():
    """Shared generators get gradients from every layer (one parameter set); ComRoPE-AP / LD refuse sharing in one
    line; the extra_repr names it."""
    from zoo.models.vit import PEVisionTransformer
    torch.manual_seed(0)
    model = PEVisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=2, num_classes=5,
                                pe='liere', pe_kwargs=dict(per_layer=False, per_head=False))
    model(torch.randn(2, 3, 32, 32)).sum().backward()
    assert model.pe.layers[0].freqs.grad is not None and model.pe.layers[0].freqs.grad.abs().sum() > 0
    assert 'per_layer=False, per_head=False' in repr(model.pe)
    with pytest.raises(ValueError, match='LieRE options'):
        ComRoPE(dim=64, num_heads=2, depth=2, variant='ld', per_layer=False)
    with pytest.raises(ValueError, match='per_head must be True or False'):
        LieRE(dim=64, num_heads=2, depth=2, per_head='false')  # a string would be truthy


@pytest.mark.filterwarnings('ignore')
def test_compiled_inference_shared_liere():
    """torch.compile in inference with shared generators: one cached tensor for every layer, outputs equal eager."""
    from zoo.models.vit import PEVisionTransformer
    torch.manual_seed(0)
    model = PEVisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=3, num_heads=2, num_classes=5,
                                pe='liere', pe_kwargs=dict(per_layer=False, per_head=False)).eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend='eager', fullgraph=True)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------- basis path (AP / LD)
def _axis_twin(term):
    """The :class:`AxisRotation` with the same tables (the per-axis path the basis path replaces)."""
    from zoo.encodings.comrope import AxisRotation
    return AxisRotation(term.tables, term.grid, term.num_class, term.num_prefix, term.variant)


def _definition(pe, layer: int, grid, num_class: int, num_prefix: int, x: torch.Tensor) -> torch.Tensor:
    """exp(sum_i x_i A_i) (``torch.linalg.matrix_exp``) applied to every rotated token; registers untouched."""
    t, h, w = grid
    tt, rr, cc = torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing='ij')
    axes = [(rr.reshape(-1) + 0.5) / h, (cc.reshape(-1) + 0.5) / w, (tt.reshape(-1) + 0.5) / t][:pe.num_axes]
    coords = torch.cat([torch.full((num_class, pe.num_axes), 0.5), torch.stack(axes, -1)]).to(x.dtype)
    r = pe.rotation_blocks(layer, coords)  # (L_rot, H, m, b, b)
    xr = torch.cat([x[:, :, :num_class], x[:, :, num_prefix:]], 2).unflatten(-1, (-1, pe.block_size))
    rot = torch.einsum('lhmij,nhlmj->nhlmi', r, xr).flatten(-2)
    return torch.cat([rot[:, :, :num_class], x[:, :, num_class:num_prefix], rot[:, :, num_class:]], 2)


@pytest.mark.parametrize('variant', COMMUTING)
@pytest.mark.parametrize('block_size', [4, 8])
@pytest.mark.parametrize('grid,heads,m,prefix,cls', [((1, 3, 4), 2, 2, 3, 1), ((1, 5, 5), 3, 2, 1, 1),
                                                    ((1, 2, 3), 2, 4, 0, 0), ((1, 3, 4), 3, 1, 1, 1),
                                                    ((2, 3, 2), 3, 3, 2, 1)])
def test_basis_rotation_matches_axis_rotation_and_definition(variant, block_size, grid, heads, m, prefix, cls):
    """Eager inference rotates AP / LD in the real Schur basis of each block's generator (BasisRotation): equal to the
    per-axis tables (AxisRotation) and to matrix_exp of the generator, in float64 and float32, with class tokens,
    registers (exactly untouched), an odd number of (head, block) pairs and a 3-axis video grid; q and k may be views
    of a fused qkv projection."""
    from zoo.encodings.comrope import BasisRotation
    video = grid[0] > 1
    if variant == 'ap' and m < 2:
        pytest.skip('AP needs a block per axis')
    dim = heads * m * block_size
    torch.manual_seed(1)
    pe = ComRoPE(dim=dim, num_heads=heads, depth=2, grid_size=grid if video else grid[1:], variant=variant,
                 block_size=block_size, num_prefix_tokens=prefix, num_class_tokens=cls).eval()
    pos = Positions(grid, prefix, cls)
    hd = dim // heads
    for dtype, tol in [(torch.float64, 1e-10), (torch.float32, 2e-5)]:
        qkv = torch.randn(2, pos.num_tokens, 3 * dim, dtype=dtype)
        q, k, _ = qkv.unflatten(-1, (3 * heads, hd)).transpose(1, 2).split(heads, 1)
        with torch.no_grad():
            for layer, term in enumerate(pe.attn_terms(pos, dtype, q.device)):
                assert isinstance(term, BasisRotation) and term.basis.dtype == dtype
                got_q, got_k = term.rotate(q, k)
                want_q, want_k = _axis_twin(term).rotate(q, k)
                assert got_q.dtype == dtype and got_q.shape == q.shape
                torch.testing.assert_close(got_q, want_q, atol=tol, rtol=0)
                torch.testing.assert_close(got_k, want_k, atol=tol, rtol=0)
                assert torch.equal(got_q[:, :, cls:prefix], q[:, :, cls:prefix])
                if dtype == torch.float64:
                    torch.testing.assert_close(got_k, _definition(pe, layer, grid, cls, prefix, k), atol=1e-10, rtol=0)
                got_c = term.rotate(q.contiguous(), k.contiguous())[0]  # any layout of q / k
                torch.testing.assert_close(got_c, want_q, atol=tol, rtol=0)


def test_skew_basis_real_schur_form():
    """_skew_basis: U orthonormal with exp(t S) = U diag(rot(t w)) U^T (float64) for random and repeated non-zero
    w_k; None (the caller keeps AxisRotation) for a zero plane or non-finite entries."""
    from zoo.encodings.comrope import _skew_basis
    torch.manual_seed(0)
    f = torch.randn(3, 4, 8, 8, dtype=torch.float64)
    j = torch.tensor([[0., -1.], [1., 0.]], dtype=torch.float64)
    q_, _ = torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64))
    repeated = q_ @ torch.block_diag(j, j, 2 * j, 2 * j) @ q_.T  # w = (1, 1, 2, 2)
    cases = {'random': f - f.transpose(-1, -2), 'repeated': repeated, 'tied': (f - f.transpose(-1, -2))[:1].expand(
        2, 4, 8, 8)}
    for name, s in cases.items():
        found = _skew_basis(s)
        assert found is not None, name
        u, w = found
        torch.testing.assert_close(u.transpose(-1, -2) @ u, torch.eye(8, dtype=torch.float64).expand_as(u),
                                   atol=1e-12, rtol=0)
        for t in (0.3, 2.5, -4.0):
            c, sn = torch.diag_embed(torch.cos(t * w)), torch.diag_embed(torch.sin(t * w))
            rot = torch.cat([torch.cat([c, -sn], -1), torch.cat([sn, c], -1)], -2)
            torch.testing.assert_close(u @ rot @ u.transpose(-1, -2), torch.linalg.matrix_exp(t * s), atol=1e-11,
                                       rtol=0)
    zero_plane = q_ @ torch.block_diag(j, 0 * j, 2 * j, 3 * j) @ q_.T
    assert _skew_basis(zero_plane) is None
    assert _skew_basis(torch.zeros(2, 4, 4, dtype=torch.float64)) is None
    assert _skew_basis(torch.full((4, 4), float('nan'), dtype=torch.float64)) is None


@pytest.mark.parametrize('variant', COMMUTING)
def test_basis_rotation_degenerate_generators_fall_back(variant):
    """A layer whose generators have a zero (or repeated zero) w_k keeps AxisRotation, and every layer's rotation is
    still right; repeated non-zero w_k take the basis path, also right."""
    from zoo.encodings.comrope import AxisRotation, BasisRotation
    pe = _pe(variant, 4, dim=64, heads=2, depth=3, num_prefix_tokens=2, num_class_tokens=1).eval()
    j = torch.tensor([[0., 1.], [-1., 0.]])
    q_, _ = torch.linalg.qr(torch.randn(4, 4))
    with torch.no_grad():
        pe.layers[0].freqs.zero_()                       # the identity: every w_k = 0
        half = q_ @ torch.block_diag(j, 0 * j) @ q_.T     # S = F - F^T = 2F: one zero plane in every block
        pe.layers[1].freqs.copy_(half.expand_as(pe.layers[1].freqs))
        tied = q_ @ torch.block_diag(j, j) @ q_.T        # repeated non-zero w_k (tied planes)
        pe.layers[2].freqs.copy_(tied.expand_as(pe.layers[2].freqs))
    pos = Positions((1, 3, 4), 2, 1)
    x = torch.randn(2, 2, pos.num_tokens, 32, dtype=torch.float64)
    with torch.no_grad():
        terms = pe.attn_terms(pos, x.dtype, x.device)
        assert [type(t) for t in terms] == [AxisRotation, AxisRotation, BasisRotation]
        for layer, term in enumerate(terms):
            got = term.rotate(x, x)[0]
            torch.testing.assert_close(got, _definition(pe, layer, (1, 3, 4), 1, 2, x), atol=1e-10, rtol=0)
        assert torch.equal(terms[0].rotate(x, x)[0], x)


def test_basis_rotation_only_up_to_basis_max_tokens():
    """Above ComRoPE.basis_max_tokens rotated tokens (video sizes) AP / LD keep the per-axis path, whose tables do
    not grow with the tokens; both paths rotate alike."""
    from zoo.encodings.comrope import AxisRotation, BasisRotation
    pe = _pe('ld', 8, dim=64, heads=2)
    pos = Positions((1, 3, 4), 1, 1)
    x = torch.randn(2, 2, pos.num_tokens, 32)
    with torch.no_grad():
        small = pe.attn_terms(pos, x.dtype, x.device)[0]
        pe.basis_max_tokens = pos.num_tokens - 1
        pe._cache.clear()
        big = pe.attn_terms(pos, x.dtype, x.device)[0]
    assert type(small) is BasisRotation and type(big) is AxisRotation
    torch.testing.assert_close(small.rotate(x, x)[0], big.rotate(x, x)[0], atol=2e-5, rtol=0)


@pytest.mark.filterwarnings('ignore')
def test_basis_rotation_only_in_eager_inference():
    """Training / autograd keeps the per-axis path (gradients reach the generators); token subsets, low precision and
    tracing use the kept tables and agree with the basis path."""
    from zoo.encodings.comrope import AxisRotation, BasisRotation
    pe = _pe('ld', 8, dim=64, heads=2)
    pos = Positions((1, 3, 4), 1, 1)
    x = torch.randn(2, 2, pos.num_tokens, 32)
    assert all(type(t) is AxisRotation for t in pe.train().attn_terms(pos, x.dtype, x.device))
    assert all(type(t) is AxisRotation for t in pe.eval().attn_terms(pos, x.dtype, x.device))  # autograd on
    with torch.no_grad():
        term = pe.attn_terms(pos, x.dtype, x.device)[1]
        assert type(term) is BasisRotation
        full = term.rotate(x, x)[0]
        assert all(t.shape[0] == 1 for t in term.tensors())  # AttnTerm.tensor_fields: leading (batch) axis 1
        copy = term.with_tensors([t.clone() for t in term.tensors()])  # gradient checkpointing's copy
        assert torch.equal(copy.rotate(x, x)[0], full)
        keep = torch.tensor([[0, 2, 5, 11], [1, 3, 4, 6]])
        sub = Positions((1, 3, 4), 1, 1, keep_indices=keep)
        xs = torch.cat([x[:, :, :1], torch.stack([x[i, :, 1:][:, keep[i]] for i in range(2)])], 2)
        got = pe.attn_terms(sub, x.dtype, x.device)[1].rotate(xs, xs)[0]
        want = torch.cat([full[:, :, :1], torch.stack([full[i, :, 1:][:, keep[i]] for i in range(2)])], 2)
        torch.testing.assert_close(got, want, atol=2e-5, rtol=0)
        half = pe.attn_terms(pos, torch.bfloat16, x.device)[1]
    xg = x.clone().requires_grad_()  # a term built without autograd, used with it: the per-axis path records the graph
    got = term.rotate(xg, xg)[0]
    got.sum().backward()
    torch.testing.assert_close(got.detach(), full, atol=2e-5, rtol=0)
    assert xg.grad is not None
    with torch.no_grad():
        assert type(half) is AxisRotation
        traced = torch.jit.trace(lambda a: term.rotate(a, a)[0], (x,), check_trace=False)
        torch.testing.assert_close(traced(x), full, atol=2e-5, rtol=0)


@pytest.mark.parametrize('variant', ['ap', 'ld'])
def test_non_finite_generators_refused_in_inference(variant):
    """AP / LD in eval without autograd (torch.linalg.matrix_exp, which returns NaN silently) refuse a NaN generator in
    one line, as training and LieRE do; a float block_size is refused at construction."""
    from zoo.models.vit import PEVisionTransformer
    model = PEVisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=2, num_classes=5,
                                pe='comrope', pe_kwargs=dict(variant=variant)).eval()
    with torch.no_grad():
        model.pe.layers[0].freqs[0, 0, 0, 0, 1] = float('nan')
        with pytest.raises(ValueError, match='non-finite generator'):
            model(torch.randn(1, 3, 32, 32))
    with pytest.raises(ValueError, match='block_size must be one of'):
        ComRoPE(dim=64, num_heads=2, depth=2, block_size=8.0)
