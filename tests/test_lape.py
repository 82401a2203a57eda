"""LaPE (arXiv:2212.13140): the official golden file through the public API, the paper's form, options and errors."""
from __future__ import annotations

import pytest
import timm
import torch
from torch.nn import functional as F

from conftest import load_golden
from zoo.encodings import CheckpointMismatchError, Positions, create_pos_encoding
from zoo.models.checkpoint_filters import checkpoint_filter_fn
from zoo.models.convert_lape import filter_official_lape
from zoo.models.vit import PEVisionTransformer

KINDS = ['ape_lape', 'sincos_lape', 'fourier_lape', 'st_ape_lape', 'sincos3d_lape']


@pytest.fixture(scope='module')
def golden():
    return load_golden('seeds/lape.pt')


def _official_model(golden, **pe_kwargs):
    c = golden['config']
    model = timm.create_model('pe_vit_tiny_patch16_ape_lape_224', img_size=c['img_size'], patch_size=c['patch_size'],
                              embed_dim=c['embed_dim'], depth=c['depth'], num_heads=c['num_heads'],
                              num_classes=c['num_classes'], pe_kwargs=dict(dict(chain_norms=True), **pe_kwargs))
    return model.eval()


def test_official_logits_and_layer_pes(golden, tmp_path):
    """The official tiny DeiT (lape.pt) through timm.create_model + a file in the official layout: logits, the
    class-token features and the PE each layer used."""
    path = tmp_path / 'lape_official.pth'
    torch.save(golden['state_dict'], path)
    c = golden['config']
    model = timm.create_model('pe_vit_tiny_patch16_ape_lape_224', pretrained=True,
                              pretrained_cfg_overlay=dict(file=str(path), num_classes=c['num_classes']),
                              img_size=c['img_size'], patch_size=c['patch_size'], embed_dim=c['embed_dim'],
                              depth=c['depth'], num_heads=c['num_heads'], num_classes=c['num_classes'],
                              pe_kwargs=dict(chain_norms=True)).eval()
    x = golden['input'].float()
    with torch.no_grad():
        torch.testing.assert_close(model(x), golden['logits'], atol=1e-5, rtol=0)
        torch.testing.assert_close(model.forward_features(x)[:, 0], golden['features_cls'], atol=1e-5, rtol=0)
        grid = model.patch_embed.grid_size
        pes = model.pe.layer_pes(Positions.from_hw(grid, 1, 1), x.device)
    # layer_pe[i]: the PE block i added to its attention input (chained norms)
    torch.testing.assert_close(torch.cat(pes), golden['layer_pe'], atol=1e-5, rtol=0)
    assert (golden['logits'] - golden['logits_basic_join']).abs().max() > 0.5  # the PE placement matters


def test_official_fp64(golden):
    model = _official_model(golden).double()
    model.load_state_dict(filter_official_lape(golden['state_dict'], model))
    with torch.no_grad():
        out = model(golden['input'].double())
    torch.testing.assert_close(out, golden['logits_fp64'], atol=1e-10, rtol=0)


def test_zero_pos_embed_diagnostic(golden):
    sd = dict(golden['state_dict'])
    sd['pos_embed'] = torch.zeros_like(sd['pos_embed'])
    model = _official_model(golden)
    model.load_state_dict(filter_official_lape(sd, model))
    with torch.no_grad():
        torch.testing.assert_close(model(golden['input'].float()), golden['logits_zero_pos_embed'], atol=1e-5, rtol=0)


def test_paper_form_normalises_the_raw_table_in_every_layer(golden):
    """chain_norms=False (default): layer i's PE is LN_i(P), not LN_i(LN_{i-1}(...)); with the official weights the
    two differ, and the chained form is what the official code computes."""
    chained = _official_model(golden)
    chained.load_state_dict(filter_official_lape(golden['state_dict'], chained))
    paper = _official_model(golden, chain_norms=False)
    paper.load_state_dict(chained.state_dict())
    pos = Positions.from_hw(chained.patch_embed.grid_size, 1, 1)
    with torch.no_grad():
        table = chained.pe.base_table(pos, torch.device('cpu'))
        pes = paper.pe.layer_pes(pos, torch.device('cpu'))
        for norm, pe in zip(paper.pe.norms, pes):
            torch.testing.assert_close(pe, F.layer_norm(table, (table.shape[-1],), norm.weight, norm.bias, norm.eps))
        assert (paper(golden['input'].float()) - golden['logits']).abs().max() > 1e-3


def test_pe_enters_the_attention_input_not_the_residual_stream():
    """The token stream gets no PE (forward_embed equals NoPE's), and the PE changes the output only through the
    attention: an identity attention (zero qkv / proj weights) makes LaPE equal NoPE."""
    torch.manual_seed(0)
    lape = PEVisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=3,
                               pe='ape_lape').eval()
    nope = PEVisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=3,
                               pe='nope').eval()
    nope.load_state_dict({k: v for k, v in lape.state_dict().items() if not k.startswith('pe.')})
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(lape.forward_embed(x), nope.forward_embed(x))
        assert (lape(x) - nope(x)).abs().max() > 1e-4
        for blk in list(lape.blocks) + list(nope.blocks):
            blk.attn.proj.weight.zero_()
            blk.attn.proj.bias.zero_()
        torch.testing.assert_close(lape(x), nope(x))


@pytest.mark.parametrize('kind', KINDS)
def test_every_base_and_new_grid(kind):
    """Each LaPE kind builds, runs at another grid (the base's resampling), and its PE per layer has zero mean and
    unit variance per token at init (norm weight 1, bias 0) for every token whose base row is not constant."""
    geo = dict(dim=32, num_heads=2, depth=3, grid_size=(4, 4), num_prefix_tokens=1, num_class_tokens=1)
    pe = create_pos_encoding(kind, geo).eval()
    for grid in [(1, 4, 4), (1, 6, 5)]:
        pos = Positions(grid, 1, 1)
        pes = pe.layer_pes(pos, torch.device('cpu'))
        assert len(pes) == 3 and pes[0].shape == (1, 1 + grid[1] * grid[2], 32)
        patches = pes[1][0, 1:]
        torch.testing.assert_close(patches.mean(-1), torch.zeros(patches.shape[0]), atol=1e-5, rtol=0)


def test_video_kinds_and_inflation_geometry():
    geo = dict(dim=32, num_heads=2, depth=2, grid_size=(2, 4, 4), num_prefix_tokens=0, num_class_tokens=0)
    for kind in ['ape_lape', 'st_ape_lape', 'sincos3d_lape', 'fourier_lape']:
        pe = create_pos_encoding(kind, geo).eval()
        assert pe.layer_pes(Positions((3, 4, 4)), torch.device('cpu'))[0].shape == (1, 48, 32)
    with pytest.raises(ValueError, match='video geometry'):
        create_pos_encoding('sincos_lape', geo)


def test_options_and_errors(golden):
    geo = dict(dim=32, num_heads=2, depth=2, grid_size=(4, 4), num_prefix_tokens=1, num_class_tokens=1)
    assert create_pos_encoding('sincos_lape', geo, dict(extrapolation='pi')).extrapolation.strategy == 'pi'
    with pytest.raises(ValueError, match="extrapolation 'yarn' does not apply"):
        create_pos_encoding('ape_lape', geo, dict(extrapolation='yarn'))
    with pytest.raises(ValueError, match=r"ape_lape \(LaPE over ape\): unknown pe_kwargs \['bogus'\]"):
        create_pos_encoding('ape_lape', geo, dict(bogus=1))
    with pytest.raises(ValueError, match=r"sincos_lape \(LaPE over sincos\): .*extrapolation 'ntk' does not apply"):
        create_pos_encoding('sincos_lape', geo, dict(extrapolation='ntk'))
    # official checkpoint into the paper form: refused, naming the fix
    paper = _official_model(golden, chain_norms=False)
    with pytest.raises(CheckpointMismatchError, match='chain_norms=True'):
        filter_official_lape(golden['state_dict'], paper)
    # missing / extra keys are named
    model = _official_model(golden)
    sd = dict(golden['state_dict'])
    sd.pop('blocks.1.pe_norm.bias')
    sd['blocks.2.pe_norm.weight'] = torch.ones(64)
    with pytest.raises(CheckpointMismatchError, match=r'missing keys \(1\): pe\.norms\.1\.bias') as e:
        checkpoint_filter_fn(sd, model)
    assert 'pe.norms.2.weight' in str(e.value)
    # an official LaPE checkpoint into a plain APE model: the PE norms are unexpected
    ape = timm.create_model('pe_vit_tiny_patch16_ape_224', img_size=32, patch_size=8, embed_dim=64, depth=2,
                            num_heads=2, num_classes=10)
    with pytest.raises(CheckpointMismatchError, match='blocks.0.pe_norm.weight'):
        checkpoint_filter_fn(golden['state_dict'], ape)


def test_extrapolation_is_the_base_encodings():
    """sincos_lape takes sin-cos's strategies through the hooks: 'pi' changes the PE on a bigger grid only."""
    torch.manual_seed(0)
    model = PEVisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=3,
                                pe='sincos_lape', dynamic_img_size=True).eval()
    assert model.pe.supported_extrapolations() == ('none', 'pi') and model.pe.extrapolation.strategy == 'none'
    with pytest.raises(ValueError, match="extrapolation 'ntk' does not apply"):
        model.pe.check_extrapolation('ntk')
    x, big = torch.randn(1, 3, 32, 32), torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        same, before = model(x), model(big)
        model.pe.set_extrapolation('pi')
        assert model.pe.extrapolation.strategy == 'pi'
        torch.testing.assert_close(model(x), same)
        assert (model(big) - before).abs().max() > 1e-4


def test_image_checkpoint_inflates_to_the_video_model():
    """inflate_2d_to_3d: the image table goes to the base encoding's hook (repeated over time), the norms copied."""
    from zoo.models import inflate_2d_to_3d
    torch.manual_seed(0)
    image = timm.create_model('pe_vit_tiny_patch16_ape_lape_224', img_size=32, patch_size=8, embed_dim=32, depth=2,
                              num_heads=2, num_classes=3)
    video = timm.create_model('pe_video_vit_tiny_patch16_ape_lape_224', img_size=32, patch_size=8, embed_dim=32,
                              depth=2, num_heads=2, num_classes=3, num_frames=4)
    sd = inflate_2d_to_3d(image.state_dict(), video)
    video.load_state_dict(sd)
    torch.testing.assert_close(video.pe.norms[1].weight, image.pe.norms[1].weight)
    frames = video.pe.base.pos_embed.reshape(2, 16, 32)
    torch.testing.assert_close(frames[0], image.pe.base.pos_embed[0, 1:])
    torch.testing.assert_close(frames[1], frames[0])
    assert video(torch.randn(1, 3, 4, 32, 32)).shape == (1, 3)


@pytest.mark.parametrize('kind', ['ape_lape', 'st_ape_lape', 'sincos3d_lape', 'fourier_lape'])
def test_video_models_train(kind):
    """The registered video models: forward, backward, every LaPE parameter gets a finite gradient."""
    torch.manual_seed(0)
    model = timm.create_model(f'pe_video_vit_tiny_patch16_{kind}_224', img_size=32, patch_size=8, embed_dim=32,
                              depth=2, num_heads=2, num_frames=4, num_classes=3)
    model(torch.randn(2, 3, 4, 32, 32)).sum().backward()
    missing = [n for n, p in model.pe.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing, missing
