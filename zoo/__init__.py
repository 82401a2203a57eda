"""zoo: position encodings for vision transformers and video-language models, on timm.

``import zoo`` registers every ``pe_vit_*`` model with timm, so ``timm.create_model('pe_vit_small_patch16_rope_mixed_224',
dynamic_img_size=True)`` works.
"""
__version__ = '0.1.0'

from . import encodings  # noqa: F401
from . import models  # noqa: F401  (registers the models with timm)
from . import integrations  # noqa: F401  (CLIP-layout towers clip_pe_vit_*; open_clip configs zoo-ViT-*)
from .models.vlm import create_video_llm, list_video_llms  # noqa: F401  (video-LLMs: pe_vlm_{tiny,small}_{scheme})

#: subpackages loaded on first use (``zoo.datasets.video_backend()``, ``zoo.hf.patch_rope_index`` after ``import zoo``)
_LAZY = ('datasets', 'hf', 'tasks', 'train', 'sweep', 'runs', 'demo')


def __getattr__(name: str):
    """PEP 562: import the subpackage ``name`` of :data:`_LAZY` on first access (``zoo.hf`` needs the ``hf`` extra;
    its import error names it). Raises ``AttributeError`` for any other name."""
    if name in _LAZY:
        import importlib
        return importlib.import_module(f'{__name__}.{name}')
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
