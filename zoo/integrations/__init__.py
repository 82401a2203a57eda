"""Bridges between zoo models and other libraries.

* :mod:`zoo.integrations.open_clip`: every zoo image model as the image tower of an open_clip CLIP model
  (``open_clip.create_model_and_transforms('zoo-ViT-S-16-rope_mixed')``), and a converter from open_clip / OpenAI CLIP
  visual towers into zoo models of any position encoding. Importing ``zoo`` registers the CLIP-layout timm towers
  (``clip_pe_vit_*``) always and the open_clip configs when ``open_clip_torch`` is installed (extra ``clip``).
"""
from . import open_clip  # noqa: F401  (registers the CLIP towers with timm, and with open_clip when it is installed)
