"""Backbones and their timm registration. Importing this module registers every ``pe_vit_*`` model with timm."""
from .checkpoint_filters import CheckpointMismatchError, check_state_dict, checkpoint_filter_fn, unwrap_state_dict
from .vit import PE_OF_MODEL, PEVisionTransformer
