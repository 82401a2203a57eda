"""Vista-LLaMA (equal distance to visual tokens): rotation only within a modality, none between visual and text
tokens, in one SDPA call (split q/k channels). Tested on its defining properties (no golden file exists)."""
import pytest
import torch

from zoo.encodings import Positions, create_pos_encoding
from zoo.encodings.multimodal import get_layout_position_ids
from zoo.models.attention import Attention, KVCache

LAYOUT = [{'type': 'text', 'len': 3}, {'type': 'image', 't': 1, 'h': 2, 'w': 2}, {'type': 'text', 'len': 4}]


def _logits(pe, q, k, ids):
    qw, kw = pe.attn_terms(Positions(None, ids=ids), q.dtype, q.device)[0].rotate(q, k)
    return qw @ kw.transpose(-1, -2) / q.shape[-1] ** 0.5


def test_ids_mark_the_visual_tokens():
    ids, delta = get_layout_position_ids('vista', LAYOUT, markers=False)
    assert ids[0, 0].tolist() == list(range(11)) and int(delta) == 0
    assert ids[1, 0].tolist() == [0, 1, 2, -1, -1, -1, -1, 7, 8, 9, 10]


def test_rotation_within_modalities_only():
    """Text-visual logits equal the un-rotated q.k (whatever the positions); text-text and visual-visual logits equal
    1-D RoPE's."""
    torch.manual_seed(0)
    pe = create_pos_encoding('multimodal_rope', dict(dim=32, num_heads=2, depth=1), dict(scheme='vista', theta=1e4))
    rope = create_pos_encoding('multimodal_rope', dict(dim=32, num_heads=2, depth=1), dict(scheme='rope1d', theta=1e4))
    ids, _ = get_layout_position_ids('vista', LAYOUT, markers=False)
    q, k = torch.randn(1, 2, 11, 16), torch.randn(1, 2, 11, 16)
    got = _logits(pe, q, k, ids)
    rot = _logits(rope, q, k, ids[:1])
    plain = q @ k.transpose(-1, -2) / 4
    vis = ids[1, 0] < 0
    same = vis[:, None] == vis[None, :]
    torch.testing.assert_close(got[..., same], rot[..., same], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[..., ~same], plain[..., ~same], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(rot[..., ~same], plain[..., ~same])  # RoPE would have rotated them


@pytest.mark.parametrize('fused', [True, False])
def test_attention_scale_cache_and_padding(fused):
    """The widened q/k keep the head dim's scale on both attention paths; the KV cache (widened keys) decodes as a
    full forward, and left padding leaves real tokens unchanged."""
    torch.manual_seed(0)
    pe = create_pos_encoding('multimodal_rope', dict(dim=32, num_heads=4, depth=1),
                             dict(scheme='vista', theta=1e4, num_kv_heads=2))
    att = Attention(32, 4, num_kv_heads=2, qkv_bias=True).eval()
    att.fused_attn = fused
    ids, _ = get_layout_position_ids('vista', LAYOUT, markers=False)
    x = torch.randn(1, 11, 32)

    def run(x, ids, mask=None, cache=None):
        term = pe.attn_terms(Positions(None, ids=ids, attn_mask=mask), x.dtype, x.device)[0]
        return att(x, term, mask, True, cache)

    with torch.no_grad():
        full = run(x, ids)
        q, k, v = att.qkv(x).view(1, 11, 8, 8).transpose(1, 2).split([4, 2, 2], 1)
        qw, kw = pe.attn_terms(Positions(None, ids=ids), x.dtype, x.device)[0].rotate(q, k)
        logit = qw @ kw.repeat_interleave(2, 1).transpose(-1, -2) / 8 ** 0.5
        ref = logit.masked_fill(~torch.ones(11, 11, dtype=torch.bool).tril(), float('-inf')).softmax(-1)
        ref = att.proj((ref @ v.repeat_interleave(2, 1)).transpose(1, 2).reshape(1, 11, 32))
        torch.testing.assert_close(full, ref, rtol=1e-5, atol=1e-5)
        cache = KVCache(1)
        parts = [run(x[:, :8], ids[..., :8], None, cache)]
        parts += [run(x[:, i:i + 1], ids[..., i:i + 1], torch.ones(1, i + 1, dtype=torch.bool), cache)
                  for i in range(8, 11)]
        torch.testing.assert_close(torch.cat(parts, 1), full, rtol=1e-5, atol=1e-5)
        xp = torch.cat([torch.zeros(1, 2, 32), x], 1)
        idp = torch.cat([torch.ones(2, 1, 2, dtype=ids.dtype), ids], -1)
        mask = torch.tensor([[False, False] + [True] * 11])
        torch.testing.assert_close(run(xp, idp, mask)[:, 2:], full, rtol=1e-5, atol=1e-5)


def test_refusals():
    from zoo.hf import patch_rope_index
    with pytest.raises(ValueError, match="scheme 'vista' cannot be patched into a Hugging Face model: Vista"):
        patch_rope_index(torch.nn.Linear(2, 2), 'vista')
    pe = create_pos_encoding('multimodal_rope', dict(dim=32, num_heads=2, depth=1),
                             dict(scheme='vista', extrapolation='mspoe'))
    with pytest.raises(ValueError, match="does not take extrapolation 'mspoe'"):
        pe.attn_terms(Positions(None, ids=torch.arange(3)[None, None]), torch.float32, torch.device('cpu'))
    with pytest.raises(ValueError, match='needs explicit position ids'):
        pe.attn_terms(Positions((1, 2, 2)), torch.float32, torch.device('cpu'))
