"""Reading a video-LLM's answers: greedy generation for a batch of questions, the option an answer names, and the
seeded random option scored when no answer can be read (MVBench's protocol, "MVBench: A Comprehensive Multi-modal
Video Understanding Benchmark", arXiv:2311.17005)."""
from __future__ import annotations

import re
import zlib
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from zoo.datasets.video import resize_frames
from .videoqa import LETTERS, format_question

__all__ = ['parse_choice', 'fallback_choice', 'generate_answers']

_PUNCT = ' \t.,;:!?"\'`*()[]{}<>'
#: "answer" / "option" / "choice" and what links it to the letter: "the answer is", "Answer:", "option", ...
_CUE = r'\b(?i:answer|option|choice)\b(?:\s+(?i:is|would\s+be|should\s+be|will\s+be))?\s*[:=\-]?\s*'
#: after a cue: any letter before punctuation or the end ("answer: d", "the answer is d."), or a capital letter
#: before a space ("Answer: B because ..."; a capital mid-sentence is no article)
_AFTER_CUE = re.compile(_CUE + r'[(\[]?(?:([A-Za-z])(?=\s*(?:$|[.)\]:;,!?]))|([A-Z])(?=\s))')
_PAREN = re.compile(r'[(\[]([A-Za-z])[)\]]')
_ALONE = re.compile(r'^\W*([A-Za-z])\W*$')
#: at the start: a letter closed by punctuation ("B.", "b)", "C:", "(d) blue") ...
_LEAD_CLOSED = re.compile(r'^\W*?[(\[]?([A-Za-z])(?:[.):\]]|\s*[-–]\s)')
#: ... or followed by a space and more words ("B red", "c is the one")
_LEAD_WORD = re.compile(r'^\W*([A-Za-z])\s+(\S.*)$')
_INDEX = re.compile(r'^\W*(\d+)\W*$')


def _norm(text: Any) -> str:
    return ' '.join(str(text).split()).strip(_PUNCT).lower()


def _letter(tok: str, n: int) -> Optional[int]:
    k = LETTERS.index(tok.upper())
    return k if k < n else None


def parse_choice(text: str, options: Sequence[str]) -> Optional[int]:
    """The option a generated answer names, or ``None`` when it names none (or several).

    Read in the order a person reads an answer (``tests/test_answers.py`` holds a table of real-style outputs):

    1. the exact text of one option, case and surrounding punctuation aside, also after a cue ("the answer is
       red."): numbers included, so with options ``1 2 3 4`` the answer ``"2"`` is the option ``2``;
    2. a letter that can only be a letter: alone (``"B"``, ``"(c)"``, ``"d."``), after a cue (``"answer: d"``,
       ``"the answer is d."``, ``"Answer: B because ..."``), in parentheses anywhere (``"it is (c)"``; several
       different ones are ambiguous), or at the start, closed by punctuation (``"b. red"``, ``"C) blue"``) or followed
       by words (``"B red"``), except the article ``a`` and the pronoun ``I`` there, which count only when the words
       are that option's text (``"A red"`` with option A ``red``). Letters beyond the options do not count;
    3. a whole-number answer as a 0-based option index (``"2"`` with options ``red green blue`` is ``blue``);
    4. the text of exactly one option inside the answer as whole words (``"I see a red circle"`` is ``red``; when
       several options occur, those contained in a longer one that occurs are dropped).

    Args:
        text: the generated answer.
        options: the option texts, in letter order.

    Returns:
        The 0-based option index, or ``None``.
    """
    s = ' '.join(str(text).split())
    n = len(options)
    opts = [_norm(o) for o in options]

    def exact(body: str) -> Optional[int]:
        hits = [i for i, o in enumerate(opts) if o and o == _norm(body)]
        return hits[0] if len(hits) == 1 else None

    bodies = [s] + [s[m.end():] for m in re.finditer(_CUE, s)]
    for body in bodies:
        k = exact(body)
        if k is not None:
            return k

    def letter(pattern: re.Pattern, anywhere: bool = False) -> Tuple[bool, Optional[int]]:
        m = pattern.search(s) if anywhere else pattern.match(s)
        return (True, _letter(next(g for g in m.groups() if g), n)) if m else (False, None)

    def in_parentheses() -> Tuple[bool, Optional[int]]:
        found = {_letter(t, n) for t in _PAREN.findall(s)}
        return (bool(found), found.pop() if len(found) == 1 else None)  # several different: ambiguous

    def leading_word() -> Tuple[bool, Optional[int]]:
        m = _LEAD_WORD.match(s)
        k = _letter(m.group(1), n) if m else None
        ok = k is not None and (m.group(1).lower() not in 'ai' or exact(m.group(2)) == k)
        return ok, k if ok else None

    def index() -> Tuple[bool, Optional[int]]:
        m = _INDEX.match(s)
        return (True, int(m.group(1)) if int(m.group(1)) < n else None) if m else (False, None)

    for hit, k in (letter(_ALONE), letter(_AFTER_CUE, anywhere=True), in_parentheses(), letter(_LEAD_CLOSED),
                   leading_word(), index()):
        if hit:
            return k
    low = ' ' + re.sub(r'[^\w]+', ' ', s.lower()) + ' '
    hits = [i for i, o in enumerate(opts) if o and ' ' + re.sub(r'[^\w]+', ' ', o).strip() + ' ' in low]
    hits = [i for i in hits if not any(j != i and opts[i] in opts[j] for j in hits)]
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
