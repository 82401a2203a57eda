"""The video-LLM's input checks: ``prepare_image`` / ``prepare_video`` refuse channels-last float input with the
permute that fixes it (instead of reading (H, W, 3) as (C, H, W) and failing later in the tower), and take numpy
arrays and PIL images as uint8 RGB."""
import numpy as np
import pytest
import torch

from zoo.models.vlm import create_video_llm

TINY = dict(tower_kwargs=dict(img_size=32, patch_size=8, embed_dim=48, depth=1, num_heads=2), dim=64, depth=2,
            num_heads=4, num_kv_heads=2, mlp_hidden=128)


@pytest.fixture(scope='module')
def model():
    torch.manual_seed(0)
    return create_video_llm('pe_vlm_tiny_rope_dhr', **TINY).eval()


def _uint8(*shape, seed=0):
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize('shape, fix', [((40, 90, 3), r'permute\(2, 0, 1\)'), ((1, 40, 90), r'\(3, H, W\)'),
                                        ((40, 90), r'\(3, H, W\)')])
def test_float_image_must_be_three_channels_first(model, shape, fix):
    with pytest.raises(ValueError, match=rf'{tuple(shape)}'.replace('(', r'\(').replace(')', r'\)')) as e:
        model.prepare_image(torch.rand(*shape))
    assert '\n' not in str(e.value)
    assert __import__('re').search(fix, str(e.value))


def test_float_channels_first_image_still_taken(model):
    pix, seg = model.prepare_image(torch.rand(3, 40, 90))
    assert pix.shape[1:] == (3, 32, 32) and seg['tiles'][0] * seg['tiles'][1] + 1 == pix.shape[0]


def test_numpy_and_pil_images_equal_the_uint8_tensor(model):
    img = _uint8(40, 90, 3)
    ref, seg = model.prepare_image(img)
    got, seg_np = model.prepare_image(img.numpy())
    assert torch.equal(got, ref) and seg_np == seg
    from PIL import Image
    got_pil, seg_pil = model.prepare_image(Image.fromarray(img.numpy()))
    assert torch.equal(got_pil, ref) and seg_pil == seg
    with pytest.raises(ValueError, match=r'a float image must be \(3, H, W\).*permute\(2, 0, 1\)'):
        model.prepare_image(np.random.rand(40, 90, 3).astype(np.float32))
    with pytest.raises(ValueError, match=r'image must be a torch.Tensor, a numpy array or a PIL image, got list'):
        model.prepare_image([[0, 1, 2]])


def test_float_video_must_be_three_channels_second(model):
    with pytest.raises(ValueError, match=r'float frames must be \(T, 3, H, W\), got \(4, 32, 32, 3\).*'
                                         r'permute\(0, 3, 1, 2\)') as e:
        model.prepare_video(torch.rand(4, 32, 32, 3))
    assert '\n' not in str(e.value)
    with pytest.raises(ValueError, match=r'\(T, 3, H, W\) normalised, got \(4, 1, 32, 32\)'):
        model.prepare_video(torch.rand(4, 1, 32, 32))
    frames = _uint8(4, 32, 32, 3)
    ref, seg = model.prepare_video(frames)
    got, seg_np = model.prepare_video(frames.numpy())
    assert torch.equal(got, ref) and seg_np == seg
    clip, _ = model.prepare_video(ref)
    assert clip is ref
