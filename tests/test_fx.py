"""FX tracing (torchvision feature extraction, timm's tracer settings) of the image and video ViTs, every encoding.

timm's own suite (tests/peer/run_timm_suite.sh) runs this at 224 px on the tiny models; these are the same checks on
tiny configurations, plus what the suite does not cover: a graph traced with ``dynamic_img_size=True`` runs other
input sizes, and a traced graph still raises the eager mode's clear errors.
"""
import pytest
import timm
import torch
from timm.models import get_notrace_functions, get_notrace_modules
from torchvision.models.feature_extraction import create_feature_extractor, get_graph_node_names

import zoo  # noqa: F401
from zoo.models import PE_OF_MODEL

TINY = sorted(n for n in PE_OF_MODEL if n.startswith('pe_vit_tiny_'))
TRACER_KWARGS = dict(leaf_modules=get_notrace_modules(), autowrap_functions=get_notrace_functions(),
                     param_shapes_constant=True)


def _small(name: str, **kwargs) -> torch.nn.Module:
    depth = 6 if 'peg0to5' in name else 2
    return timm.create_model(name, img_size=32, patch_size=8, depth=depth, num_classes=5, **kwargs)


def _traced(model: torch.nn.Module, extra_node: str = '') -> torch.nn.Module:
    """A graph module returning ``{'out': model output}`` (plus ``extra_node``, a node inside the graph)."""
    train_nodes, eval_nodes = get_graph_node_names(model, tracer_kwargs=TRACER_KWARGS)
    extra = {extra_node: extra_node} if extra_node else {}
    return create_feature_extractor(model, train_return_nodes={train_nodes[-1]: 'out', **extra},
                                    eval_return_nodes={eval_nodes[-1]: 'out', **extra}, tracer_kwargs=TRACER_KWARGS)


def test_every_tiny_model_is_checked():
    assert len(TINY) >= 10 and 'pe_vit_tiny_patch16_irpe_k_224' in TINY


@pytest.mark.parametrize('name', TINY)
def test_fx_forward_backward(name):
    torch.manual_seed(0)
    model = _small(name).eval()
    fx = _traced(model, 'blocks.1.mlp.fc1')
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        out = fx(x)
        assert torch.equal(out['out'], model(x))
        assert out['blocks.1.mlp.fc1'].shape[:2] == (2, 1 + 16)  # inside a block: features by node name
    fx.train()
    fx(x)['out'].mean().backward()
    missing = [n for n, p in fx.named_parameters() if p.grad is None]
    assert not missing, f'no gradient through the traced graph for {missing}'


@pytest.mark.parametrize('name', ['pe_vit_tiny_patch16_ape_224', 'pe_vit_tiny_patch16_peg_224',
                                  'pe_vit_tiny_patch16_irpe_k_224', 'pe_vit_tiny_patch16_rope_mixed_224'])
def test_fx_dynamic_size_and_errors(name):
    model = _small(name, dynamic_img_size=True).eval()
    fx = _traced(model)
    with torch.no_grad():
        for size in (32, 48, (24, 40)):
            x = torch.randn(1, 3, *((size, size) if isinstance(size, int) else size))
            assert torch.equal(fx(x)['out'], model(x)), size
        with pytest.raises(ValueError, match='not divisible by the patch size'):
            fx(torch.randn(1, 3, 30, 32))
        with pytest.raises(ValueError, match=r'expected images \(B, 3, H, W\)'):
            fx(torch.randn(1, 4, 32, 32))


def test_fx_fixed_size_error_is_clear():
    fx = _traced(_small('pe_vit_tiny_patch16_rope_axial_224').eval())
    with pytest.raises(ValueError, match='differs from the model input size 32x32 px'):
        fx(torch.randn(1, 3, 48, 48))


VIDEO_TINY = timm.list_models('pe_video_vit_tiny*')


@pytest.mark.parametrize('name', VIDEO_TINY)
def test_fx_video_forward_backward(name):
    """The video ViT shares the FX leaves (zoo/models/_fx.py): clips (B, C, T, H, W) trace and train as images do."""
    torch.manual_seed(0)
    model = timm.create_model(name, img_size=32, patch_size=8, num_frames=4, depth=2, num_classes=5).eval()
    fx = _traced(model)
    x = torch.randn(2, 3, 4, 32, 32)
    with torch.no_grad():
        assert torch.equal(fx(x)['out'], model(x))
        with pytest.raises(ValueError, match='expected video clips'):
            fx(torch.randn(2, 3, 32, 32))
    fx.train()
    fx(x)['out'].mean().backward()
    missing = [n for n, p in fx.named_parameters() if p.grad is None]
    assert not missing, f'no gradient through the traced graph for {missing}'


@pytest.mark.parametrize('name', ['pe_vit_tiny_patch16_rope_mixed_224', 'pe_vit_tiny_patch16_irpe_k_224'])
def test_fx_training_with_patch_dropout(name):
    """Patch dropout (a per-sample token subset, each token at its own position) traces and trains."""
    model = _small(name, patch_drop_rate=0.5)
    fx = _traced(model, 'blocks.0.mlp.fc1')
    x = torch.randn(2, 3, 32, 32)
    fx.train()
    out = fx(x)
    assert out['blocks.0.mlp.fc1'].shape[1] == 1 + 8  # class token + half of the 16 patches
    out['out'].mean().backward()
    missing = [n for n, p in fx.named_parameters() if p.grad is None]
    assert not missing, f'no gradient through the traced graph for {missing}'
    fx.eval()
    model.eval()
    with torch.no_grad():
        assert torch.equal(fx(x)['out'], model(x))  # no dropout in eval: the full grid
