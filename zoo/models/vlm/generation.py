"""Generation for :class:`~zoo.models.vlm.model.VideoLLM`: greedy or sampled decoding with a KV cache.

Every call starts from nothing: a new :class:`zoo.models.attention.KVCache`, position ids computed from this call's
prompt (the decoder encoding's ``position_ids``, the model's evaluation options), and decode positions
``cache_position + rope_deltas`` (its ``decode_position_ids``), so the ``k``-th generated token of a row sits where
:func:`get_position_ids` would put it in the full sequence. Left padding changes no real token's position (ids come
from real tokens only), and padded keys are masked, so a left-padded batch decodes as each sample alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

import torch

from ..attention import KVCache

__all__ = ['GenerateOutput', 'generate', 'select_next_token']


@dataclass
class GenerateOutput:
    """What :func:`generate` returns.

    Attributes:
        sequences: ``(B, L + n)`` int64: the (padded) prompt followed by the ``n`` generated tokens; rows that ended
            (end of turn) are filled with the pad id.
        new_tokens: ``(B, n)`` the generated part.
        rope_deltas: ``(B, 1)`` of the prompt.
        logits: ``(B, n, vocab)`` float32 logits each new token was chosen from (``output_logits=True``), else None.
        position_ids: ``(A, B, L + n)`` positions of every token as the model used them (``output_positions=True``;
            the last token's position is the one it would get if fed back), else None.
    """
    sequences: torch.Tensor
    new_tokens: torch.Tensor
    rope_deltas: torch.Tensor
    logits: Optional[torch.Tensor] = None
    position_ids: Optional[torch.Tensor] = None


def select_next_token(logits: torch.Tensor, do_sample: bool = False, temperature: float = 1.0, top_k: int = 0,
                      top_p: float = 1.0, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Next token ids ``(B,)`` from last-position logits ``(B, V)``: argmax, or a draw after temperature, top-k and
    top-p (nucleus: the smallest set whose probability reaches ``top_p``) filtering.

    Raises:
        ValueError: ``temperature <= 0``, ``top_k < 0`` or ``top_p`` outside ``(0, 1]`` when sampling.
    """
    logits = logits.float()
    if not do_sample:
        return logits.argmax(dim=-1)
    if not temperature > 0:
        raise ValueError(f'temperature must be > 0 when sampling, got {temperature}; fix: use do_sample=False for '
                         'greedy decoding')
    if top_k < 0 or not 0 < top_p <= 1:
        raise ValueError(f'need top_k >= 0 and 0 < top_p <= 1, got top_k={top_k}, top_p={top_p}')
    logits = logits / temperature
    if top_k:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float('-inf'))
    if top_p < 1:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        drop = probs.cumsum(dim=-1) - probs >= top_p  # keep tokens until the mass before them reaches top_p
        logits = logits.scatter(-1, order, sorted_logits.masked_fill(drop, float('-inf')))
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate(model, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
             videos: Optional[Sequence[torch.Tensor]] = None, video_grid_thw: Optional[torch.Tensor] = None,
             images: Optional[Sequence[torch.Tensor]] = None, image_grid_thw: Optional[torch.Tensor] = None,
             second_per_grid_ts: Optional[Sequence[float]] = None, max_new_tokens: int = 16, do_sample: bool = False,
             temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, eos_token_id: Optional[int] = None,
             pad_token_id: Optional[int] = None, generator: Optional[torch.Generator] = None, use_cache: bool = True,
             output_logits: bool = False, output_positions: bool = False,
             inputs_embeds: Optional[torch.Tensor] = None, image_tiles: Optional[torch.Tensor] = None,
             **ignored: Any) -> GenerateOutput:
    """Generate up to ``max_new_tokens`` tokens after a (left-padded) prompt batch.

    Args:
        model: a :class:`~zoo.models.vlm.model.VideoLLM`.
        input_ids, attention_mask, videos, video_grid_thw, images, image_grid_thw, second_per_grid_ts: the prompt,
            as for ``VideoLLM.forward`` (use ``collate(..., padding_side='left')`` for batches).
        max_new_tokens: tokens to generate at most (stops early once every row produced ``eos_token_id``).
        do_sample, temperature, top_k, top_p, generator: see :func:`select_next_token`.
        eos_token_id: end of turn (default the tokenizer's ``<|im_end|>``); ``pad_token_id`` fills ended rows.
        use_cache: decode with the KV cache (``False``: a full forward over the whole sequence per token, the
            reference the cache must match).
        output_logits, output_positions: also return the per-step logits / the positions used.
        inputs_embeds: ``(B, L, dim)`` prompt embeddings with the visual features in place (``model.embed``), to
            reuse encoded visuals; ``input_ids`` still give the positions and the visuals are not encoded again.
        image_tiles: ``(num_images, 2)`` AnyRes tile grids ``[cols, rows]`` of tiled images (from ``collate``).

    Returns:
        :class:`GenerateOutput`.

    Raises:
        ValueError: ``max_new_tokens < 1``; the prompt plus ``max_new_tokens`` longer than ``model.max_seq_len``; the
            input errors of ``VideoLLM.forward``; unknown keyword arguments.
    """
    if ignored:
        raise ValueError(f'generate() got unknown argument(s) {sorted(ignored)}')
    model._check_ids(input_ids, attention_mask)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f'max_new_tokens must be a positive int, got {max_new_tokens!r}')
    b, length = input_ids.shape
    if length + max_new_tokens > model.max_seq_len:
        raise ValueError(f'generate past the maximum length: a prompt of {length} tokens plus max_new_tokens='
                         f'{max_new_tokens} exceeds max_seq_len={model.max_seq_len}; fix: lower max_new_tokens to '
                         f'{max(model.max_seq_len - length, 0)} or less, shorten the prompt (fewer frames), or build '
                         'the model with a larger max_seq_len')
    tok = model.tokenizer
    eos = tok.eos_id if eos_token_id is None else int(eos_token_id)
    pad = tok.pad_id if pad_token_id is None else int(pad_token_id)
    device = input_ids.device
    mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask.to(torch.int64)
    if inputs_embeds is None:
        embeds = model.embed(input_ids, videos, video_grid_thw, images, image_grid_thw, image_tiles)
    elif tuple(inputs_embeds.shape[:2]) != (b, length):
        raise ValueError(f'inputs_embeds must be (B, L, dim) = ({b}, {length}, dim), got {tuple(inputs_embeds.shape)}')
    else:
        embeds = inputs_embeds
    pos, deltas = model.position_ids(input_ids, mask, image_grid_thw, video_grid_thw, second_per_grid_ts,
                                     scheme_options=model.scheme_options,  # evaluation options, never drawn
                                     image_tiles=image_tiles)
    cache = KVCache(len(model.decoder.blocks)) if use_cache else None
    hidden = model.decoder(embeds, pos, model.key_mask(mask), cache)
    logits = model.decoder.logits(hidden[:, -1]).float()
    seq, all_pos = input_ids, [pos]
    new: List[torch.Tensor] = []
    step_logits: List[torch.Tensor] = []
    done = torch.zeros(b, dtype=torch.bool, device=device)
    for k in range(max_new_tokens):
        nxt = select_next_token(logits, do_sample, temperature, top_k, top_p, generator)
        nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
        if output_logits:
            step_logits.append(logits)
        new.append(nxt)
        seq = torch.cat([seq, nxt[:, None]], dim=1)
        mask = torch.cat([mask, torch.ones(b, 1, dtype=mask.dtype, device=device)], dim=1)
        done = done | (nxt == eos)
        step_pos = model.decoder.pe.decode_position_ids(deltas, torch.tensor([length + k], device=device))
        all_pos.append(step_pos.to(pos.dtype))
        if bool(done.all()) or k + 1 == max_new_tokens:
            break
        if use_cache:
            hidden = model.decoder(model.decoder.embed(nxt[:, None]), step_pos, model.key_mask(mask), cache)
        else:
            full = torch.cat(all_pos, dim=-1)
            x = torch.cat([embeds, model.decoder.embed(seq[:, length:])], dim=1)
            hidden = model.decoder(x, full, model.key_mask(mask))
        logits = model.decoder.logits(hidden[:, -1]).float()
    new_tokens = torch.stack(new, dim=1)
    return GenerateOutput(seq, new_tokens, deltas,
                          torch.stack(step_logits, dim=1) if output_logits else None,
                          torch.cat(all_pos, dim=-1) if output_positions else None)
