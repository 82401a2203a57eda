"""Explicit timm entrypoints (issue 18): every zoo model is one ``@register_model`` function written out in its module,
as in ``timm/models/eva.py``, and the registry holds exactly the names, cfgs and arguments listed here."""
from __future__ import annotations

import inspect
import re
import sys

import pytest
import timm
import torch
from timm.models import get_pretrained_cfg, model_entrypoint
from timm.models._registry import _model_entrypoints

import zoo  # noqa: F401  (registers the models)
from zoo.integrations.open_clip import CLIP_LAYOUT
from zoo.models import PE_OF_MODEL, PEVisionTransformer

SIZES = ('tiny', 'small', 'base')
# {pe} part of the name -> registered encoding; sizes when not all three
IMAGE = {'ape': 'ape', 'sincos': 'sincos', 'nope': 'nope', 'peg': 'peg', 'peg0to5': 'peg', 'fourier': 'fourier',
         'rope_axial': 'rope_axial', 'rope_mixed': 'rope_mixed', 'rope_mixed_ape': 'rope_mixed_ape', 'irpe_k': 'irpe',
         'irpe_qk': 'irpe', 'irpe_qkv': 'irpe', 'comrope_ap': 'comrope', 'comrope_ld': 'comrope', 'liere': 'liere',
         'alibi': 'alibi', 'kerple_log': 'kerple_log', 'kerple_power': 'kerple_power', 'fire': 'fire',
         'gta': 'gta'}
IMAGE_SIZES = {'irpe_qk': ('small',), 'irpe_qkv': ('small', 'base')}
VIDEO = {'ape': 'ape', 'st_ape': 'st_ape', 'sincos': 'sincos1d', 'sincos3d': 'sincos3d', 'nope': 'nope', 'peg': 'peg',
         'fourier': 'fourier', 'rope3d': 'rope3d', 'rope_mixed': 'rope_mixed', 'comrope_ap': 'comrope',
         'comrope_ld': 'comrope', 'liere': 'liere', 'irpe_k': 'irpe', 'alibi': 'alibi', 'kerple_log': 'kerple_log',
         'kerple_power': 'kerple_power', 'fire': 'fire', 'gta': 'gta'}
IMAGE.update({'ape_lape': 'ape_lape', 'sincos_lape': 'sincos_lape', 'fourier_lape': 'fourier_lape', 'urpe': 'urpe'})
IMAGE.update({'loope': 'loope', 'seqpe': 'seqpe'})
VIDEO.update({'seqpe': 'seqpe'})  # LOOPE has no 3D form: video grids are refused
VIDEO.update({'ape_lape': 'ape_lape', 'st_ape_lape': 'st_ape_lape', 'sincos3d_lape': 'sincos3d_lape',
              'fourier_lape': 'fourier_lape'})
IMAGE_NAMES = sorted(f'pe_vit_{s}_patch16_{k}_224' for k in IMAGE for s in IMAGE_SIZES.get(k, SIZES))
VIDEO_NAMES = sorted(f'pe_video_vit_{s}_patch16_{k}_224' for k in VIDEO for s in SIZES)
TOWER_NAMES = sorted('clip_' + n for n in IMAGE_NAMES)
ALL_NAMES = sorted(IMAGE_NAMES + VIDEO_NAMES + TOWER_NAMES)
PRETRAINED = sorted(
    [f'pe_vit_{s}_patch16_ape_224.augreg_in21k_ft_in1k' for s in SIZES]
    + [f'pe_vit_{s}_patch16_{k}_224.naver_in1k' for k in ('rope_axial', 'rope_mixed', 'rope_mixed_ape')
       for s in ('small', 'base')]
    + [f'pe_vit_{s}_patch16_irpe_k_224.official_in1k' for s in SIZES]
    + ['pe_vit_small_patch16_irpe_qk_224.official_in1k']
    + [f'pe_vit_{s}_patch16_irpe_qkv_224.official_in1k' for s in ('small', 'base')])
MODULES = ('zoo.models.vit', 'zoo.models.video_vit', 'zoo.integrations.open_clip')


def _zoo_registered():
    return sorted(n for n, fn in _model_entrypoints.items() if fn.__module__.startswith('zoo.'))


def test_registered_names_are_exactly_the_listed_ones():
    assert _zoo_registered() == ALL_NAMES
    assert set(ALL_NAMES) <= set(timm.list_models('*pe_*', pretrained=False))
    assert sorted(n for n in timm.list_pretrained() if n.split('.')[0] in ALL_NAMES) == PRETRAINED
    assert sorted(PE_OF_MODEL) == ALL_NAMES


@pytest.mark.parametrize('module_name', MODULES)
def test_modules_write_every_entrypoint_out(module_name):
    """No registration loop: one ``def <name>(`` per registered name, ``default_cfgs`` before the first one."""
    module = sys.modules[module_name]
    source = inspect.getsource(module)
    assert 'globals()[' not in source
    names = [n for n in ALL_NAMES if _model_entrypoints[n].__module__ == module_name]
    assert names and sorted(names) == sorted(module.default_cfgs)
    for name in names:
        assert len(re.findall(rf'^def {name}\(', source, flags=re.M)) == 1, name
    cfg_line = source.index('\ndefault_cfgs = generate_default_cfgs({')
    assert cfg_line < source.index('\n@register_model\n')
    assert source.count('\n@register_model\n') == len(names)


@pytest.mark.parametrize('name', ALL_NAMES)
def test_entrypoint_is_a_plain_module_function(name):
    fn = model_entrypoint(name)
    module = sys.modules[fn.__module__]
    assert fn.__module__ in MODULES and getattr(module, name) is fn
    assert fn.__name__ == fn.__qualname__ == name
    doc = inspect.getdoc(fn)
    assert doc and '\n' not in doc and 'arXiv:' in doc, doc
    body = inspect.getsource(fn)
    assert 'model_args = dict(' in body and '**dict(model_args, **kwargs))' in body
    assert f"'{name}', pretrained=pretrained" in body  # the variant named once, in its own function
    encoding = PE_OF_MODEL[name]
    assert f"pe='{encoding}'" in body
    expected = (VIDEO if name.startswith('pe_video_vit_') else IMAGE)[re.sub(r'^.*_patch16_(.+)_224$', r'\1', name)]
    assert encoding == expected


def test_pretrained_cfgs():
    for size in SIZES:
        cfg = get_pretrained_cfg(f'pe_vit_{size}_patch16_ape_224.augreg_in21k_ft_in1k')
        assert cfg.hf_hub_id == f'timm/vit_{size}_patch16_224.augreg_in21k_ft_in1k'
        assert cfg.mean == cfg.std == (0.5, 0.5, 0.5) and cfg.crop_pct == 0.9 and cfg.num_classes == 1000
    cfg = get_pretrained_cfg('pe_vit_small_patch16_rope_axial_224.naver_in1k')
    assert cfg.hf_hub_id == 'timm/vit_small_patch16_rope_224.naver_in1k'
    assert cfg.mean == (0.485, 0.456, 0.406) and cfg.std == (0.229, 0.224, 0.225)
    cfg = get_pretrained_cfg('pe_vit_base_patch16_irpe_qkv_224.official_in1k')
    assert cfg.url == ('https://github.com/wkcn/iRPE-model-zoo/releases/download/1.0/'
                       'deit_base_patch16_224_ctx_product_50_shared_qkv.pth')
    cfg = get_pretrained_cfg('pe_video_vit_tiny_patch16_rope3d_224')
    assert cfg.num_classes == 400 and cfg.input_size == (3, 224, 224) and not cfg.has_weights
    cfg = get_pretrained_cfg('clip_pe_vit_base_patch16_rope_mixed_224')
    assert cfg.mean == (0.48145466, 0.4578275, 0.40821073) and cfg.crop_pct == 1.0 and not cfg.has_weights


@pytest.fixture
def constructor_args(monkeypatch):
    """The keyword arguments each ``PEVisionTransformer`` (or video subclass) constructor received."""
    calls = []
    init = PEVisionTransformer.__init__

    def recording_init(self, *args, **kwargs):
        calls.append(dict(kwargs))
        init(self, *args, **kwargs)
    monkeypatch.setattr(PEVisionTransformer, '__init__', recording_init)
    return calls


def _build(name, **kwargs):
    with torch.device('meta'):
        return timm.create_model(name, weight_init='skip', **kwargs)


@pytest.mark.parametrize('name', [n for n in ALL_NAMES if '_tiny_' in n])
def test_model_args(name, constructor_args):
    model = _build(name)
    args = constructor_args[-1]
    assert model.pe_name == args['pe'] == PE_OF_MODEL[name]
    assert (args['patch_size'], args['embed_dim'], args['depth'], args['num_heads']) == (16, 192, 12, 3)
    if name.startswith('pe_video_vit_'):
        assert (model.num_frames, model.tubelet_size) == (16, 2)


@pytest.mark.parametrize('name', [n for n in TOWER_NAMES if '_tiny_' in n or '_irpe_q' in n])
def test_tower_is_its_image_model_in_the_clip_layout(name, constructor_args):
    """A tower's arguments are its image model's plus CLIP_LAYOUT; parameters: no patch bias, one more LayerNorm."""
    image = _build(name[len('clip_'):])
    tower = _build(name)
    image_args, tower_args = constructor_args
    image_args.pop('weight_init'), tower_args.pop('weight_init')
    assert tower_args == dict(image_args, **CLIP_LAYOUT)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(tower) == count(image) - image.embed_dim + 2 * image.embed_dim


def test_pe_kwargs_update_the_variant_defaults(constructor_args):
    _build('pe_vit_tiny_patch16_rope_axial_224', pe_kwargs=dict(extrapolation='none'))
    assert constructor_args[-1]['pe_kwargs'] == dict(theta=100.0, extrapolation='none')
    _build('clip_pe_vit_tiny_patch16_irpe_k_224', pe_kwargs=dict(mode='bias'))
    assert constructor_args[-1]['pe_kwargs'] == dict(ratio=1.9, method='product', mode='bias', shared_head=True,
                                                      skip=1, ape=True, rpe_on='k')
    _build('pe_video_vit_tiny_patch16_peg_224', pe_kwargs=None)
    assert constructor_args[-1]['pe_kwargs'] == dict(after_blocks=(0,))
    with pytest.raises(ValueError, match='pe_kwargs must be a dict'):
        _build('pe_vit_tiny_patch16_ape_224', pe_kwargs=['theta'])
