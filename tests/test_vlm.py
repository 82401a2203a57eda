"""Video-LLM backbones (issue 13 items 1, 4, 5 and the bad-input list): every scheme builds, trains a few steps and
generates on CPU; decode positions equal get_position_ids of the full sequence; cached decoding equals a full
forward; a left-padded batch decodes as each sample alone; training options are drawn in training only; zoo
train-vlm trains, resumes bit-exactly and keeps EMA weights; every bad input is a ValueError naming the problem.

Models are tiny (tower 32 px, patch 8, width 32, 1 block; decoder width 64, 2 blocks) and their decoder weights are
scrambled where outputs must differ between tokens (a freshly initialised decoder predicts one token everywhere)."""
from __future__ import annotations

import csv
import os

import pytest
import torch
from torch import nn

import zoo
from zoo.encodings.multimodal_rope import get_layout_position_ids, get_position_ids, get_scheme
from zoo.models.vlm import (IGNORE_INDEX, VideoLLM, create_video_llm, list_video_llms, select_next_token,
                            vlm_schemes)

SCHEMES = vlm_schemes()
TOWER = dict(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2)


def tiny(scheme: str, **kw) -> VideoLLM:
    # MHRoPE's published [2, 3, 3] split needs 8 KV heads: 16 query heads over 8 KV heads (GQA 2:1)
    geo = dict(num_heads=16, num_kv_heads=8) if scheme == 'mhrope' else dict(num_heads=2, num_kv_heads=1)
    args = dict(tower_kwargs=dict(TOWER), dim=64, depth=2, mlp_hidden=128, **geo)
    args.update(kw)
    torch.manual_seed(0)  # every test model is the same model
    return create_video_llm(f'pe_vlm_tiny_{scheme}', **args)


def scramble(m: VideoLLM, seed: int = 0) -> VideoLLM:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in m.decoder.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=g) * (1.0 if 'embed' in n else 0.3))
    return m.eval()


def frames(n: int, h: int = 32, w: int = 32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, h, w, 3), dtype=torch.uint8, generator=g)


def two_prompts(m: VideoLLM, answers=(None, None)):
    """Two prompts of different lengths: 4 frames at 32x32 and 6 frames at 32x64 (another grid and frame count)."""
    c1, s1 = m.prepare_video(frames(4, seed=1), timestamps=[0.0, 0.5, 1.0, 1.5])
    c2, s2 = m.prepare_video(frames(6, 32, 64, seed=2))
    p1 = m.prompt([s1, 'what happens?'], answer=answers[0])
    p2 = m.prompt(['describe', s2, 'the video in a few words please'], answer=answers[1])
    return [p1, p2], [c1, c2]


def gen(m: VideoLLM, prompts, clips, n: int = 5, **kw):
    b = m.collate(prompts, 'left')
    return b, m.generate(b['input_ids'], attention_mask=b['attention_mask'], videos=clips,
                         video_grid_thw=b['video_grid_thw'], second_per_grid_ts=b['second_per_grid_ts'],
                         max_new_tokens=n, eos_token_id=-1, **kw)


# ------------------------------------------------------------------------------------------------------- registry
def test_registry_names_every_scheme_and_size():
    names = list_video_llms()
    assert {'rope1d', 'mrope', 'qwen2_5_vl', 'mrope_interleave', 'mhrope', 'vrope', 'v2pe', 'videorope',
            'hope'} <= set(SCHEMES)
    assert names == sorted(f'pe_vlm_{s}_{k}' for s in ('tiny', 'small') for k in SCHEMES)
    assert list_video_llms('*_hope') == ['pe_vlm_small_hope', 'pe_vlm_tiny_hope']
    assert zoo.create_video_llm is create_video_llm and zoo.list_video_llms is list_video_llms


def test_registered_defaults_keep_published_splits():
    """The registered geometry: GQA, the tower named by its timm name, every scheme's allocation exact."""
    m = create_video_llm('pe_vlm_tiny_mrope_interleave', tower_kwargs=dict(TOWER))  # default decoder geometry
    attn = m.decoder.blocks[0].attn
    assert (attn.num_heads, attn.num_kv_heads, attn.head_dim) == (8, 2, 32)
    assert m.tower.model_name == 'pe_vit_tiny_patch16_rope_mixed_224'
    assert m.decoder.embed.weight.shape[0] == len(m.tokenizer) == m.tokenizer.vocab_size
    assert m.decoder.pe.axes.shape == (1, 16)


def test_the_decoder_encoding_owns_the_scheme(monkeypatch):
    """The model asks ``decoder.pe`` for ids, training draws and decode positions: a forward (train and eval) and
    generate resolve no scheme by name; a per-head scheme's KV heads come from the scheme (``video_llm_config``)."""
    from zoo.encodings.multimodal import encoding, ids, schemes
    from zoo.models.vlm import video_llm_config
    m = tiny('hope')
    prompts, clips = two_prompts(m, answers=('a', 'b'))
    b = m.collate(prompts, 'left')
    names = []

    def get_scheme(name):
        names.append(name) if isinstance(name, str) else None
        return schemes.get_scheme(name)
    for module in (ids, encoding):
        monkeypatch.setattr(module, 'get_scheme', get_scheme)
    kw = dict(videos=clips, video_grid_thw=b['video_grid_thw'], second_per_grid_ts=b['second_per_grid_ts'])
    m.train()(b['input_ids'], b['attention_mask'], labels=b['labels'], **kw)
    m.eval()(b['input_ids'], b['attention_mask'], **kw)
    m.generate(b['input_ids'], attention_mask=b['attention_mask'], max_new_tokens=2, **kw)
    assert names == []
    assert m.scheme_options is m.decoder.pe.scheme_options
    assert video_llm_config('pe_vlm_tiny_mhrope')['num_kv_heads'] == 8
    assert video_llm_config('pe_vlm_tiny_mrope')['num_kv_heads'] == 2
    assert video_llm_config('pe_vlm_small_mhrope', num_kv_heads=16)['num_kv_heads'] == 16


# -------------------------------------------------------------------------------------------- build, train, generate
@pytest.mark.parametrize('scheme', SCHEMES)
def test_every_scheme_builds_trains_and_generates(scheme):
    torch.manual_seed(0)
    m = tiny(scheme).train()
    prompts, clips = two_prompts(m, answers=('a', 'c'))
    b = m.collate(prompts, 'right')
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    losses = []
    for _ in range(3):
        out = m(b['input_ids'], b['attention_mask'], videos=clips, video_grid_thw=b['video_grid_thw'],
                second_per_grid_ts=b['second_per_grid_ts'], labels=b['labels'],
                logits_mask=torch.zeros_like(b['labels'], dtype=torch.bool))
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        losses.append(out.loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < losses[0]
    grads = [n for n, p in m.named_parameters() if p.grad is None]
    assert not grads, f'parameters without gradient: {grads[:5]}'
    m.eval()
    _, out = gen(m, [m.prompt([m.prepare_video(frames(4))[1], 'q'])], [m.prepare_video(frames(4))[0]], n=3)
    assert out.new_tokens.shape == (1, 3) and out.sequences.shape[1] == out.new_tokens.shape[1] + \
        m.collate([m.prompt([m.prepare_video(frames(4))[1], 'q'])])['input_ids'].shape[1]


@pytest.mark.parametrize('scheme', SCHEMES)
def test_decoding_matches_full_sequence(scheme):
    """Decode positions = get_position_ids of prompt + generated tokens; cached logits = a full forward's; a
    left-padded batch gives each sample's own tokens (and logits); decoding without the cache gives the same."""
    m = scramble(tiny(scheme))
    prompts, clips = two_prompts(m)
    b, out = gen(m, prompts, clips, output_logits=True, output_positions=True)
    n = out.new_tokens.shape[1]
    full_mask = torch.cat([b['attention_mask'], torch.ones(2, n, dtype=torch.int64)], dim=1)
    real = full_mask.bool()
    layers = range(m.decoder.depth) if get_scheme(scheme).per_layer else [None]
    for layer in layers:  # a per-layer scheme (PyPE): every layer's ids, then the visual frame index
        ref, _ = get_position_ids(scheme, out.sequences, None, b['video_grid_thw'], full_mask,
                                  b['second_per_grid_ts'] if scheme == 'qwen2_5_vl' else None,
                                  image_token_id=m.tokenizer.image_id, video_token_id=m.tokenizer.video_id,
                                  **({} if layer is None else dict(layer=layer)))
        got = out.position_ids if layer is None else out.position_ids[layer]
        assert torch.equal(got[:, real].to(ref.dtype), ref[:, real])
    if layers[0] is not None:
        whole, _ = m.position_ids(out.sequences, full_mask, None, b['video_grid_thw'])
        assert torch.equal(out.position_ids[..., real], whole[..., real])
    full = m(out.sequences[:, :-1], full_mask[:, :-1], videos=clips, video_grid_thw=b['video_grid_thw'],
             second_per_grid_ts=b['second_per_grid_ts'])
    length = b['input_ids'].shape[1]
    tol = dict(atol=1e-3, rtol=1e-4)  # float32 noise on logits of magnitude ~10 (scrambled weights)
    torch.testing.assert_close(out.logits, full.logits[:, length - 1:].float(), **tol)
    for i in range(2):
        _, one = gen(m, [prompts[i]], [clips[i]], output_logits=True)
        assert torch.equal(one.new_tokens[0], out.new_tokens[i])
        torch.testing.assert_close(one.logits[0], out.logits[i], **tol)
    _, nocache = gen(m, prompts, clips, use_cache=False, output_logits=True)
    assert torch.equal(nocache.new_tokens, out.new_tokens)
    torch.testing.assert_close(nocache.logits, out.logits, **tol)


def test_left_padding_with_the_explicit_attention_path():
    """A left-padded query row sees no key; the explicit (non-SDPA) softmax gives NaN there. The decoder zeroes padded
    rows after every block, so real tokens decode as alone."""
    m = scramble(tiny('mrope'))
    for blk in m.decoder.blocks:
        blk.attn.fused_attn = False
    prompts, clips = two_prompts(m)
    _, out = gen(m, prompts, clips, n=3, output_logits=True)
    assert out.logits.isfinite().all()
    for i in range(2):
        _, one = gen(m, [prompts[i]], [clips[i]], n=3, output_logits=True)
        assert torch.equal(one.new_tokens[0], out.new_tokens[i])
        torch.testing.assert_close(one.logits[0], out.logits[i], atol=1e-3, rtol=1e-4)


def test_generation_keeps_no_state_and_samples_reproducibly():
    m = scramble(tiny('videorope'))
    prompts, clips = two_prompts(m)
    _, a1 = gen(m, prompts[:1], clips[:1])
    _, b1 = gen(m, prompts[1:], clips[1:])
    _, a2 = gen(m, prompts[:1], clips[:1])
    assert torch.equal(a1.sequences, a2.sequences)
    fresh = tiny('videorope').eval()
    fresh.load_state_dict(m.state_dict())
    _, b2 = gen(fresh, prompts[1:], clips[1:])
    assert torch.equal(b1.sequences, b2.sequences)
    assert not torch.equal(a1.new_tokens, b1.new_tokens[:, :a1.new_tokens.shape[1]])  # outputs depend on the input
    draws = [gen(m, prompts, clips, n=3, do_sample=True, temperature=1.5, top_p=0.9,
                 generator=torch.Generator().manual_seed(s))[1].new_tokens for s in (3, 3, 4)]
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])
    _, greedy = gen(m, prompts, clips, n=3)
    _, top1 = gen(m, prompts, clips, n=3, do_sample=True, top_k=1)
    assert torch.equal(greedy.new_tokens, top1.new_tokens)


def test_generation_stops_at_end_of_turn_and_pads():
    m = scramble(tiny('mrope'))
    prompts, clips = two_prompts(m)
    _, free = gen(m, prompts, clips, n=4)
    eos = int(free.new_tokens[0, 1])  # pretend row 0's second token ends its turn
    assert int(free.new_tokens[0, 0]) != eos and eos not in free.new_tokens[1].tolist()
    b = m.collate(prompts, 'left')
    out = m.generate(b['input_ids'], attention_mask=b['attention_mask'], videos=clips,
                     video_grid_thw=b['video_grid_thw'], max_new_tokens=4, eos_token_id=eos)
    assert out.new_tokens[0, 1] == eos and (out.new_tokens[0, 2:] == m.tokenizer.pad_id).all()


def test_select_next_token_filters():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0]])
    assert select_next_token(logits).tolist() == [1]
    g = torch.Generator().manual_seed(0)
    picks = {int(select_next_token(logits, True, top_k=2, generator=g)) for _ in range(50)}
    assert picks <= {1, 3} and len(picks) == 2
    picks = {int(select_next_token(logits, True, top_p=0.5, generator=g)) for _ in range(20)}
    assert picks == {1}
    with pytest.raises(ValueError, match='temperature'):
        select_next_token(logits, True, temperature=0)


# ----------------------------------------------------------------------------------------------- positions, options
@pytest.mark.parametrize('scheme', ['hope', 'v2pe'])
def test_training_options_are_drawn_in_training_only(scheme):
    m = tiny(scheme)
    prompts, _ = two_prompts(m)
    b = m.collate(prompts * 4, 'right')
    args = (b['input_ids'], b['attention_mask'], None, b['video_grid_thw'], b['second_per_grid_ts'])
    m.eval()
    fixed, _ = m.position_ids(*args)
    default, _ = get_position_ids(scheme, b['input_ids'], None, b['video_grid_thw'], b['attention_mask'],
                                  image_token_id=m.tokenizer.image_id, video_token_id=m.tokenizer.video_id)
    assert torch.equal(fixed, default) and torch.equal(m.position_ids(*args)[0], fixed)
    m.train()
    torch.manual_seed(0)
    drawn, _ = m.position_ids(*args)
    torch.manual_seed(0)
    again, _ = m.position_ids(*args)
    assert torch.equal(drawn, again)                           # reproducible from torch's seed
    rows = [drawn[:, r][:, b['attention_mask'][r].bool()] for r in range(0, 8, 2)]  # the same prompt 4 times
    assert any(not torch.equal(rows[0], r) for r in rows[1:])  # drawn per sample
    assert not all(torch.equal(drawn[:, r], fixed[:, r]) for r in range(8))


@pytest.mark.parametrize('scheme', ['mrope', 'videorope', 'vrope', 'rope1d'])
def test_prompt_layout_gives_the_layout_ids(scheme):
    """The prompt builder's token layout yields the ids of the same layout in get_layout_position_ids."""
    m = tiny(scheme)
    clip, seg = m.prepare_video(frames(4))
    p = m.prompt(['hello', seg, 'what now'])
    ids, _ = m.position_ids(p.input_ids[None], None, None, p.video_grid_thw, p.second_per_grid_ts)
    tok = m.tokenizer
    vs = int((p.input_ids == tok.vision_start_id).nonzero())
    t, h, w = seg['grid']
    n_after = p.input_ids.numel() - vs - 2 - t * h * w // 4
    ref, _ = get_layout_position_ids(scheme, [{'type': 'text', 'len': vs},
                                              {'type': 'video', 't': t, 'h': h // 2, 'w': w // 2},
                                              {'type': 'text', 'len': n_after}])
    assert torch.equal(ids, ref)


def test_qwen3_layout_has_per_frame_timestamps():
    m = tiny('mrope_interleave')
    clip, seg = m.prepare_video(frames(4), timestamps=[0.0, 0.5, 1.0, 1.5])
    assert seg['grid'][0] == 2 and seg['timestamps'] == [0.25, 1.25] and seg['second_per_grid_t'] == 1.0
    p = m.prompt([seg, 'q'])
    tok = m.tokenizer
    assert int((p.input_ids == tok.vision_start_id).sum()) == 2  # one block per temporal patch
    text = tok.decode(p.input_ids, skip_special=False)
    assert '< 0 . 2 seconds > <|vision_start|>' in text and '< 1 . 2 seconds > <|vision_start|>' in text
    assert p.video_grid_thw.tolist() == [[2, 4, 4]]              # one un-split grid row, as Qwen3-VL
    mrope = tiny('mrope').prompt([seg, 'q'])
    assert int((mrope.input_ids == tok.vision_start_id).sum()) == 1


def test_answer_labels_and_loss_only_on_answer():
    m = tiny('mrope')
    clip, seg = m.prepare_video(frames(4))
    p = m.prompt([seg, 'q'], answer='b')
    labelled = p.labels != IGNORE_INDEX
    assert p.num_answer_tokens == 2 == int(labelled.sum())
    assert p.labels[labelled].tolist() == m.tokenizer.encode('b') + [m.tokenizer.eos_id]
    assert labelled[-2:].all() and not labelled[:-2].any()
    b = m.collate([p])
    out = m(b['input_ids'], videos=[clip], video_grid_thw=b['video_grid_thw'], labels=b['labels'])
    full = m(b['input_ids'], videos=[clip], video_grid_thw=b['video_grid_thw'])
    ref = torch.nn.functional.cross_entropy(full.logits[0, -3:-1], p.labels[-2:])
    torch.testing.assert_close(out.loss, ref)


@pytest.mark.parametrize('scheme', ['videorope', 'pype', 'cope_rope', 'vista'])
def test_grad_checkpointing_gives_the_same_gradients(scheme):
    """Checkpointed blocks recompute the same terms: rotations, PyPE's frame masks, CoPE's table slices, Vista's
    split channels."""
    grads = []
    for ckpt in (False, True):
        m = tiny(scheme).train()
        m.set_grad_checkpointing(ckpt)
        prompts, clips = two_prompts(m, answers=('a', 'b'))
        b = m.collate(prompts, 'right')
        out = m(b['input_ids'], b['attention_mask'], videos=clips, video_grid_thw=b['video_grid_thw'],
                labels=b['labels'], logits_mask=torch.zeros_like(b['labels'], dtype=torch.bool))
        out.loss.backward()
        grads.append({n: p.grad.clone() for n, p in m.named_parameters()})
    for n in grads[0]:
        torch.testing.assert_close(grads[1][n], grads[0][n], atol=1e-6, rtol=1e-4, msg=n)


# ---------------------------------------------------------------------------------------------------------- towers
class StandInVideoTower(nn.Module):
    """A minimal timm-style video model: Conv3d tubelet embed (2 x 8 x 8) and patch tokens from forward_features."""

    def __init__(self, dim: int = 24):
        super().__init__()
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv3d(3, dim, (2, 8, 8), (2, 8, 8))
        self.num_features = dim
        self.dynamic_img_size = True

    def forward_features(self, x):  # (B, C, T, H, W) -> (B, t*h*w, dim)
        return self.patch_embed.proj(x).flatten(2).transpose(1, 2)


def test_video_tower_encodes_the_clip():
    m = VideoLLM('videorope', vision_tower=StandInVideoTower(), dim=64, depth=1, num_heads=2, num_kv_heads=1)
    assert m.tower.is_video and m.tower.temporal_patch_size == 2 and m.tower.out_features == 24
    clip, seg = m.prepare_video(frames(5, 32, 48))
    assert seg['grid'] == (3, 4, 6)                                # 5 frames -> 3 tubelets (last frame repeated)
    p = m.prompt([seg, 'q'])
    b = m.collate([p])
    out = m(b['input_ids'], videos=[clip], video_grid_thw=b['video_grid_thw'])
    assert out.logits.shape[:2] == b['input_ids'].shape
    with pytest.raises(ValueError, match='tubelet is 2 frames'):
        VideoLLM('mrope', vision_tower=StandInVideoTower(), temporal_patch_size=4, dim=64, depth=1, num_heads=2,
                 num_kv_heads=1)


def test_registered_video_vit_as_tower():
    import timm
    names = timm.list_models('pe_video_vit_tiny_*')
    assert names, 'the video ViTs (zoo/models/video_vit.py) are registered at import zoo'
    m = tiny('mrope', vision_tower=names[0], tower_kwargs=dict(TOWER, num_frames=4))
    assert m.tower.is_video
    clip, seg = m.prepare_video(frames(4))
    b = m.collate([m.prompt([seg, 'q'])])
    assert m(b['input_ids'], videos=[clip], video_grid_thw=b['video_grid_thw']).logits.isfinite().all()


@pytest.mark.parametrize('tp', [1, 2])
def test_image_tower_per_frame_or_pair_and_images(tp):
    m = tiny('mrope', temporal_patch_size=tp)
    clip, seg = m.prepare_video(frames(4))
    assert seg['grid'] == (4 // tp, 4, 4) and m.tower.out_features == 32 * tp
    img = m.prepare_video(frames(1))[0][0]                          # one (C, H, W) image
    p = m.prompt([{'type': 'image', 'grid': m.visual_grid(1, 32, 32)}, seg, 'q'])
    b = m.collate([p])
    out = m(b['input_ids'], videos=[clip], video_grid_thw=b['video_grid_thw'], images=[img],
            image_grid_thw=b['image_grid_thw'])
    assert out.logits.isfinite().all()
    # the frames of a temporal patch both reach the output
    clip2 = clip.clone()
    clip2[tp - 1] += 1.0
    out2 = m(b['input_ids'], videos=[clip2], video_grid_thw=b['video_grid_thw'], images=[img],
             image_grid_thw=b['image_grid_thw'])
    assert not torch.allclose(out.logits, out2.logits)


# ------------------------------------------------------------------------------------------------------- bad input
def test_bad_grid_token_count():
    m = tiny('mrope')
    clip, seg = m.prepare_video(frames(4))
    b = m.collate([m.prompt([seg, 'q'])])
    with pytest.raises(ValueError, match='describes 4 merged video tokens .* input_ids hold 8'):
        m(b['input_ids'], videos=[clip], video_grid_thw=torch.tensor([[1, 4, 4]]))
    with pytest.raises(ValueError, match=r'frames give a 2x4x4 grid .* video_grid_thw\[0\] = \[1, 8, 4\]'):
        m(b['input_ids'], videos=[clip], video_grid_thw=torch.tensor([[1, 8, 4]]))


def test_bad_videos_without_grids():
    m = tiny('mrope')
    clip, seg = m.prepare_video(frames(4))
    b = m.collate([m.prompt([seg, 'q'])])
    with pytest.raises(ValueError, match='without video_grid_thw'):
        m(b['input_ids'], videos=[clip])
    with pytest.raises(ValueError, match='8 video tokens but no videos'):
        m(b['input_ids'])
    with pytest.raises(ValueError, match='8 video tokens but no videos'):
        m.generate(b['input_ids'], video_grid_thw=b['video_grid_thw'])


def test_bad_unknown_scheme():
    with pytest.raises(ValueError, match="unknown scheme 'videoropee' \\(did you mean videorope"):
        create_video_llm('pe_vlm_tiny_videoropee')
    with pytest.raises(ValueError, match="unknown size 'huge'"):
        create_video_llm('pe_vlm_huge_mrope')
    with pytest.raises(ValueError, match='unknown multimodal RoPE scheme'):
        VideoLLM('not_a_scheme', tower_kwargs=dict(TOWER))
    with pytest.raises(ValueError, match='unknown option'):
        create_video_llm('pe_vlm_tiny_mrope', scheme='hope')


def test_bad_generate_past_max_length():
    m = tiny('mrope', max_seq_len=40)
    clip, seg = m.prepare_video(frames(4))
    b = m.collate([m.prompt([seg, 'q'])])
    length = b['input_ids'].shape[1]
    assert length < 40
    m.generate(b['input_ids'], videos=[clip], video_grid_thw=b['video_grid_thw'], max_new_tokens=40 - length)
    with pytest.raises(ValueError, match=f'generate past the maximum length.*max_new_tokens={41 - length}.*'
                                         f'max_seq_len=40'):
        m.generate(b['input_ids'], videos=[clip], video_grid_thw=b['video_grid_thw'], max_new_tokens=41 - length)
    with pytest.raises(ValueError, match='max_new_tokens must be a positive int'):
        m.generate(b['input_ids'], videos=[clip], video_grid_thw=b['video_grid_thw'], max_new_tokens=0)


def test_bad_tower_grid_for_the_merge():
    with pytest.raises(ValueError, match='24x24 px frames give a 3x3 patch grid .* 2x2 merge'):
        tiny('mrope', tower_kwargs=dict(TOWER, img_size=24, dynamic_img_size=False))
    m = tiny('mrope')  # dynamic sizes: checked per frame size
    with pytest.raises(ValueError, match='32x24 px frames give a 4x3 patch grid'):
        m.prepare_video(frames(2, 32, 24))
    with pytest.raises(ValueError, match='grid 1x4x3 patches does not allow the 2x2 merge'):
        m.prompt([{'type': 'video', 'grid': (1, 4, 3)}])


# -------------------------------------------------------------------------------------------------------- training
def _make_data(root):
    from zoo.datasets.synthetic_videoqa import make_videoqa
    make_videoqa(str(root), num_per_task=3, num_frames=12, size=32, clips_dir=None,
                 tasks=('motion_direction', 'counting'), progress=False)


MODEL_KWARGS = ['dim=64', 'depth=1', 'num_heads=2', 'num_kv_heads=1', 'mlp_hidden=64', 'tower_kwargs.img_size=32',
                'tower_kwargs.patch_size=8', 'tower_kwargs.embed_dim=32', 'tower_kwargs.depth=1',
                'tower_kwargs.num_heads=2']


def _run(data, out, epochs, *extra):
    from zoo.train.vlm import train_vlm
    return train_vlm(['--model', 'pe_vlm_tiny_hope', '--data-dir', str(data), '--output', str(out), '--epochs',
                      str(epochs), '-b', '2', '-j', '0', '--num-frames', '4', '--no-progress', '--model-ema',
                      '--lr', '1e-3', '--model-kwargs', *MODEL_KWARGS, *extra])


def _metrics(path):
    with open(os.path.join(path, 'metrics.csv')) as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_train_vlm_trains_resumes_exactly_and_keeps_ema(tmp_path, monkeypatch):
    data = tmp_path / 'vqa'
    _make_data(data)
    res = _run(data, tmp_path / 'straight', 2)
    assert res['epochs'] == 2
    rows = _metrics(tmp_path / 'straight')
    assert float(rows[1]['train_loss']) < float(rows[0]['train_loss'])
    assert rows[0]['ema_top1'] != '' and float(rows[0]['val_top1']) >= 0
    files = set(os.listdir(tmp_path / 'straight'))
    assert {'checkpoint-last.pth', 'checkpoint-best.pth', 'model.safetensors', 'model_ema.safetensors',
            'args.yaml'} <= files
    ckpt = torch.load(tmp_path / 'straight' / 'checkpoint-last.pth', weights_only=True)
    assert ckpt['meta']['pe'] == 'multimodal_rope/hope' and 'model_ema' in ckpt
    from zoo.train import vlm

    class Stop(Exception):
        pass

    def stop_after_first(self, row, *a):                             # a run killed after its first checkpoint
        if row['epoch'] == 1:
            raise Stop
    from zoo.train.loop import TrainingRun
    monkeypatch.setattr(TrainingRun, '_log_epoch', stop_after_first)
    with pytest.raises(Stop):
        _run(data, tmp_path / 'resumed', 2)
    monkeypatch.undo()
    assert len(_metrics(tmp_path / 'resumed')) == 1
    vlm.train_vlm(['--output', str(tmp_path / 'resumed'), '--resume', '--no-progress'])
    assert _metrics(tmp_path / 'resumed') == rows                    # bit-exact: data order, frames, gamma draws
    from zoo.errors import ResumeMismatchError
    with pytest.raises(ResumeMismatchError, match='--num-frames 8'):
        vlm.train_vlm(['--output', str(tmp_path / 'resumed'), '--resume', '--num-frames', '8'])


def test_train_vlm_cli_and_bad_options(tmp_path):
    from zoo.cli import SUBCOMMANDS, main
    assert 'train-vlm' in SUBCOMMANDS
    assert main(['train-vlm', '--model', 'pe_vlm_tiny_mrope', '--data-dir', str(tmp_path), '--output',
                 str(tmp_path / 'o'), '--val-fraction', '1.5']) == 2
    assert main(['train-vlm', '--model', 'pe_vlm_tiny_nope', '--data-dir', str(tmp_path), '--output',
                 str(tmp_path / 'o')]) == 2


def test_videoqa_task_counts(tmp_path):
    """The task's multiple-choice accuracy picks the letter among the options; exact match needs every token."""
    from zoo.tasks.videoqa import VideoQATask, format_question
    from zoo.datasets.videoqa import VideoQARecord
    m = tiny('mrope')
    task = VideoQATask(m)
    rec = VideoQARecord('r0', 'v.mp4', 'which?', ['x', 'y', 'z'], 2)
    item = dict(record=rec, frames=frames(4), timestamps=torch.arange(4.0))
    batch = task.to_batch(dict(items=[item, item], bad=[]), torch.device('cpu'), train=False)
    assert batch.size == 2 and batch.answer_counts == [2, 2] and batch.targets.tolist()[:1] == m.tokenizer.encode('c')
    assert 'Options: (A) x (B) y (C) z' in format_question('which?', ['x', 'y', 'z'])
    logits = torch.full((4, m.tokenizer.vocab_size), -5.0)
    a, c = task.letter_ids[0], task.letter_ids[2]
    logits[0, a], logits[0, c] = 1.0, 2.0                           # sample 0: C wins among A-C, then eos
    logits[1, m.tokenizer.eos_id] = 3.0
    logits[2, c], logits[2, 123] = 1.0, 9.0                         # sample 1: token 123 is no option: MC right,
    logits[3, m.tokenizer.eos_id] = 3.0                             # but greedy would write token 123
    counts = task.new_counts()
    task.update_counts(counts, logits, batch)
    assert (counts.n, counts.correct1, counts.correct5) == (2, 2, 1)
    out = task.forward(m, batch)
    assert out.shape == (4, m.tokenizer.vocab_size)
    assert task.loss(out, batch).isfinite()


@pytest.mark.slow
def test_train_vlm_ddp_two_cpu_processes(tmp_path):
    import subprocess
    import sys
    data, out = tmp_path / 'vqa', str(tmp_path / 'ddp')
    _make_data(data)
    env = dict(os.environ, OMP_NUM_THREADS='1')
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc-per-node', '2', '-m', 'zoo.cli',
           'train-vlm', '--model', 'pe_vlm_tiny_mrope', '--data-dir', str(data), '--output', out, '--epochs', '2',
           '-b', '1', '-j', '0', '--num-frames', '4', '--no-progress', '--model-kwargs', *MODEL_KWARGS]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert [r['epoch'] for r in _metrics(out)] == ['1', '2']
    ckpt = torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)
    assert ckpt['meta']['world_size'] == 2 and not any(k.startswith('module.') for k in ckpt['model'])
    assert proc.stdout.count('epoch 2/2') == 1  # only rank 0 logs and writes
