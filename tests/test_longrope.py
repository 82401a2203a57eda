"""LongRoPE (per-frequency factors, first n_hat positions kept) on the image / video RoPE encodings and the video-LLM
decoder, its factors file and evolutionary search; Ms-PoE per head and axis on the image / video RoPE encodings;
HARPE-style per-head bases in the decoder's rotary tables. Golden-free: each is checked against its defining formula
or property. Tiny and offline (seconds)."""
from __future__ import annotations

import argparse
import json
import os

import pytest
import timm
import torch

import zoo  # noqa: F401
from zoo.encodings import Positions, create_pos_encoding
from zoo.encodings.extrapolation import strategy_argument
from zoo.encodings.longrope import FORMAT, factors_document
from zoo.encodings.longrope_search import evolution_search, initial_factors, ladder_of, paired_decision
from zoo.encodings.mspoe_axes import axis_ratios
from zoo.encodings.multimodal.encoding import harpe_bases
from zoo.encodings.rotation import grid_coords, rope_frequencies

CPU = torch.device('cpu')
TINY = dict(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=2, dynamic_img_size=True)


def _vit(pe: str, **kw):
    torch.manual_seed(0)
    return timm.create_model(f'pe_vit_tiny_patch16_{pe}_224', **dict(TINY, **kw)).eval()


def _rope3d(**kw):
    return create_pos_encoding('rope3d', dict(dim=96, num_heads=2, depth=1, grid_size=(2, 4, 4)), kw)


# ---------------------------------------------------------------------------------------------------- LongRoPE
def test_longrope_axial_angles_follow_eq3_by_hand():
    """Pair i of an extended axis turns by n theta_i below n_hat and by n theta_i / lambda_i from n_hat on."""
    pe = create_pos_encoding('rope_axial', dict(dim=64, num_heads=2, depth=1, grid_size=(4, 4)))
    bands = pe.bands                                                                    # (8,)
    lam_r, lam_c = torch.linspace(1.0, 3.0, 8), torch.linspace(1.5, 2.5, 8)
    pe.set_extrapolation(dict(strategy='longrope', factors=[lam_r.tolist(), lam_c.tolist()], n_hat=[2, 3]))
    x = torch.arange(8.0)  # columns 0..7 of an 8x6 grid: cols extended (s=2) ... rows 8 / 4 = 2 too
    y = torch.arange(8.0)
    got = pe.angles(x, y, factors=(2.0, 1.5))[0]                                          # (8, 16)
    want_x = torch.where(x[:, None] >= 3, x[:, None] / lam_c, x[:, None]) * bands
    want_y = torch.where(y[:, None] >= 2, y[:, None] / lam_r, y[:, None]) * bands
    torch.testing.assert_close(got, torch.cat([want_x, want_y], -1))
    # an axis that is not extended (s = 1) keeps integer positions
    same = pe.angles(x, y, factors=(1.0, 2.0))[0]
    torch.testing.assert_close(same[:, 8:], y[:, None] * bands)


@pytest.mark.parametrize('pe_name', ['rope_axial', 'rope_mixed'])
def test_longrope_constant_factors_equal_pi_and_training_grid_unchanged(pe_name):
    m = _vit(pe_name)
    x = torch.randn(2, 3, 64, 64)
    n = ladder_of(m.pe).num
    with torch.no_grad():
        m.pe.set_extrapolation('pi')
        pi = m(x)
        m.pe.set_extrapolation(dict(strategy='longrope', factors=[2.0] * n, n_hat=0))
        lr = m(x)
        at_train = m(x[..., :32, :32])
        m.pe.set_extrapolation('none')
        plain = m(x[..., :32, :32])
    torch.testing.assert_close(lr, pi)
    torch.testing.assert_close(at_train, plain)


def test_longrope_rope3d_grid_and_ids_match_scaled_positions():
    sub = 32  # rope3d head_dim 48: sub = 16 channels per axis, 8 bands
    lam = [[1.0 + 0.1 * i for i in range(8)], [2.0] * 8, [1.0] * 8]
    pe = _rope3d(extrapolation=dict(strategy='longrope', factors=lam, n_hat=[1, 0, 0]))
    plain = _rope3d()
    grid = (4, 8, 4)
    term = pe.attn_terms(Positions(grid), torch.float32, CPU)[0]
    c = grid_coords(grid)
    lam_t = torch.tensor(lam[0])
    bands = rope_frequencies(8, 10000.0)
    angles_t = torch.where(c[:, :1] >= 1, c[:, :1] / lam_t, c[:, :1]) * bands         # t axis by hand
    ref_sin, _ = plain.sin_cos(c / torch.tensor([1.0, 2.0, 1.0]))                        # rows: lambda 2 = PI
    torch.testing.assert_close(term.sin[0, 0, :, 16:32], ref_sin[:, 16:32])
    torch.testing.assert_close(term.sin[0, 0, :, 0:16:2], angles_t.sin())
    ids = c.t().unsqueeze(1)
    term_ids = pe.attn_terms(Positions(None, ids=ids), torch.float32, CPU)[0]
    torch.testing.assert_close(term_ids.cos[0, 0], term.cos[0, 0])
    assert sub


def test_longrope_multimodal_per_pair_and_kv_cache():
    """The decoder: pair j of an extended id axis divides its positions from n_hat on by lambda_j; decoding with the
    cache equals a full forward (positions are per token, so the rule is the same at every step)."""
    from zoo.models.attention import KVCache
    from zoo.models.vlm.decoder import Decoder
    half = 8
    lam = [1.0 + 0.25 * j for j in range(half)]
    ext = dict(strategy='longrope', factors=lam, n_hat=4, train_grid=(6,))
    pe = create_pos_encoding('multimodal_rope', dict(dim=32, num_heads=2, depth=1),
                             dict(scheme='rope1d', theta=1e4, extrapolation=ext))
    ids = torch.arange(12.0)[None, None]
    term = pe.attn_terms(Positions(None, ids=ids), torch.float32, CPU)[0]
    n = ids[0, 0][:, None]
    want = torch.where(n >= 4, n / torch.tensor(lam), n) * rope_frequencies(half, 1e4)
    torch.testing.assert_close(term.sin[0, 0, :, :half], want.sin())
    torch.manual_seed(0)
    dec = Decoder(40, 32, 2, 4, 2, mlp_hidden=64, scheme='rope1d', theta=1e4,
                  extrapolation=dict(ext, factors=[1.0 + 0.25 * j for j in range(4)])).eval()
    tok = torch.randint(0, 40, (1, 12))
    pos = torch.arange(12)[None, None]
    with torch.no_grad():
        full = dec(dec.embed(tok), pos)
        cache = KVCache(2)
        parts = [dec(dec.embed(tok[:, :8]), pos[..., :8], None, cache)]
        parts += [dec(dec.embed(tok[:, i:i + 1]), pos[..., i:i + 1], None, cache) for i in range(8, 12)]
    # the span of the ids decides whether an axis is extended: the 8-token prompt (span 8 > 6) and each decode step
    # (span 1) differ, so compare the prompt part, whose span rule is the full sequence's too (both > 6)
    torch.testing.assert_close(parts[0], full[:, :8], rtol=1e-5, atol=1e-5)


def test_factors_file_string_form_and_errors(tmp_path):
    pe = create_pos_encoding('rope_axial', dict(dim=64, num_heads=2, depth=1, grid_size=(4, 4)))
    doc = factors_document('rope_axial', ('rows', 'cols'), [[2.0] * 8, [1.5] * 8], [0, 1], (4, 4), (8, 8),
                           dict(decided=True))
    path = tmp_path / 'f.json'
    path.write_text(json.dumps(doc))
    pe.set_extrapolation(f'longrope={path}')
    ext = pe.extrapolation
    assert ext.strategy == 'longrope' and ext.longrope[0][1] == (1.5,) * 8 and ext.longrope[1] == (0.0, 1.0)
    assert 'longrope (factors' in ext.describe() and doc['format'] == FORMAT
    pe.set_extrapolation(dict(strategy='longrope', factors_file=str(path)))
    assert pe.extrapolation.longrope[0][0] == (2.0,) * 8
    assert strategy_argument(f'longrope={path}') == f'longrope={path}' and strategy_argument('mspoe') == 'mspoe'
    with pytest.raises(argparse.ArgumentTypeError, match='needs its factors file'):
        strategy_argument('longrope')
    with pytest.raises(ValueError, match='not found'):
        pe.set_extrapolation(f'longrope={tmp_path / "missing.json"}')
    (tmp_path / 'bad.json').write_text('{"factors": [1]}')
    with pytest.raises(ValueError, match='is not a longrope factors file'):
        pe.set_extrapolation(f'longrope={tmp_path / "bad.json"}')
    pe.set_extrapolation(dict(strategy='longrope', factors=[2.0] * 5))
    with pytest.raises(ValueError, match='5 entries for axis 1 but the encoding has 8 frequencies'):
        pe.attn_terms(Positions.from_hw((8, 8)), torch.float32, CPU)
    with pytest.raises(ValueError, match='positive finite'):
        pe.set_extrapolation(dict(strategy='longrope', factors=[0.0] * 8))
    with pytest.raises(ValueError, match="belong to extrapolation 'longrope'"):
        pe.set_extrapolation(dict(strategy='pi', n_hat=3))


def test_strategies_refused_by_encodings_that_cannot_take_them_name_the_takers():
    for strategy in ('longrope=x.json', 'mspoe'):
        with pytest.raises(ValueError, match='rope3d, rope_axial, rope_mixed') as e:
            create_pos_encoding('sincos', dict(dim=32, grid_size=(4, 4)), dict(extrapolation=strategy))
        assert '\n' not in str(e.value)
    ape = create_pos_encoding('ape', dict(dim=32, grid_size=(4, 4)))
    with pytest.raises(ValueError, match="'longrope' applies to the encodings .*rope_axial"):
        ape.check_extrapolation('longrope=x.json')


def test_initial_factors_are_pi_ntk_yarn():
    pe = create_pos_encoding('rope_axial', dict(dim=64, num_heads=2, depth=1, grid_size=(4, 4)))
    init = initial_factors(ladder_of(pe), (2.0, 2.0))
    assert init['pi'][0] == [2.0] * 8
    assert init['ntk'][0][0] == 1.0 and init['ntk'][0][-1] == 2.0
    assert all(b >= a for row in init['yarn'] for a, b in zip(row, row[1:]))


def test_evolution_search_improves_and_is_reproducible():
    """A synthetic fitness whose best factors are known: the search beats every baseline and decides."""
    pe = create_pos_encoding('rope_axial', dict(dim=64, num_heads=2, depth=1, grid_size=(4, 4)))
    ladder = ladder_of(pe)
    target = torch.linspace(1.0, 2.4, 8)
    noise = torch.randn(64, generator=torch.Generator().manual_seed(0)) * 0.01

    def losses(factors, n_hat):
        err = sum(((torch.tensor(r) - target) ** 2).mean() for r in factors)
        return err + noise + 0.01 * torch.tensor(n_hat).abs().sum()

    kw = dict(population=8, mutations=6, crossovers=6, parents=4, iterations=6, seed=1)
    res = evolution_search(ladder, (2.0, 2.0), losses, **kw)
    assert res.loss < min(res.baselines.values()) and res.decided, res.message
    again = evolution_search(ladder, (2.0, 2.0), losses, **kw)
    assert again.factors == res.factors and again.history == res.history
    assert all(b >= a for row in res.factors for a, b in zip(row, row[1:]))  # monotone non-decreasing
    assert all(1.0 <= v <= 2.5 for row in res.factors for v in row)              # [1, 1.25 s]


def test_too_small_validation_set_says_so():
    best, base = torch.tensor([1.0, 0.5, 0.9]), torch.tensor([1.1, 0.4, 1.0])
    verdict, msg = paired_decision(best, base, 'pi')
    assert verdict == 'undecided' and 'too small to decide' in msg
    assert paired_decision(torch.zeros(50), torch.ones(50) * 0.1 + torch.linspace(0, 0.01, 50), 'pi')[0] == 'better'
    pe = create_pos_encoding('rope_axial', dict(dim=64, num_heads=2, depth=1, grid_size=(4, 4)))
    with pytest.raises(ValueError, match='too small to decide'):
        evolution_search(ladder_of(pe), (2.0, 2.0), lambda f, n: torch.zeros(1), iterations=1)


def test_paired_decision_names_the_baseline_that_wins_clearly():
    """Three outcomes: factors clearly worse than the baseline are not 'too small to decide' (breaker's repro)."""
    b = torch.ones(200) + torch.linspace(0, 0.01, 200)
    verdict, msg = paired_decision(b + 0.5, b, 'the best baseline (none)')
    assert verdict == 'worse' and 'the best baseline (none) wins' in msg and 'too small' not in msg
    assert paired_decision(b - 0.5, b, 'pi')[0] == 'better'
    assert paired_decision(b + torch.linspace(-1, 1, 200), b, 'pi')[0] == 'undecided'


def test_evolution_search_starts_from_none_and_never_returns_worse_than_it():
    """``none`` (all factors 1, n_hat 0) is a baseline and in the population even without ``plain``: on a fitness
    where every factor above 1 costs, the search returns the factors of doing nothing, never worse."""
    pe = create_pos_encoding('rope_axial', dict(dim=64, num_heads=2, depth=1, grid_size=(4, 4)))
    noise = torch.randn(64, generator=torch.Generator().manual_seed(0)) * 0.01

    def losses(factors, n_hat):
        return noise + sum((torch.tensor(r) - 1.0).sum() for r in factors) + torch.tensor(n_hat).sum()

    res = evolution_search(ladder_of(pe), (2.0, 2.0), losses, population=4, mutations=2, crossovers=2, parents=2,
                           iterations=2)
    assert 'none' in res.baselines and res.best_baseline == 'none'
    assert res.factors == [[1.0] * 8, [1.0] * 8] and res.n_hat == [0.0, 0.0] and res.verdict == 'undecided'


def _bad_files(tmp_path):
    good = factors_document('rope_axial', ('rows', 'cols'), [[1.5] * 8, [1.5] * 8], [0, 0], (4, 4), (8, 8))
    cases = {'n_hat_nan': (dict(n_hat=float('nan')), 'n_hat'), 'n_hat_inf': (dict(n_hat=[0, float('inf')]), 'n_hat'),
             'three_lists': (dict(factors=[[1.5] * 8] * 3), 'factors'), 'three_n_hat': (dict(n_hat=[0, 0, 0]), 'n_hat'),
             'other_encoding': (dict(encoding='rope3d', axes=['frames', 'rows', 'cols'], factors=[[1.5] * 8] * 3,
                                     n_hat=[0, 0, 0]), 'encoding'),
             'strings': (dict(factors=[['1.5'] * 8, [1.5] * 8]), 'factors'),
             'booleans': (dict(factors=[[True] * 8, [1.5] * 8]), 'factors'),
             'n_hat_string': (dict(n_hat='2'), 'n_hat')}
    out = {}
    for name, (change, field) in cases.items():
        path = tmp_path / f'{name}.json'
        path.write_text(json.dumps(dict(good, **change)))
        out[name] = (str(path), field)
    return out


def test_bad_factors_files_are_one_line_errors_naming_file_and_field(tmp_path):
    pe = create_pos_encoding('rope_axial', dict(dim=64, num_heads=2, depth=1, grid_size=(4, 4)))
    for name, (path, field) in _bad_files(tmp_path).items():
        with pytest.raises(ValueError) as e:
            pe.set_extrapolation(f'longrope={path}')
        msg = str(e.value)
        assert path in msg and f'"{field}"' in msg and 'fix:' in msg and '\n' not in msg, (name, msg)
    with pytest.raises(ValueError, match='3 longrope factor lists for at most 2 axes'):
        pe.set_extrapolation(dict(strategy='longrope', factors=[[1.5] * 8] * 3))
    with pytest.raises(ValueError, match='n_hat must be a finite position'):
        pe.set_extrapolation(dict(strategy='longrope', factors=[1.5] * 8, n_hat=float('nan')))
    mixed = factors_document('rope_mixed_ape', ('rows', 'cols'), [[1.5] * 4] * 2, [0, 0], (4, 4), (8, 8))
    (tmp_path / 'mixed.json').write_text(json.dumps(mixed))   # rope_mixed and rope_mixed_ape share factors
    assert _vit('rope_mixed').pe.check_extrapolation(f'longrope={tmp_path / "mixed.json"}').strategy == 'longrope'


def test_sweep_refuses_a_bad_factors_file_whatever_the_other_strategies(tmp_path):
    """``--extrapolation none longrope=BAD`` is an error before any evaluation (not rows marked n/a); a good file
    that does not apply to one model's encoding still makes that model's rows n/a."""
    from zoo.sweep.classify import with_strategies
    from zoo.sweep.engine import SweepModel
    models = [SweepModel('axial', _vit('rope_axial'), dict(model='axial')),
              SweepModel('ape', _vit('ape'), dict(model='ape'))]
    for path, field in _bad_files(tmp_path).values():
        if field == 'encoding':
            continue
        with pytest.raises(ValueError, match='"' + field + '"'):
            with_strategies(models, ['none', f'longrope={path}'])
    (tmp_path / 'trunc.json').write_text('{"format": "zoo-longrope/1", "factors": [1.5, ')
    with pytest.raises(ValueError, match='not readable JSON'):
        with_strategies(models, ['none', f'longrope={tmp_path / "trunc.json"}'])
    good = tmp_path / 'good.json'
    good.write_text(json.dumps(factors_document('rope_axial', ('rows', 'cols'), [[1.5] * 8] * 2, [0, 0], (4, 4),
                                                (8, 8))))
    out = with_strategies(models, ['none', f'longrope={good}'])
    assert [bool(m.info.get('not_applicable')) for m in out] == [False, False, False, True]


# ------------------------------------------------------------------------------------------ Ms-PoE per axis
@pytest.mark.parametrize('pe_name', ['rope_axial', 'rope_mixed'])
def test_mspoe_axes_each_head_reads_compressed_coordinates(pe_name):
    m = _vit(pe_name)
    pe = m.pe
    pos = Positions.from_hw((4, 4), 1, 1)
    plain_terms = pe.attn_terms(pos, torch.float32, CPU)
    pe.set_extrapolation(dict(strategy='mspoe', ratio_min=1.2, ratio_max=1.8))
    term = pe.attn_terms(pos, torch.float32, CPU)[-1]
    sin, _ = term.tables(2)
    ratios = axis_ratios(2, 2, dict(pe.extrapolation.mspoe))
    assert ratios[:, 0].tolist() == pytest.approx([1.8, 1.2])  # 'normal': the first head compresses most
    from zoo.encodings.rotary import RotaryTerm, patch_coords
    x, y = patch_coords((4, 4), CPU)
    for h in range(2):
        r = float(ratios[h, 0])
        if pe_name == 'rope_axial':
            want = RotaryTerm.from_angles(pe.angles(x / r, y / r).unsqueeze(0), 1).sin[0, 0]
        else:
            want = RotaryTerm.from_angles(pe.angles(x / r, y / r)[-1:, h:h + 1], 1).sin[0, 0]
        torch.testing.assert_close(sin[0, h], want)
    assert plain_terms[0].sin.shape[1] in (1, 2)
    with torch.no_grad():
        out = m(torch.randn(1, 3, 48, 48))
    assert torch.isfinite(out).all()


def test_mspoe_rope3d_only_the_time_axis_and_ratio_one_is_identity():
    pe = _rope3d(extrapolation=dict(strategy='mspoe', axes=[0]))
    plain = _rope3d()
    grid = (4, 4, 4)
    sin, cos = pe.attn_terms(Positions(grid), torch.float32, CPU)[0].tables(2)
    c = grid_coords(grid)
    for h, r in enumerate((1.8, 1.2)):
        ref_sin, _ = plain.sin_cos(c / torch.tensor([r, 1.0, 1.0]))
        torch.testing.assert_close(sin[0, h], ref_sin)
    one = _rope3d(extrapolation=dict(strategy='mspoe', ratio_min=1.0, ratio_max=1.0))
    q, k = torch.randn(2, 2, 64, 48), torch.randn(2, 2, 64, 48)
    got = one.attn_terms(Positions(grid), torch.float32, CPU)[0].rotate(q, k)
    ref = plain.attn_terms(Positions(grid), torch.float32, CPU)[0].rotate(q, k)
    torch.testing.assert_close(got[0], ref[0])


def test_mspoe_axes_scores_depend_on_coordinate_differences_per_head():
    pe = create_pos_encoding('rope_axial', dict(dim=64, num_heads=2, depth=1, grid_size=(4, 4)),
                             dict(extrapolation='mspoe'))
    q, k = torch.randn(1, 2, 1, 32).expand(1, 2, 64, 32), torch.randn(1, 2, 1, 32).expand(1, 2, 64, 32)
    qr, kr = pe.attn_terms(Positions.from_hw((8, 8)), torch.float32, CPU)[0].rotate(q, k)
    s = (qr @ kr.transpose(-1, -2))[0]                                                  # (2, 64, 64)
    # token (r, c) = 8 r + c: (0,0)->(1,2) and (3,3)->(4,5) have the same offset
    torch.testing.assert_close(s[:, 0, 10], s[:, 27, 37])


def test_mspoe_axes_refusals():
    pe = create_pos_encoding('rope_axial', dict(dim=64, num_heads=2, depth=1, grid_size=(4, 4)),
                             dict(extrapolation=dict(strategy='mspoe', head_order='outlier')))
    q = torch.randn(1, 2, 16, 32)
    with pytest.raises(ValueError, match="'outlier' ranks heads by the last query"):
        pe.attn_terms(Positions.from_hw((4, 4)), torch.float32, CPU)[0].rotate(q, q)
    pe.set_extrapolation(dict(strategy='mspoe', head_order='normal', axes=[2]))
    with pytest.raises(ValueError, match='out of range for its 2 grid axes'):
        pe.attn_terms(Positions.from_hw((4, 4)), torch.float32, CPU)[0].rotate(q, q)


# ---------------------------------------------------------------------------------------------------- HARPE
def test_harpe_each_key_head_uses_its_base_and_scores_are_relative():
    bases = harpe_bases(2, 1e2, 1e4)
    assert bases == pytest.approx([1e2, 1e4])
    pe = create_pos_encoding('multimodal_rope', dict(dim=64, num_heads=4, depth=1),
                             dict(num_kv_heads=2, scheme='rope1d', theta=bases))
    ids = torch.arange(10.0)[None, None]
    term = pe.attn_terms(Positions(None, ids=ids), torch.float32, CPU)[0]
    assert term.sin.shape[1] == 2
    for h, b in enumerate(bases):
        single = create_pos_encoding('multimodal_rope', dict(dim=64, num_heads=4, depth=1),
                                     dict(num_kv_heads=2, scheme='rope1d', theta=b))
        torch.testing.assert_close(term.sin[0, h], single.attn_terms(Positions(None, ids=ids), torch.float32,
                                                                     CPU)[0].sin[0, 0])
    q, k = torch.randn(1, 4, 1, 16).expand(1, 4, 10, 16), torch.randn(1, 2, 1, 16).expand(1, 2, 10, 16)
    qr, kr = term.rotate(q, k)
    s = qr @ kr.repeat_interleave(2, 1).transpose(-1, -2)
    torch.testing.assert_close(s[0, :, 5, 2], s[0, :, 8, 5])  # same offset, same score, per head
    with pytest.raises(ValueError, match='needs 2 positive bases, one per key head'):
        create_pos_encoding('multimodal_rope', dict(dim=64, num_heads=4, depth=1),
                            dict(num_kv_heads=2, scheme='rope1d', theta=[1e4, 1e5, 1e6]))


@pytest.mark.parametrize('scheme', ['rope1d', 'mrope'])
def test_harpe_video_llm_decodes_as_full_sequence_and_left_padded_as_alone(scheme):
    """Per-head bases as a training-time option of the video-LLM (theta=[...]): it trains (a gradient step), and
    cached decoding equals a full forward; a left-padded batch decodes as each sample alone."""
    from test_vlm import gen, scramble, tiny, two_prompts
    m = scramble(tiny(scheme, num_heads=4, num_kv_heads=2, theta=harpe_bases(2, 1e3, 1e5)))
    assert m.decoder.pe.head_bases == tuple(harpe_bases(2, 1e3, 1e5))
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
    m.train()  # a training step: gradients reach the decoder through the per-head tables
    tb = m.collate(prompts, 'right')
    m(tb['input_ids'], tb['attention_mask'], videos=clips, video_grid_thw=tb['video_grid_thw']).logits.float().mean() \
        .backward()
    grad = m.decoder.blocks[0].attn.qkv.weight.grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0


# ----------------------------------------------------------------------------------------- zoo search-longrope
def _folder(root, per_class=6):
    import os
    from PIL import Image
    g = torch.Generator().manual_seed(0)
    for split, n in (('train', per_class), ('val', 2)):
        for c, name in enumerate(('blue', 'green', 'red')):
            os.makedirs(os.path.join(root, split, name), exist_ok=True)
            for i in range(n):
                img = torch.rand(32, 32, 3, generator=g) * 90
                img[..., c] += 150
                Image.fromarray(img.clamp(0, 255).byte().numpy()).save(os.path.join(root, split, name, f'{i}.png'))
    return str(root)


def test_search_longrope_command_on_a_tiny_checkpoint(tmp_path, capsys):
    """Train a tiny RoPE-Axial model, search factors at 2x size on a split carved from its training folder, then
    evaluate with --extrapolation longrope=FILE; a validation set below 8 samples is refused in one line."""
    from zoo.cli import main
    data = _folder(tmp_path / 'data')
    run = str(tmp_path / 'rope')
    assert main(['train', '--model', 'pe_vit_tiny_patch16_rope_axial_224', '--output', run, '--data-dir', data,
                 '--img-size', '32', '--model-kwargs', 'patch_size=8', 'embed_dim=32', 'depth=1', 'num_heads=2',
                 '--epochs', '1', '--batch-size', '6', '--workers', '0', '--no-progress', '--threads', '1']) == 0
    out = str(tmp_path / 'factors.json')
    assert main(['search-longrope', '--run', run, '--data-dir', data, '--output', out, '--val-size', '12',
                 '--population', '4', '--mutations', '2', '--crossovers', '2', '--parents', '2', '--iterations', '2',
                 '--threads', '1']) == 0
    printed = capsys.readouterr().out
    doc = json.load(open(out))
    assert doc['encoding'] == 'rope_axial' and doc['axes'] == ['rows', 'cols'] and len(doc['factors'][0]) == 4
    assert doc['train_grid'] == [4.0, 4.0] and doc['target_grid'] == [8.0, 8.0]
    assert set(doc['search']['baselines']) == {'none', 'pi', 'ntk', 'yarn'} and doc['search']['samples'] == 12
    assert doc['search']['message'] in printed and ('too small to decide' in printed) == (not doc['search']['decided'])
    ev = str(tmp_path / 'eval')
    assert main(['eval-resolution', '--run', run, '--data-dir', data, '--split', 'train', '--sizes', '32', '64',
                 '--extrapolation', 'none', f'longrope={out}', '--output', ev, '--workers', '0',
                 '--no-progress']) == 0
    rows = json.load(open(tmp_path / 'eval' / 'results.json'))['results']
    assert len({r['loss'] for r in rows if r['size'] == 32}) == 1  # unchanged at the training size
    assert main(['search-longrope', '--run', run, '--data-dir', data, '--output', out, '--val-size', '4']) == 2
    assert 'too small to decide' in capsys.readouterr().err
    big = str(tmp_path / 'big.json')   # 3200 px on a 32 px model: refused on the memory estimate, before any image
    assert main(['search-longrope', '--run', run, '--data-dir', data, '--output', big, '--scale', '100']) == 2
    assert 'GiB of memory' in capsys.readouterr().err and not os.path.exists(big)
    assert main(['search-longrope', '--run', run, '--data-dir', data, '--output', big, '--frames', '16']) == 2
    assert '--frames 16: an image classifier has no frames' in capsys.readouterr().err


def test_search_longrope_writes_no_file_when_a_baseline_wins(tmp_path, monkeypatch, capsys):
    """Worse than the best baseline by more than 2 SE: the command names the baseline, writes nothing, exits 1."""
    import zoo.sweep.search_longrope as sl
    from zoo.encodings.longrope_search import SearchResult
    pe = create_pos_encoding('rope_axial', dict(dim=64, num_heads=2, depth=1, grid_size=(4, 4)))
    res = SearchResult([[1.5] * 8] * 2, [0, 0], 2.0, dict(none=1.0), 'none', 'worse',
                       'the best baseline (none) wins: ...')
    monkeypatch.setattr(sl, '_checkpoint', lambda args: 'x.pth')
    monkeypatch.setattr('zoo.runs.models.load_model', lambda spec: (torch.nn.Linear(1, 1), dict(model_name='m')))
    monkeypatch.setattr('zoo.runs.models.recorded_model_name', lambda path: 'm')
    monkeypatch.setattr(sl, '_image_fitness', lambda *a: (pe, None, None, (2.0, 2.0), (8, 8), '64 px'))
    monkeypatch.setattr(sl, 'evolution_search', lambda *a, **k: res)
    out = tmp_path / 'f.json'
    assert sl.main(['--checkpoint', 'x.pth', '--data-dir', str(tmp_path), '--output', str(out)]) == 1
    assert not out.exists() and 'the best baseline (none) wins' in capsys.readouterr().out


def test_search_longrope_command_on_a_tiny_video_llm(tmp_path, capsys):
    """The video-LLM path: V-NIAH items (zoo make-videoqa) at twice the training frames; the training span of the ids
    is measured at the training frame count; the factors are one list over the decoder's rotary pairs."""
    from zoo.cli import main
    q, run, out = str(tmp_path / 'q'), str(tmp_path / 'run'), str(tmp_path / 'f.json')
    assert main(['make-videoqa', '--output', q, '--tasks', 'vniah', '--niah-lengths', '8', '16', '--niah-depths',
                 '0.2', '0.8', '--niah-per-cell', '3', '--size', '32', '--frames', '16']) == 0
    assert main(['train-vlm', '--model', 'pe_vlm_tiny_rope1d', '--data-dir', q, '--output', run, '--num-frames', '4',
                 '--frame-size', '32', '--epochs', '1', '--batch-size', '4', '--max-train', '2', '--max-val', '1',
                 '--workers', '0', '--no-progress', '--threads', '1', '--model-kwargs', 'dim=64', 'depth=2',
                 'num_heads=2', 'num_kv_heads=1', 'mlp_hidden=64', 'tower_kwargs.img_size=32',
                 'tower_kwargs.patch_size=8', 'tower_kwargs.embed_dim=32', 'tower_kwargs.depth=1',
                 'tower_kwargs.num_heads=2']) == 0
    capsys.readouterr()
    assert main(['search-longrope', '--run', run, '--data-dir', q, '--output', out, '--val-size', '8',
                 '--population', '3', '--mutations', '1', '--crossovers', '1', '--parents', '2', '--iterations', '1',
                 '--threads', '1']) == 0
    doc = json.load(open(out))
    assert doc['encoding'] == 'multimodal_rope' and doc['axes'] == ['pairs'] and len(doc['factors'][0]) == 16
    assert doc['target_grid'][0] > doc['train_grid'][0] and doc['search']['samples'] == 8
    assert 'V-NIAH at 8 frames (trained at 4)' == doc['search']['target']
    assert doc['search']['message'] in capsys.readouterr().out


def test_search_longrope_allow_root_admits_linked_class_folders(tmp_path, capsys):
    """Class folders linked from outside the data root are skipped with a hint naming --allow-root, which
    search-longrope takes (it was missing there), and counted once allowed."""
    from zoo.cli import main
    data = _folder(tmp_path / 'data')
    run = str(tmp_path / 'rope')
    assert main(['train', '--model', 'pe_vit_tiny_patch16_rope_axial_224', '--output', run, '--data-dir', data,
                 '--img-size', '32', '--model-kwargs', 'patch_size=8', 'embed_dim=32', 'depth=1', 'num_heads=2',
                 '--epochs', '1', '--batch-size', '6', '--workers', '0', '--no-progress', '--threads', '1']) == 0
    linked = tmp_path / 'linked' / 'train'
    linked.mkdir(parents=True)
    for name in ('blue', 'green', 'red'):
        os.symlink(os.path.join(data, 'train', name), linked / name)
    args = ['search-longrope', '--run', run, '--data-dir', str(linked.parent), '--output', str(tmp_path / 'f.json'),
            '--val-size', '12', '--population', '2', '--mutations', '1', '--crossovers', '1', '--parents', '1',
            '--iterations', '1', '--threads', '1']
    assert main(args) == 2  # every class folder escapes the root: nothing left to validate on
    err = capsys.readouterr().err
    assert '3 lead outside it' in err and f'--allow-root {os.path.join(data, "train", "blue")}' in err
    assert main(args + ['--allow-root', os.path.join(data, 'train')]) == 0
    assert json.load(open(tmp_path / 'f.json'))['search']['samples'] == 12
