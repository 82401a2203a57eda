"""The video-LLM: vision tower -> 2x2 merge projector -> decoder whose rotation is a multimodal RoPE scheme.

The decoder's encoding (``decoder.pe``, :class:`zoo.encodings.multimodal.MultimodalRoPE`) owns the scheme: the model
asks it for position ids from the token layout (the Qwen2-VL ``get_rope_index`` convention), for decode positions from
``rope_deltas``, and for the per-sample options of a training step (HoPE's temporal scale ``gamma``, V2PE's stride;
fixed in eval mode).

Registered names ``pe_vlm_{tiny,small}_{scheme}`` for every scheme (:func:`list_video_llms`), built by
:func:`create_video_llm`. Papers: Qwen2-VL (Wang et al., arXiv:2409.12191), and the scheme papers listed in
:mod:`zoo.encodings.multimodal.schemes`.
"""
from __future__ import annotations

import difflib
import fnmatch
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from zoo.encodings.multimodal.ids import tiles_refusal
from zoo.encodings.multimodal_rope import get_scheme, list_schemes
from .decoder import Decoder
from .projector import PatchMerger
from .tiling import choose_tile_grid, num_crops, tile_image
from .tokenizer import IGNORE_INDEX, PromptInputs, VLMTokenizer, build_prompt, collate_prompts
from .tower import VisionTower

__all__ = ['VideoLLM', 'VLMOutput', 'create_video_llm', 'video_llm_config', 'list_video_llms', 'VLM_SIZES',
           'vlm_schemes']


def _as_tensor(x: Any, name: str) -> torch.Tensor:
    """``x`` as a tensor: a tensor as is, a numpy array as ``torch.from_numpy`` makes it, a PIL image as uint8
    ``(H, W, 3)`` RGB.

    Raises:
        ValueError: anything else (naming the type and what is taken).
    """
    import numpy as np
    if isinstance(x, torch.Tensor):
        return x
    if hasattr(x, 'convert') and hasattr(x, 'size') and hasattr(x, 'mode'):      # PIL.Image.Image, not imported here
        return torch.from_numpy(np.array(x.convert('RGB'), dtype=np.uint8))
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x))
    raise ValueError(f'{name} must be a torch.Tensor, a numpy array or a PIL image, got {type(x).__name__}')


@dataclass
class VLMOutput:
    """What :meth:`VideoLLM.forward` returns.

    Attributes:
        logits: ``(B, L, vocab_size)``; with a ``logits_mask``, ``(N, vocab_size)`` for its ``N`` True positions
            (row-major order).
        loss: mean cross-entropy (nats) over the labelled tokens, or ``None`` without labels.
        position_ids: ``(A, B, L)`` ids used (long, or float32 for V2PE / VideoRoPE / HoPE); per-layer schemes
            (PyPE): ``(depth + 1, A, B, L)``, each layer's ids, then the visual frame index of every token (-1: text).
        rope_deltas: ``(B, 1)``: the token at padded index ``k >= L`` decodes at ``k + rope_deltas`` on every axis;
            ``(depth, B, 1)``, one per layer, for per-layer schemes.
    """
    logits: torch.Tensor
    loss: Optional[torch.Tensor]
    position_ids: torch.Tensor
    rope_deltas: Optional[torch.Tensor]


def _count(x: torch.Tensor) -> int:
    return int(x.sum())


def _split_rows(input_ids: torch.Tensor, token_id: int, grids: Optional[torch.Tensor], merge: int,
                name: str, tiles: Optional[torch.Tensor] = None) -> List[Tuple[Optional[torch.Tensor], Any]]:
    """The grid rows (and tile rows, for tiled images) of each batch row (grids are in batch order; each row claims
    its tokens' worth)."""
    counts = (input_ids == token_id).sum(dim=1).tolist()
    out: List[Tuple[Optional[torch.Tensor], Any]] = []
    k = 0
    rows = [] if grids is None else grids.tolist()
    crops = [1] * len(rows) if tiles is None else [num_crops(c, r) for c, r in torch.as_tensor(tiles).tolist()]
    for r, n in enumerate(counts):
        start = k
        while n > 0 and k < len(rows):
            n -= crops[k] * rows[k][0] * rows[k][1] * rows[k][2] // (merge * merge)
            k += 1
        if n != 0:
            raise ValueError(f'row {r}: its {name} tokens do not match whole {name}_grid_thw rows (grids are consumed '
                             f'in batch order); fix: pass the grids build_prompt returned, in batch order')
        out.append((None if k == start else grids[start:k],
                    None if k == start or tiles is None else tiles[start:k]))
    return out


class VideoLLM(nn.Module):
    """A small video-LLM in which the multimodal RoPE scheme is a name.

    Args:
        scheme: a scheme of :func:`zoo.encodings.multimodal_rope.list_schemes` (``rope1d``, ``mrope``,
            ``qwen2_5_vl``, ``mrope_interleave``, ``mhrope``, ``vrope``, ``v2pe``, ``videorope``, ``hope``, ``pype``,
            ``cope``, ``cope_rope``, ``vista``, ``rope_dhr``: tiled images, :meth:`prepare_image`).
        vision_tower: a timm model name (any zoo ``pe_vit_*`` / ``pe_video_vit_*``, timm ViT or CNN) or a module.
        tower_kwargs: constructor options of the tower (``img_size``, ``patch_size``, ``embed_dim`` ...).
        temporal_patch_size: frames per temporal patch of an image tower (default 2); a video tower uses its tubelet.
        spatial_merge_size: the projector's merge (2).
        dim, depth, num_heads, num_kv_heads, head_dim, mlp_hidden: decoder geometry.
        theta: RoPE base.
        mrope_section: the scheme's ``[t, h, w]`` split (pairs; key heads for ``mhrope``); published split scaled
            when ``None``.
        scheme_options: the scheme's options at evaluation (e.g. ``{'gamma': 1.0}`` for HoPE, ``{'delta': 2.0}`` for
            VideoRoPE, ``{'stride': 64}`` for V2PE); training draws HoPE's gamma and V2PE's stride per sample.
        max_seq_len: the longest sequence :meth:`generate` may produce (prompt + new tokens).
        pretrained_tower: load timm's weights for the tower name (from the local cache).
        p_rope: p-RoPE (Barbero et al., arXiv:2410.06205): the fraction of the decoder's rotary pairs that
            rotate, the highest frequencies (``multimodal_rope``'s option); 1 = plain RoPE.
        extrapolation: the decoder encoding's training-free strategy (``'none'``), e.g.
            ``dict(strategy='mspoe', layers=[2, 3])`` (Ms-PoE, ``docs/mspoe.md``) or ``dict(strategy='yarn',
            train_grid=(...))``; ``decoder.pe.set_extrapolation`` switches it later.
        max_tiles: the most AnyRes tiles :meth:`prepare_image` cuts an image into (a thumbnail is added to more than
            one); 1 = images are not tiled. Only schemes that take tiled images (``rope_dhr``) allow more than 1.

    Attributes:
        tokenizer: :class:`VLMTokenizer` (its ``vocab_size`` is the embedding size).
        tower, projector, decoder: the three parts; ``decoder.pe`` is the multimodal encoding, which owns the scheme.
        scheme: the scheme name as given.
        scheme_options: the evaluation options (held by ``decoder.pe``).
        pe_name: ``'multimodal_rope/<scheme>'`` (recorded in checkpoints).
        data_config: ``mean``, ``std`` (frame normalisation of the tower) and ``img_size`` (its default frame size,
            ``(H, W)`` px).

    Raises:
        ValueError: unknown scheme or option, a tower that cannot be merged 2x2, a decoder geometry the scheme cannot
            split, ``max_tiles > 1`` for a scheme without tiles (the message names the fix).
    """

    def __init__(self, scheme: str = 'mrope',
                 vision_tower: Union[str, nn.Module] = 'pe_vit_tiny_patch16_rope_mixed_224',
                 tower_kwargs: Optional[Dict[str, Any]] = None, temporal_patch_size: Optional[int] = None,
                 spatial_merge_size: int = 2, dim: int = 256, depth: int = 4, num_heads: int = 8,
                 num_kv_heads: int = 2, head_dim: Optional[int] = None, mlp_hidden: Optional[int] = None,
                 theta: float = 1_000_000.0, mrope_section: Optional[Sequence[int]] = None,
                 scheme_options: Optional[Mapping[str, Any]] = None, max_seq_len: int = 32768,
                 pretrained_tower: bool = False, p_rope: float = 1.0, extrapolation: Any = 'none',
                 max_tiles: int = 1):
        super().__init__()
        spec = get_scheme(scheme)
        spec.options(dict(scheme_options or {}))  # validate now, before the tower is built
        if isinstance(max_tiles, bool) or not isinstance(max_tiles, int) or max_tiles < 1:
            raise ValueError(f'max_tiles must be a positive int (AnyRes tiles per image), got {max_tiles!r}')
        if max_tiles > 1 and not spec.takes_tiles:
            raise ValueError(tiles_refusal(scheme, f'max_tiles={max_tiles}'))
        self.max_tiles = int(max_tiles)
        self.scheme = scheme
        if int(max_seq_len) < 2:
            raise ValueError(f'max_seq_len must be >= 2 tokens, got {max_seq_len}')
        self.max_seq_len = int(max_seq_len)
        self.merge = int(spatial_merge_size)
        self.tokenizer = VLMTokenizer()
        self.tower = VisionTower(vision_tower, tower_kwargs, temporal_patch_size, self.merge, pretrained_tower)
        self.projector = PatchMerger(self.tower.out_features, dim, self.merge)
        self.decoder = Decoder(self.tokenizer.vocab_size, dim, depth, num_heads, num_kv_heads, head_dim, mlp_hidden,
                               scheme, theta, mrope_section, scheme_options=scheme_options,
                               p_rope=p_rope, extrapolation=extrapolation)
        self.pe_name = f'multimodal_rope/{spec.name}'
        self.data_config = self._data_config()

    @property
    def scheme_options(self) -> Dict[str, Any]:
        """The scheme's evaluation options (``decoder.pe.scheme_options``)."""
        return self.decoder.pe.scheme_options

    # ------------------------------------------------------------------------------------------------ data helpers
    def _data_config(self) -> Dict[str, Any]:
        from timm.data import resolve_data_config
        cfg = resolve_data_config({}, model=self.tower.model)
        size = self.tower.img_size or tuple(cfg['input_size'][-2:])
        return dict(mean=tuple(cfg['mean']), std=tuple(cfg['std']), img_size=tuple(int(s) for s in size))

    @property
    def prompt_style(self) -> str:
        """``'qwen3'`` (per-frame blocks with timestamps) for MRoPE-Interleave / MHRoPE, else ``'qwen2'`` (the scheme's
        :attr:`~zoo.encodings.multimodal.Scheme.style`)."""
        return self.decoder.pe.spec.style

    def visual_grid(self, num_frames: int, height: int, width: int) -> Tuple[int, int, int]:
        """Pre-merge grid ``(t, h, w)`` in tower patches of ``num_frames`` frames of ``height x width`` px.

        Raises:
            ValueError: a frame size the tower cannot take or whose grid does not allow the 2x2 merge.
        """
        return self.tower.grid(num_frames, height, width)

    def prepare_video(self, frames: torch.Tensor, timestamps: Optional[Sequence[float]] = None
                      ) -> Tuple[torch.Tensor, Dict[str, Any]]:
        """Normalise frames for the tower and describe the video for :meth:`prompt`.

        Args:
            frames: uint8 ``(T, H, W, 3)`` RGB (the video reader's output; a numpy array is taken too) or float
                ``(T, 3, H, W)`` already normalised.
            timestamps: ``(T,)`` seconds of the frames (the reader's ``timestamps``); ``None``: 1 frame per second.

        Returns:
            ``(clip, segment)``: the float clip ``(T, C, H, W)`` and ``{'type': 'video', 'grid': (t, h, w),
            'timestamps': [seconds per temporal patch], 'second_per_grid_t': seconds}``.
        """
        frames = _as_tensor(frames, 'frames')
        if frames.dtype == torch.uint8:
            if frames.dim() != 4 or frames.shape[-1] != 3:
                raise ValueError(f'uint8 frames must be (T, H, W, 3), got {tuple(frames.shape)}')
            mean = torch.tensor(self.data_config['mean']).view(1, 3, 1, 1)
            std = torch.tensor(self.data_config['std']).view(1, 3, 1, 1)
            clip = (frames.permute(0, 3, 1, 2).float() / 255.0 - mean) / std
        elif frames.is_floating_point() and frames.dim() == 4 and frames.shape[1] == 3:
            clip = frames
        elif frames.is_floating_point() and frames.dim() == 4 and frames.shape[-1] == 3:
            raise ValueError(f'float frames must be (T, 3, H, W), got {tuple(frames.shape)} (channels last); '
                             f'fix: frames.permute(0, 3, 1, 2), or pass uint8 (T, H, W, 3) RGB to be normalised here')
        else:
            raise ValueError(f'frames must be uint8 (T, H, W, 3) RGB or float (T, 3, H, W) normalised, got '
                             f'{tuple(frames.shape)} {frames.dtype}')
        n = clip.shape[0]
        t, h, w = self.visual_grid(n, clip.shape[-2], clip.shape[-1])
        tp = self.tower.temporal_patch_size
        ts = torch.arange(n, dtype=torch.float64) if timestamps is None else \
            torch.as_tensor(timestamps, dtype=torch.float64).flatten()
        if ts.numel() != n:
            raise ValueError(f'{ts.numel()} timestamps for {n} frames; fix: pass one time in seconds per frame')
        ts = torch.cat([ts, ts[-1:].expand((-n) % tp)])
        per_patch = ts.view(t, tp).mean(dim=1).tolist()
        step = float(ts[n - 1] - ts[0]) / (n - 1) if n > 1 else 1.0
        step = step if step > 0 else 1.0
        return clip, dict(type='video', grid=(t, h, w), timestamps=per_patch, second_per_grid_t=tp * step)

    def prepare_image(self, image: torch.Tensor, max_tiles: Optional[int] = None,
                      tile_size: Optional[int] = None) -> Tuple[torch.Tensor, Dict[str, Any]]:
        """Normalise an image, cut it into AnyRes tiles plus a thumbnail, and describe it for :meth:`prompt`.

        The grid is :func:`zoo.models.vlm.tiling.choose_tile_grid` (InternVL / CoMemo's rule: closest aspect ratio,
        ``1 <= cols * rows <= max_tiles``); with one tile the whole image is resized to the tile size.

        Args:
            image: uint8 ``(H, W, 3)`` RGB (a numpy array or a PIL image is taken too, PIL converted to RGB) or float
                ``(3, H, W)`` already normalised.
            max_tiles: the tile budget (default :attr:`max_tiles`; give ``max_tiles // num_images`` to each of several
                images, as the official multi-image path does). More than 1 needs a scheme that takes tiles.
            tile_size: tile side in px (default: the tower's input size, ``data_config['img_size']``).

        Returns:
            ``(pixels, segment)``: ``(C, s, s)`` float for one tile, else ``(cols * rows + 1, C, s, s)`` (the tiles in
            crop order, row-major, then the thumbnail); ``segment`` is ``{'type': 'image', 'grid': (1, h, w)}`` (one
            tile's pre-merge grid) plus ``'tiles': (cols, rows)`` when there is more than one tile.

        Raises:
            ValueError: a bad image (a float one channels-last, or not 3 channels; not a tensor, array or PIL image),
                a tile size the tower cannot take, ``max_tiles > 1`` for a scheme without tiles
                (naming the schemes that take them).
        """
        budget = self.max_tiles if max_tiles is None else max_tiles
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ValueError(f'max_tiles must be a positive int, got {budget!r}')
        if budget > 1 and not self.decoder.pe.spec.takes_tiles:
            raise ValueError(tiles_refusal(self.scheme, f'max_tiles={budget}'))
        image = _as_tensor(image, 'image')
        if image.dtype == torch.uint8:
            if image.dim() != 3 or image.shape[-1] != 3:
                raise ValueError(f'a uint8 image must be (H, W, 3) RGB, got {tuple(image.shape)}')
            mean = torch.tensor(self.data_config['mean']).view(3, 1, 1)
            std = torch.tensor(self.data_config['std']).view(3, 1, 1)
            pix = (image.permute(2, 0, 1).float() / 255.0 - mean) / std
        elif image.is_floating_point() and image.dim() == 3 and image.shape[0] == 3:
            pix = image
        elif image.is_floating_point() and image.dim() == 3 and image.shape[-1] == 3:
            raise ValueError(f'a float image must be (3, H, W), got {tuple(image.shape)} (channels last); '
                             f'fix: image.permute(2, 0, 1), or pass uint8 (H, W, 3) RGB to be normalised here')
        else:
            raise ValueError(f'image must be uint8 (H, W, 3) RGB or float (3, H, W) normalised, got '
                             f'{tuple(image.shape)} {image.dtype}')
        size = int(tile_size or self.data_config['img_size'][0])
        _, h, w = self.visual_grid(1, size, size)
        cols, rows = choose_tile_grid(pix.shape[-1], pix.shape[-2], size, 1, budget)
        crops = tile_image(pix, cols, rows, size)
        if cols * rows == 1:
            return crops[0], dict(type='image', grid=(1, h, w))
        return crops, dict(type='image', grid=(1, h, w), tiles=(cols, rows))

    def prompt(self, content: Sequence[Union[str, Mapping[str, Any]]], answer: Optional[str] = None,
               system: Optional[str] = None) -> PromptInputs:
        """:func:`build_prompt` with this model's tokenizer, prompt style and merge.

        Raises:
            ValueError: see :func:`build_prompt`; a tiled image for a scheme without tiles (naming those with).
        """
        out = build_prompt(self.tokenizer, content, answer, style=self.prompt_style,
                           spatial_merge_size=self.merge, system=system)
        if out.image_tiles is not None and not self.decoder.pe.spec.takes_tiles:
            raise ValueError(tiles_refusal(self.scheme, 'an image segment with tiles'))
        return out

    def collate(self, prompts: Sequence[PromptInputs], padding_side: str = 'right') -> Dict[str, Any]:
        """:func:`collate_prompts` with this tokenizer's pad id."""
        return collate_prompts(prompts, self.tokenizer.pad_id, padding_side)

    # ------------------------------------------------------------------------------------------------- positions
    def position_ids(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                     image_grid_thw: Optional[torch.Tensor] = None, video_grid_thw: Optional[torch.Tensor] = None,
                     second_per_grid_ts: Optional[Sequence[float]] = None,
                     scheme_options: Optional[Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]] = None,
                     image_tiles: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Position ids ``(A, B, L)`` and ``rope_deltas`` ``(B, 1)`` of a batch, from the decoder's encoding
        (``decoder.pe.position_ids``), with this model's token ids and merge.

        ``image_tiles``: ``(num_images, 2)`` tile grids ``[cols, rows]`` from :meth:`collate` (tiled images).

        Options: ``scheme_options`` (one dict, or one per row); when ``None``, the model's evaluation options, or in
        training mode the encoding's per-row draws (``decoder.pe.draw_training_options``: HoPE gamma, V2PE stride)
        from Python's ``random`` seeded by torch's RNG (so ``torch.manual_seed`` makes them reproducible).

        Raises:
            ValueError: see :func:`zoo.encodings.multimodal_rope.get_position_ids` (grids that do not match the visual
                tokens, unknown options).
        """
        b = input_ids.shape[0]
        if scheme_options is None and self.training:
            scheme_options = self.decoder.pe.draw_training_options(b)
        if scheme_options is None or isinstance(scheme_options, Mapping):
            return self._ids(input_ids, attention_mask, image_grid_thw, video_grid_thw, second_per_grid_ts,
                             scheme_options, image_tiles)
        if len(scheme_options) != b:
            raise ValueError(f'scheme_options has {len(scheme_options)} dicts for a batch of {b}; pass one per row')
        tok = self.tokenizer
        imgs = _split_rows(input_ids, tok.image_id, image_grid_thw, self.merge, 'image', image_tiles)
        vids = [g for g, _ in _split_rows(input_ids, tok.video_id, video_grid_thw, self.merge, 'video')]
        secs = list(second_per_grid_ts) if second_per_grid_ts is not None else None
        ids, deltas, k = [], [], 0
        for r in range(b):
            nv = 0 if vids[r] is None else vids[r].shape[0]
            row_secs = None if secs is None or not nv else secs[k:k + nv]
            k += nv
            mask = None if attention_mask is None else attention_mask[r:r + 1]
            i, d = self._ids(input_ids[r:r + 1], mask, imgs[r][0], vids[r], row_secs, scheme_options[r], imgs[r][1])
            ids.append(i)
            deltas.append(d)
        return torch.cat(ids, dim=-2), torch.cat(deltas, dim=-2)  # one scheme: one dtype (batch dim: -2)

    def _ids(self, input_ids, attention_mask, image_grid_thw, video_grid_thw, second_per_grid_ts, opts,
             image_tiles=None):
        tok = self.tokenizer
        tiles = {} if image_tiles is None else {'image_tiles': image_tiles}
        return self.decoder.pe.position_ids(input_ids, image_grid_thw, video_grid_thw, attention_mask,
                                            second_per_grid_ts, opts, spatial_merge_size=self.merge,
                                            image_token_id=tok.image_id, video_token_id=tok.video_id,
                                            vision_start_token_id=tok.vision_start_id, **tiles)

    # -------------------------------------------------------------------------------------------------- forward
    def _visual_features(self, kind: str, visuals: Optional[Sequence[torch.Tensor]], grids: Optional[torch.Tensor],
                         n_tokens: int, tiles: Optional[torch.Tensor] = None) -> Optional[torch.Tensor]:
        token = 'video' if kind == 'video' else 'image'
        if visuals is None or len(visuals) == 0:
            if n_tokens:
                raise ValueError(f'input_ids hold {n_tokens} {token} tokens but no {kind}s were given; fix: pass '
                                 f'{kind}s=[...] and {token}_grid_thw (from prompt() / collate())')
            if grids is not None and len(grids):
                raise ValueError(f'{token}_grid_thw has {len(grids)} rows but no {kind}s were given')
            return None
        if isinstance(visuals, torch.Tensor):
            visuals = list(visuals)
        if grids is None:
            raise ValueError(f'{len(visuals)} {kind}(s) were given without {token}_grid_thw (videos without grids); '
                             f'fix: pass the {token}_grid_thw that prompt() / collate() return')
        grids = torch.as_tensor(grids)
        if grids.dim() != 2 or grids.shape[1] != 3 or grids.shape[0] != len(visuals):
            raise ValueError(f'{token}_grid_thw must be ({len(visuals)}, 3), one pre-merge [t, h, w] per {kind}, got '
                             f'shape {tuple(grids.shape)}')
        m = self.merge
        crops = torch.ones(len(visuals), dtype=torch.int64)
        if tiles is not None:
            tiles = torch.as_tensor(tiles)
            if kind != 'image' or tuple(tiles.shape) != (len(visuals), 2):
                raise ValueError(f'image_tiles must be ({len(visuals)}, 2), one [cols, rows] per image, got shape '
                                 f'{tuple(tiles.shape)}; fix: pass the image_tiles collate() returns')
            if bool((tiles > 1).any()) and not self.decoder.pe.spec.takes_tiles:
                raise ValueError(tiles_refusal(self.scheme))
            crops = torch.tensor([num_crops(c, r) for c, r in tiles.tolist()], dtype=torch.int64)
            flat, flat_grids = [], []
            for i, (v, k, g) in enumerate(zip(visuals, crops.tolist(), grids.tolist())):
                shape = tuple(getattr(v, 'shape', ()))
                v = v.unsqueeze(0) if k == 1 and len(shape) == 3 else v
                if not isinstance(v, torch.Tensor) or v.dim() != 4 or v.shape[0] != k:
                    raise ValueError(f'image #{i} has tiles {tiles[i].tolist()}, so {k} crop(s) (tiles + thumbnail), '
                                     f'but its pixels have shape {shape}; fix: pass the (crops, C, H, W) tensor '
                                     'prepare_image returns')
                flat.extend(v.unbind(0))
                flat_grids.extend([g] * k)
            visuals, grids = flat, torch.tensor(flat_grids, dtype=torch.int64)
        described = int((grids[:, 0] * grids[:, 1] * grids[:, 2]).sum()) // (m * m)
        if described != n_tokens:
            raise ValueError(f'{token}_grid_thw describes {described} merged {token} tokens (sum of t*h*w/{m * m}) but '
                             f'input_ids hold {n_tokens} {token} tokens; fix: build the prompt with the same grids '
                             '(prompt() / collate())')
        feats = self.tower(visuals)
        out = []
        for i, (f, g) in enumerate(zip(feats, grids.tolist())):
            if list(f.shape[:3]) != g:
                raise ValueError(f'{kind} #{i}: its frames give a {f.shape[0]}x{f.shape[1]}x{f.shape[2]} grid (t, h, w '
                                 f'patches) but {token}_grid_thw[{i}] = {g}; fix: build the prompt from the same '
                                 'frames (visual_grid / prepare_video)')
            out.append(self.projector(f))
        return torch.cat(out)

    def embed(self, input_ids: torch.Tensor, videos=None, video_grid_thw=None, images=None,
              image_grid_thw=None, image_tiles=None) -> torch.Tensor:
        """Token embeddings ``(B, L, dim)`` with the projected visual features in the image / video token slots (a
        tiled image: its crops through the tower one by one, tiles then thumbnail, as the prompt lays them out)."""
        x = self.decoder.embed(input_ids)
        tok = self.tokenizer
        for kind, token_id, visuals, grids, tiles in (('video', tok.video_id, videos, video_grid_thw, None),
                                                      ('image', tok.image_id, images, image_grid_thw, image_tiles)):
            slots = input_ids == token_id
            feats = self._visual_features(kind, visuals, grids, _count(slots), tiles)
            if feats is not None:
                x = x.masked_scatter(slots.unsqueeze(-1), feats.to(x.dtype))
        return x

    @staticmethod
    def _check_ids(input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor]) -> None:
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.is_floating_point():
            raise ValueError(f'input_ids must be a (B, L) integer tensor, got {getattr(input_ids, "shape", input_ids)}')
        if attention_mask is not None and tuple(attention_mask.shape) != tuple(input_ids.shape):
            raise ValueError(f'attention_mask shape {tuple(attention_mask.shape)} != input_ids shape '
                             f'{tuple(input_ids.shape)}')

    @staticmethod
    def key_mask(attention_mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
        """``(B, L)`` bool key padding mask, or ``None`` when every token is real (SDPA's causal fast path)."""
        if attention_mask is None:
            return None
        mask = attention_mask != 0
        return None if bool(mask.all()) else mask

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                videos: Optional[Sequence[torch.Tensor]] = None, video_grid_thw: Optional[torch.Tensor] = None,
                images: Optional[Sequence[torch.Tensor]] = None, image_grid_thw: Optional[torch.Tensor] = None,
                second_per_grid_ts: Optional[Sequence[float]] = None, position_ids: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, logits_mask: Optional[torch.Tensor] = None,
                scheme_options: Optional[Union[Mapping[str, Any], Sequence[Mapping[str, Any]]]] = None,
                image_tiles: Optional[torch.Tensor] = None) -> VLMOutput:
        """Logits of a batch (teacher forcing), and the loss on labelled tokens.

        Args:
            input_ids: ``(B, L)`` int64 (from :meth:`prompt` / :meth:`collate`).
            attention_mask: ``(B, L)``, 0 for padding (either side).
            videos: float clips ``(T, C, H, W)`` (from :meth:`prepare_video`), in batch order.
            video_grid_thw: ``(num_videos, 3)`` pre-merge grids (must match the clips and the video tokens).
            images: float images ``(C, H, W)``; ``image_grid_thw`` ``(num_images, 3)`` their grids; a tiled image is
                ``(crops, C, H, W)`` (:meth:`prepare_image`) with ``image_grid_thw`` one tile's grid.
            image_tiles: ``(num_images, 2)`` tile grids ``[cols, rows]`` (from :meth:`collate`; ``None``: untiled).
            second_per_grid_ts: seconds per temporal patch per video (used by ``qwen2_5_vl``).
            position_ids: ``(A, B, L)`` to use instead of computing them.
            labels: ``(B, L)`` int64 targets, :data:`IGNORE_INDEX` where no loss; the loss of token ``k`` is on the
                logits at ``k - 1`` (computed at those positions only).
            logits_mask: ``(B, L)`` bool: compute logits only there (the vocabulary projection dominates a small
                model's cost; training needs the answer positions only).
            scheme_options: see :meth:`position_ids`.

        Raises:
            ValueError: bad shapes; visual tokens without visuals or grids ("videos without grids"); grids whose token
                count does not match the visual tokens or the frames; errors of :func:`get_position_ids`.
        """
        self._check_ids(input_ids, attention_mask)
        x = self.embed(input_ids, videos, video_grid_thw, images, image_grid_thw, image_tiles)
        deltas = None
        if position_ids is None:
            position_ids, deltas = self.position_ids(input_ids, attention_mask, image_grid_thw, video_grid_thw,
                                                     second_per_grid_ts, scheme_options, image_tiles)
        hidden = self.decoder(x, position_ids, self.key_mask(attention_mask))
        logits = self.decoder.logits(hidden if logits_mask is None else hidden[logits_mask.bool()])
        loss = None
        if labels is not None:
            sel = labels[:, 1:] != IGNORE_INDEX
            loss = F.cross_entropy(self.decoder.logits(hidden[:, :-1][sel]).float(), labels[:, 1:][sel])
        return VLMOutput(logits, loss, position_ids, deltas)

    def generate(self, input_ids: torch.Tensor, **kwargs: Any):
        """Greedy or sampled generation with a KV cache; see :func:`zoo.models.vlm.generation.generate`."""
        from .generation import generate
        return generate(self, input_ids, **kwargs)

    # --------------------------------------------------------------------------------------------- timm-like api
    @torch.jit.ignore
    def no_weight_decay(self) -> set:
        """Embedding, norms, biases and the encoding's learned tables (CoPE) get no weight decay (timm's optimizer
        factory skips 1-D params itself)."""
        return {'decoder.embed.weight'} | {f'decoder.pe.{n}' for n in self.decoder.pe.no_weight_decay()}

    @torch.jit.ignore
    def set_grad_checkpointing(self, enable: bool = True) -> None:
        self.decoder.grad_checkpointing = enable
        if hasattr(self.tower.model, 'set_grad_checkpointing'):
            self.tower.model.set_grad_checkpointing(enable)


# ---------------------------------------------------------------------------------------------------- registry
#: Decoder and tower per size. Every scheme keeps its published frequency split at head_dim 32; a scheme that
#: allocates per key head raises the KV-head count to what its split needs (``Scheme.fit_kv_heads``: MHRoPE's
#: [2, 3, 3] of 8 key heads gives the tiny MHRoPE model 8 (MHA) instead of 2).
VLM_SIZES: Dict[str, Dict[str, Any]] = {
    'tiny': dict(vision_tower='pe_vit_tiny_patch16_rope_mixed_224', dim=256, depth=4, num_heads=8, num_kv_heads=2,
                 mlp_hidden=704),
    'small': dict(vision_tower='pe_vit_small_patch16_rope_mixed_224', dim=512, depth=8, num_heads=16,
                  num_kv_heads=8, mlp_hidden=1408),
}
_KWARGS = ('vision_tower', 'tower_kwargs', 'temporal_patch_size', 'spatial_merge_size', 'dim', 'depth', 'num_heads',
           'num_kv_heads', 'head_dim', 'mlp_hidden', 'theta', 'mrope_section', 'scheme_options', 'max_seq_len',
           'pretrained_tower', 'p_rope', 'extrapolation', 'max_tiles')


#: AnyRes tile budget per image of the registered models whose scheme takes tiles (CoMemo's max_dynamic_patch).
DEFAULT_MAX_TILES = 6


def vlm_schemes() -> List[str]:
    """Canonical scheme names with ``pe_vlm_*`` models (aliases such as ``qwen3_vl`` left out)."""
    return [n for n in list_schemes() if get_scheme(n).name == n and get_scheme(n).in_video_llm]


def list_video_llms(pattern: str = '*') -> List[str]:
    """Registered video-LLM names ``pe_vlm_{tiny,small}_{scheme}`` matching a wildcard, sorted."""
    names = [f'pe_vlm_{size}_{s}' for size in VLM_SIZES for s in vlm_schemes()]
    return sorted(n for n in names if fnmatch.fnmatch(n, pattern))


def video_llm_config(name: str, **kwargs: Any) -> Dict[str, Any]:
    """The constructor arguments of a registered video-LLM: the size's defaults, the KV-head count its scheme needs
    (``Scheme.fit_kv_heads``), then ``kwargs``.

    Args:
        name: ``pe_vlm_{tiny,small}_{scheme}`` (see :func:`list_video_llms`).
        **kwargs: overrides of the size's defaults: ``vision_tower`` (a timm model name), ``tower_kwargs``,
            ``temporal_patch_size``, ``dim``, ``depth``, ``num_heads``, ``num_kv_heads``, ``head_dim``,
            ``mlp_hidden``, ``theta``, ``mrope_section``, ``scheme_options``, ``max_seq_len``, ``extrapolation``,
            ``pretrained_tower``, ``spatial_merge_size``, ``p_rope``, ``max_tiles`` (default
            :data:`DEFAULT_MAX_TILES` for a scheme that takes tiles, else 1).

    Returns:
        ``{'scheme': ..., **arguments}`` for :class:`VideoLLM`.

    Raises:
        ValueError: an unknown name (unknown size or scheme, with the accepted ones) or keyword.
    """
    if not isinstance(name, str) or not name.startswith('pe_vlm_'):
        raise ValueError(f'{name!r} is not a video-LLM name; fix: use pe_vlm_{{tiny,small}}_{{scheme}}, one of '
                         f'{list_video_llms()[:4]} ... (zoo.list_video_llms())')
    size, _, scheme = name[len('pe_vlm_'):].partition('_')
    if size not in VLM_SIZES:
        raise ValueError(f'{name!r}: unknown size {size!r}; fix: use one of {sorted(VLM_SIZES)}')
    if scheme in list_schemes() and not get_scheme(scheme).in_video_llm:
        raise ValueError(f'{name!r}: scheme {scheme!r} has no video-LLM; fix: use its ids through '
                         f"get_layout_position_ids({scheme!r}, segments) or pick one of {vlm_schemes()}")
    if scheme not in vlm_schemes():
        close = difflib.get_close_matches(scheme, vlm_schemes(), n=2)
        hint = f' (did you mean {", ".join(close)}?)' if close else ''
        raise ValueError(f'{name!r}: unknown scheme {scheme!r}{hint}; fix: use one of {vlm_schemes()}')
    unknown = sorted(set(kwargs) - set(_KWARGS))
    if unknown:
        raise ValueError(f'create_video_llm({name!r}) got unknown option(s) {unknown}; its options are {list(_KWARGS)}')
    args = dict(VLM_SIZES[size])
    args['num_kv_heads'] = get_scheme(scheme).fit_kv_heads(args['num_kv_heads'])
    if get_scheme(scheme).takes_tiles:
        args['max_tiles'] = DEFAULT_MAX_TILES
    args.update(kwargs)
    return dict(scheme=scheme, **args)


def create_video_llm(name: str, **kwargs: Any) -> VideoLLM:
    """Build a registered video-LLM (arguments: :func:`video_llm_config`).

    Args:
        name: ``pe_vlm_{tiny,small}_{scheme}`` (see :func:`list_video_llms`).
        **kwargs: overrides of the size's defaults (see :func:`video_llm_config`).

    Raises:
        ValueError: an unknown name (unknown size or scheme, with the accepted ones) or keyword.
    """
    model = VideoLLM(**video_llm_config(name, **kwargs))
    model.model_name = name
    return model
