"""The position-encoding interface shared by every backbone (image ViT, video ViT, video-LLM decoder).

A backbone builds one :class:`Positions` per forward (never from the token count) and asks its encoding for up to
four contributions (hooks):

* ``embed(x, pos)``: add to the tokens after patch embedding (APE, sin-cos, Fourier features). Backbones call it on
  the full grid, before any token subset is taken, so additive encodings never see a subset.
* ``mix(x, pos, block_idx)``: a token mixer after a block (CPVT's PEG). It needs the full grid.
* ``attn_terms(pos, dtype, device)``: one :class:`AttnTerm` (or ``None``) per layer, computed once per forward and
  shared by the layers that need the same one. A term may transform the layer's input tokens before the q/k/v
  projection (LaPE), rotate q and k (RoPE family, ComRoPE, LieRE, multimodal
  schemes), transform v before attention and the output after it (GTA), add an additive attention bias that can
  depend on q and k (iRPE bias / contextual, the distance biases; per block of queries at large sizes), multiply
  the post-softmax weights (URPE), and add a value term computed from the attention weights (iRPE on v).
* ``set_grid_size(grid)``: resample learned tables to a new default grid.
* ``set_extrapolation(strategy)`` / ``check_extrapolation(strategy)``: switch to (or validate, without any change)
  a training-free extrapolation strategy (:mod:`zoo.encodings.extrapolation`); the encoding drops its own cached
  tables.
* ``map_checkpoint(layout, state_dict, prefix)``: take the encoding's tensors out of an upstream checkpoint
  (:data:`zoo.encodings.checkpoint.CHECKPOINT_LAYOUTS`) under its own names, learned tables resampled to its grid.
* ``inflate_param(name, image_value, target, image_grid, prefix)``: a video encoding's parameter from the same image
  encoding's (2D checkpoint -> 3D model).

The attention layer (``zoo.models.attention.Attention``) contains no per-encoding branch: it only asks the term what
it contributes, and uses ``F.scaled_dot_product_attention`` unless the term declares ``needs_attn_weights`` (a
post-softmax multiplier or a value term); a term that sets ``query_block`` gets its bias asked per block of queries
(``bias_rows``), each block one SDPA call, so no ``(L, L)`` bias exists whole. Code
above the encodings (models, sweeps, converters) calls these hooks and never reads or writes an encoding's attributes
or caches.

Terms carry a batch axis (size 1 or B) so that positions can differ per sample (token subsets, mixed text/visual
sequences). They hold their tensors in ``tensor_fields`` and no lazily-built state, so gradient checkpointing (both
modes) sees the same saved tensors in the forward and the recompute.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from ._cache import TableCache
from .checkpoint import CHECKPOINT_LAYOUTS, append_time_part
from .extrapolation import ALL_STRATEGIES, Extrapolation, strategy_name
from .registry import get_pos_encoding_class, list_pos_encodings, pos_encoding_name

__all__ = ['Positions', 'AttnTerm', 'PosEncoding', 'check_keep_indices', 'pe_aux_loss']


def check_keep_indices(keep_indices: torch.Tensor, batch_size: int, num_patches: int) -> None:
    """Validate a token subset: ``(B, K)`` integer indices into the flattened patch grid, sorted, unique, in range.

    Raises:
        ValueError: naming the problem (wrong rank, batch, dtype, range, order) and the expected form.
    """
    if not isinstance(keep_indices, torch.Tensor) or keep_indices.dim() != 2:
        raise ValueError(f'keep_indices must be a (B, K) integer tensor of patch indices, got '
                         f'{getattr(keep_indices, "shape", type(keep_indices).__name__)}')
    if keep_indices.dtype.is_floating_point or keep_indices.dtype == torch.bool:
        raise ValueError(f'keep_indices must be integer (torch.long), got {keep_indices.dtype}')
    if keep_indices.shape[0] != batch_size:
        raise ValueError(f'keep_indices has batch {keep_indices.shape[0]} but the input has batch {batch_size}')
    if keep_indices.shape[1] < 1:
        raise ValueError('keep_indices keeps no token; keep at least one patch per sample')
    if torch.compiler.is_compiling():
        return
    if int(keep_indices.min()) < 0 or int(keep_indices.max()) >= num_patches:
        raise ValueError(f'keep_indices must lie in [0, {num_patches}) (the flattened t-major, row-major patch grid), '
                         f'got values in [{int(keep_indices.min())}, {int(keep_indices.max())}]')
    if keep_indices.shape[1] > 1 and not bool((keep_indices[:, 1:] > keep_indices[:, :-1]).all()):
        raise ValueError('keep_indices must be sorted ascending without repeats in every row; '
                         'use keep_indices.sort(dim=1).values')


@dataclass(frozen=True)
class Positions:
    """Where the tokens of one forward pass are.

    Token layout: ``[prefix tokens (class, registers), then the other tokens]``. The other tokens are either the
    patches of a grid in t-major, row-major order (all of them, or a per-sample kept subset), or a sequence with
    explicit per-token ids (text and visual tokens of a video-LLM).

    Attributes:
        grid: patch grid ``(T, H, W)`` in patches; a 2D image is ``(1, H, W)``. ``None`` for explicit ids.
        num_prefix_tokens: leading tokens that carry no grid position (class token + registers).
        num_class_tokens: how many of the prefix tokens are class tokens (they come first). Registers follow.
        keep_indices: optional ``(B, K)`` long, sorted indices into the flattened grid of the patch tokens present
            (patch dropout, MAE / V-JEPA masking); ``None`` means every patch is present.
        ids: optional explicit position ids ``(A, B, L)`` (A axes, M-RoPE style), long or float, for every token.
        attn_mask: optional key padding mask ``(B, L_keys)`` bool, True for real tokens (keys of a KV cache included).
        is_causal: tokens attend only to keys at or before their own index.
        batch_size: rows of the batch, when the backbone states it: encodings that draw positions per sample in
            training (``random_positions``) draw this many; ``None`` means one draw shared by the batch (or the batch
            of ``keep_indices``).
        images: the backbone's input pixels ``(B, C, H, W)`` for encodings computed from the image content
            (LOOPE's official ``ArtPE``); ``None`` where the backbone does not hand them over.
    """
    grid: Optional[Tuple[int, int, int]]
    num_prefix_tokens: int = 0
    num_class_tokens: int = 0
    keep_indices: Optional[torch.Tensor] = None
    ids: Optional[torch.Tensor] = None
    attn_mask: Optional[torch.Tensor] = None
    is_causal: bool = False
    batch_size: Optional[int] = None
    images: Optional[torch.Tensor] = None

    @classmethod
    def from_hw(cls, hw: Tuple[int, int], num_prefix_tokens: int = 0, num_class_tokens: int = 0,
                keep_indices: Optional[torch.Tensor] = None) -> 'Positions':
        """Positions of a 2D image grid ``(H, W)`` in patches."""
        return cls((1, int(hw[0]), int(hw[1])), num_prefix_tokens, num_class_tokens, keep_indices)

    @property
    def hw(self) -> Tuple[int, int]:
        """The spatial grid ``(H, W)`` in patches."""
        if self.grid is None:
            raise ValueError('These positions carry explicit ids, not a patch grid; a grid encoding needs a grid.')
        return self.grid[1], self.grid[2]

    def hw_2d(self, encoding: str) -> Tuple[int, int]:
        """``(H, W)`` of a single-frame grid; ValueError naming ``encoding`` for video grids or explicit ids."""
        if self.grid is None or self.grid[0] != 1:
            raise ValueError(f'{encoding} is a 2D encoding and needs a (1, H, W) patch grid, got grid={self.grid}')
        return self.grid[1], self.grid[2]

    def grid_of(self, encoding: str, video: bool) -> Tuple[int, ...]:
        """The grid an encoding works on: ``(T, H, W)`` for a 3D (video) encoding, ``(H, W)`` for a 2D one
        (:meth:`hw_2d`); ValueError naming ``encoding`` for explicit ids."""
        if not video:
            return self.hw_2d(encoding)
        if self.grid is None:
            raise ValueError(f'{encoding} needs a patch grid (Positions.grid), not explicit ids')
        return tuple(self.grid)

    @property
    def grid_patches(self) -> int:
        """Cells of the full grid ``T * H * W``."""
        t, h, w = self.grid
        return t * h * w

    @property
    def num_patches(self) -> int:
        """Patch tokens present (``K`` for a subset, else the full grid)."""
        return self.grid_patches if self.keep_indices is None else self.keep_indices.shape[1]

    @property
    def num_tokens(self) -> int:
        return self.num_prefix_tokens + self.num_patches

    @property
    def is_subset(self) -> bool:
        return self.keep_indices is not None

    @property
    def draw_batch(self) -> int:
        """How many per-sample position draws a training forward makes: ``batch_size``, else the batch of
        ``keep_indices``, else 1 (one draw shared by the batch)."""
        if self.batch_size is not None:
            return self.batch_size
        return 1 if self.keep_indices is None else self.keep_indices.shape[0]

    def require_full_grid(self, encoding: str) -> None:
        """ValueError for token subsets: ``encoding`` needs every patch of the grid (e.g. PEG's convolution)."""
        if self.keep_indices is not None:
            raise ValueError(f'{encoding} needs the full patch grid, but this forward keeps a subset of patches '
                             f'(patch dropout or keep_indices); use patch_drop_rate=0 / no keep_indices with this '
                             f'encoding, or pick an encoding that accepts subsets')

    def token_index(self) -> Optional[torch.Tensor]:
        """``(B, num_tokens)`` long index of every present token into the full-grid token sequence (prefix first),
        or ``None`` when every patch is present."""
        if self.keep_indices is None:
            return None
        keep = self.keep_indices.long()
        prefix = torch.arange(self.num_prefix_tokens, device=keep.device).expand(keep.shape[0], -1)
        return torch.cat([prefix, keep + self.num_prefix_tokens], dim=1)

    def select(self, t: torch.Tensor, dim: int, dims: Sequence[int] = ()) -> torch.Tensor:
        """Gather the present tokens from a full-grid tensor ``t`` whose axis 0 is the batch (size 1 or B).

        Args:
            t: full-grid tensor; axis ``dim`` (and each axis in ``dims``, e.g. both axes of a pairwise table) indexes
                the full token sequence ``num_prefix_tokens + T*H*W``.
            dim: token axis.
            dims: further token axes gathered with the same index (pairwise tables).

        Returns:
            ``t`` unchanged for the full grid; otherwise batch ``B`` with every token axis reduced to the present
            tokens, per sample.
        """
        index = self.token_index()
        if index is None:
            return t
        b = index.shape[0]
        for d in (dim, *dims):
            d = d % t.dim()
            shape = [1] * t.dim()
            shape[0], shape[d] = b, index.shape[1]
            idx = index.view(shape).expand(*[b if i == 0 else (index.shape[1] if i == d else t.shape[i])
                                             for i in range(t.dim())])
            t = torch.gather(t.expand(b, *t.shape[1:]), d, idx)
        return t


class AttnTerm:
    """What an encoding contributes inside one attention layer.

    q, k, v are ``(B, heads, L, head_dim)`` (k and v may have fewer heads before grouped-query attention repeats
    them). Subclasses override only what they need; the defaults contribute nothing. The order inside the attention:

    0. ``transform_input(x)`` on the layer's input tokens, before the q/k/v projection;
    1. ``rotate(q, k)`` and ``transform_values(v)`` (each token at its own position, before a KV cache append);
    2. ``bias(q, k, scale)``, added to ``scale * q @ k^T`` (merged with the padding / causal masks into SDPA's
       ``attn_mask``), or, when ``query_block`` is set, ``bias_rows`` for each block of queries;
    3. softmax; on the explicit path (``needs_attn_weights``) the weights are multiplied by ``attn_multiplier`` and
       ``value_term(attn)`` is added to ``attn @ v``;
    4. ``transform_output(o)`` on the per-head output, before the heads are merged.

    The tensors that define a term are listed in ``tensor_fields`` (their leading axis is the batch, size 1 or B):
    backbones hand them to gradient checkpointing as explicit inputs, so gradients reach learned parameters in both
    checkpoint modes.

    Attributes:
        needs_attn_weights: True when ``attn_multiplier`` or ``value_term`` needs the post-softmax weights (URPE,
            iRPE on v); only then does the attention leave ``F.scaled_dot_product_attention`` for the explicit path.
        query_block: when set (an int), the fused path asks ``bias_rows`` for blocks of at most this many queries (as
            equal as possible) and runs one SDPA call per block, so the ``(L, L)`` bias is never materialised whole
            (distance biases at video sizes). Terms set it only in eager mode (sizes are then Python ints), never
            while tracing.
    """
    needs_attn_weights: bool = False
    query_block: Optional[int] = None
    tensor_fields: Tuple[str, ...] = ()

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Return rotated ``(q, k)``, out of place. Prefix tokens are handled by the term (identity rows)."""
        return q, k

    def transform_input(self, x: torch.Tensor) -> torch.Tensor:
        """The attention's input tokens ``(B, L, C)`` (after the block's norm) transformed before the q/k/v
        projection, out of place (LaPE: the layer's normalised PE added). ``L`` is the tokens of this forward."""
        return x

    def transform_values(self, v: torch.Tensor) -> torch.Tensor:
        """Values ``(B, kv_heads, L, head_dim)`` transformed before attention (GTA: each token's group element),
        out of place; new tokens of a KV cache are transformed before they are appended."""
        return v

    def transform_output(self, o: torch.Tensor) -> torch.Tensor:
        """Per-head attention output ``(B, heads, L_queries, head_dim)`` transformed after attention, before the heads
        are merged (GTA: the inverse of the query token's group element), out of place."""
        return o

    def bias(self, q: torch.Tensor, k: torch.Tensor, scale: float) -> Optional[torch.Tensor]:
        """Additive attention logits ``(B or 1, heads or 1, L, L)`` added to ``scale * q @ k^T``, or ``None``."""
        return None

    def bias_rows(self, q: torch.Tensor, k: torch.Tensor, scale: float, start: int, stop: int) -> torch.Tensor:
        """Rows ``start:stop`` of :meth:`bias` (query token indices in the key sequence), ``(B or 1, heads or 1,
        stop - start, L_keys)``, for a term that sets ``query_block``; ``q`` holds those queries only.

        Raises:
            NotImplementedError: the term sets ``query_block`` without computing its bias per block.
        """
        raise NotImplementedError(f'{type(self).__name__} sets query_block but does not implement bias_rows')

    def attn_multiplier(self, q: torch.Tensor, k: torch.Tensor) -> Optional[torch.Tensor]:
        """Post-softmax multiplier ``(B or 1, heads or 1, L_queries, L_keys)`` of the attention weights (URPE), or
        ``None``. Used on the explicit path only: a term returning one declares ``needs_attn_weights``."""
        return None

    def value_term(self, attn: torch.Tensor) -> Optional[torch.Tensor]:
        """Extra output ``(B, heads, L, head_dim)`` from post-softmax weights ``attn`` ``(B, heads, L, L)``."""
        return None

    def tensors(self) -> Tuple[torch.Tensor, ...]:
        return tuple(getattr(self, f) for f in self.tensor_fields)

    def with_tensors(self, tensors: Sequence[torch.Tensor]) -> 'AttnTerm':
        """A shallow copy whose ``tensor_fields`` are replaced by ``tensors`` (same order)."""
        new = copy.copy(self)
        for f, t in zip(self.tensor_fields, tensors):
            setattr(new, f, t)
        return new


class PosEncoding(nn.Module):
    """Base class for every position encoding. Subclasses override the hooks they use.

    Class attributes:
        family: human-readable PE family name used by ``zoo list`` and reports.
        adaptation: how the encoding adapts to a new grid, stated in resolution reports.
        supports_subsets: False when the encoding needs every patch of the grid (PEG); backbones then refuse
            patch dropout and ``keep_indices`` with a clear error at construction or forward.
        supports_video: False for image-only encodings (2D ``sincos``, ``rope_axial``): they refuse a 3-tuple
            ``grid_size`` ``(T, H, W)`` at construction and a grid with ``T > 1`` at forward, naming the video kinds.
            Every other encoding takes a video geometry (``grid_size=(T, H, W)`` in tubelets and patches).
        extrapolation_strategies: the training-free strategies the encoding takes (:mod:`zoo.encodings.extrapolation`):
            all four for the RoPE family, ``('none', 'pi')`` for sin-cos and Fourier features, ``('none',)`` (the
            default) for the others, which adapt by :attr:`adaptation` instead.
    """
    family: str = 'none'
    adaptation: str = 'nothing to adapt'
    supports_subsets: bool = True
    supports_video: bool = True
    extrapolation_strategies: Tuple[str, ...] = ('none',)
    _extrapolation: Optional[Extrapolation] = None  # set by encodings that take strategies

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        """Add absolute position information to tokens ``x`` ``(B, L, C)`` laid out as described in Positions."""
        return x

    def mix(self, x: torch.Tensor, pos: Positions, block_idx: int) -> torch.Tensor:
        """Token mixer applied after block ``block_idx`` (identity unless the encoding has one there)."""
        return x

    def attn_terms(self, pos: Positions, dtype: torch.dtype,
                   device: torch.device) -> Optional[Sequence[Optional[AttnTerm]]]:
        """One :class:`AttnTerm` (or None) per layer, or ``None`` when the encoding has no attention term."""
        return None

    def set_grid_size(self, grid_size: Tuple[int, ...]) -> None:
        """Called by ``set_input_size``: resample learned tables to a new default grid (in patches)."""

    # ------------------------------------------------------------------------------------------- extrapolation
    @property
    def extrapolation(self) -> Optional[Extrapolation]:
        """The training-free extrapolation strategy the encoding holds, or ``None`` for an encoding that takes none.
        Read-only: change it with :meth:`set_extrapolation`."""
        return self._extrapolation

    @classmethod
    def supported_extrapolations(cls) -> Tuple[str, ...]:
        """The strategy names the encoding takes, e.g. ``('none', 'pi', 'ntk', 'yarn')``; ``('none',)`` for an
        encoding that adapts otherwise (learned tables, relative buckets, convolutions, normalised positions)."""
        return tuple(cls.extrapolation_strategies)

    def check_extrapolation(self, strategy: Union[str, Mapping[str, Any]]) -> Optional[Extrapolation]:
        """What :meth:`set_extrapolation` would set, without changing the encoding (validate a sweep's (model,
        strategy) pairs up front, no copy needed).

        Args:
            strategy: ``'none'``, ``'pi'``, ``'ntk'``, ``'yarn'``, or a dict with ``strategy`` and optionally
                ``train_grid``, ``alpha``, ``beta`` (:meth:`Extrapolation.parse`); what the dict leaves out keeps the
                encoding's current value (its training grid, YaRN's ramp).

        Returns:
            The :class:`Extrapolation` the encoding would hold, or ``None`` for an encoding that takes no strategy
            (``'none'`` is accepted by every encoding: it is what those do).

        Raises:
            ValueError: an unknown strategy or option, or a strategy the encoding does not take; the message names
                the encoding, the strategy and the strategies (or the adaptation) it takes.
        """
        name = pos_encoding_name(self)
        current = self.extrapolation
        if current is None:
            plain = strategy_name(strategy)  # 'longrope=FILE' -> 'longrope'
            if plain not in ALL_STRATEGIES:
                raise ValueError(f'unknown extrapolation strategy {plain!r}; choose one of {ALL_STRATEGIES}')
            if plain != 'none':
                takers = [n for n in list_pos_encodings()
                          if plain in getattr(get_pos_encoding_class(n), 'extrapolation_strategies', ())]
                raise ValueError(f'extrapolation {plain!r} does not apply to the {name} encoding ({self.family}), '
                                 f'which adapts to a new grid by: {self.adaptation}; {plain!r} applies to the '
                                 f'encodings {", ".join(takers)}')
            return None
        merged = dict(strategy=current.strategy, train_grid=current.train_grid, alpha=current.alpha, beta=current.beta)
        merged.update(dict(strategy=strategy) if isinstance(strategy, str) else dict(strategy))
        return Extrapolation.parse(merged, allowed=self.extrapolation_strategies, encoding=name)

    def set_extrapolation(self, strategy: Union[str, Mapping[str, Any]]) -> None:
        """Switch to another training-free extrapolation strategy (evaluation sweeps), next to
        :meth:`set_grid_size`: the same as building the encoding with ``extrapolation=strategy`` (merged with the
        current training grid and ramp, see :meth:`check_extrapolation`). Cached tables are dropped.

        Raises:
            ValueError: see :meth:`check_extrapolation`; the encoding is unchanged then.
        """
        ext = self.check_extrapolation(strategy)
        if ext is not None:
            self._extrapolation = ext
            self.clear_caches()

    def clear_caches(self) -> None:
        """Drop every derived table the encoding (and its child modules) cached; they are rebuilt when next needed."""
        for m in self.modules():
            for value in vars(m).values():
                if isinstance(value, TableCache):
                    value.clear()

    # --------------------------------------------------------------------------------------------- checkpoints
    def map_checkpoint(self, layout: str, state_dict: Dict[str, torch.Tensor],
                       prefix: str = '') -> Dict[str, torch.Tensor]:
        """Take this encoding's tensors out of a checkpoint and return them under its own names.

        The default asks each child encoding (an optional ``ape``); encodings whose tensors have upstream names
        (RoPE-Mixed, learned tables, iRPE, ComRoPE) extend it.

        Args:
            layout: the source layout the backbone's filter detected, a key of
                :data:`~zoo.encodings.checkpoint.CHECKPOINT_LAYOUTS`.
            state_dict: the checkpoint's tensors (upstream names; for ``'zoo'`` the model's own names). The tensors
                this encoding takes are removed from it; the rest is left to the caller.
            prefix: this encoding's name in the model (``'pe.'``): the returned keys start with it.

        Returns:
            ``{prefix + name: tensor}`` for this encoding's ``state_dict`` names. Learned 2D tables are resampled to
            the encoding's grid; other tensors are moved unchanged (their shapes are checked by the caller).

        Raises:
            ValueError: an unknown ``layout``.
            CheckpointMismatchError: tensors that cannot fit this encoding (the message says how to build one that
                does).
        """
        if layout not in CHECKPOINT_LAYOUTS:
            raise ValueError(f'unknown checkpoint layout {layout!r}; choose one of {list(CHECKPOINT_LAYOUTS)}')
        out: Dict[str, torch.Tensor] = {}
        for name, child in self.named_children():
            if isinstance(child, PosEncoding):
                out.update(child.map_checkpoint(layout, state_dict, f'{prefix}{name}.'))
        return out

    def inflate_param(self, name: str, image_value: Optional[torch.Tensor], target: torch.Tensor,
                      image_grid: Tuple[int, int], prefix: str = '') -> Optional[torch.Tensor]:
        """One parameter of this (video) encoding made from the same image encoding's (2D checkpoint -> 3D model).

        The default hands names of a child encoding (``ape.*``) to it, keeps a tensor of the same shape, and appends a
        zero time part where the video parameter is longer along one axis
        (:func:`~zoo.encodings.checkpoint.append_time_part`). Learned tables, PEG kernels and iRPE ``product``
        tables override it.

        Args:
            name: the parameter's name in this encoding's ``state_dict``.
            image_value: the image checkpoint's tensor of that name, or ``None`` when the image has none (then only
                a parameter with a natural start, e.g. TimeSformer's zero time table, gets a value).
            target: this encoding's current tensor (shape and dtype of the result).
            image_grid: the image model's patch grid ``(H, W)``.
            prefix: this encoding's name in the model (``'pe.'``), for messages.

        Returns:
            The tensor to load, or ``None`` when ``image_value`` cannot be related to ``target`` (the caller reports
            the mismatch) or there is nothing to start from.

        Raises:
            CheckpointMismatchError: a learned table that does not hold the ``image_grid`` patch table.
        """
        child, sep, rest = name.partition('.')
        sub = self._modules.get(child) if sep else None
        if isinstance(sub, PosEncoding):
            return sub.inflate_param(rest, image_value, target, image_grid, f'{prefix}{child}.')
        if image_value is None:
            return None
        if tuple(image_value.shape) == tuple(target.shape):
            return image_value
        return append_time_part(image_value, target)

    # -------------------------------------------------------------------------------------------- parameters
    def reset_parameters(self) -> None:
        """Re-initialise every parameter and rebuild every buffer (meta-device construction: ``to_empty`` then
        ``init_weights``). The default re-initialises every submodule that knows how (``reset_parameters``)."""
        for m in self.modules():
            if m is not self and hasattr(m, 'reset_parameters'):
                m.reset_parameters()

    def no_weight_decay(self) -> set:
        """Names of parameters (relative to this module) that must not get weight decay."""
        return set()

    def aux_loss(self) -> Optional[torch.Tensor]:
        """The encoding's own regulariser, a scalar tensor the training loop may add to the loss (SeqPE's contrastive
        and distillation losses), or ``None`` when it has none. The default sums its child encodings' (an optional
        ``ape``). See :func:`pe_aux_loss`."""
        total = None
        for child in self.children():
            if isinstance(child, PosEncoding):
                loss = child.aux_loss()
                if loss is not None:
                    total = loss if total is None else total + loss
        return total


def pe_aux_loss(model: nn.Module) -> Optional[torch.Tensor]:
    """The sum of :meth:`PosEncoding.aux_loss` over every encoding in ``model`` (outermost encodings only; each
    sums its child encodings'), or ``None`` when none has a regulariser."""
    total = None
    encodings = [m for m in model.modules() if isinstance(m, PosEncoding)]
    inner = {id(c) for e in encodings for c in e.modules() if c is not e}
    for enc in encodings:
        if id(enc) in inner:
            continue
        loss = enc.aux_loss()
        if loss is not None:
            total = loss if total is None else total + loss
    return total
