"""Multimodal rotary position schemes for video-LLMs: one scheme object per scheme (:mod:`.schemes`), position ids of
token sequences (:mod:`.ids`), and the tables, the rotation and the registered encoding ``multimodal_rope``
(:mod:`.encoding`). ``zoo.encodings.multimodal_rope`` re-exports the public functions."""
from .schemes import (HOPE_GAMMAS, V2PE_STRIDES, Scheme, get_scheme, list_schemes, register_scheme, sample_hope_gamma,
                      sample_v2pe_stride)
from .ids import (PAD_POSITION_ID, QWEN_TOKEN_IDS, decode_position_ids, get_layout_position_ids, get_position_ids,
                  layout_to_inputs, scheme_axis_names, scheme_num_axes, training_options)
from .encoding import (MultimodalRoPE, apply_multimodal_rope, axis_of_pair, axis_table, default_mrope_section,
                       multimodal_rope_cos_sin, multimodal_rope_tables)

__all__ = ['HOPE_GAMMAS', 'V2PE_STRIDES', 'PAD_POSITION_ID', 'QWEN_TOKEN_IDS', 'Scheme', 'MultimodalRoPE',
           'get_scheme', 'list_schemes', 'register_scheme', 'scheme_num_axes', 'scheme_axis_names',
           'get_position_ids', 'get_layout_position_ids', 'layout_to_inputs', 'decode_position_ids',
           'training_options', 'sample_v2pe_stride', 'sample_hope_gamma', 'axis_of_pair', 'axis_table',
           'default_mrope_section', 'multimodal_rope_tables', 'multimodal_rope_cos_sin', 'apply_multimodal_rope']
