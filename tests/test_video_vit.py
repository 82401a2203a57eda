"""Video ViT backbone (zoo.models.video_vit): tiny models, 32 px frames, patch 8, tubelet 2."""
import os

import pytest
import timm
import torch

import zoo  # noqa: F401  (registers the models)
from zoo.models import CheckpointMismatchError, PEVideoTransformer
from zoo.models.video_vit import VIDEO_PE_MODELS

TINY = dict(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=2, num_frames=4, num_classes=5)


def _video(pe: str = 'nope', **kw) -> PEVideoTransformer:
    torch.manual_seed(0)
    return timm.create_model(f'pe_video_vit_tiny_patch16_{pe}_224', **dict(TINY, **kw)).eval()


def _clip(b=2, t=4, h=32, w=32, seed=1):
    return torch.randn(b, 3, t, h, w, generator=torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------------------------------------ the backbone
def test_registered_names_and_defaults():
    names = set(timm.list_models('pe_video_vit_*'))
    for suffix in VIDEO_PE_MODELS:
        for size in ('tiny', 'small', 'base'):
            assert f'pe_video_vit_{size}_patch16_{suffix}_224' in names
    with torch.device('meta'):
        m = timm.create_model('pe_video_vit_small_patch16_nope_224')
    assert isinstance(m.patch_embed.proj, torch.nn.Conv3d)
    assert m.patch_embed.proj.weight.shape == (384, 3, 2, 16, 16)
    assert (m.num_frames, m.tubelet_size, m.patch_embed.grid_size) == (16, 2, (8, 14, 14))
    assert m.cls_token is None and m.global_pool == 'avg' and m.num_prefix_tokens == 0
    assert isinstance(m.norm, torch.nn.Identity) and not isinstance(m.fc_norm, torch.nn.Identity)  # VideoMAE head


def test_token_order_is_t_major_then_row_major():
    m = _video()
    x = _clip()
    tokens = m.forward_embed(x)
    conv = m.patch_embed.proj(x)  # (B, C, T', H', W')
    assert tokens.shape == (2, 2 * 4 * 4, 48)
    # VideoMAE / V-JEPA 2: flatten(2).transpose(1, 2)
    torch.testing.assert_close(tokens, conv.flatten(2).transpose(1, 2), rtol=0, atol=0)
    # token n <-> (t, h, w) = (n // (H W), (n % (H W)) // W, n % W)
    n = 1 * 16 + 2 * 4 + 3
    torch.testing.assert_close(tokens[:, n], conv[:, :, 1, 2, 3], rtol=0, atol=0)


def test_forward_features_head_intermediates():
    m = _video()
    x = _clip()
    feats = m.forward_features(x)
    assert feats.shape == (2, 32, 48)
    assert m(x).shape == (2, 5)
    torch.testing.assert_close(m.forward_head(feats), m(x))
    final, inter = m.forward_intermediates(x)
    torch.testing.assert_close(final, feats)
    assert [tuple(i.shape) for i in inter] == [(2, 48, 2, 4, 4)] * 2
    nlc = m.forward_intermediates(x, output_fmt='NLC', intermediates_only=True)
    torch.testing.assert_close(nlc[-1], inter[-1].flatten(2).transpose(1, 2))
    m.set_grad_checkpointing(True)
    torch.testing.assert_close(m.forward_features(x), feats)


def test_features_only():
    m = timm.create_model('pe_video_vit_tiny_patch16_nope_224', features_only=True, out_indices=(0, 1),
                          **{k: v for k, v in TINY.items() if k != 'num_classes'})
    assert [tuple(o.shape) for o in m(_clip())] == [(2, 48, 2, 4, 4)] * 2


def test_dynamic_sizes_and_errors():
    m = _video(dynamic_img_size=True)
    assert m(_clip(1, 8, 48, 40)).shape == (1, 5)  # 2x frames, other frame sizes
    with pytest.raises(ValueError, match=r'5 frames are not divisible by the tubelet size 2'):
        m(_clip(1, 5))
    with pytest.raises(ValueError, match=r'36x32 px is not divisible by the patch size 8x8'):
        m(_clip(1, 4, 36, 32))
    fixed = _video()
    with pytest.raises(ValueError, match=r'8 frames of 32x32 px differs .* set_input_size'):
        fixed(_clip(1, 8))
    padded = _video(dynamic_img_size=True, dynamic_img_pad=True)
    assert padded.forward_features(_clip(1, 4, 36, 30)).shape == (1, 2 * 5 * 4, 48)


def test_wrong_rank_both_ways():
    with pytest.raises(ValueError, match=r'expected video clips \(B, 3, T, H, W\).*pe_vit_\* model'):
        _video()(torch.randn(2, 3, 32, 32))
    image = timm.create_model('pe_vit_tiny_patch16_nope_224', img_size=32, patch_size=8, embed_dim=48, depth=2,
                              num_heads=2, num_classes=5)
    with pytest.raises(ValueError, match=r'expected images \(B, 3, H, W\).*pe_video_vit_\* model'):
        image(_clip())


def test_bad_constructor_options():
    with pytest.raises(ValueError, match='positive multiple of tubelet_size'):
        _video(num_frames=5)
    with pytest.raises(ValueError, match='must be integers'):
        _video(num_frames=4.0)


def test_set_input_size_frames_and_pixels():
    m = _video()
    x = _clip()
    ref = m(x)
    m.set_input_size(img_size=48, num_frames=8)
    assert m.patch_embed.grid_size == (4, 6, 6)
    assert m(_clip(2, 8, 48, 48)).shape == (2, 5)
    m.set_input_size(img_size=32, num_frames=4)
    torch.testing.assert_close(m(x), ref)  # nope: nothing learned depends on the grid
    with pytest.raises(ValueError, match='multiple of the tubelet size 2'):
        m.set_input_size(num_frames=3)


# ------------------------------------------------------------------------------------------------ token subsets
def test_keep_indices_all_equals_unmasked_and_subset_runs_kept_tokens():
    m = _video()
    x = _clip()
    full = m.forward_features(x)
    every = torch.arange(32).expand(2, -1)
    torch.testing.assert_close(m.forward_features(x, keep_indices=every), full, rtol=0, atol=0)
    keep = torch.stack([torch.tensor([0, 3, 9, 17, 30]), torch.tensor([1, 2, 16, 20, 31])])
    sub = m.forward_features(x, keep_indices=keep)
    assert sub.shape == (2, 5, 48)
    # nope: the kept tokens are the gathered embeddings run through the same blocks
    tokens = m.forward_embed(x).gather(1, keep[..., None].expand(-1, -1, 48))
    torch.testing.assert_close(sub, m.norm(m.blocks(tokens)))
    torch.testing.assert_close(m.forward_embed(x, keep_indices=keep), tokens)


@pytest.mark.parametrize('keep, match', [
    (torch.tensor([[0, 32], [1, 2]]), r'must lie in \[0, 32\)'),
    (torch.tensor([[3, 1], [1, 2]]), 'sorted ascending'),
    (torch.tensor([[0, 1]]), 'batch 1 but the input has batch 2'),
    (torch.tensor([0, 1]), r'\(B, K\) integer tensor'),
])
def test_bad_keep_indices(keep, match):
    with pytest.raises(ValueError, match=match):
        _video().forward_features(_clip(), keep_indices=keep)


def test_peg_refuses_subsets():
    m = _video('peg')
    with pytest.raises(ValueError, match='PEG.*needs the full patch grid'):
        m.forward_features(_clip(), keep_indices=torch.arange(8).expand(2, -1))
    with pytest.raises(ValueError, match='patch_drop_rate > 0'):
        _video('peg', patch_drop_rate=0.5)


# ------------------------------------------------------------------------------------------------ checkpoints
def _vjepa2_checkpoint(model: PEVideoTransformer) -> dict:
    """A state dict in the V-JEPA 2 release layout: wrapped, prefixed, no classifier."""
    enc = {f'module.backbone.{k}': v.clone() for k, v in model.state_dict().items() if not k.startswith('head.')}
    return {'target_encoder': enc, 'encoder': enc, 'epoch': 1}


def test_vjepa2_layout_loads_through_pretrained_cfg_overlay(tmp_path):
    src = _video(fc_norm=False)
    assert 'norm.weight' in src.state_dict() and 'fc_norm.weight' not in src.state_dict()
    path = os.path.join(tmp_path, 'vjepa2.pt')
    torch.save(_vjepa2_checkpoint(src), path)
    m = timm.create_model('pe_video_vit_tiny_patch16_nope_224', pretrained=True, num_classes=0, fc_norm=False,
                          pretrained_cfg_overlay=dict(file=path), **{k: v for k, v in TINY.items()
                                                                     if k != 'num_classes'}).eval()
    x = _clip()
    torch.testing.assert_close(m.forward_features(x), src.forward_features(x), rtol=0, atol=0)
    # a classifier-sized model: the encoder has no head, which keeps its initialisation
    m5 = timm.create_model('pe_video_vit_tiny_patch16_nope_224', pretrained=True, fc_norm=False,
                           pretrained_cfg_overlay=dict(file=path, num_classes=5), **TINY).eval()
    torch.testing.assert_close(m5.forward_features(x), src.forward_features(x), rtol=0, atol=0)


def test_vjepa2_layout_into_mean_pooled_head_names_the_fix(tmp_path):
    path = os.path.join(tmp_path, 'vjepa2.pt')
    torch.save(_vjepa2_checkpoint(_video(fc_norm=False)), path)
    with pytest.raises(CheckpointMismatchError, match='fc_norm=False'):
        timm.create_model('pe_video_vit_tiny_patch16_nope_224', pretrained=True, num_classes=0,
                          pretrained_cfg_overlay=dict(file=path), **{k: v for k, v in TINY.items()
                                                                     if k != 'num_classes'})


def test_other_layouts_are_refused(tmp_path):
    image = timm.create_model('pe_vit_tiny_patch16_nope_224', img_size=32, patch_size=8, embed_dim=48, depth=2,
                              num_heads=2, num_classes=5)
    path = os.path.join(tmp_path, 'image.pt')
    torch.save(image.state_dict(), path)
    with pytest.raises(CheckpointMismatchError, match='image checkpoint.*inflate_2d_to_3d'):
        timm.create_model('pe_video_vit_tiny_patch16_nope_224', pretrained=True,
                          pretrained_cfg_overlay=dict(file=path, num_classes=5), **TINY)
    torch.save({'encoder': {'layers.0.weight': torch.zeros(3)}}, path)
    with pytest.raises(CheckpointMismatchError, match='no patch_embed.proj.weight'):
        timm.create_model('pe_video_vit_tiny_patch16_nope_224', pretrained=True,
                          pretrained_cfg_overlay=dict(file=path, num_classes=5), **TINY)
    deeper = _video(fc_norm=False, depth=3)
    torch.save(_vjepa2_checkpoint(deeper), path)
    with pytest.raises(CheckpointMismatchError, match=r'unexpected keys.*blocks\.2\.'):
        timm.create_model('pe_video_vit_tiny_patch16_nope_224', pretrained=True, fc_norm=False,
                          pretrained_cfg_overlay=dict(file=path, num_classes=5), **TINY)


# ------------------------------------------------------------------------------------------------ every 3D PE
SUBSET_PES = [p for p in VIDEO_PE_MODELS if p != 'peg']


@pytest.mark.parametrize('pe', list(VIDEO_PE_MODELS))
def test_every_pe_runs_at_2x_frames_and_1_5x_size(pe):
    m = _video(pe, dynamic_img_size=True)
    x = _clip()
    ref = m.forward_features(x)
    assert ref.shape == (2, 32, 48) and torch.isfinite(ref).all()
    out = m(_clip(2, 8, 48, 48))  # 2x frames, 1.5x frame size
    assert out.shape == (2, 5) and torch.isfinite(out).all()
    torch.testing.assert_close(m.forward_features(x), ref)  # the training grid is unchanged afterwards
    m.set_input_size(img_size=48, num_frames=8)  # learned tables resampled to the new default grid
    assert m.patch_embed.grid_size == (4, 6, 6)
    assert torch.isfinite(m(_clip(2, 8, 48, 48))).all()


@pytest.mark.parametrize('pe', SUBSET_PES)
def test_keep_every_index_is_the_unmasked_output(pe):
    m = _video(pe)
    x = _clip()
    full = m.forward_features(x)
    # bit-exact, except ComRoPE/LieRE: their rotation of a token subset multiplies the per-axis blocks of the kept
    # tokens in another order than the full grid's (float32 round-off, ~1 ulp); an index error would be O(1)
    tol = 1e-6 if pe in ('comrope_ap', 'comrope_ld', 'liere') else 0
    torch.testing.assert_close(m.forward_features(x, keep_indices=torch.arange(32).expand(2, -1)), full,
                               rtol=tol, atol=tol)
    keep = torch.stack([torch.tensor([0, 5, 9, 30]), torch.tensor([1, 2, 17, 31])])
    sub = m.forward_features(x, keep_indices=keep)
    assert sub.shape == (2, 4, 48) and torch.isfinite(sub).all()


@pytest.mark.parametrize('pe', SUBSET_PES)
def test_patch_dropout_trains(pe):
    m = _video(pe, patch_drop_rate=0.5).train()
    m(_clip()).sum().backward()
    assert all(p.grad is not None for p in m.parameters() if p.requires_grad)


# ------------------------------------------------------------------------------------------------ inflation
# Encodings whose time part starts at zero after inflation: a static clip (one image repeated) gives exactly the
# image model's output (no prefix tokens, mean pooling on both sides, patch_embed='average').
EXACT_INFLATION = {'ape': 'ape', 'st_ape': 'ape', 'nope': 'nope', 'peg': 'peg', 'fourier': 'fourier',
                   'rope_mixed': 'rope_mixed', 'comrope_ld': 'comrope_ld', 'liere': 'liere', 'irpe_k': 'irpe_k'}
_IMG = dict(class_token=False, global_pool='avg', img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=2,
            num_classes=5)


def _image_model(pe: str):
    torch.manual_seed(0)
    kw = dict(_IMG, pe_kwargs=dict(skip=0)) if pe == 'irpe_k' else _IMG  # no class token: no class bucket
    m = timm.create_model(f'pe_vit_tiny_patch16_{pe}_224', **kw).eval()
    with torch.no_grad():  # move every parameter off its initial value (zero time parts stay meaningful)
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return m


@pytest.mark.parametrize('pe', sorted(EXACT_INFLATION))
def test_inflated_image_checkpoint_matches_on_a_static_clip(pe):
    from zoo.models import inflate_2d_to_3d
    image = _image_model(EXACT_INFLATION[pe])
    video = timm.create_model(f'pe_video_vit_tiny_patch16_{pe}_224', num_frames=4, **_IMG).eval()
    video.load_state_dict(inflate_2d_to_3d({'model': image.state_dict()}, video), strict=True)
    x = torch.randn(2, 3, 32, 32)
    static = x[:, :, None].expand(-1, -1, 4, -1, -1).contiguous()
    torch.testing.assert_close(video(static), image(x), rtol=1e-4, atol=1e-5)


def test_inflation_patch_embed_modes_and_errors():
    from zoo.models import inflate_2d_to_3d
    image = _image_model('nope')
    video = timm.create_model('pe_video_vit_tiny_patch16_nope_224', num_frames=4, **_IMG)
    w = image.state_dict()['patch_embed.proj.weight']
    avg = inflate_2d_to_3d(image.state_dict(), video)['patch_embed.proj.weight']
    torch.testing.assert_close(avg.sum(2), w)  # spread over the tubelet: weights / 2 on each frame
    center = inflate_2d_to_3d(image.state_dict(), video, patch_embed='center')['patch_embed.proj.weight']
    torch.testing.assert_close(center[:, :, 1], w)
    assert center[:, :, 0].abs().max() == 0
    with pytest.raises(ValueError, match="'average' or 'center'"):
        inflate_2d_to_3d(image.state_dict(), video, patch_embed='mean')
    with pytest.raises(CheckpointMismatchError, match='needs an image checkpoint'):
        inflate_2d_to_3d(video.state_dict(), video)
    wide = timm.create_model('pe_video_vit_tiny_patch16_nope_224', num_frames=4, **dict(_IMG, embed_dim=64))
    with pytest.raises(CheckpointMismatchError):
        inflate_2d_to_3d(image.state_dict(), wide)
    deeper = timm.create_model('pe_video_vit_tiny_patch16_nope_224', num_frames=4, **dict(_IMG, depth=1))
    with pytest.raises(CheckpointMismatchError, match=r'blocks\.1\.'):
        inflate_2d_to_3d(image.state_dict(), deeper)


def test_inflated_ape_resamples_another_frame_grid():
    from zoo.models import inflate_2d_to_3d
    image = _image_model('ape')  # 4 x 4 patch grid
    video = timm.create_model('pe_video_vit_tiny_patch16_ape_224', num_frames=4, **dict(_IMG, img_size=48))
    sd = inflate_2d_to_3d(image.state_dict(), video, image_grid=(4, 4))
    table = sd['pe.pos_embed']
    assert table.shape == (1, 2 * 6 * 6, 48)
    torch.testing.assert_close(table[:, :36], table[:, 36:])  # the frame table repeated over the tubelets


# ------------------------------------------------------------------------------------------------ train / evaluate
VIDEO_RUN = ['--model', 'pe_video_vit_tiny_patch16_nope_224', '--img-size', '16', '--num-frames', '4',
             '--model-kwargs', 'patch_size=8', 'embed_dim=32', 'depth=1', 'num_heads=2', '--batch-size', '4',
             '--workers', '0', '--no-progress', '--threads', '1', '--epochs', '1', '--warmup-epochs', '0']


@pytest.fixture(scope='module')
def videos(tmp_path_factory) -> str:
    from zoo.datasets.synthetic_video import make_videos
    root = str(tmp_path_factory.mktemp('videos'))
    make_videos(root, num_per_class=4, val_per_class=2, num_frames=8, size=16, seed=0, clips_dir=None,
                classes=('motion_left', 'motion_right'), progress=False)
    return root


@pytest.fixture(scope='module')
def video_run(videos, tmp_path_factory) -> str:
    from zoo.train.loop import train
    out = str(tmp_path_factory.mktemp('runs') / 'nope')
    train([*VIDEO_RUN, '--data-dir', videos, '--output', out])
    return out


def test_train_video_model_records_its_clip(video_run):
    import pandas as pd
    ckpt = torch.load(os.path.join(video_run, 'checkpoint-last.pth'), map_location='cpu', weights_only=True)
    meta = ckpt['meta']
    assert (meta['num_frames'], meta['img_size'], meta['pe']) == (4, 16, 'nope')
    assert meta['class_names'] == ['motion_left', 'motion_right'] and meta['data_config']['num_frames'] == 4
    assert ckpt['model']['patch_embed.proj.weight'].shape == (32, 3, 2, 8, 8)
    metrics = pd.read_csv(os.path.join(video_run, 'metrics.csv'))
    assert len(metrics) == 1 and metrics['val_unreadable'].iloc[0] == 0


def test_eval_frames_sweep_and_reports(video_run, videos, tmp_path):
    import pandas as pd
    from zoo.sweep.frames import eval_frames
    out = str(tmp_path / 'ev')
    result = eval_frames(['--run', video_run, '--data-dir', videos, '--frames', '2', '4', '8', '--sizes', '16', '24',
                          '--workers', '0', '--no-progress', '--output', out])
    df = pd.DataFrame(result['rows'])
    assert len(df) == 6 and (df['n'] == 4).all() and not result['failed']
    assert set(zip(df['frames'], df['size'])) == {(t, s) for t in (2, 4, 8) for s in (16, 24)}
    for name in ('results.csv', 'results.json', 'report.md', 'scaling.png', 'heatmap_nope.png'):
        assert os.path.isfile(os.path.join(out, name)), name
    report = open(os.path.join(out, 'report.md')).read()
    assert '| frames | 16 px | 24 px |' in report and '4 frames' in report
    # nope has no position to adapt: its accuracy at the training clip equals the training run's own validation
    trained = df[(df['frames'] == 4) & (df['size'] == 16)]['top1'].iloc[0]
    metrics = pd.read_csv(os.path.join(video_run, 'metrics.csv'))
    assert trained == pytest.approx(metrics['val_top1'].iloc[-1], abs=1e-6)


def test_video_cli_errors(video_run, videos, tmp_path, capsys):
    from zoo.cli import main
    image_run = ['--model', 'pe_vit_tiny_patch16_nope_224', '--data-dir', videos, '--output', str(tmp_path / 'i'),
                 '--num-frames', '4']
    assert main(['train', *image_run]) == 2
    assert '--num-frames 4: pe_vit_tiny_patch16_nope_224 takes images' in capsys.readouterr().err
    assert main(['train', *VIDEO_RUN, '--data-dir', videos, '--output', str(tmp_path / 'm'), '--mixup', '0.8']) == 2
    assert '--mixup / --cutmix apply to images' in capsys.readouterr().err
    ev = ['--run', video_run, '--data-dir', videos, '--sizes', '16', '--output', str(tmp_path / 'e')]
    assert main(['eval-frames', *ev, '--frames', '3']) == 2
    assert 'not divisible by the tubelet size 2' in capsys.readouterr().err
    assert main(['eval-frames', *ev, '--frames', '4', '--crop-pct', '0.9']) == 2
    assert '--crop-pct apply to image models' in capsys.readouterr().err
    assert main(['eval-resolution', '--run', video_run, '--data-dir', videos, '--sizes', '16',
                 '--output', str(tmp_path / 'r')]) == 2
    assert 'is a video model' in capsys.readouterr().err


def test_video_resume_is_exact(videos, tmp_path, monkeypatch):
    """Random frame offsets are drawn from (seed, epoch, index): a run killed in epoch 2 and resumed ends with the
    weights and metrics of an uninterrupted one."""
    from zoo.train import loop
    i = VIDEO_RUN.index('--epochs')
    run = [*VIDEO_RUN[:i], *VIDEO_RUN[i + 2:], '--epochs', '2', '--data-dir', videos]
    from zoo.datasets import SafeVideoFolder
    epochs, set_epoch = [], SafeVideoFolder.set_epoch
    monkeypatch.setattr(SafeVideoFolder, 'set_epoch', lambda self, e: (epochs.append(e), set_epoch(self, e)))
    full = loop.train([*run, '--output', str(tmp_path / 'full')])
    assert epochs == [0, 1]  # new random frame offsets every epoch
    real = loop.train_one_epoch

    def killed_in_second_epoch(*args, **kwargs):
        if kwargs.get('epoch') == 1:
            raise KeyboardInterrupt('simulated kill mid-epoch')
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, 'train_one_epoch', killed_in_second_epoch)
    out = str(tmp_path / 'killed')
    with pytest.raises(KeyboardInterrupt):
        loop.train([*run, '--output', out])
    monkeypatch.setattr(loop, 'train_one_epoch', real)
    resumed = loop.train(['--output', out, '--resume', '--workers', '0', '--no-progress', '--threads', '1'])
    a = torch.load(os.path.join(full['output'], 'checkpoint-last.pth'), weights_only=True)['model']
    b = torch.load(os.path.join(out, 'checkpoint-last.pth'), weights_only=True)['model']
    for k, v in a.items():
        torch.testing.assert_close(b[k], v, rtol=0, atol=0, msg=k)
    assert [{k: v for k, v in r.items() if k != 'epoch_s'} for r in full['history']] == \
        [{k: v for k, v in r.items() if k != 'epoch_s'} for r in resumed['history']]


def test_vjepa_fixed_table_is_checked_not_loaded(tmp_path):
    """V-JEPA without RoPE stores its fixed 3D sin-cos table as ``pos_embed``: equal to the model's own -> dropped,
    different -> the checkpoint error."""
    from zoo.encodings import Positions
    from zoo.models import video_checkpoint_filter_fn
    m = _video('sincos3d', fc_norm=False, num_classes=0)
    grid = m.patch_embed.grid_size
    own = m.pe.embed(torch.zeros(1, 32, 48), Positions(grid))
    sd = _vjepa2_checkpoint(m)
    sd['target_encoder']['module.backbone.pos_embed'] = own.clone()
    out = video_checkpoint_filter_fn(sd, m)
    assert 'pos_embed' not in out and set(out) == set(m.state_dict())
    sd['target_encoder']['module.backbone.pos_embed'] = own.flip(1)
    with pytest.raises(CheckpointMismatchError, match="not the table of the model's 'sincos3d' encoding"):
        video_checkpoint_filter_fn(sd, m)
    ape = _video('ape', fc_norm=False, num_classes=0)  # a learned table goes to pe.pos_embed
    sd = _vjepa2_checkpoint(ape)
    sd['target_encoder']['module.backbone.pos_embed'] = sd['target_encoder'].pop('module.backbone.pe.pos_embed')
    out = video_checkpoint_filter_fn(sd, ape)
    torch.testing.assert_close(out['pe.pos_embed'], ape.state_dict()['pe.pos_embed'])


def test_num_frames_has_one_home():
    """The tubelet embed owns the clip length; the model's num_frames / tubelet_size are read-only views of it."""
    m = _video('rope3d')
    assert m.num_frames == m.patch_embed.num_frames == 4 and m.tubelet_size == m.patch_embed.tubelet_size == 2
    assert 'num_frames' not in vars(m) and 'tubelet_size' not in vars(m)
    with pytest.raises(AttributeError):
        m.num_frames = 8
    m.set_input_size(num_frames=8)
    assert m.num_frames == m.patch_embed.num_frames == 8 and m.patch_embed.grid_size == (4, 4, 4)
    assert m(_clip(2, 8)).shape == (2, 5)
    with pytest.raises(ValueError, match='positive multiple of the tubelet size'):
        m.set_input_size(num_frames=7)
    assert m.num_frames == 8
