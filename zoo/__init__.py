"""zoo: position encodings for vision transformers and video-language models, on timm.

``import zoo`` registers every ``pe_vit_*`` model with timm, so ``timm.create_model('pe_vit_small_patch16_rope_mixed_224',
dynamic_img_size=True)`` works.
"""
__version__ = '0.1.0'

from . import encodings  # noqa: F401
from . import models  # noqa: F401  (registers the models with timm)
from . import integrations  # noqa: F401  (CLIP-layout towers clip_pe_vit_*; open_clip configs zoo-ViT-*)
from .models.vlm import create_video_llm, list_video_llms  # noqa: F401  (video-LLMs: pe_vlm_{tiny,small}_{scheme})
