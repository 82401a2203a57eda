"""Position encodings. No backbone code lives here: backbones call ``create_pos_encoding``."""
from .base import AttnTerm, Positions, PosEncoding, check_keep_indices, pe_aux_loss
from .checkpoint import CHECKPOINT_LAYOUTS, CheckpointMismatchError
from .extrapolation import STRATEGIES, Extrapolation
from .registry import (create_pos_encoding, get_pos_encoding_class, list_pos_encodings, pos_encoding_name,
                       register_pos_encoding)
from .absolute import LearnedAPE, NoPE, SinCos1D, SinCos2D, SinCos3D, SpaceTimeAPE
from .conditional import PEG
from .fourier import LearnableFourierPE
from .rotation import apply_rope, grid_coords, rope_frequencies, rope_sin_cos
from .rotary import RoPE3D, RoPEAxial, RoPEMixed, RoPEMixedAPE, RotaryTerm
from .irpe import IRPE
from .comrope import ComRoPE, LieRE
from .distance import FIRE, ALiBi, KerpleLog, KerplePower, alibi_slopes
from .gta import GTA
from .randomized import RandomPositions
from .loope import LOOPE
from .seqpe import SeqPE
from .lape import LaPE, LaPETerm
from .urpe import URPE, URPETerm
from . import multimodal_rope
