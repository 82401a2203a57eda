"""Options shared by a family of encodings: p-RoPE (``p_rope``) on the RoPE family and randomized positions
(``random_positions``) on the coordinate-based encodings; a one-line refusal for the others."""
from __future__ import annotations

import copy
import math

import pytest
import torch

import zoo  # noqa: F401
from zoo.encodings import Positions, RandomPositions, create_pos_encoding
from zoo.encodings.registry import takers

CPU = torch.device('cpu')
P_ROPE = ['rope_axial', 'rope_mixed', 'rope_mixed_ape', 'rope3d', 'multimodal_rope', 'gta']
RANDOM = ['sincos', 'sincos3d', 'fourier', 'rope_axial', 'rope_mixed', 'rope_mixed_ape', 'rope3d', 'alibi',
          'kerple_log', 'kerple_power', 'fire', 'comrope', 'liere', 'gta']
IMAGE_ONLY = {'sincos', 'rope_axial'}


def _pe(kind: str, grid=(4, 4), heads: int = 2, dim: int = 64, npt: int = 1, **kw):
    torch.manual_seed(0)
    return create_pos_encoding(kind, dict(dim=dim, num_heads=heads, depth=2, grid_size=grid, num_prefix_tokens=npt,
                                          num_class_tokens=npt), kw)


def test_the_options_name_their_takers():
    assert set(takers('p_rope')) == set(P_ROPE)
    assert set(takers('random_positions')) == set(RANDOM)
    for kind, opt in [('ape', dict(p_rope=0.5)), ('comrope', dict(p_rope=0.5)), ('alibi', dict(p_rope=0.5)),
                      ('liere', dict(p_rope=0.5)),
                      ('irpe', dict(random_positions='subset')), ('peg', dict(random_positions='cape'))]:
        with pytest.raises(ValueError) as err:
            _pe(kind, **opt)
        msg = str(err.value)
        name = next(iter(opt))
        assert '\n' not in msg and f"to the {kind!r} encoding" in msg and str(takers(name)) in msg, msg


# ------------------------------------------------------------------------------------------------------- p-RoPE
@pytest.mark.parametrize('p', [-0.1, 1.5, 'half'])
def test_p_rope_out_of_range_is_refused(p):
    with pytest.raises(ValueError, match='p_rope must be a fraction'):
        _pe('rope_axial', p_rope=p)


def test_p_rope_zeroes_the_lowest_frequencies_of_each_ladder():
    # rope_axial: head_dim 32 -> 8 bands per axis; p = 0.75 keeps the 6 highest
    pe = _pe('rope_axial', p_rope=0.75)
    plain = _pe('rope_axial').bands
    assert torch.equal(pe.bands[:6], plain[:6]) and (pe.bands[6:] == 0).all() and (plain[6:] > 0).all()
    # rope_mixed: pair i has band i % ladder (ladder 8 for 2D, head_dim / 2 = 16 pairs); zero bands >= 4 at p = 0.5
    pe = _pe('rope_mixed', p_rope=0.5)
    band = torch.arange(16) % 8
    freqs = pe.masked_freqs()
    assert (freqs[..., band >= 4] == 0).all() and (freqs[..., band < 4] != 0).all()
    assert torch.equal(freqs[..., band < 4], pe.freqs.detach()[..., band < 4])
    video = _pe('rope_mixed', grid=(2, 4, 4), p_rope=0.5)  # 3 ladders of ceil(16 / 3) = 6 pairs: keep 3
    band = torch.arange(16) % 6
    assert (video.masked_freqs()[..., band >= 3] == 0).all() and (video.masked_freqs()[..., band < 3] != 0).all()
    # rope3d: each of the t, h, w chunks (sub / 2 = 5 bands at head_dim 32) keeps round(0.6 * 5) = 3
    pe = _pe('rope3d', grid=(2, 4, 4), p_rope=0.6)
    coords = torch.tensor([[1.0, 2.0, 3.0]])
    sin, cos = pe.sin_cos(coords)
    angle_sin = sin[0, 0::2].reshape(-1)[:15].reshape(3, 5)  # interleaved pairs: one sin per pair, t | h | w chunks
    assert (angle_sin[:, 3:] == 0).all() and (angle_sin[:, :3] != 0).all()
    # multimodal_rope: pair j (frequency theta^(-2j / head_dim)) rotates iff j < round(p * head_dim / 2)
    pe = _pe('multimodal_rope', p_rope=0.25, heads=2, dim=64)
    ids = torch.arange(1, 6).expand(3, 1, -1)
    term = pe.term(ids, CPU)
    half_sin = term.sin[0, 0, :, :16]
    assert (half_sin[:, 4:] == 0).all() and (half_sin[:, :4] != 0).all()


@pytest.mark.parametrize('kind', P_ROPE)
def test_p_rope_one_is_plain_and_zero_rotates_nothing(kind):
    grid = (2, 4, 4) if kind in ('rope3d',) else (4, 4)
    g3 = grid if len(grid) == 3 else (1, *grid)
    pos = Positions(g3, 1, 1)
    q = torch.randn(1, 2, 1 + math.prod(g3), 32)
    plain = _pe(kind, grid).eval().attn_terms(pos, q.dtype, CPU)[0].rotate(q, q)[0]
    one = _pe(kind, grid, p_rope=1.0).eval().attn_terms(pos, q.dtype, CPU)[0].rotate(q, q)[0]
    none = _pe(kind, grid, p_rope=0.0).eval().attn_terms(pos, q.dtype, CPU)[0].rotate(q, q)[0]
    torch.testing.assert_close(one, plain, atol=0, rtol=0)
    torch.testing.assert_close(none, q)
    assert (plain - q).abs().max() > 1e-2


def test_p_rope_composes_with_extrapolation():
    """A zeroed pair stays at zero frequency under every strategy."""
    for strategy in ('pi', 'ntk', 'yarn'):
        pe = _pe('rope_mixed', p_rope=0.5, extrapolation=strategy)
        freqs = pe.scaled_freqs((2.0, 2.0))
        band = torch.arange(16) % 8
        assert (freqs[..., band >= 4] == 0).all(), strategy


# ------------------------------------------------------------------------------------------ randomized positions
def test_random_positions_parse_and_refuse_bad_options():
    assert not RandomPositions.parse(None).active and RandomPositions.parse('subset').mode == 'subset'
    assert RandomPositions.parse(dict(mode='cape', max_scale=1.2)).max_scale == 1.2
    for bad, match in [('shuffle', 'unknown random_positions mode'), (dict(mode='subset', max_shift=1), 'takes'),
                       (dict(mode='subset', range_factor=0.5), 'range_factor >= 1'), (3, 'must be a mode')]:
        with pytest.raises(ValueError, match=match):
            RandomPositions.parse(bad, 'x')


def test_subset_draws_are_sorted_distinct_and_in_range():
    torch.manual_seed(0)
    rp = RandomPositions.parse(dict(mode='subset', range_factor=3.0))
    coords = rp.draw((2, 3, 4), 5, CPU).reshape(5, 2, 3, 4, 3)
    for axis, n in enumerate((2, 3, 4)):
        line = coords.select(-1, axis).movedim(axis + 1, -1).reshape(5, -1, n)[:, 0]  # one line along the axis
        assert (line[:, 1:] > line[:, :-1]).all() and line.min() >= 0 and line.max() < 3 * n
        assert line.frac().eq(0).all()
    assert not torch.equal(coords[0], coords[1])  # per sample
    # every line along an axis is the same subset (per-axis draws, the grid stays a product)
    assert torch.equal(coords[..., 2][:, :, :1].expand(-1, -1, 3, -1), coords[..., 2])


def test_cape_draws_shift_and_scale_the_grid():
    torch.manual_seed(0)
    grid = (1, 3, 4)
    base = torch.stack(torch.meshgrid(*[torch.arange(n).float() for n in grid], indexing='ij'), -1).reshape(-1, 3)
    shifted = RandomPositions.parse(dict(mode='cape', max_shift=2.0, max_scale=1.0)).draw(grid, 4, CPU)
    delta = shifted - base
    assert torch.allclose(delta, delta[:, :1].expand_as(delta)) and delta.abs().max() <= 2.0
    scaled = RandomPositions.parse(dict(mode='cape', max_shift=0.0, max_scale=2.0)).draw(grid, 4, CPU)
    centre = torch.tensor([0.0, 1.0, 1.5])
    ratio = (scaled - centre)[:, -1] / (base - centre)[-1]
    assert torch.allclose(ratio[:, 1:], ratio[:, 1:2].expand(-1, 2), atol=1e-5)
    assert ((ratio[:, 1] >= 0.5) & (ratio[:, 1] <= 2.0)).all()


def _outputs(pe, pos, x):
    """The encoding's contribution: embedded tokens, or the first layer's term tensors."""
    out = [pe.embed(x, pos)]
    terms = pe.attn_terms(pos, x.dtype, CPU)
    if terms is not None:
        out += list(terms[0].tensors())
    return out


@pytest.mark.parametrize('mode', ['subset', 'cape'])
@pytest.mark.parametrize('kind', RANDOM)
def test_random_positions_only_in_training_and_per_sample(kind, mode):
    grid = (4, 4) if kind in IMAGE_ONLY else (2, 4, 4)
    g3 = grid if len(grid) == 3 else (1, *grid)
    plain = _pe(kind, grid).eval()
    pe = _pe(kind, grid, random_positions=mode)
    pe.load_state_dict(plain.state_dict())
    pos = Positions(g3, 1, 1, batch_size=3)
    x = torch.randn(3, 1 + math.prod(g3), 64)
    with torch.no_grad():
        pe.eval()
        for a, b in zip(_outputs(pe, pos, x), _outputs(plain, pos, x)):
            torch.testing.assert_close(a, b, atol=0, rtol=0)  # never random in eval
        pe.train()
        drawn = _outputs(pe, pos, x)
        again = _outputs(pe, pos, x)
    changed = [t for t, p in zip(drawn, _outputs(plain, pos, x))
               if t.shape[0] == 3 and not torch.equal(t, p.expand_as(t))]
    assert changed, f'{kind}: training draws changed nothing'
    t = changed[-1]
    assert not torch.equal(t[0], t[1]), f'{kind}: the samples share one draw'
    assert any(not torch.equal(a, b) for a, b in zip(drawn, again)), f'{kind}: the same draw twice'


@pytest.mark.parametrize('kind', ['rope_mixed', 'sincos', 'alibi', 'fire', 'comrope', 'gta'])
def test_random_positions_train_a_vit_with_gradient_checkpointing(kind):
    """A training forward draws once; gradient checkpointing recomputes with the same draw (the term's tensors are
    explicit inputs), so the gradients match the plain run's under the same seed."""
    from zoo.models.vit import PEVisionTransformer
    torch.manual_seed(0)
    model = PEVisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=2, num_classes=5,
                                dynamic_img_size=True, pe=kind, pe_kwargs=dict(random_positions='subset')).train()
    ckpt = copy.deepcopy(model)
    ckpt.set_grad_checkpointing(True)
    x = torch.randn(2, 3, 32, 32)
    torch.manual_seed(1)
    model(x).square().sum().backward()
    torch.manual_seed(1)
    ckpt(x).square().sum().backward()
    for (n, a), b in zip(model.named_parameters(), ckpt.parameters()):
        if a.grad is not None:
            torch.testing.assert_close(b.grad, a.grad, atol=1e-5, rtol=1e-4, msg=n)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(x), model(x), atol=0, rtol=0)


def test_draw_axes_keep_order_and_report_their_span():
    """Per-axis draws: each sample's subset is sorted and distinct within [0, span); CAPE keeps the cells' order."""
    torch.manual_seed(0)
    axes, span = RandomPositions.parse(dict(mode='subset', range_factor=2.5)).draw_axes((2, 3, 4), 6, CPU)
    assert span == (5.0, 8.0, 10.0)
    for a, n, r in zip(axes, (2, 3, 4), span):
        assert a.shape == (6, n) and (a[:, 1:] > a[:, :-1]).all() and a.min() >= 0 and a.max() < r
    axes, span = RandomPositions.parse('cape').draw_axes((2, 3, 4), 6, CPU)
    assert span == (2.0, 3.0, 4.0) and all((a[:, 1:] > a[:, :-1]).all() for a in axes)


@pytest.mark.parametrize('kind, kw', [('comrope', dict(variant='ap')), ('comrope', dict(variant='ld')),
                                      ('comrope', dict(variant='ap', block_size=2)), ('liere', {}),
                                      ('gta', {}), ('gta', dict(positions='integer'))])
def test_normalised_encodings_draw_subsets_of_a_finer_grid(kind, kw):
    """ComRoPE / LieRE / GTA divide a subset by its span: range_factor 1 draws the grid itself, so training equals
    eval exactly (the per-sample path computes what the shared one does); range_factor 2 draws other positions."""
    grid = (2, 4, 4)
    plain = _pe(kind, grid, **kw).eval()
    same = _pe(kind, grid, random_positions=dict(mode='subset', range_factor=1.0), **kw).train()
    finer = _pe(kind, grid, random_positions='subset', **kw).train()
    pos = Positions(grid, 1, 1, batch_size=2)
    with torch.no_grad():
        want = plain.attn_terms(pos, torch.float32, CPU)[1].tensors()[0]
        got = same.attn_terms(pos, torch.float32, CPU)[1].tensors()[0]
        other = finer.attn_terms(pos, torch.float32, CPU)[1].tensors()[0]
    assert got.shape[0] == 2
    torch.testing.assert_close(got, want.expand_as(got), atol=1e-6, rtol=0)
    assert (other - want).abs().max() > 1e-3


def test_comrope_refuses_two_position_augmentations():
    with pytest.raises(ValueError, match='random_positions and perturb_intensity') as err:
        _pe('comrope', random_positions='subset', perturb_intensity=1.0)
    assert '\n' not in str(err.value)


def test_the_video_llm_takes_p_rope():
    """p-RoPE reaches the video-LLM's decoder encoding (multimodal_rope) from create_video_llm; bad values refused."""
    from zoo.models.vlm import create_video_llm
    kw = dict(dim=64, depth=1, num_heads=2, num_kv_heads=1, mlp_hidden=64,
              tower_kwargs=dict(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2))
    model = create_video_llm('pe_vlm_tiny_mrope', p_rope=0.5, **kw)
    assert model.decoder.pe.p_rope == 0.5
    ids = torch.arange(1, 6).expand(3, 1, -1)
    sin = model.decoder.pe.term(ids, CPU).sin[0, 0, :, :16]  # head_dim 32: 16 frequencies, the 8 lowest zeroed
    assert (sin[:, 8:] == 0).all() and (sin[:, :8] != 0).any()
    with pytest.raises(ValueError, match='p_rope must be a fraction'):
        create_video_llm('pe_vlm_tiny_mrope', p_rope=1.5, **kw)
