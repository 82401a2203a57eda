"""Backbones and their timm registration. Importing this module registers every ``pe_vit_*`` (image) and
``pe_video_vit_*`` (video) model with timm."""
from .checkpoint_filters import (CheckpointMismatchError, check_state_dict, checkpoint_filter_fn, unwrap_state_dict,
                                 video_checkpoint_filter_fn)
from .vit import PE_OF_MODEL, PEVisionTransformer
from .video_vit import PEVideoTransformer, TubeletEmbed
from .inflate import inflate_2d_to_3d
