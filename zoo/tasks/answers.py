"""Reading a video-LLM's answers: greedy generation for a batch of questions, the option an answer names, and the
seeded random option scored when no answer can be read (MVBench's protocol, "MVBench: A Comprehensive Multi-modal
Video Understanding Benchmark", arXiv:2311.17005)."""
from __future__ import annotations

import re
import zlib
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from zoo.datasets.video import resize_frames
from .videoqa import LETTERS, format_question

__all__ = ['parse_choice', 'fallback_choice', 'generate_answers']

_LEAD = re.compile(r'^\W*([a-z]|\d+)(?:\W|$)', re.IGNORECASE)
_PAREN = re.compile(r'\(([a-z])\)', re.IGNORECASE)


def parse_choice(text: str, options: Sequence[str]) -> Optional[int]:
    """The option a generated answer names, or ``None``.

    Read in order: a leading option letter (``"B"``, ``"(b)"``, ``"b. red"``; the tokenizer lower-cases), a
    leading 0-based option index (``"2"``), a letter in parentheses anywhere (``"the answer is (c)"``), the exact
    text of one option (case-insensitive). Letters or indices beyond the options do not count.
    """
    s = ' '.join(str(text).split())
    n = len(options)
    m = _LEAD.match(s)
    if m:
        tok = m.group(1)
        k = int(tok) if tok.isdigit() else LETTERS.index(tok.upper())
        if k < n:
            return k
    m = _PAREN.search(s)
    if m and LETTERS.index(m.group(1).upper()) < n:
        return LETTERS.index(m.group(1).upper())
    low = s.lower().strip(' .')
    hits = [i for i, o in enumerate(options) if ' '.join(str(o).split()).lower().strip(' .') == low]
    return hits[0] if len(hits) == 1 else None


def fallback_choice(seed: int, item_id: str, n: int) -> int:
    """The seeded random option scored for an unreadable answer: depends on (seed, item) only."""
    return int(np.random.default_rng([seed, zlib.crc32(item_id.encode())]).integers(n))


def generate_answers(model, items: List[Dict[str, Any]], size: int, max_new_tokens: int, device) -> List[str]:
    """Generated answer texts of a left-padded batch (greedy, KV cache).

    Args:
        model: a :class:`zoo.models.vlm.VideoLLM`.
        items: dicts with ``record`` (a video-QA record: question, options), ``frames`` (uint8 ``(T, H, W, 3)``) and
            ``timestamps`` (seconds).
        size: frame size in px (frames of another size are resized, shorter side + centre crop).
        max_new_tokens: tokens generated per answer.

    Returns:
        One text per item, cut at the end-of-turn or padding token.
    """
    prompts, clips = [], []
    for it in items:
        r = it['record']
        frames = resize_frames(it['frames'], size) if it['frames'].shape[1:3] != (size, size) else it['frames']
        clip, seg = model.prepare_video(frames, it['timestamps'])
        prompts.append(model.prompt([seg, format_question(r.question, r.options)]))
        clips.append(clip.to(device))
    b = model.collate(prompts, 'left')
    out = model.generate(b['input_ids'].to(device), attention_mask=b['attention_mask'].to(device), videos=clips,
                         video_grid_thw=b['video_grid_thw'], second_per_grid_ts=b['second_per_grid_ts'],
                         max_new_tokens=max_new_tokens)
    eos, pad = model.tokenizer.eos_id, model.tokenizer.pad_id
    texts = []
    for row in out.new_tokens.tolist():
        keep = []
        for tok in row:
            if tok in (eos, pad):
                break
            keep.append(tok)
        texts.append(model.tokenizer.decode(keep))
    return texts
