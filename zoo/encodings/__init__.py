"""Position encodings. No backbone code lives here: backbones call ``create_pos_encoding``."""
from .base import AttnTerm, Positions, PosEncoding
from .registry import create_pos_encoding, list_pos_encodings, register_pos_encoding
