"""SeqPE (zoo/encodings/seqpe.py): no golden file exists, so its defining properties: positions as left-padded digit
sequences, finite and distinct embeddings on new (larger) grids, the regularisers' targets and gradients, the eval
cache, the video (3-axis) form and its inflation, and the refusals."""
from __future__ import annotations

import pytest
import torch

import zoo  # noqa: F401  (registers the models)
from zoo.encodings import Positions, create_pos_encoding
from zoo.encodings.base import pe_aux_loss
from zoo.encodings.seqpe import SeqPE, position_digits
from zoo.models.vit import PEVisionTransformer


def _pe(grid=(4, 4), dim=32, **kw) -> SeqPE:
    torch.manual_seed(0)
    return create_pos_encoding('seqpe', dict(dim=dim, grid_size=grid), dict(dict(enc_dim=32, enc_depth=1), **kw))


def test_digits_left_padded_per_axis():
    """The paper's example: (2, 3) of a 4x4 grid written with 2 digits per axis is 0 2 0 3."""
    assert position_digits(torch.tensor([[2, 3]]), 2).tolist() == [[0, 2, 0, 3]]
    assert position_digits(torch.tensor([[105, 7, 0]]), 3).tolist() == [[1, 0, 5, 0, 0, 7, 0, 0, 0]]
    assert position_digits(torch.tensor([[5]]), 4, base=2).tolist() == [[0, 1, 0, 1]]


def test_new_grids_give_finite_distinct_embeddings():
    """Extrapolation: a grid 3x the training grid per axis gets finite embeddings, every position its own."""
    pe = _pe().eval()
    with torch.no_grad():
        table = pe.table((12, 12))[0]
    assert table.shape == (144, 32) and torch.isfinite(table).all()
    dist = torch.cdist(table, table) + torch.eye(144) * 1e9
    assert float(dist.min()) > 1e-4
    # the trained grid's rows are the new grid's rows at the same positions (a function of the position only)
    with torch.no_grad():
        small = pe.table((4, 4))[0]
    torch.testing.assert_close(table.view(12, 12, -1)[:4, :4].reshape(16, -1), small, atol=1e-5, rtol=1e-5)


def test_aux_loss_is_a_scalar_with_gradients_to_every_parameter():
    pe = _pe().train()
    loss = pe.aux_loss()
    assert loss.dim() == 0 and bool(torch.isfinite(loss)) and float(loss.detach()) > 0
    loss.backward()
    missing = [n for n, p in pe.named_parameters() if p.grad is None or not bool(p.grad.abs().sum() > 0)]
    assert not missing, missing
    only_ct = _pe(distill_weight=0.0)
    torch.manual_seed(1)
    a = only_ct.aux_loss()
    torch.manual_seed(1)
    torch.testing.assert_close(a, only_ct.contrastive_loss())


def _aware(positions):
    """Sin-cos features per axis: the cosine similarity of two positions is the mean of ``cos(w dp)``, a function of
    their difference only, falling with distance over the ranges used here."""
    w = torch.tensor([0.05, 0.1, 0.2, 0.4])
    ang = positions.float()[:, :, None] * w
    return torch.cat([ang.sin(), ang.cos()], -1).flatten(1)


def test_contrastive_target_is_the_nearest_candidate():
    """With an embedding whose cosine similarity falls with position distance, the contrastive loss is far lower than
    with the random initial encoder or a scrambled one (the loss rewards distance-aware embeddings; it would fail on a
    wrong target)."""
    pe = _pe(grid=(8, 8), n_anchors=64, n_candidates=8, distill_scale=2.0)
    torch.manual_seed(3)
    random_loss = pe.contrastive_loss().detach()
    pe.encode = _aware
    torch.manual_seed(3)
    aware_loss = pe.contrastive_loss()
    pe.encode = lambda p: _aware(p * torch.tensor([[7, 13]]) % 16)  # scrambled positions
    torch.manual_seed(3)
    scrambled = pe.contrastive_loss()
    assert float(aware_loss) < 0.7 * float(random_loss) and float(aware_loss) < 0.7 * float(scrambled)


def test_distillation_vanishes_for_shift_invariant_similarities():
    """The students are the teachers' cells in a window shifted beyond the training grid: an embedding whose
    similarities depend only on position differences gives zero loss, a generic encoder does not."""
    pe = _pe(grid=(4, 6), distill_scale=3.0)
    shifts = pe.distill_shifts(512)
    ext, rng = torch.tensor([4, 6]), torch.tensor([12, 18])
    assert bool((shifts >= ext).any(-1).all()) and bool((shifts + ext <= rng).all()) and bool((shifts >= 0).all())
    with torch.no_grad():  # spread the embeddings (the initial encoder maps every position nearly alike)
        for p in pe.parameters():
            p.normal_(0, 0.5)
    torch.manual_seed(0)
    assert float(pe.distill_loss().detach()) > 1e-2
    pe.encode = _aware
    torch.manual_seed(0)
    assert float(pe.distill_loss()) < 1e-6
    pe.encode = lambda p: _aware(p ** 2)  # not shift-invariant
    torch.manual_seed(0)
    assert float(pe.distill_loss()) > 1e-3


def test_eval_cache_and_training_recompute():
    pe = _pe().eval()
    a = pe.table((4, 4))
    assert pe.table((4, 4)) is a
    with torch.no_grad():
        pe.proj.bias.add_(1.0)
    b = pe.table((4, 4))
    assert b is not a and not torch.equal(a, b)
    pe.train()
    assert pe.table((4, 4)) is not pe.table((4, 4))
    assert pe.table((4, 4)).requires_grad


def test_model_aux_loss_and_prefix_tokens():
    model = PEVisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2, num_classes=3,
                                reg_tokens=1, pe='seqpe', pe_kwargs=dict(enc_dim=32, enc_depth=1))
    loss = pe_aux_loss(model)
    assert loss is not None and loss.dim() == 0
    ape = PEVisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2, num_classes=3)
    assert pe_aux_loss(ape) is None
    x = torch.zeros(1, 2 + 16, 32)
    out = model.pe.embed(x, Positions.from_hw((4, 4), 2, 1))
    assert bool((out[:, :2] == 0).all()) and bool((out[:, 2:] != 0).any())


def test_video_form_uses_three_axes_and_inflates_from_the_image_encoder():
    img = _pe(grid=(4, 4))
    vid = _pe(grid=(2, 4, 4))
    assert vid.slot_embed.shape[0] == 1 + 3 * img.num_digits
    pos = vid.grid_positions((2, 3, 4))
    assert pos.shape == (24, 3) and pos[13].tolist() == [0, 1, 1]  # t-major tokens, axes (row, col, t)
    inflated = vid.inflate_param('slot_embed', img.slot_embed.detach(), vid.slot_embed, (4, 4))
    assert torch.equal(inflated[:1 + 2 * img.num_digits], img.slot_embed.detach())
    assert bool((inflated[1 + 2 * img.num_digits:] == 0).all())
    out = vid.embed(torch.zeros(1, 24, 32), Positions((2, 3, 4)))
    assert torch.isfinite(out).all()


def test_refusals():
    with pytest.raises(ValueError, match='raise num_digits'):
        _pe(grid=(12, 12), num_digits=1)
    pe = _pe(num_digits=1).eval()
    with pytest.raises(ValueError, match='num_digits'):
        pe.table((11, 4))
    with pytest.raises(ValueError, match='enc_dim'):
        _pe(enc_heads=5)
    with pytest.raises(ValueError, match='distill_scale'):
        _pe(distill_scale=1.5)
    with pytest.raises(ValueError, match='2D encoding'):
        _pe().embed(torch.zeros(1, 32, 32), Positions((2, 4, 4)))
    with pytest.raises(ValueError, match=r'\(N, 2\)'):
        _pe().encode(torch.zeros(3, 3, dtype=torch.long))


def _image_folder(root) -> str:
    """A tiny ImageFolder tree: 2 classes x 4 training / 2 validation 32 px images."""
    from PIL import Image
    g = torch.Generator().manual_seed(0)
    for split, n in (('train', 4), ('val', 2)):
        for c, name in enumerate(('a', 'b')):
            (root / split / name).mkdir(parents=True, exist_ok=True)
            for i in range(n):
                img = (torch.rand(32, 32, 3, generator=g) * 90).byte().numpy()
                img[..., c] += 150
                Image.fromarray(img).save(root / split / name / f'{i}.png')
    return str(root)


def test_zoo_train_adds_weight_times_the_aux_loss(tmp_path, monkeypatch):
    """--pe-aux-loss 0.5 adds 0.5 x pe_aux_loss(model) to every batch's loss (a spy returns the real loss's graph
    plus 50, so the recorded train loss jumps by 25); a model whose encoding has no regulariser is refused."""
    import pandas as pd
    from zoo.train import loop
    data = _image_folder(tmp_path / 'data')
    tiny = ['--data-dir', data, '--img-size', '32', '--model-kwargs', 'patch_size=8', 'embed_dim=32', 'depth=1',
            'num_heads=2', 'pe_kwargs.enc_dim=16', 'pe_kwargs.enc_depth=1', '--batch-size', '4', '--workers', '0',
            '--no-progress', '--threads', '1', '--crop-pct', '1', '--epochs', '1', '--warmup-epochs', '0',
            '--color-jitter', '0']
    real, seen = loop.pe_aux_loss, []

    def spy(model):
        out = real(model)
        seen.append(out)
        return out - out.detach() + 50.0  # the real gradient, the value 50
    monkeypatch.setattr(loop, 'pe_aux_loss', spy)
    out = tmp_path / 'run'
    loop.train(['--model', 'pe_vit_tiny_patch16_seqpe_224', '--output', str(out), '--pe-aux-loss', '0.5', *tiny])
    assert seen and all(t is not None and t.dim() == 0 for t in seen)
    assert float(pd.read_csv(out / 'metrics.csv')['train_loss'][0]) > 25.0
    monkeypatch.setattr(loop, 'pe_aux_loss', real)
    with pytest.raises(ValueError, match='pe-aux-loss'):
        loop.train(['--model', 'pe_vit_tiny_patch16_ape_224', '--output', str(tmp_path / 'ape'),
                    '--pe-aux-loss', '0.5', *tiny[:9], *tiny[11:]])
