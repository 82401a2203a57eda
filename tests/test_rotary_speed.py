"""The eager CPU fast path of :class:`zoo.encodings.RotaryTerm` (one complex multiply per tensor, issue 24): the same
bits as timm's ``apply_rot_embed``, the same gradients, one kernel instead of six, and the real kernel wherever the
fast path does not apply (compile, export, bf16, non-rotation tables)."""
import pytest
import timm
import torch
from timm.layers.pos_embed_sincos import apply_rot_embed
from torch.profiler import ProfilerActivity, profile

import zoo  # noqa: F401
from zoo.encodings import RotaryTerm
from zoo.encodings.rotation import apply_rope, rope_sin_cos


def _qkv(b=2, heads=4, kv_heads=4, n=11, d=16, dtype=torch.float32):
    """q, k, v as the attention splits them from the fused projection: strided views of one buffer."""
    qkv = torch.randn(b, n, heads + 2 * kv_heads, d, dtype=dtype).transpose(1, 2)
    return qkv.split([heads, kv_heads, kv_heads], dim=1)


@pytest.mark.parametrize('table_heads', [1, 4])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_fast_path_gives_timm_bits(table_heads, dtype):
    torch.manual_seed(0)
    q, k, _ = _qkv(dtype=dtype)
    angles = torch.randn(1, table_heads, 11, 8, dtype=dtype) * 20
    term = RotaryTerm.from_angles(angles)
    rq, rk = term.rotate(q, k)
    assert term._complex is not None  # the fast path ran
    sin, cos = rope_sin_cos(angles)
    for out, x in ((rq, q), (rk, k)):
        assert out.dtype == x.dtype and out.shape == x.shape
        want = apply_rot_embed(x.contiguous(), sin, cos)
        assert torch.equal(out, want), (out - want).abs().max()


def test_fast_path_with_prefix_tokens_scale_and_gqa():
    torch.manual_seed(1)
    q, k, _ = _qkv(heads=4, kv_heads=2, n=13)
    angles = torch.randn(1, 2, 12, 8) * 5
    term = RotaryTerm.from_angles(angles, num_prefix_tokens=1, scale=1.3)
    rq, rk = term.rotate(q, k)
    assert term._complex is not None
    slow = RotaryTerm(term.sin, term.cos)  # pairs_equal False: the real kernel
    sq, sk = slow.rotate(q, k)
    assert slow._complex is None
    assert torch.equal(rq, sq) and torch.equal(rk, sk)
    assert torch.equal(rq[:, :, 0], q[:, :, 0] * 1.3)  # the prefix token: identity (times the YaRN scale)


def test_fast_path_gradients_equal_the_real_kernel():
    torch.manual_seed(2)
    angles = (torch.randn(1, 4, 11, 8) * 3).requires_grad_()
    x = torch.randn(2, 4, 11, 16, requires_grad=True)
    grads = []
    for fast in (True, False):
        term = RotaryTerm.from_angles(angles)
        term.pairs_equal = fast
        q, k = term.rotate(x, x * 2)
        (q.square().sum() + (k * 0.5).sum()).backward()
        assert (term._complex is not None) == fast
        grads.append((x.grad.clone(), angles.grad.clone()))
        x.grad = angles.grad = None
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_with_tensors_builds_its_own_table():
    """Gradient checkpointing hands the term new sin/cos tensors: the copy must not reuse the first table."""
    angles = torch.randn(1, 1, 5, 4)
    term = RotaryTerm.from_angles(angles)
    x = torch.randn(1, 2, 5, 8)
    term.rotate(x, x)
    sin = term.sin.clone().requires_grad_()
    copy = term.with_tensors((sin, term.cos))
    q, _ = copy.rotate(x, x)
    q.sum().backward()
    assert sin.grad is not None and sin.grad.abs().sum() > 0


@pytest.mark.parametrize('case', ['bf16', 'half_layout', 'not_a_rotation', 'compiling'])
def test_real_kernel_where_the_fast_path_does_not_apply(case, monkeypatch):
    angles = torch.randn(1, 1, 5, 4)
    x = torch.randn(1, 2, 5, 8)
    term = RotaryTerm.from_angles(angles, layout='half' if case == 'half_layout' else 'interleaved')
    if case == 'bf16':
        x = x.bfloat16()
    if case == 'not_a_rotation':
        term = RotaryTerm(term.sin, term.cos)
    if case == 'compiling':
        monkeypatch.setattr(torch.compiler, 'is_compiling', lambda: True)
    q, _ = term.rotate(x, x)
    assert term._complex is None
    assert torch.equal(q, apply_rope(x, term.sin, term.cos, term.layout))


def _rotation_ops(model, x):
    with torch.inference_mode():
        model(x)  # builds and caches the tables
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            model(x)
    return {e.key: e.count for e in prof.key_averages()}


@pytest.mark.parametrize('kind', ['rope_axial', 'rope_mixed'])
def test_rope_vit_rotates_without_elementwise_passes(kind):
    """The profile behind issue 24: timm's kernel spends neg, stack/cat and two multiplies per tensor. The fast path
    leaves one multiply per tensor and no neg / cat inside the blocks."""
    model = timm.create_model(f'pe_vit_small_patch16_{kind}_224', depth=2, num_classes=0, img_size=64).eval()
    ops = _rotation_ops(model, torch.randn(1, 3, 64, 64))
    assert ops.get('aten::neg', 0) == 0
    assert ops.get('aten::mul', 0) == 2 * 2  # q and k of two blocks
    assert ops.get('aten::cat', 0) <= 1  # the class token only


def test_rope3d_video_uses_the_fast_path_and_vjepa2_pairing_does_not():
    x = torch.randn(1, 3, 4, 32, 32)
    for pairing, fast in (('interleaved', True), ('vjepa2', False)):
        model = timm.create_model('pe_video_vit_small_patch16_rope3d_224', img_size=32, num_frames=4, depth=1,
                                  num_classes=0, pe_kwargs=dict(pairing=pairing)).eval()
        ops = _rotation_ops(model, x)
        assert (ops.get('aten::neg', 0) == 0) == fast, pairing


@pytest.mark.filterwarnings('ignore')
@pytest.mark.parametrize('name', ['pe_vit_tiny_patch16_rope_mixed_224', 'pe_vit_tiny_patch16_gta_224'])
def test_compiled_inference_rotates_with_the_complex_op(name):
    """torch.compile in CPU inference: the rotation is the opaque op zoo::rotary_complex (the eager complex kernel;
    inductor has no complex numbers), giving eager's bits; with autograd on the graph keeps the real kernel."""
    model = timm.create_model(name, img_size=64).eval()
    x = torch.randn(2, 3, 64, 64)
    for grad in (False, True):
        graphs = []

        def backend(gm, example_inputs):
            graphs.append(str(gm.graph))
            return gm.forward

        torch._dynamo.reset()
        compiled = torch.compile(model, backend=backend, fullgraph=True)
        with torch.set_grad_enabled(grad):
            got, want = compiled(x), model(x)
        assert torch.equal(got, want)
        assert ('rotary_complex' in graphs[0]) == (not grad)
