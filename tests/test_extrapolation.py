"""Training-free extrapolation strategies (none, PI, NTK, YaRN): formulas, per-axis factors, 2D / 3D / multimodal
encodings, sin-cos / Fourier coordinates, errors, and the eval-resolution dimension. Tiny and offline."""
from __future__ import annotations

import copy
import json
import math
import os

import pytest
import timm
import torch
from PIL import Image

import zoo  # noqa: F401
from zoo.cli import main
from zoo.encodings import Positions, create_pos_encoding
from zoo.encodings.absolute import sincos2d_at
from zoo.encodings.extrapolation import (ROTARY_STRATEGIES, STRATEGIES, Extrapolation, extrapolation_of,
                                         ntk_exponents, set_extrapolation, yarn_ramp)
from zoo.encodings.rotation import grid_coords, rope_frequencies

CPU = torch.device('cpu')
TINY = dict(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=2, dynamic_img_size=True)


def _tiny(pe: str, **kw):
    return timm.create_model(f'pe_vit_tiny_patch16_{pe}_224', **dict(TINY, **kw)).eval()


# ------------------------------------------------------------------------------------------------------ formulas
def test_pi_divides_every_frequency_and_factor_one_is_identity():
    f = rope_frequencies(8, 100.0)
    ext = Extrapolation('pi', (4.0,))
    torch.testing.assert_close(ext.frequencies(f, 2.5, 4.0), f / 2.5)
    for s in STRATEGIES:
        assert Extrapolation(s, (4.0,)).frequencies(f, 1.0, 4.0, ntk_exponents(8)) is f
    assert ext.factors((3,)) == (1.0,) and ext.factors((10,)) == (2.5,)  # a smaller grid is never stretched


@pytest.mark.parametrize('n, theta, s', [(8, 100.0, 2.0), (16, 10000.0, 1.5), (4, 10.0, 4.0)])
def test_ntk_equals_base_scaling(n, theta, s):
    """NTK-aware: b' = b s^(|D|/(|D|-2)); with n = |D|/2 bands theta^(-d/n) ... written per band as s^(-d/(n-1))."""
    ext = Extrapolation('ntk', (4.0,))
    scaled = ext.frequencies(rope_frequencies(n, theta), s, 4.0, ntk_exponents(n))
    torch.testing.assert_close(scaled, rope_frequencies(n, theta * s ** (n / (n - 1))))
    # 1D form (rope_frequencies(D/2, b) = b^(-2d/D)): the same exponents
    d = 2 * n
    torch.testing.assert_close(ext.frequencies(rope_frequencies(d // 2, theta), s, 4.0, ntk_exponents(d // 2)),
                               rope_frequencies(d // 2, theta * s ** (d / (d - 2))))
    assert scaled[0] == rope_frequencies(n, theta)[0]                       # highest frequency kept
    torch.testing.assert_close(scaled[-1], rope_frequencies(n, theta)[-1] / s)  # lowest interpolated by 1/s


def test_yarn_ramp_and_temperature_by_hand():
    L, s, alpha, beta = 16.0, 2.0, 1.0, 4.0
    f = torch.tensor([3.0, 1.0, 0.5, 0.2, 0.01])
    ext = Extrapolation('yarn', (L,), alpha, beta)
    out = ext.frequencies(f, s, L)
    for theta, got in zip(f.tolist(), out.tolist()):
        r = L * theta / (2 * math.pi)
        gamma = 0.0 if r < alpha else 1.0 if r > beta else (r - alpha) / (beta - alpha)
        assert got == pytest.approx((1 - gamma) * theta / s + gamma * theta, rel=1e-6)
    assert out[0] == f[0] and out[-1] == pytest.approx(f[-1] / s)  # many turns kept, few turns interpolated
    assert yarn_ramp(torch.tensor([0.5, 2.5, 9.0]), 1.0, 4.0).tolist() == [0.0, 0.5, 1.0]
    assert ext.attention_scale(4.0) == pytest.approx(0.1 * math.log(4.0) + 1)
    assert ext.attention_scale(1.0) == 1.0 and Extrapolation('pi').attention_scale(4.0) == 1.0
    assert ext.grid_attention_scale((2.0, 2.0)) == pytest.approx(0.1 * math.log(4.0) + 1)  # token-count ratio


# ------------------------------------------------------------------------------------------------ encodings
@pytest.mark.parametrize('pe', ['rope_axial', 'rope_mixed', 'rope_mixed_ape'])
def test_every_strategy_is_exact_at_the_training_grid_and_differs_beyond(pe):
    model = _tiny(pe)
    x, x2 = torch.randn(2, 3, 32, 32), torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        ref, ref2 = model(x), model(x2)
        outs = {}
        for s in STRATEGIES:
            model.pe.set_extrapolation(s)
            assert model.pe.extrapolation.train_grid == (4.0, 4.0)  # the model's (training) grid
            torch.testing.assert_close(model(x), ref, rtol=0, atol=0)
            outs[s] = model(x2)
    torch.testing.assert_close(outs['none'], ref2, rtol=0, atol=0)
    for s in ('pi', 'ntk', 'yarn'):
        assert (outs[s] - ref2).abs().max() > 1e-5, s


def test_rope_axial_factors_are_per_axis():
    pe = create_pos_encoding('rope_axial', dict(dim=64, num_heads=2, depth=1, grid_size=(4, 4)), dict(extrapolation='pi'))
    x, y = torch.arange(8.0), torch.arange(8.0)
    base = pe.angles(x, y)  # (1, N, head_dim/2): column pairs first, then row pairs
    wide = pe.angles(x, y, pe.extrapolation.factors((4, 8)))  # rows as trained, twice the columns
    n = pe.num_bands
    torch.testing.assert_close(wide[..., :n], base[..., :n] / 2)  # column bands interpolated
    torch.testing.assert_close(wide[..., n:], base[..., n:])      # row bands untouched


def test_rope_mixed_components_follow_their_axis_and_keep_gradients():
    pe = create_pos_encoding('rope_mixed', dict(dim=64, num_heads=2, depth=2, grid_size=(4, 4)),
                             dict(extrapolation='ntk'))
    f = pe.scaled_freqs((1.0, 3.0))  # (s_rows, s_cols): only x (columns) components change
    torch.testing.assert_close(f[1], pe.freqs.float()[1])
    e = ntk_exponents(pe.freqs.shape[-1], period=pe.freqs.shape[-1] // 2)
    torch.testing.assert_close(f[0], pe.freqs.float()[0] * 3.0 ** (-e))
    f.sum().backward()
    assert pe.freqs.grad is not None


def test_yarn_temperature_reaches_attention_through_the_rotation():
    """YaRN scales sin and cos by m = 0.1 ln(s) + 1 (s = token-count ratio): q and k come out m times longer, so
    every attention logit is m^2 times the unscaled one (no attention-side branch)."""
    model = _tiny('rope_axial', pe_kwargs=dict(extrapolation='yarn'))
    pos = Positions.from_hw((8, 8), 1, 1)
    term = model.pe.attn_terms(pos, torch.float32, CPU)[0]
    m = 0.1 * math.log(4.0) + 1
    torch.testing.assert_close(term.sin ** 2 + term.cos ** 2, torch.full_like(term.sin, m * m))
    q, k = torch.randn(1, 2, 65, 32), torch.randn(1, 2, 65, 32)
    qr, kr = term.rotate(q, k)
    torch.testing.assert_close(qr.norm(dim=-1), m * q.norm(dim=-1))
    model.pe.set_extrapolation(dict(strategy='yarn', alpha=0.0, beta=1e-6))  # ramp fully "keep": only temperature
    term2 = model.pe.attn_terms(pos, torch.float32, CPU)[0]
    model.pe.set_extrapolation('none')
    plain = model.pe.attn_terms(pos, torch.float32, CPU)[0]
    torch.testing.assert_close(term2.cos, plain.cos * m)
    at_train = model.pe.attn_terms(Positions.from_hw((4, 4), 1, 1), torch.float32, CPU)[0]
    torch.testing.assert_close(at_train.sin ** 2 + at_train.cos ** 2, torch.ones_like(at_train.sin))


def test_rope3d_grid_and_explicit_ids_pi_equals_scaled_positions():
    geo = dict(dim=96, num_heads=2, depth=1, grid_size=(2, 4, 4))
    pe = create_pos_encoding('rope3d', geo, dict(extrapolation='pi'))
    plain = create_pos_encoding('rope3d', geo)
    grid = (4, 8, 4)  # twice the frames and rows, columns as trained
    term = pe.attn_terms(Positions(grid), torch.float32, CPU)[0]
    coords = grid_coords(grid) / torch.tensor([2.0, 2.0, 1.0])
    sin, cos = plain.sin_cos(coords)
    torch.testing.assert_close(term.sin[0, 0], sin)
    ids = grid_coords(grid).t().unsqueeze(1)  # (3, 1, L) explicit ids: the span gives the same factors
    term_ids = pe.attn_terms(Positions(None, ids=ids), torch.float32, CPU)[0]
    torch.testing.assert_close(term_ids.cos[0, 0], cos)


def test_multimodal_rope_pi_equals_scaled_ids_per_axis_and_yarn_scale():
    geo = dict(dim=64, num_heads=2, depth=1)
    ids = torch.stack([torch.arange(40.0), torch.arange(40.0) % 8, torch.arange(40.0) % 5]).unsqueeze(1)  # (3,1,L)
    plain = create_pos_encoding('multimodal_rope', geo, dict(scheme='mrope'))
    pi = create_pos_encoding('multimodal_rope', geo, dict(scheme='mrope',
                                                         extrapolation=dict(strategy='pi', train_grid=(20, 4, 5))))
    t_pi = pi.attn_terms(Positions(None, ids=ids), torch.float32, CPU)[0]
    t_ref = plain.attn_terms(Positions(None, ids=ids / torch.tensor([2.0, 2.0, 1.0])[:, None, None]),
                             torch.float32, CPU)[0]
    torch.testing.assert_close(t_pi.cos, t_ref.cos)
    pi.set_extrapolation('yarn')  # keeps the training spans
    t_y = pi.attn_terms(Positions(None, ids=ids), torch.float32, CPU)[0]
    torch.testing.assert_close(t_y.sin ** 2 + t_y.cos ** 2, torch.full_like(t_y.sin, (0.1 * math.log(2) + 1) ** 2))
    need = create_pos_encoding('multimodal_rope', geo, dict(scheme='mrope', extrapolation='ntk'))
    with pytest.raises(ValueError, match='needs the training extent per axis'):
        need.attn_terms(Positions(None, ids=ids), torch.float32, CPU)


def test_sincos_and_fourier_integer_or_rescaled_coordinates():
    sc = create_pos_encoding('sincos', dict(dim=32, grid_size=(4, 4)), dict(extrapolation='pi'))
    torch.testing.assert_close(sc.table((8, 6), CPU)[0], sincos2d_at(grid_coords((1, 8, 6))[:, 1:] /
                                                                     torch.tensor([2.0, 1.5]), 32))
    torch.testing.assert_close(sc.table((4, 4), CPU)[0], sincos2d_at(grid_coords((1, 4, 4))[:, 1:], 32))
    sc.set_extrapolation('none')
    torch.testing.assert_close(sc.table((8, 6), CPU)[0], sincos2d_at(grid_coords((1, 8, 6))[:, 1:], 32))
    fo = create_pos_encoding('fourier', dict(dim=32, grid_size=(4, 4)), dict(extrapolation='pi', fourier_dim=16))
    ref = copy.deepcopy(fo)
    ref.set_extrapolation('none')
    # fourier at (8, 8) with PI = the integer-coordinate encoding of the half-step grid: compare through W_r
    x = grid_coords((1, 8, 8))[:, 1:] / 2
    feats = torch.cat([(x @ fo.w_r.t()).cos(), (x @ fo.w_r.t()).sin()], -1) * fo.scale
    torch.testing.assert_close(fo.table((8, 8), CPU)[0], fo.mlp(feats))
    assert (fo.table((8, 8), CPU) - ref.table((8, 8), CPU)).abs().max() > 1e-4


# ------------------------------------------------------------------------------------------------------- errors
def test_unknown_strategy_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown extrapolation strategy 'yarm'.*none.*pi.*ntk.*yarn"):
        _tiny('rope_mixed', pe_kwargs=dict(extrapolation='yarm'))
    with pytest.raises(ValueError, match='unknown extrapolation strategy'):
        _tiny('ape').pe.set_extrapolation('linear')
    with pytest.raises(ValueError, match='unknown extrapolation options'):
        _tiny('rope_axial', pe_kwargs=dict(extrapolation=dict(strategy='pi', factor=2)))


@pytest.mark.parametrize('pe, name', [('ape', "'ape' encoding"), ('irpe_k', "'irpe' encoding"),
                                      ('comrope_ap', "'comrope' encoding"), ('peg', "'peg' encoding")])
def test_strategy_on_an_encoding_it_does_not_apply_to(pe, name):
    with pytest.raises(ValueError, match=f"extrapolation 'yarn' does not apply to the {name}.*rope_axial"):
        _tiny(pe, pe_kwargs=dict(extrapolation='yarn'))
    model = _tiny(pe)
    with pytest.raises(ValueError, match="extrapolation 'pi' does not apply to the"):
        model.pe.set_extrapolation('pi')
    model.pe.set_extrapolation('none')  # 'none' is every encoding's behaviour
    _tiny(pe, pe_kwargs=dict(extrapolation='none'))


def test_ntk_and_yarn_refused_by_additive_encodings():
    for pe in ('sincos', 'fourier'):
        with pytest.raises(ValueError, match="extrapolation 'ntk' does not apply to it.*none.*pi"):
            _tiny(pe, pe_kwargs=dict(extrapolation='ntk'))


# ------------------------------------------------------------------------------- the hook: set / check / read
@pytest.mark.parametrize('pe, strategy', [('rope_mixed', 'yarn'), ('rope_axial', 'ntk'), ('sincos', 'pi'),
                                          ('fourier', 'pi')])
def test_set_extrapolation_equals_a_model_built_with_it_and_drops_the_cache(pe, strategy):
    """No copy needed: switching a model's encoding in place gives what building it with the strategy gives, at a
    new grid, also right after that grid's tables were cached under the old strategy."""
    torch.manual_seed(0)
    model = _tiny(pe)
    fresh = _tiny(pe, pe_kwargs=dict(extrapolation=strategy))
    fresh.load_state_dict(model.state_dict())
    x2 = torch.randn(2, 3, 64, 48)
    with torch.no_grad():
        before = model(x2)                                   # caches the 8 x 6 grid's tables under 'none'
        model.pe.set_extrapolation(strategy)
        assert model.pe.extrapolation == fresh.pe.extrapolation
        torch.testing.assert_close(model(x2), fresh(x2), rtol=0, atol=0)
        assert (model(x2) - before).abs().max() > 1e-5
        model.pe.set_extrapolation('none')
        torch.testing.assert_close(model(x2), before, rtol=0, atol=0)


def test_set_extrapolation_drops_the_cached_tables():
    pe = _tiny('rope_axial').pe
    pos = Positions.from_hw((8, 8), 1, 1)
    term = pe.attn_terms(pos, torch.float32, CPU)[0]
    assert pe.attn_terms(pos, torch.float32, CPU)[0] is term  # cached
    pe.set_extrapolation('none')                                # same strategy: tables rebuilt all the same
    assert pe.attn_terms(pos, torch.float32, CPU)[0] is not term


def test_check_extrapolation_validates_without_changing_the_encoding():
    pe = _tiny('rope_mixed').pe
    ext = pe.check_extrapolation(dict(strategy='yarn', beta=16))
    assert (ext.strategy, ext.train_grid, ext.alpha, ext.beta) == ('yarn', (4.0, 4.0), 1.0, 16.0)
    assert pe.extrapolation == Extrapolation('none', (4.0, 4.0))        # unchanged
    assert _tiny('ape').pe.check_extrapolation('none') is None          # takes no strategy: nothing to hold
    with pytest.raises(AttributeError):
        pe.extrapolation = ext                                          # read-only: set_extrapolation owns it
    assert extrapolation_of(pe) == pe.extrapolation and extrapolation_of(None) is None
    set_extrapolation(pe, 'pi')                                         # the module function is the method
    assert pe.extrapolation.strategy == 'pi'


@pytest.mark.parametrize('pe, supported', [('rope_axial', ROTARY_STRATEGIES), ('rope_mixed_ape', ROTARY_STRATEGIES),
                                           ('sincos', ('none', 'pi')), ('fourier', ('none', 'pi')),
                                           ('ape', ('none',)), ('irpe_k', ('none',)), ('peg', ('none',))])
def test_supported_extrapolations_and_refusals_name_the_encoding(pe, supported):
    model = _tiny(pe)
    assert type(model.pe).supported_extrapolations() == supported
    before = model.pe.extrapolation
    for strategy in STRATEGIES:
        if strategy in supported:
            model.pe.check_extrapolation(strategy)
            continue
        name = 'sincos' if pe == 'sincos' else 'fourier' if pe == 'fourier' else None
        match = (f"{name}: extrapolation '{strategy}' does not apply to it \\(it supports \\('none', 'pi'\\)\\)"
                 if name else f"extrapolation '{strategy}' does not apply to the {pe.split('_')[0]} encoding")
        with pytest.raises(ValueError, match=match):
            model.pe.check_extrapolation(strategy)
        with pytest.raises(ValueError, match=match):
            model.pe.set_extrapolation(strategy)
        assert model.pe.extrapolation == before                         # a refused strategy changes nothing


# ------------------------------------------------------------------------------------------- eval-resolution
def _folder(root):
    g = torch.Generator().manual_seed(0)
    for split in ('train', 'val'):
        for c, name in enumerate(('blue', 'green', 'red')):
            os.makedirs(os.path.join(root, split, name), exist_ok=True)
            for i in range(6 if split == 'train' else 3):
                img = torch.rand(32, 32, 3, generator=g) * 90
                img[..., c] += 150
                Image.fromarray(img.clamp(0, 255).byte().numpy()).save(os.path.join(root, split, name, f'{i}.png'))
    return str(root)


def test_eval_resolution_extrapolation_dimension(tmp_path):
    data = _folder(tmp_path / 'data')
    common = ['--data-dir', data, '--img-size', '32', '--model-kwargs', 'patch_size=8', 'embed_dim=32', 'depth=1',
              'num_heads=2', '--epochs', '1', '--batch-size', '6', '--workers', '0', '--no-progress', '--threads', '1']
    rope, ape = str(tmp_path / 'rope'), str(tmp_path / 'ape')
    assert main(['train', '--model', 'pe_vit_tiny_patch16_rope_mixed_224', '--output', rope, *common]) == 0
    out = str(tmp_path / 'eval')
    assert main(['eval-resolution', '--run', rope, '--data-dir', data, '--sizes', '32', '64', '--extrapolation',
                 'none', 'pi', 'yarn', '--output', out, '--workers', '0', '--no-progress']) == 0
    res = json.load(open(os.path.join(out, 'results.json')))
    rows = res['results']
    assert [(r['extrapolation'], r['size']) for r in rows] == [(s, z) for s in ('none', 'pi', 'yarn')
                                                              for z in (32, 64)]
    assert {r['label'] for r in rows} == {'rope_mixed · none', 'rope_mixed · pi', 'rope_mixed · yarn'}
    at_train = {r['loss'] for r in rows if r['size'] == 32}
    assert len(at_train) == 1  # identical at the training size (the recorded grid)
    assert len({r['loss'] for r in rows if r['size'] == 64}) == 3
    assert 'yarn (training grid 4x4' in res['models'][2]['extrapolation']
    md = open(os.path.join(out, 'report.md')).read()
    assert '### Extrapolation strategies' in md and os.path.getsize(os.path.join(out, 'extrapolation.png')) > 0
    # an encoding that takes no strategy, and nothing else to evaluate: a clear error before any evaluation (with
    # another model or strategy that applies, its rows are recorded as not applicable: tests/test_sweep.py)
    assert main(['train', '--model', 'pe_vit_tiny_patch16_ape_224', '--output', ape, *common]) == 0
    from zoo.sweep.resolution import eval_resolution
    with pytest.raises(ValueError, match="--extrapolation ntk for ape: extrapolation 'ntk' does not apply"):
        eval_resolution(['--run', ape, '--data-dir', data, '--sizes', '32', '--extrapolation', 'ntk',
                         '--output', str(tmp_path / 'e2'), '--workers', '0', '--no-progress'])
    with pytest.raises(SystemExit):  # argparse: invalid choice
        eval_resolution(['--run', rope, '--data-dir', data, '--sizes', '32', '--extrapolation', 'linear',
                         '--output', str(tmp_path / 'e3')])
