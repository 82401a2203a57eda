"""The video-LLM task: multiple-choice video QA (MVBench-style records) -> chat prompts -> loss on the answer only.

Each record becomes one user turn ``<video> Question: ... Options: (A) ... (B) ... Answer with the option's letter
from the given choices directly.`` (the MVBench / lmms-eval prompt, "MVBench: A Comprehensive Multi-modal Video
Understanding Benchmark", Li et al., arXiv:2311.17005) and the answer turn ``<letter> <|im_end|>``. The loss is the
cross-entropy of the answer tokens only (teacher forcing).

Evaluation counts (:class:`zoo.tasks.metrics.EvalCounts`): ``correct1`` = multiple-choice accuracy (the right letter
scores highest among the options' letters at the answer position), ``correct5`` = exact match (greedy argmax equals
every answer token, i.e. greedy decoding would write the answer), ``loss_sum`` = per-sample mean answer cross-entropy.
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any, List

import torch
import torch.nn.functional as F
from torch import nn

from .metrics import EvalCounts
from .base import Batch, Task

__all__ = ['VideoQATask', 'VideoQABatch', 'format_question']

LETTERS = string.ascii_uppercase
_IGNORE = -100


def format_question(question: str, options: List[str]) -> str:
    """The MVBench-style question text with lettered options.

    Raises:
        ValueError: fewer than 2 or more than 26 options.
    """
    if not 2 <= len(options) <= len(LETTERS):
        raise ValueError(f'a multiple-choice question needs 2 to {len(LETTERS)} options, got {len(options)}')
    opts = ' '.join(f'({LETTERS[i]}) {o}' for i, o in enumerate(options))
    return (f'Question: {question} Options: {opts} Answer with the option\'s letter from the given choices '
            'directly.')


@dataclass
class VideoQABatch(Batch):
    """A :class:`Batch` whose ``targets`` are the answer tokens of every sample, concatenated ``(N,)`` (the model
    returns logits at the ``N`` positions that predict them), plus per sample the number of answer tokens, the token
    ids of its option letters and the right option's index."""
    samples: int = 0
    answer_counts: List[int] = field(default_factory=list)
    option_ids: List[torch.Tensor] = field(default_factory=list)
    answers: List[int] = field(default_factory=list)

    @property
    def size(self) -> int:
        return self.samples


class VideoQATask(Task):
    """Multiple-choice video QA for a :class:`zoo.models.vlm.VideoLLM`.

    Loader batches are ``{'items': [...], 'bad': [...]}`` from :func:`zoo.datasets.videoqa.collate_videoqa` (items of
    :class:`zoo.datasets.videoqa.VideoQADataset`: uint8 frames, timestamps, the record).

    Args:
        model: the (unwrapped) video-LLM; only its tokenizer, prompt builder and frame preprocessing are used here.
    """

    def __init__(self, model: nn.Module):
        self.model = model
        tok = model.tokenizer
        self.letter_ids = []
        for c in LETTERS:
            ids = tok.encode(c)
            if len(ids) != 1:
                raise ValueError(f'option letter {c!r} is not a single token ({ids}); the task needs one token per '
                                 'letter')
            self.letter_ids.append(ids[0])

    def to_batch(self, raw: Any, device: torch.device, train: bool) -> VideoQABatch:
        items, bad = raw['items'], raw['bad']
        if not items:
            return VideoQABatch(None, torch.empty(0, dtype=torch.int64), bad, 0)
        m = self.model
        prompts, clips, options, answers = [], [], [], []
        for it in items:
            r = it['record']
            clip, seg = m.prepare_video(it['frames'], it['timestamps'])
            prompts.append(m.prompt([seg, format_question(r.question, r.options)], answer=LETTERS[r.answer]))
            clips.append(clip.to(device, non_blocking=True))
            options.append(torch.tensor(self.letter_ids[:len(r.options)], dtype=torch.int64))
            answers.append(int(r.answer))
        b = m.collate(prompts, 'right')
        answer = b['labels'][:, 1:] != _IGNORE          # token k + 1 is an answer token: logits at k predict it
        logits_mask = torch.zeros_like(b['labels'], dtype=torch.bool)
        logits_mask[:, :-1] = answer
        inputs = dict(input_ids=b['input_ids'].to(device), attention_mask=b['attention_mask'].to(device),
                      videos=clips, video_grid_thw=b['video_grid_thw'], second_per_grid_ts=b['second_per_grid_ts'],
                      logits_mask=logits_mask.to(device))
        return VideoQABatch(inputs, b['labels'][:, 1:][answer].to(device), bad, len(items),
                            answer.sum(dim=1).tolist(), options, answers)

    def forward(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        return model(**batch.inputs).logits  # (N, vocab): the answer positions only

    def loss(self, outputs: torch.Tensor, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(outputs.float(), batch.targets)

    def new_counts(self) -> EvalCounts:
        return EvalCounts()

    def update_counts(self, counts: EvalCounts, outputs: torch.Tensor, batch: VideoQABatch) -> None:
        logits = outputs.float()
        start = 0
        for r, n in enumerate(batch.answer_counts):
            lg, tg = logits[start:start + n], batch.targets[start:start + n]
            start += n
            opts = batch.option_ids[r].to(lg.device)
            counts.correct1 += int(int(lg[0, opts].argmax()) == batch.answers[r])  # the letter comes first
            counts.correct5 += int(bool((lg.argmax(-1) == tg).all()))
            counts.loss_sum += float(F.cross_entropy(lg, tg))
            counts.n += 1
