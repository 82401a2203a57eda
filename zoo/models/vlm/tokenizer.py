"""The video-LLM tokenizer and chat prompt builder.

Text is encoded with open_clip's bundled byte-pair encoding (``open_clip.tokenizer.SimpleTokenizer``, the CLIP BPE
shipped inside the package: nothing is downloaded). It lower-cases and normalises white space, as CLIP does. The
special tokens the multimodal RoPE schemes need get ids after the BPE vocabulary; they are never parsed out of text,
so user text cannot inject one.

The prompt builder lays out a chat turn as Qwen2-VL does (``<|im_start|>user ... <|im_end|><|im_start|>assistant``),
with ``<|vision_start|> <|video_pad|> x N <|vision_end|>`` per visual block, and returns the pre-merge grids that
:func:`zoo.encodings.multimodal_rope.get_position_ids` needs. For the Qwen3-VL layout (``mrope_interleave``,
``mhrope``) every temporal patch of a video gets its own block, preceded by a timestamp text ``<t seconds>``
(Qwen3-VL's video layout; MRoPE-Interleave: "Revisiting Multimodal Positional Encoding in Vision-Language Models",
Huang et al., arXiv:2510.23095).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import torch

__all__ = ['SPECIAL_TOKENS', 'VLMTokenizer', 'PromptInputs', 'build_prompt', 'collate_prompts', 'IGNORE_INDEX']

#: Special tokens, in id order after the BPE vocabulary.
SPECIAL_TOKENS = ('<|im_start|>', '<|im_end|>', '<|vision_start|>', '<|vision_end|>', '<|image_pad|>',
                  '<|video_pad|>', '<|pad|>')

#: Label value of tokens without a loss (prompt, visual and padding tokens), as ``F.cross_entropy``'s default.
IGNORE_INDEX = -100


@functools.lru_cache(maxsize=4)
def _bpe(bpe_path: Optional[str]):
    """open_clip's ``SimpleTokenizer`` (loaded once per file: it only reads its merges and memoises encodings)."""
    from open_clip.tokenizer import SimpleTokenizer
    return SimpleTokenizer(context_length=None, **({} if bpe_path is None else {'bpe_path': bpe_path}))


class VLMTokenizer:
    """open_clip's bundled BPE plus the video-LLM special tokens.

    Args:
        bpe_path: a CLIP BPE merges file (``.txt.gz``); default: the one bundled with open_clip.

    Attributes:
        vocab_size: BPE tokens plus special tokens (49408 + 7 with the bundled file).
        im_start_id, eos_id (``<|im_end|>``, end of turn), vision_start_id, vision_end_id, image_id, video_id,
        pad_id: ids of the special tokens.
    """

    def __init__(self, bpe_path: Optional[str] = None):
        self.bpe = _bpe(bpe_path)
        base = len(self.bpe.encoder)
        self.special: Dict[str, int] = {name: base + i for i, name in enumerate(SPECIAL_TOKENS)}
        self.special_names = {i: n for n, i in self.special.items()}
        self.num_bpe = base
        self.vocab_size = base + len(SPECIAL_TOKENS)
        s = self.special
        self.im_start_id, self.eos_id = s['<|im_start|>'], s['<|im_end|>']
        self.vision_start_id, self.vision_end_id = s['<|vision_start|>'], s['<|vision_end|>']
        self.image_id, self.video_id, self.pad_id = s['<|image_pad|>'], s['<|video_pad|>'], s['<|pad|>']

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str) -> List[int]:
        """BPE ids of ``text`` (lower-cased, white space normalised); special-token strings stay ordinary text.

        Raises:
            ValueError: ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise ValueError(f'text must be a str, got {type(text).__name__}: {text!r}')
        return list(self.bpe.encode(text))

    def decode(self, ids: Union[Sequence[int], torch.Tensor], skip_special: bool = True) -> str:
        """Text of ``ids``; special tokens are dropped (``skip_special``) or written by name."""
        if isinstance(ids, torch.Tensor):
            ids = ids.flatten().tolist()
        out, run = [], []
        for i in ids:
            i = int(i)
            if i < self.num_bpe:
                run.append(i)
                continue
            if run:
                out.append(self.bpe.decode(run).strip())
                run = []
            if not skip_special:
                out.append(self.special_names.get(i, f'<|unk_{i}|>'))
        if run:
            out.append(self.bpe.decode(run).strip())
        return ' '.join(t for t in out if t)


@dataclass
class PromptInputs:
    """One tokenised prompt (and optional answer).

    Attributes:
        input_ids: ``(L,)`` int64.
        labels: ``(L,)`` int64, the answer tokens (and their end of turn) and :data:`IGNORE_INDEX` elsewhere.
        image_grid_thw: ``(num_images, 3)`` int64 pre-merge grids ``[1, h, w]`` in tower patches, or ``None``.
        video_grid_thw: ``(num_videos, 3)`` int64 pre-merge grids ``[t, h, w]`` (``t`` temporal patches), or None.
        second_per_grid_ts: seconds per temporal patch, one per video, or ``None`` without videos.
        num_answer_tokens: tokens with a label.
        image_tiles: ``(num_images, 2)`` int64 AnyRes tile grids ``[cols, rows]`` (``[1, 1]``: untiled), or ``None``
            when no image is tiled.
    """
    input_ids: torch.Tensor
    labels: torch.Tensor
    image_grid_thw: Optional[torch.Tensor] = None
    video_grid_thw: Optional[torch.Tensor] = None
    second_per_grid_ts: Optional[List[float]] = None
    num_answer_tokens: int = 0
    extra: Dict[str, Any] = field(default_factory=dict)
    image_tiles: Optional[torch.Tensor] = None


def _grid(seg: Mapping[str, Any], i: int, merge: int) -> List[int]:
    kind = seg['type']
    g = seg.get('grid')
    try:
        t, h, w = (int(x) for x in g)
        ok = all(float(x) == int(x) for x in g)
    except (TypeError, ValueError):
        ok = False
    if not ok or min(t, h, w) < 1:
        raise ValueError(f'content[{i}] ({kind}) needs grid=(t, h, w), positive integers in tower patches (pre-merge, '
                         f'as VideoLLM.visual_grid returns it), got {g!r}')
    if kind == 'image' and t != 1:
        raise ValueError(f'content[{i}]: an image grid has t = 1, got {g!r}; fix: use type "video"')
    if h % merge or w % merge:
        raise ValueError(f'content[{i}] ({kind}) grid {t}x{h}x{w} patches does not allow the {merge}x{merge} merge of '
                         f'the projector; fix: use frames whose patch grid is a multiple of {merge} on each side')
    return [t, h, w]


def _tiles(seg: Mapping[str, Any], i: int) -> List[int]:
    """``[cols, rows]`` of an image segment (``[1, 1]`` without ``tiles``)."""
    if 'tiles' not in seg:
        return [1, 1]
    g = seg['tiles']
    try:
        cols, rows = (int(x) for x in g)
        ok = all(float(x) == int(x) for x in g) and cols >= 1 and rows >= 1
    except (TypeError, ValueError):
        ok = False
    if not ok or seg['type'] != 'image':
        raise ValueError(f'content[{i}]: tiles must be [cols, rows] (positive integers) of an image, got {g!r} on a '
                         f'{seg["type"]!r} segment; fix: use VideoLLM.prepare_image')
    return [cols, rows]


def build_prompt(tokenizer: VLMTokenizer, content: Sequence[Union[str, Mapping[str, Any]]],
                 answer: Optional[str] = None, *, style: str = 'qwen2', spatial_merge_size: int = 2,
                 system: Optional[str] = None) -> PromptInputs:
    """Tokenise one user turn (text, images, videos, in order) and, optionally, the assistant's answer.

    Layout (``[]`` optional)::

        [<|im_start|> system text <|im_end|>] <|im_start|> user <content> <|im_end|> <|im_start|> assistant
        [answer <|im_end|>]

    A visual block is ``<|vision_start|> <pad> x n <|vision_end|>`` with ``n = t*h*w / spatial_merge_size**2``
    (``<|image_pad|>`` or ``<|video_pad|>``). A tiled image (``tiles = [cols, rows]``, AnyRes) is one block of its
    tiles' tokens in crop order (row-major) then, for more than one tile, the thumbnail's: ``(cols * rows + 1) * h * w
    / merge**2`` tokens, ``grid`` being one tile's (the InternVL / CoMemo layout, ``<img> ... </img>``, with this
    tokenizer's markers). In the ``'qwen3'`` style each of a video's ``t`` temporal patches is its
    own block of ``h*w / merge**2`` tokens preceded by the text ``<{seconds:.1f} seconds>``; the video keeps one
    un-split grid row (the ids split it).

    Args:
        tokenizer: the :class:`VLMTokenizer`.
        content: strings (text) and dicts ``{'type': 'image', 'grid': (1, h, w)[, 'tiles': (cols, rows)]}`` (from
            ``VideoLLM.prepare_image``) or ``{'type': 'video', 'grid':
            (t, h, w), 'timestamps': [t floats, seconds] (optional), 'second_per_grid_t': float (optional, default
            1.0)}``; grids are pre-merge, in tower patches. Without timestamps, patch ``k`` is at ``k *
            second_per_grid_t`` seconds.
        answer: the answer text (training); its tokens and the closing ``<|im_end|>`` get labels.
        style: ``'qwen2'`` or ``'qwen3'`` (the scheme's :attr:`Scheme.style`).
        spatial_merge_size: the projector's merge factor.
        system: optional system text.

    Returns:
        :class:`PromptInputs`.

    Raises:
        ValueError: unknown style or content type; a grid that is not positive, not divisible by the merge, or an
            image with ``t != 1``; ``tiles`` that are not two positive ints of an image; timestamps whose count is
            not ``t``; a non-positive ``second_per_grid_t``.
    """
    if style not in ('qwen2', 'qwen3'):
        raise ValueError(f'unknown prompt style {style!r}; fix: use "qwen2" or "qwen3" (the scheme\'s style)')
    tok, m = tokenizer, int(spatial_merge_size)
    ids: List[int] = []
    if system is not None:
        ids += [tok.im_start_id] + tok.encode('system ' + system) + [tok.eos_id]
    ids += [tok.im_start_id] + tok.encode('user')
    images, videos, secs, tiles = [], [], [], []
    if isinstance(content, (str, Mapping)):
        content = [content]
    for i, seg in enumerate(content):
        if isinstance(seg, str):
            ids += tok.encode(seg)
            continue
        kind = seg.get('type') if isinstance(seg, Mapping) else None
        if kind == 'text':
            ids += tok.encode(seg.get('text', ''))
            continue
        if kind not in ('image', 'video'):
            raise ValueError(f'content[{i}] must be a str or a dict with type "text", "image" or "video", got {seg!r}')
        t, h, w = _grid(seg, i, m)
        per = (h // m) * (w // m)
        if kind == 'image':
            cols, rows = _tiles(seg, i)
            images.append([t, h, w])
            tiles.append([cols, rows])
            crops = cols * rows + (cols * rows > 1)
            ids += [tok.vision_start_id] + [tok.image_id] * (crops * per) + [tok.vision_end_id]
            continue
        sec = float(seg.get('second_per_grid_t', 1.0) or 1.0)
        if not sec > 0:
            raise ValueError(f'content[{i}]: second_per_grid_t must be positive seconds, got {sec}')
        videos.append([t, h, w])
        secs.append(sec)
        if style == 'qwen2':
            ids += [tok.vision_start_id] + [tok.video_id] * (t * per) + [tok.vision_end_id]
            continue
        stamps = seg.get('timestamps')
        stamps = [k * sec for k in range(t)] if stamps is None else [float(x) for x in stamps]
        if len(stamps) != t:
            raise ValueError(f'content[{i}]: {len(stamps)} timestamps for a video of {t} temporal patches; fix: pass '
                             'one time in seconds per temporal patch')
        for s in stamps:
            ids += tok.encode(f'<{s:.1f} seconds>') + [tok.vision_start_id] + [tok.video_id] * per + \
                [tok.vision_end_id]
    ids += [tok.eos_id, tok.im_start_id] + tok.encode('assistant')
    labels = [IGNORE_INDEX] * len(ids)
    n_answer = 0
    if answer is not None:
        ans = tok.encode(answer) + [tok.eos_id]
        ids += ans
        labels += ans
        n_answer = len(ans)
    as_grid = (lambda g: torch.tensor(g, dtype=torch.int64) if g else None)
    tiled = any(c * r > 1 for c, r in tiles)
    return PromptInputs(torch.tensor(ids, dtype=torch.int64), torch.tensor(labels, dtype=torch.int64),
                        as_grid(images), as_grid(videos), secs or None, n_answer,
                        image_tiles=as_grid(tiles) if tiled else None)


def collate_prompts(prompts: Sequence[PromptInputs], pad_id: int, padding_side: str = 'right') -> Dict[str, Any]:
    """Pad prompts into a batch.

    Args:
        prompts: from :func:`build_prompt`, in batch order.
        pad_id: the tokenizer's ``pad_id``.
        padding_side: ``'right'`` (training, teacher forcing) or ``'left'`` (generation).

    Returns:
        dict of ``input_ids`` ``(B, L)`` int64, ``attention_mask`` ``(B, L)`` int64 (0 = padding), ``labels``
        ``(B, L)`` int64, ``image_grid_thw`` / ``video_grid_thw`` (grids of every sample, in batch order, or None),
        ``second_per_grid_ts`` (list or None) and ``image_tiles`` (``(num_images, 2)`` tile grids ``[cols, rows]`` of
        every image in batch order, ``[1, 1]`` for untiled ones, when any image of the batch is tiled; else None).
        Samples may have different tile grids: each image's tokens and grid rows stay its own.

    Raises:
        ValueError: no prompts or an unknown padding side.
    """
    if not prompts:
        raise ValueError('collate_prompts needs at least one prompt')
    if padding_side not in ('left', 'right'):
        raise ValueError(f'padding_side must be "left" or "right", got {padding_side!r}')
    length = max(p.input_ids.numel() for p in prompts)
    b = len(prompts)
    ids = torch.full((b, length), pad_id, dtype=torch.int64)
    labels = torch.full((b, length), IGNORE_INDEX, dtype=torch.int64)
    mask = torch.zeros(b, length, dtype=torch.int64)
    for r, p in enumerate(prompts):
        n = p.input_ids.numel()
        sl = slice(0, n) if padding_side == 'right' else slice(length - n, length)
        ids[r, sl], labels[r, sl], mask[r, sl] = p.input_ids, p.labels, 1
    imgs = [p.image_grid_thw for p in prompts if p.image_grid_thw is not None]
    vids = [p.video_grid_thw for p in prompts if p.video_grid_thw is not None]
    secs = [s for p in prompts for s in (p.second_per_grid_ts or [])]
    tiles = None
    if any(p.image_tiles is not None for p in prompts):
        tiles = torch.cat([p.image_tiles if p.image_tiles is not None else
                           torch.ones(len(p.image_grid_thw), 2, dtype=torch.int64)
                           for p in prompts if p.image_grid_thw is not None])
    return dict(input_ids=ids, attention_mask=mask, labels=labels,
                image_grid_thw=torch.cat(imgs) if imgs else None, video_grid_thw=torch.cat(vids) if vids else None,
                second_per_grid_ts=secs or None, image_tiles=tiles)
