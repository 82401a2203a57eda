"""Registry-wide model tests (timm style) plus the foundation PEs' defining properties."""

import pytest
import timm
import torch

import zoo  # noqa: F401
from zoo.encodings import Positions, create_pos_encoding, list_pos_encodings
from zoo.encodings.rotary import RoPEAxial, RoPEMixed, RotaryTerm
from zoo.models import CheckpointMismatchError

ALL_MODELS = timm.list_models('pe_vit_*')
TINY = [n for n in ALL_MODELS if '_tiny_' in n] + ['pe_vit_small_patch16_irpe_qkv_224']
SMALL = dict(depth=2)  # registered sizes, fewer blocks, to keep the suite fast


def _small(name):
    return dict(depth=6) if 'peg0to5' in name else SMALL


def _families():
    """One tiny model per PE variant (registered suffix)."""
    return sorted(set(TINY))


def test_registry_names():
    expected_pes = ['ape', 'sincos', 'nope', 'peg', 'peg0to5', 'fourier', 'rope_axial', 'rope_mixed', 'rope_mixed_ape',
                    'irpe_k', 'comrope_ap', 'comrope_ld', 'liere']
    for size in ('tiny', 'small', 'base'):
        for pe in expected_pes:
            assert f'pe_vit_{size}_patch16_{pe}_224' in ALL_MODELS
    assert 'pe_vit_small_patch16_irpe_qkv_224' in ALL_MODELS
    # our names never shadow a timm model
    timm_names = set(timm.list_models(module='vision_transformer')) | set(timm.list_models(module='eva'))
    assert not timm_names & set(ALL_MODELS)


@pytest.mark.parametrize('name', ALL_MODELS)
def test_forward_backward_any_resolution(name):
    torch.manual_seed(0)
    model = timm.create_model(name, dynamic_img_size=True, num_classes=7, **_small(name))
    for h, w in [(224, 224), (160, 160), (320, 320), (224, 320)]:
        model.zero_grad()
        x = torch.randn(1, 3, h, w)
        out = model(x)
        assert out.shape == (1, 7) and torch.isfinite(out).all()
        feats = model.forward_features(x)
        assert feats.shape == (1, model.num_prefix_tokens + (h // 16) * (w // 16), model.embed_dim)
    out.sum().backward()
    no_grad = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not no_grad, f'parameters without gradient: {no_grad}'


@pytest.mark.parametrize('name', _families())
def test_set_input_size_state_dict_and_classifier(name):
    model = timm.create_model(name, img_size=224, **_small(name)).eval()
    model.set_input_size(img_size=(160, 192))
    assert model(torch.randn(1, 3, 160, 192)).shape == (1, 1000)
    sd = model.state_dict()
    # only learned parameters (and no derived buffers) are saved
    assert set(sd) == {n for n, _ in model.named_parameters()} | {n for n, b in model.named_buffers() if n in sd}
    assert not [n for n, _ in model.named_buffers() if n in sd]
    clone = timm.create_model(name, img_size=(160, 192), **_small(name)).eval()
    clone.load_state_dict(sd, strict=True)
    x = torch.randn(2, 3, 160, 192)
    with torch.no_grad():
        torch.testing.assert_close(clone(x), model(x))
    model.reset_classifier(5)
    assert model(torch.randn(1, 3, 160, 192)).shape == (1, 5)
    # learned PE parameters are excluded from weight decay
    nwd = model.no_weight_decay()
    pe_params = [f'pe.{n}' for n, p in model.pe.named_parameters() if p.ndim > 1 and 'mlp' not in n]
    pe_params = [n for n in pe_params if not n.endswith('.weight') or 'pegs' not in n]  # PEG convs are weights
    if 'seqpe' in name:  # SeqPE's position encoder is a network: its layers' weights decay like the backbone's
        pe_params = [n for n in pe_params if not (n.endswith('.weight') and n.startswith(('pe.blocks.', 'pe.proj.')))]
    assert set(pe_params) <= nwd, set(pe_params) - nwd


@pytest.mark.parametrize('name', _families())
def test_fused_matches_explicit_attention(name):
    torch.manual_seed(0)
    model = timm.create_model(name, dynamic_img_size=True, **_small(name)).eval()
    x = torch.randn(2, 3, 96, 128)
    with torch.no_grad():
        fused = model(x)
        for blk in model.blocks:
            blk.attn.fused_attn = False
        explicit = model(x)
    torch.testing.assert_close(fused, explicit, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize('name', _families())
def test_forward_intermediates(name):
    model = timm.create_model(name, dynamic_img_size=True, **_small(name)).eval()
    x = torch.randn(1, 3, 96, 128)
    final, inter = model.forward_intermediates(x, indices=2)
    assert [t.shape for t in inter] == [(1, model.embed_dim, 6, 8)] * 2
    torch.testing.assert_close(final, model.forward_features(x))


def test_bad_input_sizes_raise_clear_errors():
    model = timm.create_model('pe_vit_tiny_patch16_rope_mixed_224', **SMALL)
    with pytest.raises(ValueError, match=r'200x200 px differs .* dynamic_img_size=True'):
        model(torch.randn(1, 3, 200, 200))
    model = timm.create_model('pe_vit_tiny_patch16_rope_mixed_224', dynamic_img_size=True, **SMALL)
    with pytest.raises(ValueError, match=r'230x224 px is not divisible by the patch size 16x16.*dynamic_img_pad'):
        model(torch.randn(1, 3, 230, 224))
    padded = timm.create_model('pe_vit_tiny_patch16_rope_mixed_224', dynamic_img_size=True, dynamic_img_pad=True,
                               **SMALL)
    assert padded(torch.randn(1, 3, 230, 224)).shape == (1, 1000)


def test_unknown_names_and_options():
    with pytest.raises(RuntimeError, match='Unknown model'):
        timm.create_model('pe_vit_tiny_patch16_bogus_224')
    with pytest.raises(ValueError, match="unknown position encoding 'bogus'"):
        timm.create_model('pe_vit_tiny_patch16_ape_224', pe='bogus')
    with pytest.raises(ValueError, match=r"unknown pe_kwargs \['tehta'\].*theta"):
        timm.create_model('pe_vit_tiny_patch16_rope_axial_224', pe_kwargs=dict(tehta=3))


def test_tiny_cifar_model_and_timm_options():
    model = timm.create_model(
        'pe_vit_tiny_patch16_rope_mixed_224', img_size=32, patch_size=4, embed_dim=64, depth=3, num_heads=2,
        num_classes=10, mlp_ratio=2, qkv_bias=False, reg_tokens=2, init_values=1e-5, fc_norm=True,
        global_pool='avg', act_layer='quick_gelu', norm_layer='layernorm', drop_path_rate=0.1, pre_norm=True)
    assert model.num_prefix_tokens == 3
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    model = timm.create_model('pe_vit_tiny_patch16_ape_224', img_size=32, patch_size=4, patch_drop_rate=0.5,
                              class_token=False, global_pool='avg').train()
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 1000)
    with pytest.raises(ValueError, match='patch_drop_rate'):  # PEG's convolution needs the full grid
        timm.create_model('pe_vit_tiny_patch16_peg_224', patch_drop_rate=0.5)


# ------------------------------------------------------------------------------------------- PE properties
def _rotated_scores(term: RotaryTerm, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    q, k = term.rotate(q, k)
    return q @ k.transpose(-2, -1)


@pytest.mark.parametrize('cls', [RoPEAxial, RoPEMixed])
def test_rope_scores_depend_only_on_relative_offset(cls):
    torch.manual_seed(0)
    pe = cls(dim=64, num_heads=2, depth=1)
    x, y = torch.randint(0, 14, (2, 30)).float()
    q, k = torch.randn(2, 1, 2, 30, 32).unbind(0)
    base = _rotated_scores(RotaryTerm.from_angles(pe.angles(x, y).reshape(1, -1, 30, 16)), q, k)
    shifted = _rotated_scores(RotaryTerm.from_angles(pe.angles(x + 5, y - 3).reshape(1, -1, 30, 16)), q, k)
    torch.testing.assert_close(base, shifted, atol=1e-4, rtol=1e-4)
    # ... and do depend on position (the test can fail)
    moved = _rotated_scores(RotaryTerm.from_angles(pe.angles(x.flip(0), y).reshape(1, -1, 30, 16)), q, k)
    assert (moved - base).abs().max() > 1e-2


def test_prefix_tokens_are_not_rotated():
    model = timm.create_model('pe_vit_tiny_patch16_rope_axial_224', reg_tokens=2, **SMALL)
    pos = Positions((1, 14, 14), num_prefix_tokens=3, num_class_tokens=1)
    term = model.pe.attn_terms(pos, torch.float32, torch.device('cpu'))[0]
    q = torch.randn(1, 3, 199, 64)
    rq, _ = term.rotate(q, q)
    torch.testing.assert_close(rq[:, :, :3], q[:, :, :3], rtol=0, atol=0)
    assert not torch.allclose(rq[:, :, 4:], q[:, :, 4:])


def test_peg_depends_on_content_and_zero_padding():
    torch.manual_seed(0)
    peg = create_pos_encoding('peg', dict(dim=8, depth=2), dict(after_blocks=(1,)))
    pos = Positions((1, 5, 6), num_prefix_tokens=1, num_class_tokens=1)
    x = torch.ones(1, 31, 8)
    out = peg.mix(x, pos, 1)
    torch.testing.assert_close(out[:, 0], x[:, 0])  # class token passes through
    grid = out[0, 1:].reshape(5, 6, 8)
    assert not torch.allclose(grid[0, 0], grid[2, 2])  # constant input: the border differs (zero padding)
    torch.testing.assert_close(grid[2, 2], grid[2, 3])  # interior of a constant map is constant
    x2 = x.clone()
    x2[0, 1 + 2 * 6 + 2] += 1.0  # change one token's content
    out2 = peg.mix(x2, pos, 1)[0, 1:].reshape(5, 6, 8)
    assert not torch.allclose(out2[2, 3], grid[2, 3])  # its neighbour's output changes
    torch.testing.assert_close(peg.mix(x, pos, 0), x)  # no PEG after block 0 here


@pytest.mark.parametrize('kind', ['sincos', 'fourier'])
def test_embeddings_finite_at_4x_grid(kind):
    pe = create_pos_encoding(kind, dict(dim=64, grid_size=(14, 14)))
    x = torch.zeros(1, 1 + 56 * 56, 64)
    out = pe.embed(x, Positions((1, 56, 56), 1, 1))
    assert torch.isfinite(out).all() and out[:, 1:].abs().sum() > 0
    torch.testing.assert_close(out[:, 0], x[:, 0])


def test_ape_resamples_bicubically_like_timm():
    from timm.layers import resample_abs_pos_embed
    pe = create_pos_encoding('ape', dict(dim=16, grid_size=(4, 4), num_prefix_tokens=1))
    x = torch.zeros(1, 1 + 6 * 8, 16)
    out = pe.embed(x, Positions((1, 6, 8), 1, 1))
    ref = resample_abs_pos_embed(pe.pos_embed, new_size=[6, 8], old_size=[4, 4], num_prefix_tokens=1)
    torch.testing.assert_close(out, ref)


def test_every_registered_encoding_is_used_by_a_model():
    used = {m.split('_patch16_')[1].rsplit('_224', 1)[0] for m in ALL_MODELS}
    assert {'ape', 'sincos', 'nope', 'peg', 'fourier', 'rope_axial', 'rope_mixed', 'rope_mixed_ape'} <= used
    assert {'ape', 'sincos', 'nope', 'peg', 'fourier', 'rope_axial', 'rope_mixed'} <= set(list_pos_encodings())


# ------------------------------------------------------------------------------------------- precision, export
@pytest.mark.parametrize('name', ['pe_vit_small_patch16_rope_mixed_224', 'pe_vit_small_patch16_rope_axial_224',
                                  'pe_vit_small_patch16_ape_224', 'pe_vit_small_patch16_fourier_224',
                                  'pe_vit_small_patch16_sincos_224', 'pe_vit_small_patch16_peg_224'])
def test_bf16_autocast_close_to_fp32(name):
    torch.manual_seed(0)
    model = timm.create_model(name, dynamic_img_size=True, depth=4, num_classes=100).eval()
    with torch.no_grad():
        model.head.weight.normal_(0, 1.0)  # logits of O(1), so a relative error is meaningful
        for size in (224, 512):
            x = torch.randn(1, 3, size, size)
            ref = model(x)
            with torch.autocast('cpu', dtype=torch.bfloat16):
                low = model(x).float()
            rel = (low - ref).norm() / ref.norm()
            assert rel < 0.02, f'{name} at {size}: relative error {rel:.4f}'


@pytest.mark.parametrize('name', _families())
@pytest.mark.filterwarnings('ignore::torch.jit.TracerWarning', 'ignore::FutureWarning')
def test_export_at_fixed_size(name):
    model = timm.create_model(name, **_small(name)).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        traced = torch.jit.trace(model, x, check_trace=False)
        torch.testing.assert_close(traced(x), model(x), atol=1e-4, rtol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize('name', ['pe_vit_tiny_patch16_ape_224', 'pe_vit_tiny_patch16_rope_mixed_224',
                                  'pe_vit_tiny_patch16_peg_224', 'pe_vit_tiny_patch16_fourier_224',
                                  'pe_vit_tiny_patch16_sincos_224', 'pe_vit_tiny_patch16_rope_axial_224',
                                  'pe_vit_tiny_patch16_irpe_k_224', 'pe_vit_tiny_patch16_comrope_ap_224',
                                  'pe_vit_tiny_patch16_liere_224'])
def test_torch_compile_dynamic_two_sizes(name):
    torch._dynamo.reset()
    model = timm.create_model(name, dynamic_img_size=True, depth=1, embed_dim=64, num_heads=2).eval()
    compiled = torch.compile(model, dynamic=True)
    with torch.no_grad():
        for h, w in [(64, 64), (96, 128)]:
            x = torch.randn(1, 3, h, w)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-3, rtol=1e-3)


# ------------------------------------------------------------------------------------------- timm equivalence
TIMM_PAIRS = [
    ('vit_small_patch16_224', 'pe_vit_small_patch16_ape_224'),
    ('vit_small_patch16_rope_224', 'pe_vit_small_patch16_rope_axial_224'),
    ('vit_small_patch16_rope_mixed_224', 'pe_vit_small_patch16_rope_mixed_224'),
    ('vit_small_patch16_rope_mixed_ape_224', 'pe_vit_small_patch16_rope_mixed_ape_224'),
    ('vit_base_patch16_rope_mixed_224', 'pe_vit_base_patch16_rope_mixed_224'),
]


def _randomize(model: torch.nn.Module) -> None:
    """Random weights of a realistic scale, so that every path (PE, LayerScale, head) moves the logits."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(('gamma_1', 'gamma_2')):
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            elif 'norm' in name and name.endswith('weight'):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            elif 'freqs' in name:
                continue
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (0.5 if 'head' in name else 0.05))


@pytest.mark.parametrize('timm_name,zoo_name', TIMM_PAIRS)
def test_timm_checkpoint_gives_same_logits(timm_name, zoo_name, tmp_path):
    ref = timm.create_model(timm_name, depth=2, num_classes=10, dynamic_img_size=True).eval()
    _randomize(ref)
    path = tmp_path / f'{timm_name}.pth'
    torch.save(ref.state_dict(), path)
    ours = timm.create_model(zoo_name, pretrained=True, pretrained_cfg_overlay=dict(file=str(path), num_classes=10),
                             depth=2, num_classes=10, dynamic_img_size=True).eval()
    for size in (224, 320):
        x = torch.randn(2, 3, size, size)
        with torch.no_grad():
            a, b = ref(x), ours(x)
        assert a.abs().max() > 0.1  # the comparison is not between near-zero logits
        assert (a - b).abs().max() <= 1e-4, f'{zoo_name} at {size}: {(a - b).abs().max()}'


def test_timm_checkpoint_keeps_layerscale_when_model_has_it(tmp_path):
    ref = timm.create_model('vit_small_patch16_rope_224', depth=2, num_classes=10).eval()
    _randomize(ref)
    torch.save(ref.state_dict(), tmp_path / 'r.pth')
    ours = timm.create_model('pe_vit_small_patch16_rope_axial_224', pretrained=True, depth=2, num_classes=10,
                             init_values=1e-5, pretrained_cfg_overlay=dict(file=str(tmp_path / 'r.pth'), num_classes=10))
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        assert (ref(x) - ours.eval()(x)).abs().max() <= 1e-4


def test_pretrained_cfg_points_at_real_hub_ids():
    cfg = timm.get_pretrained_cfg('pe_vit_small_patch16_rope_mixed_224.naver_in1k')
    assert cfg.hf_hub_id == 'timm/vit_small_patch16_rope_mixed_224.naver_in1k'
    cfg = timm.get_pretrained_cfg('pe_vit_base_patch16_ape_224.augreg_in21k_ft_in1k')
    assert cfg.hf_hub_id == 'timm/vit_base_patch16_224.augreg_in21k_ft_in1k'


def test_checkpoint_with_wrong_keys_lists_them(tmp_path):
    ref = timm.create_model('vit_small_patch16_rope_224', depth=2)
    sd = ref.state_dict()
    sd['blocks.0.attn.extra'] = torch.zeros(3)
    del sd['blocks.1.norm1.weight']
    sd['blocks.0.mlp.fc1.weight'] = torch.zeros(10, 10)
    torch.save(sd, tmp_path / 'bad.pth')
    with pytest.raises(CheckpointMismatchError) as err:
        timm.create_model('pe_vit_small_patch16_rope_axial_224', pretrained=True, depth=2,
                          pretrained_cfg_overlay=dict(file=str(tmp_path / 'bad.pth')))
    msg = str(err.value)
    assert 'blocks.1.norm1.weight' in msg and 'blocks.0.attn.extra' in msg and 'blocks.0.mlp.fc1.weight' in msg
    assert 'Fix:' in msg


@pytest.mark.parametrize('kwargs,match', [
    (dict(img_size=30, patch_size=8), r'30x30 px is not divisible by the patch size 8x8'),
    (dict(img_size=32, patch_size=8, dynamic_img_pad=True), r'needs dynamic_img_size=True'),
    (dict(patch_size=0), r'must be positive'),
    (dict(reg_tokens=-1), r'reg_tokens >= 0'),
    (dict(drop_path_rate=1.5), r'drop_path_rate'),
    (dict(pe='rope_axial', pe_kwargs=dict(theta=0)), r'theta must be > 0'),
    (dict(pe='sincos', pe_kwargs=dict(temperature=0)), r'temperature must be > 0'),
    (dict(pe='peg', pe_kwargs=dict(after_blocks='01')), r'after_blocks must be'),
    (dict(pe='peg', pe_kwargs=dict(after_blocks=(7,))), r'block indices in \[0, 2\)'),
    (dict(pe_kwargs=[1, 2]), r'pe_kwargs must be a dict'),
    (dict(pe='irpe', pe_kwargs=dict(skip=1), class_token=False, global_pool='avg'), r'skip must be between 0 and'),
])
def test_bad_model_options_raise_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        timm.create_model('pe_vit_tiny_patch16_ape_224', **dict(dict(depth=2), **kwargs))


def test_bad_inputs_and_calls_raise_clear_errors():
    model = timm.create_model('pe_vit_tiny_patch16_ape_224', img_size=32, patch_size=8, depth=2)
    with pytest.raises(ValueError, match=r'expected images \(B, 3, H, W\)'):
        model(torch.randn(1, 1, 32, 32))
    with pytest.raises(ValueError, match='floating-point'):
        model(torch.zeros(1, 3, 32, 32, dtype=torch.long))
    with pytest.raises(ValueError, match='not divisible'):
        model.set_input_size(30)
    avg = timm.create_model('pe_vit_tiny_patch16_ape_224', depth=2, class_token=False, global_pool='avg')
    with pytest.raises(ValueError, match='needs a class token'):
        avg.reset_classifier(3, 'token')
    fourier = timm.create_model('pe_vit_tiny_patch16_fourier_224', img_size=32, patch_size=8, depth=2).half()
    assert fourier(torch.randn(1, 3, 32, 32).half()).dtype == torch.float16
