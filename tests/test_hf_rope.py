"""Frequency allocation exact to Hugging Face transformers (issue 13, item 3).

For M-RoPE (Qwen2-VL, Qwen2.5-VL: chunked ``mrope_section``) and MRoPE-Interleave (Qwen3-VL: interleaved t, h, w),
the zoo's cos/sin tables and rotated q, k equal those of the installed transformers' text rotary embedding and
``apply_rotary_pos_emb`` on the same position ids. transformers is a test-only extra (``pip install -e '.[test]'``);
tiny configs are built in code, nothing is downloaded.
"""
from __future__ import annotations

import os

import pytest
import torch

from zoo.encodings import Positions, create_pos_encoding
from zoo.encodings import multimodal_rope as mm

try:
    import transformers
    from transformers.models.qwen2_5_vl import configuration_qwen2_5_vl as c25, modeling_qwen2_5_vl as m25
    from transformers.models.qwen2_vl import configuration_qwen2_vl as c2, modeling_qwen2_vl as m2
    from transformers.models.qwen3_vl import configuration_qwen3_vl as c3, modeling_qwen3_vl as m3
except ImportError as e:  # pragma: no cover - depends on the environment
    if os.environ.get('ZOO_ALLOW_MISSING_HF') == '1':
        pytest.skip(f'transformers not installed ({e})', allow_module_level=True)
    raise ImportError(f'tests/test_hf_rope.py needs transformers>=4.57 (a test-only extra): pip install -e ".[test]" '
                      f'(or set ZOO_ALLOW_MISSING_HF=1 to skip): {e}') from e

# (zoo scheme, HF module, config class, rotary class, theta)
FAMILIES = {
    'mrope': (m2, c2.Qwen2VLTextConfig, m2.Qwen2VLRotaryEmbedding, 1e6),
    'qwen2_5_vl': (m25, c25.Qwen2_5_VLTextConfig, m25.Qwen2_5_VLRotaryEmbedding, 1e6),
    'qwen3_vl': (m3, c3.Qwen3VLTextConfig, m3.Qwen3VLTextRotaryEmbedding, 5e6),
}

# (scheme, head_dim, mrope_section passed to both sides; None = each side's default for head_dim 128)
CASES = [('mrope', 128, None), ('mrope', 64, [8, 12, 12]), ('mrope', 32, [2, 6, 8]),
         ('qwen2_5_vl', 128, None), ('qwen2_5_vl', 64, [16, 8, 8]),
         ('qwen3_vl', 128, None), ('qwen3_vl', 64, [12, 10, 10]), ('qwen3_vl', 32, [8, 4, 4])]

HEADS, KV_HEADS = 4, 2


def _hf_rotary(scheme, head_dim, section):
    _, config_cls, rotary_cls, theta = FAMILIES[scheme]
    rope = {'rope_type': 'default', 'rope_theta': theta}
    if section is not None:
        rope['mrope_section'] = list(section)
    cfg = config_cls(hidden_size=HEADS * head_dim, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                     head_dim=head_dim, rope_parameters=rope, max_position_embeddings=1 << 16)
    return rotary_cls(cfg).eval(), theta


def _hf_cos_sin(scheme, rotary, x, pos, head_dim, section):
    """(cos, sin) ``(B, L, head_dim)`` as the HF text model computes them. transformers 5.x recomposes the axes
    inside the rotary module; 4.57's Qwen2-VL / 2.5-VL module returns per-axis tables ``(3, B, L, D)`` that
    ``apply_multimodal_rotary_pos_emb`` recomposes: there the per-axis tables are compared through the zoo's
    allocation, and the allocation itself by the rotated-q/k test, which calls HF's own apply function."""
    cos, sin = rotary(x, pos)
    if cos.dim() == 4:
        axes = mm.axis_of_pair(scheme, head_dim, section).repeat(2)
        pick = axes.view(1, 1, 1, -1).expand(1, *cos.shape[1:])
        cos, sin = cos.gather(0, pick)[0], sin.gather(0, pick)[0]
    return cos, sin


def _ids(batch, length, high, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, high, (3, batch, length), generator=g)


def _layout_ids(scheme):
    segs = [{'type': 'text', 'len': 3}, {'type': 'image', 't': 1, 'h': 3, 'w': 5}, {'type': 'text', 'len': 2},
            {'type': 'video', 't': 4, 'h': 2, 'w': 3, 'second_per_grid_t': 0.5}, {'type': 'text', 'len': 2}]
    pos, _ = mm.get_layout_position_ids(scheme, segs)
    return pos


@pytest.mark.parametrize('scheme,head_dim,section', CASES)
def test_cos_sin_equal_transformers(scheme, head_dim, section):
    rotary, theta = _hf_rotary(scheme, head_dim, section)
    for pos in (_ids(2, 50, 40_000, 0), _ids(1, 9, 8, 1), _layout_ids(scheme)):
        x = torch.zeros(1, dtype=torch.float32)
        hf_cos, hf_sin = _hf_cos_sin(scheme, rotary, x, pos, head_dim, section)
        cos, sin = mm.multimodal_rope_cos_sin(pos, head_dim, scheme, section, theta=theta)
        assert cos.shape == hf_cos.shape == (pos.shape[1], pos.shape[2], head_dim)
        torch.testing.assert_close(cos, hf_cos, atol=0, rtol=0)
        torch.testing.assert_close(sin, hf_sin, atol=0, rtol=0)


@pytest.mark.parametrize('scheme,head_dim,section', CASES)
def test_rotated_q_k_equal_transformers(scheme, head_dim, section):
    rotary, theta = _hf_rotary(scheme, head_dim, section)
    mod = FAMILIES[scheme][0]
    pos = torch.cat([_ids(2, 30, 5_000, 2), _layout_ids(scheme).expand(-1, 2, -1)], dim=-1)
    L = pos.shape[-1]
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, HEADS, L, head_dim, generator=g)
    k = torch.randn(2, KV_HEADS, L, head_dim, generator=g)
    cos, sin = rotary(q, pos)
    if cos.dim() == 4:  # transformers 4.57 Qwen2-VL / 2.5-VL
        hf_q, hf_k = mod.apply_multimodal_rotary_pos_emb(q, k, cos, sin, section or [16, 24, 24])
    else:
        hf_q, hf_k = mod.apply_rotary_pos_emb(q, k, cos, sin)
    zq, zk = mm.apply_multimodal_rope(q, k, pos, scheme=scheme, mrope_section=section, theta=theta)
    torch.testing.assert_close(zq, hf_q, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(zk, hf_k, atol=1e-6, rtol=1e-6)
    # the registered encoding (one term for every layer, GQA tables shared by each query group)
    enc = create_pos_encoding('multimodal_rope', {'dim': HEADS * head_dim, 'num_heads': HEADS, 'depth': 2},
                              {'scheme': scheme, 'theta': theta, 'mrope_section': section,
                               'num_kv_heads': KV_HEADS})
    term = enc.attn_terms(Positions(None, ids=pos), torch.float32, torch.device('cpu'))[0]
    tq, tk = term.rotate(q, k)
    torch.testing.assert_close(tq, hf_q, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(tk, hf_k, atol=1e-6, rtol=1e-6)
    # and the rotation is not the identity
    assert not torch.allclose(tq, q, atol=1e-3)


def test_transformers_version_recorded():
    major, minor = (int(x) for x in transformers.__version__.split('.')[:2])
    assert (major, minor) >= (4, 57), transformers.__version__
