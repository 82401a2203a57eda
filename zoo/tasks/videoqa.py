"""The video-LLM task: multiple-choice video QA (MVBench-style records) -> chat prompts -> loss on the answer only.

Each record becomes one user turn ``<video> Question: ... Options: (A) ... (B) ... Answer with the option's letter
from the given choices directly.`` (the MVBench / lmms-eval prompt, "MVBench: A Comprehensive Multi-modal Video
Understanding Benchmark", Li et al., arXiv:2311.17005) and the answer turn ``<letter> <|im_end|>``. The loss is the
cross-entropy of the answer tokens only (teacher forcing).

Evaluation counts (:class:`zoo.tasks.metrics.EvalCounts`): ``correct1`` = multiple-choice accuracy (the right letter
scores highest among the options' letters at the answer position), ``correct5`` = exact match (greedy argmax equals
every answer token, i.e. greedy decoding would write the answer), ``loss_sum`` = per-sample mean answer cross-entropy.

Training (``zoo train-vlm``): :class:`VideoQATraining` builds the video-LLM, opens the records and reads their frames
(:class:`SeededVideoQADataset`: random offsets a resumed run reads again).
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from zoo.datasets import FrameSampling, VideoReadError, read_video
from zoo.datasets.video_folder import BadVideo
from zoo.datasets.videoqa import VideoQADataset, collate_videoqa, load_benchmark
from .base import Batch, Task
from .metrics import EvalCounts
from .training import TrainingData, TrainingTask

__all__ = ['VideoQATask', 'VideoQABatch', 'format_question', 'VideoQATraining', 'SeededVideoQADataset']

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

    Training metrics (:meth:`train_predictions`, logged per epoch by the training loop as ``train_top1`` and
    ``train_top_share``): the option letter scored highest at the answer position against the right one, so
    ``train_top_share`` is the share of the most frequent letter (near 100 %: the one-letter plateau).

    Args:
        model: the (unwrapped) video-LLM; only its tokenizer, prompt builder and frame preprocessing are used here.
        num_options: the most options a training question has; the training metrics count letters ``A`` to this
            one (``train_outcomes``). ``None``: no training metrics.

    Raises:
        ValueError: an option letter that is not one token; ``num_options`` outside 2-26.
    """

    train_outcomes: Optional[Tuple[str, ...]] = None

    def __init__(self, model: nn.Module, num_options: Optional[int] = None):
        self.model = model
        if num_options is not None:
            if not 2 <= num_options <= len(LETTERS):
                raise ValueError(f'num_options must be 2-{len(LETTERS)} (the most options of a training question), '
                                 f'got {num_options}')
            self.train_outcomes = tuple(LETTERS[:num_options])
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

    def _chosen(self, outputs: torch.Tensor, batch: VideoQABatch) -> List[int]:
        """Per sample, the index of the option whose letter scores highest at the first answer position."""
        firsts = torch.tensor(np.cumsum([0] + batch.answer_counts[:-1]), dtype=torch.int64, device=outputs.device)
        first = outputs.detach()[firsts].float()  # (B, vocab): the letter is the first answer token
        return [int(first[r, batch.option_ids[r].to(first.device)].argmax()) for r in range(len(batch.answers))]

    def train_predictions(self, outputs: torch.Tensor,
                          batch: VideoQABatch) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
        """The chosen and the right option indices ``(B,)`` int64 of a training batch (``None`` without
        ``num_options``, or for an empty batch)."""
        if self.train_outcomes is None or not batch.answers:
            return None
        return (torch.tensor(self._chosen(outputs, batch), dtype=torch.int64),
                torch.tensor(batch.answers, dtype=torch.int64))


# ---- training (zoo train-vlm) ---------------------------------------------------------------------------------------

class SeededVideoQADataset(VideoQADataset):
    """:class:`VideoQADataset` whose random frame offsets come from ``(torch.initial_seed(), index)``: the run
    reseeds torch every epoch (and the loader seeds each worker from it), so a resumed epoch reads the same frames."""

    def __getitem__(self, index: int) -> Any:
        if not self.sampling.random:
            return super().__getitem__(index)
        r = self.records[index]
        gen = np.random.default_rng([torch.initial_seed() % (1 << 63), index])
        try:
            clip = read_video(r.video, self.sampling, start=r.start, end=r.end, size=self.size, generator=gen,
                              on_truncated=self.on_truncated)
        except VideoReadError as e:
            self.bad_counts[e.reason] += 1
            return BadVideo(r.video, f'{e.reason}: {e.detail}', reason=e.reason)
        return {'record': r, 'frames': clip.frames, 'frame_indices': clip.indices, 'timestamps': clip.timestamps,
                'fps': clip.fps}


def _split(records: list, fraction: float) -> Tuple[list, list]:
    """Evenly spaced validation records (by sorted id), at least one; the rest for training."""
    records = sorted(records, key=lambda r: r.id)
    n_val = max(1, int(round(len(records) * fraction)))
    val_idx = set(np.linspace(0, len(records) - 1, n_val).round().astype(int).tolist())
    return [r for i, r in enumerate(records) if i not in val_idx], [r for i, r in enumerate(records) if i in val_idx]


def _load_state(model: nn.Module, path: str, what: str, drop_missing_head: bool = False) -> None:
    """Load ``path`` into ``model`` (strict); ``drop_missing_head``: leave out a classifier the model lacks (a
    classification checkpoint loaded into a vision tower)."""
    from zoo.models import CheckpointMismatchError, checkpoint_filter_fn, unwrap_state_dict
    from zoo.runs.checkpoints import load_checkpoint
    from zoo.runs.models import is_zoo_model
    state = dict(unwrap_state_dict(load_checkpoint(path)))
    if drop_missing_head:
        own = model.state_dict()
        state = {k: v for k, v in state.items() if k in own or not k.startswith(('head.', 'fc_norm.'))}
        if is_zoo_model(model):
            state = checkpoint_filter_fn(state, model)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise CheckpointMismatchError(f'{what} {path!r} does not load into {type(model).__name__}: '
                                      f'{" ".join(str(e).split())[:600]}') from None


class VideoQATraining(TrainingTask):
    """``zoo train-vlm``: a video-LLM (``pe_vlm_*``) on multiple-choice video-QA records (:class:`VideoQATask`).

    Records come from ``--benchmark``'s reader of ``--data-dir``; validation from ``--val-data-dir`` or an evenly
    spaced ``--val-fraction`` of them. Frames: ``--num-frames`` at ``--frame-size`` px, uniform or at ``--fps``;
    training draws random offsets (:class:`SeededVideoQADataset`) unless ``--fixed-frames``.
    """
    metric_names, samples, files = ('mc acc', 'exact'), 'questions', 'video'

    def create_model(self, resuming: bool) -> nn.Module:
        from zoo.models.vlm import create_video_llm
        args = self.args
        model = create_video_llm(args.model, **args.model_kwargs)
        if args.tower_checkpoint and not resuming:
            _load_state(model.tower.model, args.tower_checkpoint, '--tower-checkpoint', drop_missing_head=True)
        if args.initial_checkpoint and not resuming:
            _load_state(model, args.initial_checkpoint, '--initial-checkpoint')
        if args.grad_checkpointing:
            model.set_grad_checkpointing(True)
        self.img_size = int(args.frame_size or model.data_config['img_size'][0])
        model.visual_grid(args.num_frames, self.img_size, self.img_size)  # a frame size the tower can merge
        return model

    def _records(self) -> Tuple[list, list]:
        args = self.args
        records, _ = load_benchmark(args.benchmark, args.data_dir, allow_roots=args.allow_root,
                                    **({'tasks': args.tasks} if args.tasks else {}))
        if args.val_data_dir:
            tasks = args.val_tasks if args.val_tasks is not None else args.tasks
            val, _ = load_benchmark(args.benchmark, args.val_data_dir, allow_roots=args.allow_root,
                                    **({'tasks': tasks} if tasks else {}))
            train = sorted(records, key=lambda r: r.id)
        else:
            if len(records) < 2:
                raise ValueError(f'{args.data_dir!r} holds {len(records)} usable record(s); need at least 2 to hold '
                                 'some out for validation (or give --val-data-dir)')
            train, val = _split(records, args.val_fraction)
        train = train[:args.max_train] if args.max_train else train
        val = val[:args.max_val] if args.max_val else val
        if not train or not val:
            raise ValueError(f'no {"training" if not train else "validation"} records in {args.data_dir!r} '
                             f'(tasks {args.tasks or "all"}); check --data-dir, --tasks, --val-data-dir')
        return train, val

    def open_data(self, model: nn.Module) -> TrainingData:
        args = self.args
        train_rec, val_rec = self._records()
        fps = dict(fps=args.fps) if args.sampling == 'fps' else {}
        self.sampling = FrameSampling(args.sampling, args.num_frames, **fps)
        train_sampling = self.sampling if args.fixed_frames else FrameSampling(
            self.sampling.mode, self.sampling.num_frames, fps=self.sampling.fps, random=True)
        train_ds = SeededVideoQADataset(train_rec, train_sampling, size=self.img_size)
        val_ds = VideoQADataset(val_rec, self.sampling, size=self.img_size, cache_dir=args.frame_cache)
        return TrainingData(train_ds, val_ds, collate_videoqa, sorted({r.task for r in train_rec}),
                            dict(model.data_config, frame_size=self.img_size), args.data_dir)

    def create_task(self, model: nn.Module, data: TrainingData) -> Task:
        return VideoQATask(model, num_options=max(len(r.options) for r in data.train.records))

    def meta(self, data: TrainingData) -> Dict[str, Any]:
        args = self.args
        return dict(img_size=self.img_size, num_frames=args.num_frames, sampling=self.sampling.key(),
                    benchmark=args.benchmark, tasks=list(data.classes))

    def describe(self, data: TrainingData) -> str:
        return (f'{self.args.num_frames} frames at {self.img_size} px ({self.args.sampling}) | {len(data.train)} '
                f'train / {len(data.val)} val questions ({", ".join(data.classes)})')
