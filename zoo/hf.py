"""Hugging Face adapter (optional extra ``zoo[hf]``): any zoo multimodal RoPE scheme in a Qwen2-VL, Qwen2.5-VL or
Qwen3-VL model instance from ``transformers``, without patching library source.

:func:`patch_rope_index` replaces the instance's position-id method (``get_rope_index`` on the inner
``Qwen*VLModel`` in transformers 4.57 - 5.x; found by name, bound by its own signature) with
:func:`zoo.encodings.multimodal_rope.get_position_ids` for the chosen scheme. When the scheme's frequency
allocation differs from the model's (VideoRoPE, HoPE, VRoPE, MRoPE-I on a Qwen2-VL, ...), the text model's rotary
embedding is replaced too, by the zoo's tables for that scheme (:func:`multimodal_rope_cos_sin`), so the model runs the
scheme and not only its ids. With the scheme the model already uses (``mrope`` on Qwen2-VL, ``qwen2_5_vl`` on
Qwen2.5-VL, ``mrope_interleave`` on Qwen3-VL) only the ids are replaced and the outputs are unchanged wherever the
zoo's ids equal transformers' (see the note on 5.x below).

Conventions bridged here: ``rope_deltas`` are returned in transformers' form (``next position - real tokens``, used
with ``attention_mask.cumsum(-1) - 1``), padded slots hold 0, 1-axis schemes are broadcast to 3 rows, and 4-axis
schemes (VRoPE) are returned with a leading text row (5 rows), because the text model reads a 4-row tensor as text +
t, h, w. On Qwen3-VL, whose prompts put every frame in its own block after a timestamp, video grids are split into
frames for every scheme.

Note: transformers 5.x places the text after a video at ``s + max(h, w)`` (not ``1 +`` the largest id); the zoo
follows the original Qwen code / transformers 4.57 (``docs/multimodal_rope.md``). The two agree for images and for
videos with ``t <= max(h, w)`` merged patches (Qwen2.5-VL: ``tau(t-1) < max(h, w)``).
"""
from __future__ import annotations

import inspect
import types
from typing import Any, Dict, Optional, Sequence

import torch
from torch import nn

from zoo.encodings.multimodal_rope import axis_table, get_position_ids, get_scheme, multimodal_rope_cos_sin

__all__ = ['patch_rope_index', 'unpatch_rope_index', 'native_scheme']

#: The scheme each supported model type uses natively.
NATIVE_SCHEMES = {'qwen2_vl': 'mrope', 'qwen2_5_vl': 'qwen2_5_vl', 'qwen3_vl': 'mrope_interleave',
                  'qwen3_vl_moe': 'mrope_interleave'}
_ATTR = '_zoo_rope_patch'


def _inner(model: nn.Module) -> nn.Module:
    """The module that owns ``get_rope_index`` (``Qwen*VLModel``): the model itself or its ``.model``."""
    for cand in (model, getattr(model, 'model', None)):
        if cand is not None and callable(getattr(cand, 'get_rope_index', None)) and hasattr(cand, 'config'):
            return cand
    raise ValueError(f'{type(model).__name__} has no get_rope_index (on itself or .model); patch_rope_index supports '
                     f'Qwen2-VL, Qwen2.5-VL and Qwen3-VL models ({sorted(NATIVE_SCHEMES)})')


def native_scheme(model: nn.Module) -> str:
    """The zoo scheme a Qwen-VL model uses natively (``'mrope'``, ``'qwen2_5_vl'``, ``'mrope_interleave'``).

    Raises:
        ValueError: another model type.
    """
    mt = getattr(_inner(model).config, 'model_type', None)
    if mt not in NATIVE_SCHEMES:
        raise ValueError(f'model type {mt!r} is not supported; fix: use a Qwen2-VL, Qwen2.5-VL or Qwen3-VL model')
    return NATIVE_SCHEMES[mt]


def _text_geometry(cfg) -> Dict[str, Any]:
    text = getattr(cfg, 'text_config', cfg)
    rope = dict(getattr(text, 'rope_parameters', None) or getattr(text, 'rope_scaling', None) or {})
    heads = int(text.num_attention_heads)
    head_dim = int(getattr(text, 'head_dim', None) or text.hidden_size // heads)
    theta = float(rope.get('rope_theta', getattr(text, 'rope_theta', 1e6)))
    return dict(head_dim=head_dim, num_kv_heads=int(getattr(text, 'num_key_value_heads', None) or heads),
                theta=theta, section=rope.get('mrope_section'))


def _text_rotary(model: nn.Module) -> nn.Module:
    inner = _inner(model)
    lm = getattr(inner, 'language_model', None)
    rot = getattr(lm, 'rotary_emb', None) if lm is not None else getattr(inner, 'rotary_emb', None)
    if rot is None:
        raise ValueError(f'{type(model).__name__}: no text rotary embedding found (language_model.rotary_emb)')
    return rot


def unpatch_rope_index(model: nn.Module) -> None:
    """Undo :func:`patch_rope_index` (nothing happens for a model that is not patched)."""
    state = getattr(model, _ATTR, None)
    if state is None:
        return
    inner, rot = state['inner'], state['rotary']
    inner.__dict__.pop('get_rope_index', None)
    if rot is not None:
        rot.__dict__.pop('forward', None)
    if getattr(inner, 'rope_deltas', None) is not None:
        inner.rope_deltas = None
    delattr(model, _ATTR)


def patch_rope_index(model: nn.Module, scheme: str, *, frequencies: str = 'scheme',
                     mrope_section: Optional[Sequence[int]] = None, **scheme_kwargs: Any) -> nn.Module:
    """Make a Qwen2-VL / Qwen2.5-VL / Qwen3-VL model instance use a zoo multimodal RoPE scheme.

    Args:
        model: a ``Qwen2VLForConditionalGeneration``, ``Qwen2_5_VLForConditionalGeneration``,
            ``Qwen3VLForConditionalGeneration`` (or their inner ``*Model``), patched in place.
        scheme: any zoo scheme (``zoo.encodings.multimodal_rope.list_schemes()``).
        frequencies: ``'scheme'`` (default): the scheme's own frequency allocation (the text rotary embedding is
            replaced when it differs from the model's); ``'model'``: only the ids change, the model keeps its
            allocation (3-axis and 1-axis schemes only).
        mrope_section: the scheme's ``[t, h, w]`` split in rotary pairs; default: the model's ``mrope_section`` when
            the scheme accepts it, else the scheme's published split scaled to the head dim.
        **scheme_kwargs: the scheme's options (``delta`` for VideoRoPE, ``gamma`` for HoPE, ``stride`` for V2PE,
            ``tokens_per_second`` for ``qwen2_5_vl``: default the model's ``vision_config.tokens_per_second``).

    Returns:
        ``model`` (patched; :func:`unpatch_rope_index` restores it).

    Raises:
        ValueError: an unsupported model; an unknown scheme or option; ``frequencies='scheme'`` with ``mhrope``
            (per-key-head tables do not fit transformers' one-table rotation; fix: ``frequencies='model'``);
            ``frequencies='model'`` with a 4-axis scheme (VRoPE); a section that does not fit the head dim; a scheme
            that is not one id set for every layer (``Scheme.hf_refusal``: PyPE's per-layer ids and image-block mask).
    """
    if frequencies not in ('scheme', 'model'):
        raise ValueError(f"frequencies must be 'scheme' or 'model', got {frequencies!r}")
    refusal = get_scheme(scheme).hf_refusal
    if refusal:
        raise ValueError(f'scheme {scheme!r} cannot be patched into a Hugging Face model: {refusal}; fix: use it in '
                         f"the zoo video-LLM (zoo.create_video_llm('pe_vlm_tiny_{scheme}')) or a scheme with one id "
                         'set for all layers')
    unpatch_rope_index(model)
    inner = _inner(model)
    native = native_scheme(model)
    cfg = inner.config
    spec = get_scheme(scheme)
    opts = dict(scheme_kwargs)
    if spec.uses_seconds({}) and 'tokens_per_second' not in opts:  # Qwen2.5-VL time: default the model's rate
        tps = getattr(getattr(cfg, 'vision_config', None), 'tokens_per_second', None)
        if tps is not None:
            opts['tokens_per_second'] = tps
    spec.options(dict(opts))  # validate now
    geo = _text_geometry(cfg)
    head_dim = geo['head_dim']
    native_axes = axis_table(native, head_dim, 1, geo['section'])
    rotary = None
    if frequencies == 'model':
        if spec.num_axes not in (1, 3):
            raise ValueError(f"scheme {scheme!r} has {spec.num_axes} position axes; the model's own allocation "
                             "drives 3 (t, h, w); fix: frequencies='scheme'")
    else:
        if spec.per_head:
            raise ValueError(f"scheme {scheme!r} allocates frequencies per key head, which transformers' rotation (one "
                             "cos/sin table for every head) cannot express; fix: frequencies='model' (its "
                             'MRoPE-Interleave ids with the model\'s allocation)')
        section = mrope_section
        if section is None and spec.default_section is not None and geo['section'] is not None:
            try:
                axis_table(scheme, head_dim, 1, geo['section'])
                section = list(geo['section'])
            except ValueError:
                section = None
        try:
            axes = axis_table(scheme, head_dim, 1, section)
        except ValueError as e:
            raise ValueError(f'scheme {scheme!r} cannot split this model\'s head_dim {head_dim} (model mrope_section '
                             f'{geo["section"]}): {e}') from None
        if not (axes.shape == native_axes.shape and torch.equal(axes, native_axes)):
            rotary = _patch_rotary(model, scheme, head_dim, section, geo['theta'])
    split_frames = getattr(cfg, 'model_type', '') in ('qwen3_vl', 'qwen3_vl_moe') and \
        not spec.split_video_frames(spec.options(dict(opts)))
    merge = int(getattr(getattr(cfg, 'vision_config', cfg), 'spatial_merge_size', 2))
    ids_cfg = dict(image_token_id=int(cfg.image_token_id), video_token_id=int(cfg.video_token_id),
                   vision_start_token_id=int(getattr(cfg, 'vision_start_token_id', 0) or 0))
    orig = inner.get_rope_index
    sig = inspect.signature(orig)

    def get_rope_index(self, *args, **kwargs):
        bound = sig.bind_partial(*args, **kwargs)
        a = dict(bound.arguments)
        a.update(a.pop('kwargs', {}) or {})
        input_ids = a['input_ids']
        mask = a.get('attention_mask')
        mask = mask if isinstance(mask, torch.Tensor) and mask.dim() == 2 else None
        video_grid, secs = a.get('video_grid_thw'), a.get('second_per_grid_ts')
        if split_frames and video_grid is not None:
            reps = video_grid[:, 0]
            if secs is not None:
                secs = torch.repeat_interleave(torch.as_tensor(secs, dtype=torch.float64).flatten().cpu(), reps.cpu())
            video_grid = torch.repeat_interleave(video_grid, reps, dim=0)
            video_grid[:, 0] = 1
        if not spec.uses_seconds(opts):
            secs = None
        pos, deltas = get_position_ids(scheme, input_ids, a.get('image_grid_thw'), video_grid, mask, secs,
                                       spatial_merge_size=merge, mm_token_type_ids=a.get('mm_token_type_ids'),
                                       **ids_cfg, **opts)
        b, length = input_ids.shape
        real = torch.ones_like(input_ids, dtype=torch.bool) if mask is None else mask.bool()
        pos = pos.masked_fill(~real.unsqueeze(0), 0)  # transformers' pad value
        deltas = deltas + (length - real.sum(dim=1, keepdim=True)).to(deltas.dtype)  # next - real tokens
        if spec.num_axes == 1:
            pos = pos.expand(3, -1, -1)
        elif spec.num_axes > 3:  # a leading text row, so that the text model does not read row 0 as text
            text = (real.long().cumsum(-1) - 1).masked_fill(~real, 0).to(pos.dtype)
            pos = torch.cat([text.unsqueeze(0), pos], dim=0)
        return pos, deltas

    inner.get_rope_index = types.MethodType(get_rope_index, inner)
    if getattr(inner, 'rope_deltas', None) is not None:
        inner.rope_deltas = None
    setattr(model, _ATTR, dict(inner=inner, rotary=rotary, scheme=scheme, frequencies=frequencies))
    return model


def _patch_rotary(model: nn.Module, scheme: str, head_dim: int, section, theta: float) -> nn.Module:
    rot = _text_rotary(model)
    num_axes = get_scheme(scheme).num_axes
    scaling = float(getattr(rot, 'attention_scaling', 1.0) or 1.0)

    def forward(self, x, position_ids):
        pos = position_ids if position_ids.dim() == 3 else position_ids.unsqueeze(0)
        if pos.shape[0] >= num_axes:
            pos = pos[-num_axes:]       # drop leading text rows (generation prepends one)
        else:
            pos = pos[:1]               # text-only steps: every row holds the same position
        cos, sin = multimodal_rope_cos_sin(pos.to(x.device), head_dim, scheme, section, theta)
        return (cos * scaling).to(x.dtype), (sin * scaling).to(x.dtype)

    rot.forward = types.MethodType(forward, rot)
    return rot
