"""``--model zoo``: a zoo video-LLM (``zoo train-vlm`` run or checkpoint, or a ``pe_vlm_*`` name) as an lmms-eval
simple model answering ``generate_until`` requests.

``--model_args pretrained=P,max_frames_num=N[,frame_size=PX][,frame_sampling=mvbench|linspace][,use_ema=True]``;
lmms-eval's ``--batch_size`` and ``--device`` apply. ``P`` is a ``zoo train-vlm`` output dir (its
``checkpoint-last.pth``, as ``zoo eval-video --run``), a checkpoint file (``--checkpoint``), or a registered
``pe_vlm_*`` name (random weights, at its default size: a smoke test).

Per request: the doc's video is read with zoo's exact reader (:func:`zoo.datasets.video.read_video`) at ``N`` frames
of ``frame_size`` px (default: the checkpoint's training size, as ``zoo eval-video``), by the task's frame rule (the
generation kwarg ``frame_sampling``, else the model arg, else ``linspace``):

* ``mvbench``: the midpoints of N equal segments of the question's ``[start, end]`` window (zoo's protocol,
  MVBench's ``get_index``; the ``zoo_*`` tasks);
* ``linspace``: ``N`` frames evenly spaced from the first to the last frame of the whole video (lmms-eval's video
  models, ``np.linspace(0, n - 1, N)`` truncated; the ``zoo_*_lmms`` tasks and lmms-eval's own tasks).

The prompt is the request's context (the task's ``doc_to_text``) after the video, in the model's chat format
(:meth:`zoo.models.vlm.VideoLLM.prompt`); requests are answered in left-padded batches of ``--batch_size`` with the
KV cache (:meth:`zoo.models.vlm.VideoLLM.generate`; greedy unless the task sets ``do_sample``), ``max_new_tokens``
from the task (default 16), cut at the end-of-turn token and at the task's ``until`` strings. ``loglikelihood``
requests are refused with one line.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import require_lmms_eval

require_lmms_eval('the lmms-eval model "zoo" (zoo.integrations.lmms_eval.model)')

import torch  # noqa: E402
from lmms_eval.api.model import lmms  # noqa: E402
from tqdm import tqdm  # noqa: E402

from zoo.datasets.video import FrameSampling, VideoReadError, read_video, resize_frames  # noqa: E402

__all__ = ['ZooVideoLLM', 'LinspaceSampling', 'load_zoo_video_llm', 'FRAME_RULES']

_logger = logging.getLogger('zoo.integrations.lmms_eval')

FRAME_RULES = ('mvbench', 'linspace')


@dataclass(frozen=True)
class LinspaceSampling(FrameSampling):
    """lmms-eval's frame rule: ``num_frames`` indices evenly spaced over the whole video, first and last frame
    included (``np.linspace(0, n - 1, N)`` cast to int); a question's window is not used."""

    def indices(self, num_total: int, avg_fps: float, start: Optional[float] = None, end: Optional[float] = None,
                generator: Optional[np.random.Generator] = None,
                timestamps: Optional[Sequence[float]] = None) -> np.ndarray:
        return np.linspace(0, num_total - 1, int(self.num_frames), dtype=int).astype(np.int64)


def load_zoo_video_llm(pretrained: str, use_ema: bool = False) -> Tuple[Any, Dict[str, Any]]:
    """The model ``pretrained`` names: a ``zoo train-vlm`` run dir, a checkpoint file or a ``pe_vlm_*`` name.

    Returns:
        ``(model in eval mode, meta)`` (``meta``: the checkpoint's record; ``{}`` for a name).

    Raises:
        FileNotFoundError / ValueError: as ``zoo eval-video`` (no final weights in a run dir; a checkpoint that is
            not a video-LLM, the message naming the expected layout).
    """
    from zoo.models.vlm import create_video_llm, list_video_llms
    from zoo.runs.models import load_video_llm, run_checkpoint
    if os.path.isdir(pretrained):
        return load_video_llm(run_checkpoint(pretrained, 'zoo train-vlm'), use_ema)
    if os.path.exists(pretrained) or os.sep in pretrained or pretrained.endswith(('.pth', '.pt', '.safetensors')):
        return load_video_llm(pretrained, use_ema)
    if pretrained in list_video_llms():
        if use_ema:
            raise ValueError(f'use_ema: {pretrained!r} is a model name with random weights, not a checkpoint')
        return create_video_llm(pretrained).eval(), {}
    raise ValueError(f'pretrained={pretrained!r} is neither a zoo train-vlm run dir, a checkpoint file nor a '
                     f'video-LLM name (pe_vlm_<size>_<scheme>, e.g. {list_video_llms()[0]}; zoo.list_video_llms())')


def _flag(value: Any) -> bool:
    return str(value).strip().lower() in ('1', 'true', 'yes', 'on')


class ZooVideoLLM(lmms):
    """A zoo video-LLM behind lmms-eval's model interface (see the module docstring).

    Args:
        pretrained: run dir, checkpoint file or ``pe_vlm_*`` name.
        max_frames_num: frames per video (lmms-eval's name for it).
        frame_size: frame size in px (default: the training size the checkpoint records, else the model's).
        frame_sampling: ``mvbench`` or ``linspace``, for tasks that do not set it.
        use_ema: evaluate the checkpoint's EMA weights.
        batch_size: questions per ``generate`` call (lmms-eval's ``--batch_size``; ``auto`` means 8).
        device: ``cpu``, ``cuda``, ``cuda:1`` ... (lmms-eval's ``--device``; default: CUDA when available; CUDA
            asked for where there is none runs on the CPU, with a warning: lmms-eval's default is ``cuda``).

    Raises:
        ValueError: bad arguments, a checkpoint that is not a video-LLM, or a frame count / size the tower cannot
            merge (one line each, the messages of ``zoo eval-video``).
        FileNotFoundError: no such run dir or checkpoint.
    """

    is_simple = True

    def __init__(self, pretrained: str = '', max_frames_num: Any = 8, frame_size: Any = None,
                 frame_sampling: str = 'linspace', use_ema: Any = False, batch_size: Any = 8,
                 max_batch_size: Any = None, device: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__()
        if kwargs:
            raise ValueError(f'--model zoo takes no model_args {", ".join(sorted(kwargs))} (its arguments: '
                             'pretrained, max_frames_num, frame_size, frame_sampling, use_ema)')
        if not pretrained:
            raise ValueError('--model zoo needs --model_args pretrained=RUN_DIR, a zoo train-vlm checkpoint or a '
                             'pe_vlm_* name')
        if frame_sampling not in FRAME_RULES:
            raise ValueError(f'frame_sampling={frame_sampling!r} is unknown; use one of {", ".join(FRAME_RULES)}')
        self.num_frames = int(max_frames_num)
        if self.num_frames < 1:
            raise ValueError(f'max_frames_num={max_frames_num} must be at least 1')
        self.frame_sampling = frame_sampling
        self.batch_size_per_call = 8 if str(batch_size).startswith('auto') else max(1, int(batch_size))
        self.model, self.meta = load_zoo_video_llm(str(pretrained), _flag(use_ema))
        train_size = self.meta.get('img_size') or self.model.data_config['img_size'][0]
        self.frame_size = int(frame_size) if frame_size not in (None, '', 'None') else int(train_size)
        try:
            self.model.visual_grid(self.num_frames, self.frame_size, self.frame_size)
        except ValueError as e:
            raise ValueError(f'{pretrained} cannot take {self.num_frames} frames x {self.frame_size} px: {e}') \
                from None
        if device and str(device).startswith('cuda') and not torch.cuda.is_available():
            _logger.warning('--device %s: CUDA is not available here; running on the CPU', device)
            device = 'cpu'
        self.device = torch.device(device if device else ('cuda' if torch.cuda.is_available() else 'cpu'))
        self.model.to(self.device)
        self.pretrained = str(pretrained)
        #: the frame indices read per doc id (``zoo eval-video`` logs the same in ``results.json``)
        self.frame_log: Dict[str, List[int]] = {}

    # ------------------------------------------------------------------------------------------------ frames
    def _sampling(self, rule: str) -> FrameSampling:
        if rule not in FRAME_RULES:
            raise ValueError(f'generation kwarg frame_sampling={rule!r} is unknown; use one of '
                             f'{", ".join(FRAME_RULES)}')
        cls = FrameSampling if rule == 'mvbench' else LinspaceSampling
        return cls('uniform', self.num_frames)

    def _read(self, doc: Dict[str, Any], visual: Any, rule: str) -> Dict[str, Any]:
        """Frames and timestamps of one request's video, or ``{'error': ...}``."""
        path = visual[0] if isinstance(visual, (list, tuple)) else visual
        if not isinstance(path, str):
            raise ValueError(f'--model zoo reads video files; the task gave {type(path).__name__} visuals')
        window = (doc.get('start'), doc.get('end')) if rule == 'mvbench' else (None, None)
        try:
            clip = read_video(path, self._sampling(rule), start=window[0], end=window[1], size=self.frame_size)
        except (VideoReadError, OSError) as e:
            return dict(error=f'{getattr(e, "reason", "undecodable")}: {getattr(e, "detail", e)}', path=path)
        self.frame_log[str(doc.get('id', path))] = clip.indices.tolist()
        return dict(frames=clip.frames, timestamps=[float(t) for t in clip.timestamps])

    # -------------------------------------------------------------------------------------------- generation
    def _generate(self, items: List[Dict[str, Any]], gen: Dict[str, Any]) -> List[str]:
        """Answer a batch of ``{'frames', 'timestamps', 'text'}`` (left padded, KV cache)."""
        m = self.model
        prompts, clips = [], []
        for it in items:
            frames = it['frames']
            if tuple(frames.shape[1:3]) != (self.frame_size, self.frame_size):
                frames = resize_frames(frames, self.frame_size)
            clip, seg = m.prepare_video(frames, it['timestamps'])
            prompts.append(m.prompt([seg, it['text']]))
            clips.append(clip.to(self.device))
        b = m.collate(prompts, 'left')
        sample = _flag(gen.get('do_sample', False))
        extra = dict(do_sample=True, temperature=float(gen.get('temperature') or 1.0),
                     top_p=float(gen.get('top_p') or 1.0)) if sample else {}
        with torch.inference_mode():
            out = m.generate(b['input_ids'].to(self.device), attention_mask=b['attention_mask'].to(self.device),
                             videos=clips, video_grid_thw=b['video_grid_thw'],
                             second_per_grid_ts=b['second_per_grid_ts'],
                             max_new_tokens=int(gen.get('max_new_tokens') or 16), **extra)
        stop = (m.tokenizer.eos_id, m.tokenizer.pad_id)
        texts = []
        for row in out.new_tokens.tolist():
            keep = row[:next((k for k, t in enumerate(row) if t in stop), len(row))]
            texts.append(m.tokenizer.decode(keep))
        return texts

    def generate_until(self, requests) -> List[str]:
        """One answer per request, in request order (``requests``: lmms-eval ``Instance`` s whose ``args`` are
        ``(context, gen_kwargs, doc_to_visual, doc_id, task, split)``)."""
        from .videoqa_task import UNREADABLE
        answers: List[Optional[str]] = [None] * len(requests)
        pending: List[Tuple[int, Dict[str, Any], Dict[str, Any]]] = []
        bar = tqdm(total=len(requests), desc='zoo generate_until', disable=self.rank != 0)

        def flush() -> None:
            groups: Dict[str, list] = {}
            for i, item, gen in pending:  # one generate call per generation setting
                groups.setdefault(repr(sorted(gen.items())), []).append((i, item, gen))
            for group in groups.values():
                texts = self._generate([it for _, it, _ in group], group[0][2])
                for (i, _, gen), text in zip(group, texts):
                    for s in gen.get('until') or []:
                        if s:
                            text = text.split(s)[0]
                    answers[i] = text
                    self.cache_hook.add_partial('generate_until', (requests[i].args[0], gen), text)
            bar.update(len(pending))
            pending.clear()

        for i, req in enumerate(requests):
            context, gen_kwargs, doc_to_visual, doc_id, task, split = req.args[:6]
            gen = dict(gen_kwargs or {})
            rule = str(gen.pop('frame_sampling', self.frame_sampling))
            if isinstance(gen.get('until'), str):
                gen['until'] = [gen['until']]
            doc = self.task_dict[task][split][doc_id]
            got = self._read(doc, doc_to_visual(doc), rule)
            if 'error' in got:
                _logger.warning('%s: %s; the item is left out (zoo protocol) or unanswered', got['path'], got['error'])
                answers[i] = f'{UNREADABLE} {got["error"]}' if rule == 'mvbench' else ''
                bar.update(1)
                continue
            pending.append((i, dict(got, text=context), gen))
            if len(pending) >= self.batch_size_per_call:
                flush()
        if pending:
            flush()
        bar.close()
        return [a if a is not None else '' for a in answers]

    def loglikelihood(self, requests) -> List[Tuple[float, bool]]:
        raise NotImplementedError('--model zoo answers generate_until requests only (greedy answers read by the '
                                  'task); loglikelihood tasks are not supported: use a generate_until task such as '
                                  'zoo_mvbench')

    def generate_until_multi_round(self, requests) -> List[str]:
        raise NotImplementedError('--model zoo answers single-turn generate_until requests only; multi-round tasks '
                                  'are not supported')
