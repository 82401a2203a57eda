"""The contract every registered position encoding must meet, parametrised over the encoding registry.

A new encoding registered with ``@register_pos_encoding`` is picked up here without editing this file: build,
forward/backward, a new grid, token subsets (patch dropout / ``keep_indices``) or their clear refusal, gradient
checkpointing in both modes, meta-device construction, bf16, ``torch.export`` with dynamic H and W,
``torch.compile(dynamic=True)`` over three sizes without graph breaks, a state-dict round trip, and the hooks that
replace reaching in: extrapolation (``set_extrapolation`` / ``check_extrapolation``) and checkpoint mapping.
"""
from __future__ import annotations

import copy

import pytest
import torch
from torch.export import Dim

import zoo  # noqa: F401
from zoo.encodings import STRATEGIES, create_pos_encoding, get_pos_encoding_class, list_pos_encodings
from zoo.encodings.extrapolation import ALL_STRATEGIES
from zoo.models.vit import PEVisionTransformer

KINDS = list_pos_encodings()
PATCH = 8


def _build(kind: str, **kw) -> PEVisionTransformer:
    args = dict(img_size=32, patch_size=PATCH, embed_dim=64, depth=2, num_heads=2, num_classes=5,
                dynamic_img_size=True, pe=kind)
    args.update(kw)
    return PEVisionTransformer(**args)


def _x(h: int = 32, w: int = 32, b: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.randn(b, 3, h, w, generator=torch.Generator().manual_seed(seed))


def _pe_grads(model) -> dict:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_registry_is_not_empty():
    assert {'ape', 'rope_mixed', 'irpe', 'comrope', 'liere', 'peg', 'multimodal_rope'} <= set(KINDS)


@pytest.mark.parametrize('kind', KINDS)
def test_forward_backward_and_new_grid(kind):
    torch.manual_seed(0)
    model = _build(kind)
    out = model(_x())
    assert out.shape == (2, 5) and torch.isfinite(out).all()
    out.square().sum().backward()
    pe_params = [n for n, p in model.pe.named_parameters()]
    missing = [n for n, p in model.pe.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing, f'{kind}: encoding parameters without a finite gradient: {missing} of {pe_params}'
    with torch.no_grad():
        assert torch.isfinite(model(_x(48, 40))).all()


@pytest.mark.parametrize('kind', KINDS)
def test_token_subsets(kind):
    """keep_indices with every index equals the full forward; a real subset trains; PEG refuses clearly."""
    torch.manual_seed(0)
    model = _build(kind).eval()
    x = _x()
    n = (32 // PATCH) ** 2
    if not model.pe.supports_subsets:
        with pytest.raises(ValueError, match='patch_drop_rate'):
            _build(kind, patch_drop_rate=0.5)
        with pytest.raises(ValueError, match='full patch grid'):
            model.forward_features(x, keep_indices=torch.arange(n).expand(2, -1))
        return
    with torch.no_grad():
        full = model.forward_features(x)
        kept = model.forward_features(x, keep_indices=torch.arange(n).expand(2, -1))
    torch.testing.assert_close(kept, full, atol=1e-5, rtol=1e-5)
    # a per-sample subset: each kept token sees the same positions as in a forward over that subset alone
    keep = torch.stack([torch.tensor([0, 3, 5, 9, 15]), torch.tensor([1, 2, 6, 7, 12])])
    with torch.no_grad():
        both = model.forward_features(x, keep_indices=keep)
        one = model.forward_features(x[1:], keep_indices=keep[1:])
    torch.testing.assert_close(both[1:], one, atol=1e-5, rtol=1e-5)
    assert (both[0] - both[1]).abs().max() > 1e-3
    dropped = _build(kind, patch_drop_rate=0.5).train()
    out = dropped(x)
    out.sum().backward()
    assert torch.isfinite(out).all()


@pytest.mark.parametrize('reentrant', [False, True])
@pytest.mark.parametrize('kind', KINDS)
def test_gradient_checkpointing_same_gradients(kind, reentrant, monkeypatch):
    import timm.layers.config as timm_config
    monkeypatch.setattr(timm_config, '_USE_REENTRANT_CKPT', reentrant, raising=False)
    torch.manual_seed(0)
    ref = _build(kind).train()
    ckpt = copy.deepcopy(ref)
    ckpt.set_grad_checkpointing(True)
    x = _x()
    ref(x).square().sum().backward()
    ckpt(x).square().sum().backward()
    g_ref, g_ckpt = _pe_grads(ref), _pe_grads(ckpt)
    assert g_ref.keys() == g_ckpt.keys(), f'{kind}: parameters losing gradients under checkpointing: ' \
                                          f'{sorted(set(g_ref) - set(g_ckpt))}'
    for name in g_ref:
        torch.testing.assert_close(g_ckpt[name], g_ref[name], atol=1e-5, rtol=1e-4, msg=f'{kind}: {name}')


@pytest.mark.parametrize('kind', KINDS)
def test_meta_device_init(kind):
    """meta -> to_empty -> init_weights gives the buffers of a normal construction and parameters that follow
    their init distribution (final norm, head and the encoding included)."""
    torch.manual_seed(0)
    normal = _build(kind)
    with torch.device('meta'):
        meta = _build(kind)
    meta.to_empty(device='cpu')
    with torch.no_grad():  # poison the memory so that anything left uninitialised is caught
        for p in list(meta.parameters()) + list(meta.buffers()):
            p.fill_(1e20) if p.is_floating_point() else None
    meta.init_weights()
    ref_buffers = dict(normal.named_buffers())
    for name, buf in meta.named_buffers():
        torch.testing.assert_close(buf, ref_buffers[name], msg=f'{kind}: buffer {name}')
    ref_params = dict(normal.named_parameters())
    for name, p in meta.named_parameters():
        ref = ref_params[name]
        assert torch.isfinite(p).all(), f'{kind}: {name} not initialised'
        if ref.numel() < 16 or ref.std() == 0:
            torch.testing.assert_close(p, ref, msg=f'{kind}: {name} (a constant init)')
        else:
            ratio = (p.std() / ref.std()).item()
            assert 0.5 < ratio < 2, f'{kind}: {name} std {p.std():.3g} vs {ref.std():.3g}'
            assert abs(p.mean() - ref.mean()) < 0.5 * ref.std() + 1e-3, f'{kind}: {name} mean'
    with torch.no_grad():
        assert torch.isfinite(meta.eval()(_x())).all()


@pytest.mark.parametrize('kind', KINDS)
def test_bf16_model_close_to_fp32_and_independent_of_history(kind):
    torch.manual_seed(0)
    model = _build(kind).eval()
    with torch.no_grad():
        model.head.weight.normal_(0, 1.0)
        x = _x(48, 48)
        ref = model(x)
        warm = copy.deepcopy(model).to(torch.bfloat16)  # ran in fp32 before the cast (tables cached)
        fresh = _build(kind).eval()
        fresh.load_state_dict(model.state_dict())
        fresh = fresh.to(torch.bfloat16)  # never ran in fp32
        low_warm = warm(x.bfloat16()).float()
        low_fresh = fresh(x.bfloat16()).float()
    rel = ((low_fresh - ref).norm() / ref.norm()).item()
    assert rel < 0.05, f'{kind}: bf16 relative error {rel:.4f}'
    torch.testing.assert_close(low_warm, low_fresh, atol=0, rtol=0, msg=f'{kind}: bf16 logits depend on history')
    for name, buf in fresh.named_buffers():
        if 'freq' in name or 'band' in name:
            assert buf.dtype == torch.float32, f'{kind}: {name} is {buf.dtype}'


@pytest.mark.parametrize('kind', KINDS)
def test_inference_caches_never_go_stale(kind):
    """Eval without autograd may cache what depends only on the grid and the parameters (every encoding that caches
    keys it on the parameters' versions and storage): after an in-place change of every encoding parameter, after
    load_state_dict, after torch.nn.utils.vector_to_parameters (new .data) and after a dtype round trip, the logits
    equal those of a forward with autograd on (which never reads a cache)."""
    torch.manual_seed(0)
    model = _build(kind).eval()
    x = _x()
    for change in ('in place', 'load_state_dict', 'vector_to_parameters', 'dtype round trip'):
        with torch.no_grad():
            model(x)  # fills any cache
            params = list(model.pe.parameters())
            if change == 'in place':
                for p in params:
                    p.add_(torch.randn_like(p) * 0.5)
            elif change == 'load_state_dict':
                state = {k: v + 0.25 if k.startswith('pe.') and v.is_floating_point() else v
                         for k, v in model.state_dict().items()}
                model.load_state_dict(state)
            elif change == 'vector_to_parameters' and params:
                vec = torch.nn.utils.parameters_to_vector(params)
                torch.nn.utils.vector_to_parameters(vec + 0.3 * torch.randn_like(vec), params)
            elif change == 'dtype round trip':
                model.bfloat16().float()
            cached = model(x)
        with torch.enable_grad():
            fresh = model(x).detach()
        torch.testing.assert_close(cached, fresh, atol=1e-5, rtol=1e-5, msg=f'{kind}: stale table after {change}')


@pytest.mark.parametrize('kind', KINDS)
def test_validate_under_inference_mode_then_train(kind):
    """Tables cached during an eval forward under torch.inference_mode are inference tensors; the next training
    forward must not reuse them (they cannot be saved for backward): it trains, with finite gradients."""
    torch.manual_seed(0)
    model = _build(kind).eval()
    with torch.inference_mode():
        model(_x())
    model.train()
    model(_x()).square().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    with torch.inference_mode():
        model(_x())


@pytest.mark.parametrize('kind', KINDS)
def test_a_model_built_under_inference_mode_runs(kind):
    """Parameters created under torch.inference_mode are inference tensors without a version counter: the caches
    keyed on parameter versions then recompute (no 'Inference tensors do not track version counter' crash), and the
    logits equal those of the same weights built normally."""
    torch.manual_seed(0)
    model = _build(kind).eval()
    with torch.inference_mode():
        built = _build(kind).eval()
        built.load_state_dict(model.state_dict())
        got = [built(_x()), built(_x())]
    with torch.no_grad():
        want = model(_x())
    for g in got:
        torch.testing.assert_close(g, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('grad', [False, True])
@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.filterwarnings('ignore')
def test_torch_export_dynamic_hw(kind, grad):
    """Exports in eval mode with dynamic H and W, under no_grad and with autograd on (LieRE's training exponential
    must not leak an .item() into the graph)."""
    torch.manual_seed(0)
    model = _build(kind).eval()
    h, w = Dim('h', min=2, max=16), Dim('w', min=2, max=16)
    with torch.set_grad_enabled(grad):
        ep = torch.export.export(model, (_x(32, 40, b=1),), dynamic_shapes=({2: PATCH * h, 3: PATCH * w},))
        for size in [(32, 40), (48, 24)]:
            x = _x(*size, b=1, seed=1)
            torch.testing.assert_close(ep.module()(x), model(x), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.filterwarnings('ignore')
def test_torch_compile_dynamic_no_graph_breaks(kind):
    """fullgraph=True fails on any graph break; three sizes with dynamic shapes."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _build(kind).eval()
    compiled = torch.compile(model, dynamic=True, fullgraph=True, backend='eager')
    with torch.no_grad():
        for size in [(32, 32), (48, 40), (24, 56)]:
            x = _x(*size, b=1)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize('kind', KINDS)
def test_state_dict_round_trip(kind, tmp_path):
    torch.manual_seed(0)
    model = _build(kind).eval()
    path = tmp_path / 'm.pth'
    torch.save(model.state_dict(), path)
    other = _build(kind).eval()
    other.load_state_dict(torch.load(path, weights_only=True))
    x = _x()
    with torch.no_grad():
        torch.testing.assert_close(other(x), model(x), atol=0, rtol=0)
    derived = {n for n, _ in model.named_buffers()} & set(model.state_dict())
    assert not derived, f'{kind}: derived tables in the state_dict: {derived}'


@pytest.mark.parametrize('kind', KINDS)
def test_extrapolation_hook_matches_the_constructor(kind):
    """Every encoding takes 'none'; a strategy is accepted by ``set_extrapolation`` / ``check_extrapolation`` exactly
    when the constructor accepts it (``supported_extrapolations``), and a refusal names the strategy and changes
    nothing."""
    geo = dict(dim=64, num_heads=2, depth=2, grid_size=(4, 4), num_prefix_tokens=1, num_class_tokens=1)
    pe = create_pos_encoding(kind, geo)
    supported = get_pos_encoding_class(kind).supported_extrapolations()
    assert supported[0] == 'none' and set(supported) <= set(ALL_STRATEGIES)
    held = pe.extrapolation
    assert (held is None) == (supported == ('none',))
    for strategy in STRATEGIES:
        if strategy in supported:
            ext = pe.check_extrapolation(strategy)
            assert pe.extrapolation == held and (ext is None or ext.strategy == strategy)
            assert create_pos_encoding(kind, geo, dict(extrapolation=strategy)).extrapolation == ext
            pe.set_extrapolation(strategy)
            assert pe.extrapolation == ext
            held = ext
            continue
        for call in (pe.check_extrapolation, pe.set_extrapolation,
                     lambda s: create_pos_encoding(kind, geo, dict(extrapolation=s))):
            with pytest.raises(ValueError, match=f"extrapolation '{strategy}' does not apply"):
                call(strategy)
        assert pe.extrapolation == held


@pytest.mark.parametrize('kind', KINDS)
def test_checkpoint_hook_takes_its_own_zoo_layout_tensors_unchanged(kind):
    """``map_checkpoint('zoo', ...)``: a checkpoint of the same model loads as it is (tensors taken come back under
    the same names, unchanged; the rest is left for the backbone)."""
    torch.manual_seed(0)
    model = _build(kind)
    sd = model.state_dict()
    rest = dict(sd)
    out = model.pe.map_checkpoint('zoo', rest, 'pe.')
    assert set(out).isdisjoint(rest) and set(out) | set(rest) == set(sd)
    assert all(k.startswith('pe.') and torch.equal(v, sd[k]) for k, v in out.items())
    with pytest.raises(ValueError, match='unknown checkpoint layout'):
        model.pe.map_checkpoint('timm', {})


# ------------------------------------------------------------------------------------------------ video (3D) grids
# Every kind that takes a video geometry (``supports_video``) also meets the contract on a (T, H, W) grid, built as the
# video backbone builds it: ``grid_size=(T', H', W')`` in the geometry, ``Positions(grid=(T, H, W))`` at forward, no
# prefix tokens. The tiny backbone below is the seam alone (embed -> blocks with the encoding's terms -> mix).
from torch import nn  # noqa: E402

from zoo.encodings import Positions  # noqa: E402
from zoo.models.attention import Block  # noqa: E402

VIDEO_KINDS = [k for k in KINDS if get_pos_encoding_class(k).supports_video]
IMAGE_ONLY_KINDS = [k for k in KINDS if not get_pos_encoding_class(k).supports_video]
GRID3 = (2, 4, 4)


class _VideoSeam(nn.Module):
    """Tokens ``(B, T, H, W, 3)`` -> linear embed -> the encoding's embed -> subset -> blocks (terms, mix)."""

    def __init__(self, kind: str, grid=GRID3, dim: int = 64, depth: int = 2, heads: int = 2):
        super().__init__()
        self.depth = depth
        self.proj = nn.Linear(3, dim)
        self.pe = create_pos_encoding(kind, dict(dim=dim, num_heads=heads, depth=depth, grid_size=tuple(grid),
                                                 num_prefix_tokens=0, num_class_tokens=0))
        self.blocks = nn.ModuleList([Block(dim, heads, qkv_bias=True) for _ in range(depth)])

    def forward(self, x: torch.Tensor, keep_indices: torch.Tensor | None = None) -> torch.Tensor:
        b, t, h, w, _ = x.shape
        pos = Positions((t, h, w))
        tok = self.pe.embed(self.proj(x).flatten(1, 3), pos)
        if keep_indices is not None:
            pos.require_full_grid(type(self.pe).__name__) if not self.pe.supports_subsets else None
            tok = tok.gather(1, keep_indices[..., None].expand(-1, -1, tok.shape[-1]))
            pos = Positions((t, h, w), keep_indices=keep_indices)
        terms = self.pe.attn_terms(pos, tok.dtype, tok.device) or [None] * self.depth
        for i, blk in enumerate(self.blocks):
            tok = self.pe.mix(blk(tok, terms[i]), pos, i)
        return tok


def _v(t: int = 2, h: int = 4, w: int = 4, b: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.randn(b, t, h, w, 3, generator=torch.Generator().manual_seed(seed))


def test_video_kinds_cover_the_3d_encodings():
    assert {'ape', 'st_ape', 'sincos1d', 'sincos3d', 'nope', 'peg', 'fourier', 'rope3d', 'rope_mixed', 'comrope',
            'liere', 'irpe'} <= set(VIDEO_KINDS)
    assert set(IMAGE_ONLY_KINDS) == {'sincos', 'rope_axial', 'sincos_lape', 'urpe', 'loope'}


@pytest.mark.parametrize('kind', IMAGE_ONLY_KINDS)
def test_video_geometry_refused_by_image_only_kinds(kind):
    with pytest.raises(ValueError, match='video geometry'):
        create_pos_encoding(kind, dict(dim=64, num_heads=2, depth=2, grid_size=GRID3, num_prefix_tokens=0))


@pytest.mark.parametrize('kind', VIDEO_KINDS)
def test_video_forward_backward_and_more_frames_bigger_frame(kind):
    torch.manual_seed(0)
    model = _VideoSeam(kind)
    out = model(_v())
    assert out.shape == (2, 32, 64) and torch.isfinite(out).all()
    out.square().sum().backward()
    missing = [n for n, p in model.pe.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing, f'{kind}: encoding parameters without a finite gradient on a 3D grid: {missing}'
    with torch.no_grad():  # 2x frames and 1.5x frame size (4x6x6 grid)
        assert torch.isfinite(model(_v(4, 6, 6))).all()


@pytest.mark.parametrize('kind', VIDEO_KINDS)
def test_video_token_subsets(kind):
    """keep_indices with every index equals the full forward; per-sample subsets see original positions."""
    torch.manual_seed(0)
    model = _VideoSeam(kind).eval()
    x, n = _v(), 32
    if not model.pe.supports_subsets:
        with pytest.raises(ValueError, match='full patch grid'):
            model(x, keep_indices=torch.arange(n).expand(2, -1))
        return
    with torch.no_grad():
        full = model(x)
        kept = model(x, keep_indices=torch.arange(n).expand(2, -1))
        torch.testing.assert_close(kept, full, atol=1e-5, rtol=1e-5)
        keep = torch.stack([torch.tensor([0, 3, 5, 9, 17, 31]), torch.tensor([1, 2, 16, 20, 25, 30])])
        both = model(x, keep_indices=keep)
        one = model(x[1:], keep_indices=keep[1:])
    torch.testing.assert_close(both[1:], one, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('kind', VIDEO_KINDS)
@pytest.mark.filterwarnings('ignore')
def test_video_torch_export_dynamic_thw(kind):
    torch.manual_seed(0)
    model = _VideoSeam(kind).eval()
    t, h, w = Dim('t', min=2, max=8), Dim('h', min=2, max=8), Dim('w', min=2, max=8)
    with torch.no_grad():
        ep = torch.export.export(model, (_v(2, 4, 5, b=1),), dynamic_shapes=({1: t, 2: h, 3: w},))
        for size in [(2, 4, 5), (3, 6, 4)]:
            x = _v(*size, b=1, seed=1)
            torch.testing.assert_close(ep.module()(x), model(x), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize('kind', VIDEO_KINDS)
@pytest.mark.filterwarnings('ignore')
def test_video_torch_compile_dynamic_no_graph_breaks(kind):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _VideoSeam(kind).eval()
    compiled = torch.compile(model, dynamic=True, fullgraph=True, backend='eager')
    with torch.no_grad():
        for size in [(2, 4, 4), (3, 5, 4), (4, 3, 6)]:
            x = _v(*size, b=1)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize('kind', VIDEO_KINDS)
def test_video_meta_device_init(kind):
    """meta -> to_empty -> reset_parameters gives the encoding's init distribution and a finite forward."""
    torch.manual_seed(0)
    normal = _VideoSeam(kind)
    with torch.device('meta'):
        meta = _VideoSeam(kind)
    meta.to_empty(device='cpu')
    with torch.no_grad():
        for p in meta.parameters():
            p.fill_(1e20)
    for m in meta.modules():
        if m is not meta and not isinstance(m, type(meta.pe)) and hasattr(m, 'reset_parameters'):
            m.reset_parameters()
    meta.pe.reset_parameters()
    ref_params = dict(normal.pe.named_parameters())
    for name, p in meta.pe.named_parameters():
        ref = ref_params[name]
        assert torch.isfinite(p).all(), f'{kind}: {name} not initialised'
        if ref.numel() < 16 or ref.std() == 0:
            torch.testing.assert_close(p, ref, msg=f'{kind}: {name} (a constant init)')
        else:
            ratio = (p.std() / ref.std()).item()
            assert 0.5 < ratio < 2, f'{kind}: {name} std {p.std():.3g} vs {ref.std():.3g}'
    with torch.no_grad():
        assert torch.isfinite(meta.eval()(_v())).all()


# ------------------------------------------------------------------------------------------ the seam's newer hooks
# Each hook of AttnTerm that only some encodings use (value / output transforms, the post-softmax multiplier, the
# bias per block of queries) is held to a hand computation here by a toy term, so that breaking the hook in the
# attention fails a test even before an encoding that uses it exists.
import torch.nn.functional as F  # noqa: E402

from zoo.encodings import AttnTerm  # noqa: E402
from zoo.models.attention import Attention, KVCache  # noqa: E402

_L, _H, _D = 7, 2, 8


def _toy_attention(seed: int = 0) -> Attention:
    torch.manual_seed(seed)
    attn = Attention(_H * _D, _H, qkv_bias=True).eval()
    return attn


def _qkv(attn: Attention, x: torch.Tensor):
    q, k, v = attn.qkv(x).reshape(x.shape[0], x.shape[1], 3, _H, _D).permute(2, 0, 3, 1, 4)
    return q, k, v


def _finish(attn: Attention, o: torch.Tensor) -> torch.Tensor:
    return attn.proj(o.transpose(1, 2).reshape(o.shape[0], o.shape[2], _H * _D))


class _ScaleVO(AttnTerm):
    """Toy value / output transform: v of token j times ``w[j]``, the output of query i times ``u[i]``."""
    tensor_fields = ('w', 'u')

    def __init__(self, w, u):
        self.w, self.u = w, u

    def transform_values(self, v):
        return v * self.w[..., -v.shape[-2]:, None]

    def transform_output(self, o):
        return o * self.u[..., -o.shape[-2]:, None]


class _Multiplier(AttnTerm):
    """Toy post-softmax multiplier ``C`` (may be negative; rows not renormalised)."""
    needs_attn_weights = True
    tensor_fields = ('c',)

    def __init__(self, c):
        self.c = c

    def attn_multiplier(self, q, k):
        return self.c


class _RowBias(AttnTerm):
    """Toy blocked bias: rows of a known table, recording which rows the attention asked for."""
    tensor_fields = ('table',)

    def __init__(self, table, block):
        self.table, self.query_block, self.asked = table, block, []

    def bias(self, q, k, scale):
        self.asked.append(('all', q.shape[-2]))
        return self.table[..., self.table.shape[-2] - q.shape[-2]:, :]

    def bias_rows(self, q, k, scale, start, stop):
        self.asked.append((start, stop))
        assert q.shape[-2] == stop - start
        return self.table[..., start:stop, :]


@pytest.mark.parametrize('fused', [True, False])
def test_value_and_output_transforms_match_a_hand_computation(fused):
    attn = _toy_attention()
    attn.fused_attn = fused
    x = torch.randn(2, _L, _H * _D)
    w, u = torch.rand(1, 1, _L) + 0.5, torch.rand(1, 1, _L) + 0.5
    q, k, v = _qkv(attn, x)
    p = ((q @ k.transpose(-2, -1)) * _D ** -0.5).softmax(-1)
    want = _finish(attn, (p @ (v * w[..., None])) * u[..., None])
    with torch.no_grad():
        got = attn(x, _ScaleVO(w, u))
        torch.testing.assert_close(got, want.detach(), atol=1e-5, rtol=1e-5)
        # KV cache: each step's values are transformed at their own tokens before they are cached
        full = attn(x, _ScaleVO(w, u), is_causal=True)
        cache = KVCache(1)
        attn(x[:, :4], _ScaleVO(w[..., :4], u[..., :4]), is_causal=True, kv_cache=cache)
        step = attn(x[:, 4:], _ScaleVO(w, u), is_causal=True, kv_cache=cache)
    torch.testing.assert_close(step, full[:, 4:], atol=1e-5, rtol=1e-5)


def test_post_softmax_multiplier_matches_a_hand_computation_and_leaves_sdpa():
    attn = _toy_attention(1)
    attn.fused_attn = True  # the term's declaration alone must send it to the explicit path
    x = torch.randn(2, _L, _H * _D)
    c = torch.randn(1, _H, _L, _L)
    q, k, v = _qkv(attn, x)
    p = ((q @ k.transpose(-2, -1)) * _D ** -0.5).softmax(-1) * c
    want = _finish(attn, p @ v)
    with torch.no_grad():
        torch.testing.assert_close(attn(x, _Multiplier(c)), want.detach(), atol=1e-5, rtol=1e-5)
        plain = attn(x)
    assert (plain - want).abs().max() > 1e-2


class _AddInput(AttnTerm):
    """Toy input term: ``e`` added to the attention's input tokens before the q/k/v projection (LaPE's hook)."""
    tensor_fields = ('e',)

    def __init__(self, e):
        self.e = e

    def transform_input(self, x):
        return x + self.e


@pytest.mark.parametrize('fused', [True, False])
def test_input_term_matches_a_hand_computation(fused):
    """``transform_input``: q, k and v are all projected from ``x + e``; the output is ``attn(x + e)``, not ``x``'s."""
    attn = _toy_attention(3)
    attn.fused_attn = fused
    x, e = torch.randn(2, _L, _H * _D), torch.randn(1, _L, _H * _D)
    q, k, v = _qkv(attn, x + e)
    want = _finish(attn, ((q @ k.transpose(-2, -1)) * _D ** -0.5).softmax(-1) @ v)
    with torch.no_grad():
        torch.testing.assert_close(attn(x, _AddInput(e)), want.detach(), atol=1e-5, rtol=1e-5)
        assert (attn(x) - want).abs().max() > 1e-2


@pytest.mark.parametrize('causal', [False, True])
def test_blocked_bias_matches_the_whole_bias(causal):
    """A term with query_block gets its bias per block of queries (never whole) on the fused path, and the output
    equals SDPA with the whole bias, with causal and key padding masks and a KV-cache offset."""
    attn = _toy_attention(2)
    attn.fused_attn = True
    x = torch.randn(2, _L, _H * _D)
    table = torch.randn(1, _H, _L, _L)
    key_mask = torch.ones(2, _L, dtype=torch.bool)
    key_mask[1, 1] = False
    q, k, v = _qkv(attn, x)
    allowed = key_mask[:, None, None, :] & (torch.ones(_L, _L).tril().bool() if causal else True)
    want = _finish(attn, F.scaled_dot_product_attention(q, k, v, attn_mask=table.masked_fill(~allowed, float('-inf'))))
    term = _RowBias(table, block=3)
    with torch.no_grad():
        got = attn(x, term, attn_mask=key_mask, is_causal=causal)
    torch.testing.assert_close(got, want.detach(), atol=1e-5, rtol=1e-5)
    assert term.asked == [(0, 3), (3, 6), (6, 7)]
    # explicit path: the whole bias, once
    attn.fused_attn = False
    term = _RowBias(table, block=3)
    with torch.no_grad():
        torch.testing.assert_close(attn(x, term, attn_mask=key_mask, is_causal=causal), want.detach(),
                                   atol=1e-5, rtol=1e-5)
    assert term.asked == [('all', _L)]
    if causal:  # KV cache: the new queries are the last rows of the key sequence
        attn.fused_attn = True
        cache = KVCache(1)
        with torch.no_grad():
            attn(x[:, :2], _RowBias(table[..., :2, :2], 3), is_causal=True, kv_cache=cache)
            term = _RowBias(table, block=3)
            step = attn(x[:, 2:], term, is_causal=True, kv_cache=cache)
        plain = _finish(attn, F.scaled_dot_product_attention(
            q, k, v, attn_mask=table.masked_fill(~torch.ones(_L, _L).tril().bool(), float('-inf'))))
        torch.testing.assert_close(step, plain[:, 2:].detach(), atol=1e-5, rtol=1e-5)
        assert term.asked == [(2, 5), (5, 7)]
