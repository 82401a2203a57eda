"""Multimodal rotary position schemes for video-LLMs (public entry point; the code lives in
:mod:`zoo.encodings.multimodal`).

Schemes (names accepted by :func:`get_position_ids`; each is one object in one registry, :func:`get_scheme`):

* ``rope1d``: 1-D RoPE (Su et al., RoFormer, arXiv:2104.09864).
* ``mrope`` (= ``qwen2_vl``), ``qwen2_5_vl``: M-RoPE of Qwen2-VL (arXiv:2409.12191) and Qwen2.5-VL's absolute-time
  variant (``tokens_per_second=2``, arXiv:2502.13923); chunked ``mrope_section = [16, 24, 24]``.
* ``mrope_interleave`` (= ``mrope_i``, ``qwen3_vl``): MRoPE-Interleave (Huang et al., arXiv:2510.23095; Qwen3-VL),
  per-frame video blocks, interleaved ``[24, 20, 20]``.
* ``mhrope``: MHRoPE (same paper): MRoPE-Interleave's ids, one axis per key head (``[2, 3, 3]`` of 8 heads).
* ``vrope``: VRoPE (Liu et al., arXiv:2502.11664), four diagonal coordinates.
* ``v2pe``: V2PE (Ge et al., arXiv:2412.09616), fractional visual increments ``stride / 256``.
* ``videorope``: VideoRoPE (Wei et al., arXiv:2502.05173): diagonal layout, temporal scale ``delta`` (2), low-frequency
  temporal allocation.
* ``hope``: HoPE (Li et al., arXiv:2505.20444): VideoRoPE's layout with temporal scale ``gamma`` (drawn from
  :data:`HOPE_GAMMAS` in training), temporal pairs not rotated (NoPE).

Ids: :func:`get_position_ids` (token ids + grids, Qwen ``get_rope_index`` drop-in), :func:`get_layout_position_ids`
(segments), :func:`decode_position_ids` (``rope_deltas`` + cache positions). Rotation: :func:`apply_multimodal_rope`,
or the registered encoding ``multimodal_rope`` (:class:`MultimodalRoPE`) that reads ``Positions.ids``. Conventions
(markers are text, pad value, ``rope_deltas``) are in :mod:`zoo.encodings.multimodal.ids` and
``docs/multimodal_rope.md``.
"""
from .multimodal import *  # noqa: F401,F403  (the public API, listed in __all__)
from .multimodal import __all__  # noqa: F401
