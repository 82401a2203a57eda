"""Long prompts: PyPE's visual-frame pattern and CoPE's contextual term computed per block of queries (the blocked
attention path) equal the whole-matrix forms, so neither materialises an ``(L, L)`` tensor per layer at 32k tokens."""
import pytest
import torch

from zoo.encodings import Positions
from zoo.encodings.multimodal import QWEN_TOKEN_IDS, layout_to_inputs
from zoo.encodings.multimodal import encoding as mm_encoding
from zoo.encodings.multimodal.encoding import image_block_mask, image_block_mask_rows
from zoo.models import attention as attention_module
from zoo.models.vlm.decoder import Decoder

TOKENS = dict(spatial_merge_size=2, image_token_id=QWEN_TOKEN_IDS['image'], video_token_id=QWEN_TOKEN_IDS['video'])


def _pype_inputs():
    layout = [{'type': 'text', 'len': 3}, {'type': 'image', 'h': 3, 'w': 4}, {'type': 'text', 'len': 2},
              {'type': 'video', 't': 2, 'h': 2, 'w': 3}, {'type': 'text', 'len': 4}]
    return layout_to_inputs(layout, markers=False)


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocked above 8 tokens, in blocks of 5 (PyPE) and 3 (CoPE) queries; counts the blocked SDPA calls."""
    monkeypatch.setattr(mm_encoding, 'BLOCK_ABOVE', 8)
    monkeypatch.setattr(mm_encoding, 'FRAME_MASK_QUERY_BLOCK', 5)
    monkeypatch.setattr(mm_encoding, 'COPE_QUERY_BLOCK', 3)
    calls = []
    blocked = attention_module.Attention._blocked_sdpa

    def spy(self, *args, **kwargs):
        calls.append(args[-1])
        return blocked(self, *args, **kwargs)

    monkeypatch.setattr(attention_module.Attention, '_blocked_sdpa', spy)
    return calls


def test_mask_rows_equal_the_whole_mask():
    torch.manual_seed(0)
    frames = torch.tensor([[-1, -1, 0, 0, 0, 0, -1, 1, 1, 1, 2, 2, 2, -1]])
    positions = torch.tensor([[0, 1, 2, 3, 3, 2, 4, 5, 6, 5, 6, 7, 6, 8]])
    whole = image_block_mask(positions, frames)
    rows = torch.cat([image_block_mask_rows(positions, frames, s, min(s + 4, 14)) for s in range(0, 14, 4)], 1)
    assert torch.equal(rows, whole)
    assert not torch.equal(whole, torch.ones(14, 14, dtype=torch.bool).tril()[None])  # the pattern is not causal
    text = torch.full((1, 9), -1)
    rows = image_block_mask_rows(torch.arange(9)[None], text, 2, 6)
    assert image_block_mask(torch.arange(9)[None], text) is None
    assert torch.equal(rows[0], torch.ones(9, 9, dtype=torch.bool).tril()[2:6])


def _decoder(scheme, **opts):
    torch.manual_seed(0)
    dec = Decoder(200, 32, 2, 4, 2, mlp_hidden=64, scheme=scheme, theta=1e4, scheme_options=opts or None).eval()
    if scheme.startswith('cope'):
        with torch.no_grad():
            dec.pe.cope_pos_emb.normal_(std=1.0)
    return dec


def test_pype_blocked_prefill_equals_whole(small_blocks):
    inp = _pype_inputs()
    dec = _decoder('pype')
    pos, _ = dec.pe.position_ids(inp['input_ids'], inp['image_grid_thw'], inp['video_grid_thw'], **TOKENS)
    ids = inp['input_ids'].clamp(max=199)
    with torch.no_grad():
        mm_encoding.BLOCK_ABOVE = 10 ** 9
        whole = dec(dec.embed(ids), pos)
        assert not small_blocks
        mm_encoding.BLOCK_ABOVE = 8
        blocked = dec(dec.embed(ids), pos)
    assert small_blocks == [5, 5]  # both layers took the blocked path
    torch.testing.assert_close(blocked, whole, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('scheme', ['cope', 'cope_rope'])
def test_cope_blocked_prefill_equals_whole_with_padding_and_decoding(small_blocks, scheme):
    from zoo.models.attention import KVCache
    dec = _decoder(scheme, npos=6)
    torch.manual_seed(1)
    ids = torch.randint(0, 200, (2, 14))
    mask = torch.ones(2, 14, dtype=torch.bool)
    mask[1, :3] = False  # left padding in row 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)[None]
    with torch.no_grad():
        mm_encoding.BLOCK_ABOVE = 10 ** 9
        whole = dec(dec.embed(ids), pos, mask)
        mm_encoding.BLOCK_ABOVE = 8
        blocked = dec(dec.embed(ids), pos, mask)
        assert small_blocks == [3, 3]
        torch.testing.assert_close(blocked, whole, rtol=1e-5, atol=1e-5)
        cache = KVCache(2)  # a blocked prefill, then cached decoding steps: the full sequence's rows
        parts = [dec(dec.embed(ids[:, :10]), pos[..., :10], mask[:, :10], cache)]
        parts += [dec(dec.embed(ids[:, i:i + 1]), pos[..., i:i + 1], mask[:, :i + 1], cache) for i in range(10, 14)]
    out = torch.cat(parts, 1)
    torch.testing.assert_close(out[0], whole[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out[1, 3:], whole[1, 3:], rtol=1e-5, atol=1e-5)


def test_cope_blocked_training_gradients_equal(small_blocks):
    dec = _decoder('cope_rope', npos=6).train()
    ids = torch.randint(0, 200, (1, 12))
    pos = torch.arange(12)[None, None]
    grads = []
    for above in (10 ** 9, 8):
        mm_encoding.BLOCK_ABOVE = above
        dec.zero_grad()
        dec(dec.embed(ids), pos).square().sum().backward()
        grads.append(dec.pe.cope_pos_emb.grad.clone())
    assert small_blocks
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-5)


def test_short_prompts_and_decoding_keep_one_sdpa_call():
    dec = _decoder('cope', npos=6)
    terms = dec.pe.attn_terms(Positions(None, ids=torch.arange(100)[None, None]), torch.float32, torch.device('cpu'))
    assert terms[0].query_block is None
    long = dec.pe.attn_terms(Positions(None, ids=torch.arange(3000)[None, None]), torch.float32,
                             torch.device('cpu'))
    assert long[0].query_block == mm_encoding.COPE_QUERY_BLOCK
