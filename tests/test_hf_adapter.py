"""zoo.hf.patch_rope_index on tiny, randomly initialised Qwen2-VL, Qwen2.5-VL and Qwen3-VL models (issue 13, item 6).

Configs are built in code (nothing is downloaded). With the scheme a model already uses, the patched model's ids,
logits and generated tokens equal the unpatched model's. With any other scheme, the rotary tables the text model
receives are the zoo's for that scheme, on get_position_ids' ids at prefill and on ``next position + k`` while
generating. transformers is a test-only extra (``pip install -e '.[test]'``).
"""
from __future__ import annotations

import os

import pytest
import torch

from zoo.encodings.multimodal_rope import get_position_ids, get_scheme, multimodal_rope_cos_sin
from zoo.hf import native_scheme, patch_rope_index, unpatch_rope_index

try:
    import transformers
    from transformers import (Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2VLConfig,
                              Qwen2VLForConditionalGeneration, Qwen3VLConfig, Qwen3VLForConditionalGeneration)
except ImportError as e:  # pragma: no cover - depends on the environment
    if os.environ.get('ZOO_ALLOW_MISSING_HF') == '1':
        pytest.skip(f'transformers not installed ({e})', allow_module_level=True)
    raise ImportError(f'tests/test_hf_adapter.py needs transformers>=4.57 (test extra): pip install -e ".[test]" (or '
                      f'set ZOO_ALLOW_MISSING_HF=1 to skip): {e}') from e

transformers.logging.set_verbosity_error()

VOCAB, IMG, VID, VS, VE = 200, 190, 191, 192, 193
HEAD_DIM = 32
VISION = dict(depth=1, num_heads=2, patch_size=4, spatial_merge_size=2, temporal_patch_size=2)


def _text(section, theta=1e6, **extra):
    rope = dict(rope_type='default', rope_theta=theta, mrope_section=list(section), **extra)
    return dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1, head_dim=HEAD_DIM, rope_parameters=rope, max_position_embeddings=4096,
                bos_token_id=0, eos_token_id=1, pad_token_id=2)


def _build(family: str):
    ids = dict(image_token_id=IMG, video_token_id=VID, vision_start_token_id=VS)
    if family == 'qwen2_vl':
        cfg = Qwen2VLConfig(text_config=_text([4, 6, 6]), vision_config=dict(VISION, embed_dim=32, hidden_size=64),
                            **ids)
        model = Qwen2VLForConditionalGeneration(cfg)
    elif family == 'qwen2_5_vl':
        vision = dict(VISION, hidden_size=32, intermediate_size=64, out_hidden_size=64, window_size=16,
                      fullatt_block_indexes=[0], tokens_per_second=2)
        model = Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(text_config=_text([4, 6, 6]),
                                                                    vision_config=vision, **ids))
    else:
        vision = dict(VISION, hidden_size=32, intermediate_size=64, out_hidden_size=64, num_position_embeddings=64,
                      deepstack_visual_indexes=[0])
        model = Qwen3VLForConditionalGeneration(Qwen3VLConfig(text_config=_text([6, 5, 5], 5e6, mrope_interleaved=True),
                                                              vision_config=vision, **ids))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():  # a random init whose outputs differ from token to token
            p.copy_(torch.randn(p.shape, generator=g))
    return model.eval()


FAMILIES = ('qwen2_vl', 'qwen2_5_vl', 'qwen3_vl')
OTHER_SCHEMES = ('rope1d', 'mrope', 'qwen2_5_vl', 'mrope_interleave', 'vrope', 'v2pe', 'videorope', 'hope')


@pytest.fixture(scope='module')
def models():
    return {f: _build(f) for f in FAMILIES}


def _inputs(family: str, pad: int = 0):
    """Text, an image (1x4x4 patches) and a video (2x8x8 patches) as the family's processor lays them out. The video
    keeps t <= max(h, w) merged patches, where transformers 5.x and the zoo agree on the text after it."""
    if family == 'qwen3_vl':  # per-frame blocks after a timestamp text, one un-split grid row
        video = [50, VS] + [VID] * 16 + [VE, 51, VS] + [VID] * 16 + [VE]
    else:
        video = [VS] + [VID] * 32 + [VE]
    ids = [2] * pad + [5, 6, VS] + [IMG] * 4 + [VE, 7] + video + [8, 9]
    input_ids = torch.tensor([ids])
    types = torch.zeros_like(input_ids)
    types[input_ids == IMG], types[input_ids == VID] = 1, 2
    mask = torch.ones_like(input_ids)
    mask[:, :pad] = 0
    g = torch.Generator().manual_seed(1)
    px = 3 * 2 * 4 * 4
    out = dict(input_ids=input_ids, attention_mask=mask, mm_token_type_ids=types,
               pixel_values=torch.randn(16, px, generator=g), image_grid_thw=torch.tensor([[1, 4, 4]]),
               pixel_values_videos=torch.randn(128, px, generator=g), video_grid_thw=torch.tensor([[2, 8, 8]]))
    if family == 'qwen2_5_vl':
        out['second_per_grid_ts'] = torch.tensor([1.0])
    return out


def _record_rotary(model):
    """Position ids handed to the text rotary embedding, per call."""
    calls = []
    rot = model.model.language_model.rotary_emb
    handle = rot.register_forward_hook(lambda mod, args, out: calls.append((args[1].detach().clone(), out[0])))
    return calls, handle


@pytest.mark.parametrize('family', FAMILIES)
def test_native_scheme_leaves_outputs_unchanged(models, family):
    model = models[family]
    kw = _inputs(family)
    with torch.no_grad():
        ref_ids, ref_deltas = model.model.get_rope_index(kw['input_ids'], kw['mm_token_type_ids'],
                                                         kw['image_grid_thw'], kw['video_grid_thw'],
                                                         attention_mask=kw['attention_mask'])
        ref = model(**kw).logits
        ref_gen = model.generate(**kw, max_new_tokens=6, do_sample=False)
        patch_rope_index(model, native_scheme(model))
        try:
            assert model.model.language_model.rotary_emb.__dict__.get('forward') is None  # ids only
            ids, deltas = model.model.get_rope_index(kw['input_ids'], kw['mm_token_type_ids'], kw['image_grid_thw'],
                                                     kw['video_grid_thw'], attention_mask=kw['attention_mask'])
            assert torch.equal(ids, ref_ids) and torch.equal(deltas, ref_deltas)
            assert torch.equal(model(**kw).logits, ref)
            assert torch.equal(model.generate(**kw, max_new_tokens=6, do_sample=False), ref_gen)
            assert len(set(ref_gen[0, -6:].tolist())) > 1
        finally:
            unpatch_rope_index(model)
        assert torch.equal(model(**kw).logits, ref)


@pytest.mark.parametrize('family', FAMILIES)
def test_native_scheme_with_left_padding(models, family):
    model = models[family]
    kw = _inputs(family, pad=3)
    with torch.no_grad():
        ref = model.generate(**kw, max_new_tokens=4, do_sample=False)
        patch_rope_index(model, native_scheme(model))
        try:
            assert torch.equal(model.generate(**kw, max_new_tokens=4, do_sample=False), ref)
        finally:
            unpatch_rope_index(model)


def _zoo_ids(model, family, scheme, kw):
    """get_position_ids as the adapter must call it (Qwen3-VL: frames split into their own blocks)."""
    grid = kw['video_grid_thw']
    spec = get_scheme(scheme)
    opts = {}
    if family == 'qwen3_vl' and not spec.split_video_frames(spec.options({})):
        grid = torch.repeat_interleave(grid, grid[:, 0], dim=0)
        grid[:, 0] = 1
    secs = None
    if scheme == 'qwen2_5_vl':
        opts['tokens_per_second'] = 2
        secs = [1.0] * grid.shape[0]
    return get_position_ids(scheme, kw['input_ids'], kw['image_grid_thw'], grid, kw['attention_mask'], secs,
                            image_token_id=IMG, video_token_id=VID, mm_token_type_ids=kw['mm_token_type_ids'], **opts)


NATIVE = {'qwen2_vl': 'mrope', 'qwen2_5_vl': 'qwen2_5_vl', 'qwen3_vl': 'mrope_interleave'}


@pytest.mark.parametrize('family,scheme', [(f, s) for f in FAMILIES for s in OTHER_SCHEMES if s != NATIVE[f]])
def test_any_scheme_drives_the_rotation(models, family, scheme):
    model = models[family]
    assert native_scheme(model) == NATIVE[family]
    kw = _inputs(family)
    spec = get_scheme(scheme)
    ids, _ = _zoo_ids(model, family, scheme, kw)
    with torch.no_grad():
        ref = model(**kw).logits
        patch_rope_index(model, scheme)
        calls, handle = _record_rotary(model)
        try:
            logits = model(**kw).logits
            seq = model.generate(**kw, max_new_tokens=4, do_sample=False)
        finally:
            handle.remove()
            unpatch_rope_index(model)
    assert not torch.allclose(logits, ref)                              # the scheme changed the model
    section = {'qwen2_vl': [4, 6, 6], 'qwen2_5_vl': [4, 6, 6], 'qwen3_vl': [6, 5, 5]}[family]
    try:
        get_scheme(scheme).allocation(HEAD_DIM, 1, section)
    except ValueError:
        section = None                                                  # the scheme's own split, scaled
    pos, cos = calls[0]                                                 # the forward's prefill
    pos = pos if pos.dim() == 3 else pos[None]
    used = pos[-spec.num_axes:] if pos.shape[0] >= spec.num_axes else pos[:1].expand(spec.num_axes, -1, -1)
    assert torch.equal(used.to(ids.dtype), ids)
    zoo_cos, _ = multimodal_rope_cos_sin(ids, HEAD_DIM, scheme, section, 5e6 if family == 'qwen3_vl' else 1e6)
    torch.testing.assert_close(cos, zoo_cos.to(cos.dtype))
    # generation: prefill, then decode steps at next position + k on every axis
    length = kw['input_ids'].shape[1]
    nxt = ids[0, 0, -1] + 1
    steps = calls[2:]                                                   # calls[1] is generate's prefill
    assert len(steps) == seq.shape[1] - length - 1
    for k, (p, _) in enumerate(steps):
        p = p if p.dim() == 3 else p[None]
        p = p[-spec.num_axes:] if p.shape[0] >= spec.num_axes else p  # rows the rotation reads
        assert p.shape[-1] == 1 and torch.allclose(p.float(), (nxt + k).float()), (k, p.flatten().tolist())


def test_mhrope_needs_model_frequencies(models):
    model = models['qwen3_vl']
    kw = _inputs('qwen3_vl')
    with pytest.raises(ValueError, match="per key head.*frequencies='model'"):
        patch_rope_index(model, 'mhrope')
    with torch.no_grad():
        ref = model(**kw).logits
        patch_rope_index(model, 'mhrope', frequencies='model')  # MRoPE-I ids with the model's allocation
        try:
            assert torch.equal(model(**kw).logits, ref)
        finally:
            unpatch_rope_index(model)


def test_bad_adapter_input(models):
    with pytest.raises(ValueError, match="unknown multimodal RoPE scheme 'nope'"):
        patch_rope_index(models['qwen2_vl'], 'nope')
    with pytest.raises(ValueError, match="4 position axes.*frequencies='scheme'"):
        patch_rope_index(models['qwen2_vl'], 'vrope', frequencies='model')
    with pytest.raises(ValueError, match="unknown option"):
        patch_rope_index(models['qwen2_vl'], 'videorope', gamma=1.0)
    with pytest.raises(ValueError, match='no get_rope_index'):
        patch_rope_index(torch.nn.Linear(2, 2), 'mrope')
    assert not hasattr(models['qwen2_vl'], '_zoo_rope_patch')  # failed patches leave the model alone
