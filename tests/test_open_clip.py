"""open_clip integration: zoo towers by name, the CLIP -> zoo converter, CLIP zero-shot sweeps, CLIP fine-tuning.

Offline and tiny: CLIP models are randomly initialised open_clip models (perturbed so that every weight matters),
saved to files in tmp dirs.
"""
from __future__ import annotations

import json
import os

import pytest
import torch
from PIL import Image

open_clip = pytest.importorskip('open_clip')

import zoo  # noqa: E402,F401
from zoo.cli import main  # noqa: E402
from zoo.runs.models import create_zoo_model, load_weights  # noqa: E402
from zoo.integrations import open_clip as zoc  # noqa: E402
from zoo.models import CheckpointMismatchError  # noqa: E402

TINY_TEXT = dict(context_length=16, vocab_size=49408, width=32, heads=2, layers=1)
TINY_VISION = dict(image_size=32, patch_size=8, width=64, layers=2, head_width=32)


def _clip(quick_gelu: bool = False, vision=TINY_VISION, embed_dim: int = 24, text=TINY_TEXT, seed: int = 0):
    """A random open_clip CLIP whose weights (LayerNorms, biases, class/positional embeddings) are all perturbed."""
    torch.manual_seed(seed)
    model = open_clip.CLIP(embed_dim=embed_dim, vision_cfg=dict(vision), text_cfg=dict(text),
                           quick_gelu=quick_gelu).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


@pytest.fixture(scope='module')
def clip_file(tmp_path_factory):
    model = _clip()
    path = str(tmp_path_factory.mktemp('clip') / 'clip.pt')
    torch.save(model.state_dict(), path)
    return model, path


def test_configs_registered_for_every_image_model_and_files_current():
    names = set(open_clip.list_models())
    image_models = [n for n in zoo.models.PE_OF_MODEL if n.startswith('pe_vit_')]
    assert image_models
    for n in image_models:
        assert zoc.clip_config_name(n) in names, n
    assert 'zoo-ViT-S-16-rope_mixed' in names and 'zoo-ViT-B-16-comrope_ap' in names
    for name, cfg in zoc.clip_configs().items():  # the shipped JSON files are what the generator writes
        with open(os.path.join(zoc.CONFIG_DIR, f'{name}.json')) as f:
            assert json.load(f) == json.loads(json.dumps(cfg)), f'{name}: run python -m zoo.integrations'
    assert len(os.listdir(zoc.CONFIG_DIR)) == len(zoc.clip_configs())


def test_create_model_and_transforms_by_name_text_tower_untouched_size_changeable():
    model, _, preprocess = open_clip.create_model_and_transforms(
        'zoo-ViT-Ti-16-rope_mixed', text_cfg=TINY_TEXT, force_image_size=64)
    assert type(model.visual).__name__ == 'TimmModel'
    trunk = model.visual.trunk
    assert trunk.pe_name == 'rope_mixed' and isinstance(trunk.norm_pre, torch.nn.LayerNorm)
    assert tuple(trunk.patch_embed.img_size) == (64, 64)
    assert type(model.transformer).__name__ == 'Transformer'  # open_clip's own text tower
    img = preprocess(Image.new('RGB', (80, 70), (120, 30, 200))).unsqueeze(0)
    assert img.shape == (1, 3, 64, 64)
    text = open_clip.get_tokenizer('zoo-ViT-Ti-16-rope_mixed')(['a cat', 'a dog'])[:, :16]
    img_f, txt_f, scale = model(img, text)
    assert img_f.shape == (1, 384) and txt_f.shape == (2, 384)
    loss = open_clip.ClipLoss()(img_f.expand(2, -1), txt_f, scale)
    loss.backward()
    assert trunk.pe.freqs.grad is not None and torch.isfinite(loss)
    model.visual.set_input_size(96)
    assert model.encode_image(torch.randn(1, 3, 96, 96)).shape == (1, 384)


@pytest.mark.parametrize('quick_gelu', [False, True])
def test_converter_ape_features_equal_open_clip(tmp_path, quick_gelu):
    ref_model = _clip(quick_gelu=quick_gelu, seed=1)
    path = str(tmp_path / 'clip.pt')
    torch.save(ref_model.state_dict(), path)
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        ref = ref_model.encode_image(x)
        out = zoc.create_model_from_clip(path, pe='ape', quick_gelu=quick_gelu, head_width=32)(x)
        wrong_act = zoc.create_model_from_clip(path, pe='ape', quick_gelu=not quick_gelu, head_width=32)(x)
    torch.testing.assert_close(out, ref, atol=2e-5, rtol=1e-5)
    assert (wrong_act - ref).abs().max() > 1e-3  # the activation matters: the test can fail


@pytest.mark.parametrize('pe', ['rope_mixed', 'rope_axial', 'rope_mixed_ape', 'sincos', 'comrope_ap', 'irpe_k', 'peg'])
def test_converter_any_pe_keeps_resamples_or_drops_the_ape(clip_file, pe):
    ref_model, path = clip_file
    sd = ref_model.state_dict()
    model = zoc.create_model_from_clip(path, pe=pe, head_width=32)
    own = model.state_dict()
    pos, cls = sd['visual.positional_embedding'], sd['visual.class_embedding']
    torch.testing.assert_close(own['blocks.1.attn.qkv.weight'],
                               sd['visual.transformer.resblocks.1.attn.in_proj_weight'])
    torch.testing.assert_close(own['head.weight'], sd['visual.proj'].t())
    if pe == 'irpe_k':  # iRPE's APE has a class entry: kept as is
        torch.testing.assert_close(own['pe.ape.pos_embed'][0], pos)
        torch.testing.assert_close(own['cls_token'].flatten(), cls)
    elif pe == 'rope_mixed_ape':  # patch rows only; the class row folded into the class token
        torch.testing.assert_close(own['pe.ape.pos_embed'][0], pos[1:])
        torch.testing.assert_close(own['cls_token'].flatten(), cls + pos[0])
    else:  # no APE: dropped, the class row folded into the class token
        torch.testing.assert_close(own['cls_token'].flatten(), cls + pos[0])
    assert torch.isfinite(model(torch.randn(1, 3, 32, 32))).all()


def test_converter_resamples_the_ape_to_another_size(clip_file):
    from timm.layers import resample_abs_pos_embed
    ref_model, path = clip_file
    model = zoc.create_model_from_clip(path, pe='ape', head_width=32, img_size=48)
    pos = ref_model.state_dict()['visual.positional_embedding'][None]
    expected = resample_abs_pos_embed(pos, new_size=[6, 6], old_size=[4, 4], num_prefix_tokens=1)
    torch.testing.assert_close(model.pe.pos_embed, expected)
    assert model(torch.randn(1, 3, 48, 48)).shape == (1, 24)


def test_full_clip_checkpoint_into_zoo_open_clip_model(tmp_path):
    """An open_clip ViT-Ti-style CLIP (width 192, 12 blocks, patch 16) into zoo-ViT-Ti-16-ape: same image and text
    features; into zoo-ViT-Ti-16-rope_mixed: loads (frequencies keep their init)."""
    vision = dict(image_size=64, patch_size=16, width=192, layers=12, head_width=64)
    ref = _clip(vision=vision, embed_dim=384, seed=2)
    path = str(tmp_path / 'vit_ti_clip.pt')
    torch.save(ref.state_dict(), path)
    zm = open_clip.create_model('zoo-ViT-Ti-16-ape', text_cfg=TINY_TEXT, force_image_size=64).eval()
    zoc.load_clip_checkpoint(zm, path)
    x = torch.randn(1, 3, 64, 64)
    text = torch.randint(1, 1000, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(zm.encode_image(x), ref.encode_image(x), atol=5e-5, rtol=1e-5)
        torch.testing.assert_close(zm.encode_text(text), ref.encode_text(text))
    torch.testing.assert_close(zm.logit_scale, ref.logit_scale)
    rm = open_clip.create_model('zoo-ViT-Ti-16-rope_mixed', text_cfg=TINY_TEXT, force_image_size=64).eval()
    zoc.load_clip_checkpoint(rm, path)
    rm.visual.set_input_size(96)
    assert rm.encode_image(torch.randn(1, 3, 96, 96)).shape == (1, 384)


def test_clear_errors_for_other_layouts_and_widths(clip_file, tmp_path):
    ref_model, path = clip_file
    timm_vit = create_zoo_model('pe_vit_tiny_patch16_ape_224', dict(img_size=32, patch_size=8, embed_dim=64,
                                                                     depth=2, num_heads=2))
    with pytest.raises(CheckpointMismatchError, match='timm ViT'):
        zoc.convert_clip_visual({k: v for k, v in timm_vit.state_dict().items()}, timm_vit)
    with pytest.raises(CheckpointMismatchError, match='ModifiedResNet'):
        zoc.clip_visual_state_dict({'visual.layer1.0.conv1.weight': torch.zeros(1), 'visual.attnpool.c_proj.weight':
                                    torch.zeros(1)})
    wide = create_zoo_model('clip_pe_vit_tiny_patch16_rope_mixed_224', dict(img_size=32, patch_size=8, embed_dim=96,
                                                                             depth=2, num_heads=3))
    with pytest.raises(CheckpointMismatchError, match='width: CLIP 64 vs model embed_dim 96'):
        zoc.convert_clip_visual(ref_model.state_dict(), wide)
    no_prenorm = create_zoo_model('pe_vit_tiny_patch16_ape_224', dict(img_size=32, patch_size=8, embed_dim=64,
                                                                       depth=2, num_heads=2))
    with pytest.raises(CheckpointMismatchError, match='pre_norm=True'):
        zoc.convert_clip_visual(ref_model.state_dict(), no_prenorm)
    stock = open_clip.CLIP(embed_dim=24, vision_cfg=TINY_VISION, text_cfg=TINY_TEXT)
    with pytest.raises(CheckpointMismatchError, match='zoo-\\* config'):
        zoc.load_clip_checkpoint(stock, path)
    with pytest.raises(ValueError, match='unknown position encoding'):
        zoc.create_model_from_clip(path, pe='nonsense', head_width=32)


def _folder(root, classes=('cat', 'dog'), n=3):
    g = torch.Generator().manual_seed(0)
    for split in ('train', 'val'):
        for c in classes:
            os.makedirs(os.path.join(root, split, c), exist_ok=True)
            for i in range(n):
                img = (torch.rand(40, 40, 3, generator=g) * 255).byte().numpy()
                Image.fromarray(img).save(os.path.join(root, split, c, f'{i}.png'))
    return str(root)


def test_eval_resolution_zero_shot_matches_open_clip(clip_file, tmp_path):
    """A stock open_clip config (its tower converted to a zoo ape tower) evaluated zero-shot at two sizes; at the
    training size the predictions are open_clip's own (encode_image + build_zero_shot_classifier)."""
    ref_model, path = clip_file
    cfg_dir = tmp_path / 'cfg'
    cfg_dir.mkdir()
    (cfg_dir / 'Tiny-Test-ViT-8.json').write_text(json.dumps(dict(embed_dim=24, vision_cfg=TINY_VISION,
                                                                   text_cfg=TINY_TEXT)))
    open_clip.add_model_config(str(cfg_dir))
    data = _folder(tmp_path / 'data')
    templates = tmp_path / 't.txt'
    templates.write_text('a photo of a {}.\na blurry photo of a {}.\n')
    out = str(tmp_path / 'zs')
    assert main(['eval-resolution', '--zero-shot', '--model', 'Tiny-Test-ViT-8', '--checkpoint', path,
                 '--data-dir', data, '--sizes', '32', '48', '--templates', str(templates), '--output', out,
                 '--workers', '0', '--no-progress']) == 0
    res = json.load(open(os.path.join(out, 'results.json')))['results']
    assert [r['size'] for r in res] == [32, 48] and all(r['n'] == 6 and not r['error'] for r in res)
    # open_clip's own zero-shot prediction at 32 px
    tok = open_clip.get_tokenizer('Tiny-Test-ViT-8')
    weights = open_clip.build_zero_shot_classifier(ref_model, tok, ['cat', 'dog'],
                                                   ['a photo of a {}.', 'a blurry photo of a {}.'])
    from timm.data import create_transform
    tf = create_transform((3, 32, 32), is_training=False, interpolation='bicubic', crop_pct=1.0,
                          mean=zoc.CLIP_MEAN, std=zoc.CLIP_STD)
    correct = 0
    for label, c in enumerate(('cat', 'dog')):
        for i in range(3):
            x = tf(Image.open(os.path.join(data, 'val', c, f'{i}.png')).convert('RGB'))[None]
            with torch.no_grad():
                pred = (ref_model.encode_image(x, normalize=True) @ weights).argmax(-1).item()
            correct += pred == label
    assert res[0]['correct1'] == correct


def test_zero_shot_errors(clip_file, tmp_path):
    _, path = clip_file
    data = _folder(tmp_path / 'data')
    base = ['eval-resolution', '--zero-shot', '--data-dir', data, '--sizes', '32', '--output', str(tmp_path / 'o')]
    assert main(base + ['--model', 'no-such-clip', '--checkpoint', path]) == 2
    bad = tmp_path / 'bad.txt'
    bad.write_text('no placeholder here\n')
    assert main(base + ['--model', 'zoo-ViT-Ti-16-ape', '--checkpoint', path, '--templates', str(bad)]) == 2
    from zoo.sweep.zero_shot import class_prompts_names, load_templates
    with pytest.raises(ValueError, match='every line must contain'):
        load_templates(str(bad))
    names = tmp_path / 'names.txt'
    names.write_text('one\n')
    with pytest.raises(ValueError, match='lists 1 names but the data has 2'):
        class_prompts_names(['a', 'b'], str(names))


def test_zoo_train_fine_tunes_a_clip_tower_as_a_classifier(clip_file, tmp_path):
    ref_model, path = clip_file
    kwargs = dict(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=2)
    model = create_zoo_model('clip_pe_vit_tiny_patch16_rope_mixed_224', kwargs, num_classes=2)
    load_weights(model, path)  # what zoo train --initial-checkpoint does
    sd = ref_model.state_dict()
    torch.testing.assert_close(model.blocks[0].mlp.fc1.weight, sd['visual.transformer.resblocks.0.mlp.c_fc.weight'])
    torch.testing.assert_close(model.norm.weight, sd['visual.ln_post.weight'])
    assert model.head.weight.shape == (2, 64)  # a new classifier
    data = _folder(tmp_path / 'data')
    out = str(tmp_path / 'run')
    assert main(['train', '--model', 'clip_pe_vit_tiny_patch16_rope_mixed_224', '--data-dir', data,
                 '--initial-checkpoint', path, '--img-size', '32', '--model-kwargs', 'patch_size=8', 'embed_dim=64',
                 'depth=2', 'num_heads=2', '--epochs', '1', '--batch-size', '4', '--workers', '0', '--no-progress',
                 '--output', out, '--lr', '1e-4']) == 0
    ckpt = torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)
    assert ckpt['meta']['model_name'] == 'clip_pe_vit_tiny_patch16_rope_mixed_224'
    w = ckpt['model']['blocks.0.mlp.fc1.weight']
    assert (w - sd['visual.transformer.resblocks.0.mlp.c_fc.weight']).abs().max() < 0.05  # fine-tuned, not re-inited
