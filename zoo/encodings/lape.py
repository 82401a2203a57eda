"""LaPE: layer-adaptive position embedding, over every additive position encoding (2D and 3D).

Paper: "LaPE: Layer-adaptive Position Embedding for Vision Transformers with Independent Layer Normalization"
(Yu et al., ICCV 2023, arXiv:2212.13140), Sec. 3.3. Official code: github.com/Ingrid725/LaPE
(``vision_transformer.py``, ``join_type='LaPE'``).

A base additive encoding (``ape``, ``sincos``, ``fourier``, ``st_ape``, ``sincos3d``) gives the table ``P``
``(1, P_prefix + N, C)`` it would add to the tokens (prefix rows as the base gives them: DeiT's learned class row, zero
for fixed tables). LaPE adds nothing to the token stream; block ``i`` instead gets its own layer norm of the PE,
added to the attention's input after the block's own ``norm1``:

    ``x = x + Attn(LN1_i(x) + LN^pe_i(P))``,  ``x = x + MLP(LN2_i(x))``

so the residual stream and the MLP never see the PE (the ``AttnTerm.transform_input`` hook). The per-layer norms have
their own affine parameters (``norms.i.weight / bias``, ones and zeros at init, eps ``norm_eps`` = 1e-6 as DeiT's
``norm_layer``).

Official quirk (``chain_norms``): the released code reassigns the PE to each block's normalised PE, so block ``i``
normalises block ``i - 1``'s output (``P_i = LN^pe_i(P_{i-1})``, ``P_{-1} = P``) instead of the raw table. The paper
(Eq. 6-7) normalises the same ``P`` independently in every layer: ``chain_norms=False`` (the default).
``chain_norms=True`` reproduces the official numbers (``lape.pt``); an official checkpoint (``'deit_lape'`` layout)
is refused by a model built without it.

A new grid: the base encoding's own rule (the learned table resampled bicubically, sin-cos and Fourier recomputed at
the new coordinates, ...), then the per-layer norms, which act per token and have no grid.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .base import AttnTerm, Positions, PosEncoding
from .checkpoint import CheckpointMismatchError
from .extrapolation import Extrapolation
from .registry import create_pos_encoding, get_pos_encoding_class, register_pos_encoding

__all__ = ['LaPE', 'LaPETerm', 'LAPE_BASES']

#: LaPE name -> the additive encoding it normalises per layer.
LAPE_BASES = {'ape_lape': 'ape', 'sincos_lape': 'sincos', 'fourier_lape': 'fourier', 'st_ape_lape': 'st_ape',
              'sincos3d_lape': 'sincos3d'}


class LaPETerm(AttnTerm):
    """One layer's normalised PE ``pe`` ``(1 or B, L, C)``, added to the attention's input tokens ``(B, L, C)``."""
    tensor_fields = ('pe',)

    def __init__(self, pe: torch.Tensor):
        self.pe = pe

    def transform_input(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.pe.to(x.dtype)


class LaPE(PosEncoding):
    """Layer-adaptive PE (LaPE, arXiv:2212.13140) over the additive encoding ``base_kind`` (set by each registered
    subclass, see :data:`LAPE_BASES`).

    Args:
        dim: embedding width C.
        depth: number of blocks (one layer norm of the PE each).
        grid_size: training grid ``(H, W)`` or ``(T', H', W')`` in patches (the base encoding's geometry).
        num_heads, num_prefix_tokens, num_class_tokens: the backbone's geometry, handed to the base encoding.
        chain_norms: False (paper): every layer normalises the base table; True (official code): each layer
            normalises the previous layer's normalised PE.
        norm_eps: eps of the per-layer norms (1e-6, DeiT's ``norm_layer``).
        **base_kwargs: options of the base encoding (e.g. ``extrapolation='pi'`` for ``sincos_lape``,
            ``random_positions`` for the coordinate-based ones); refused by the base encoding's factory when it does
            not take them.

    Parameters: the base encoding's (``base.*``, e.g. ``base.pos_embed``), and ``norms.i.weight``, ``norms.i.bias``
    ``(C,)`` for ``i < depth``.

    Raises:
        ValueError: a bad geometry or option (the base encoding's message), ``depth < 1``.
    """
    base_kind: str = ''
    family = 'LaPE (layer-adaptive PE)'

    def __init__(self, dim: int, depth: int, grid_size: Tuple[int, ...], num_heads: int = 1,
                 num_prefix_tokens: int = 1, num_class_tokens: int = 1, chain_norms: bool = False,
                 norm_eps: float = 1e-6, **base_kwargs: Any):
        super().__init__()
        if int(depth) < 1:
            raise ValueError(f'{self._name()}: depth must be >= 1, got {depth}')
        geometry = dict(dim=dim, num_heads=num_heads, depth=depth, grid_size=tuple(grid_size),
                        num_prefix_tokens=num_prefix_tokens, num_class_tokens=num_class_tokens)
        try:
            self.base = create_pos_encoding(self.base_kind, geometry, base_kwargs)
        except ValueError as e:  # the base's one-line message, naming the LaPE kind too
            raise ValueError(f'{self._name()} (LaPE over {self.base_kind}): {e}') from None
        self.dim, self.depth = int(dim), int(depth)
        self.chain_norms = bool(chain_norms)
        self.norms = nn.ModuleList([nn.LayerNorm(dim, eps=norm_eps) for _ in range(self.depth)])
        self.supports_video = self.base.supports_video
        self.supports_subsets = self.base.supports_subsets
        self.adaptation = f'the {self.base_kind} table adapts as {self.base_kind} does ({self.base.adaptation}); ' \
                          'the per-layer norms act per token'

    def _name(self) -> str:
        return next((k for k, v in LAPE_BASES.items() if v == self.base_kind), 'lape')

    def extra_repr(self) -> str:
        return f'base={self.base_kind!r}, chain_norms={self.chain_norms}'

    # -------------------------------------------------------------------------------------------------- forward
    def base_table(self, pos: Positions, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The base encoding's table ``(1 or B, P + T*H*W, C)`` in ``dtype`` on the **full** grid of ``pos`` (what
        its ``embed`` adds to zero tokens; ``B`` rows in training when it draws random positions per sample)."""
        if pos.grid is None:
            raise ValueError(f'{self._name()} needs a patch grid (Positions.grid), not explicit ids')
        full = Positions(pos.grid, pos.num_prefix_tokens, pos.num_class_tokens, batch_size=pos.batch_size)
        rows = full.draw_batch if self.training else 1
        zeros = torch.zeros(rows, full.num_tokens, self.dim, device=device, dtype=dtype)
        return self.base.embed(zeros, full)

    def layer_pes(self, pos: Positions, device: torch.device,
                  dtype: torch.dtype = torch.float32) -> Sequence[torch.Tensor]:
        """The PE each layer adds to its attention input, ``depth`` tensors ``(1 or B, L, C)``, rows of the tokens
        present (a token subset gathered per sample). Computed in float32 (float64 for a float64 ``dtype``)."""
        work = torch.promote_types(dtype, torch.float32)
        table = self.base_table(pos, device, work)
        out, pe = [], table
        for norm in self.norms:
            src = pe if self.chain_norms else table
            pe = F.layer_norm(src, (self.dim,), norm.weight.to(work), norm.bias.to(work), norm.eps)
            out.append(pos.select(pe, 1))
        return out

    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Sequence[Optional[AttnTerm]]:
        return [LaPETerm(pe.to(dtype)) for pe in self.layer_pes(pos, device, dtype)]

    def set_grid_size(self, grid_size: Tuple[int, ...]) -> None:
        self.base.set_grid_size(grid_size)

    # ----------------------------------------------------------------------------------- extrapolation (the base's)
    @property
    def extrapolation(self) -> Optional[Extrapolation]:
        return self.base.extrapolation

    def check_extrapolation(self, strategy):
        return self.base.check_extrapolation(strategy)

    def set_extrapolation(self, strategy) -> None:
        self.base.set_extrapolation(strategy)

    # ---------------------------------------------------------------------------------------------- checkpoints
    def map_checkpoint(self, layout: str, state_dict: Dict[str, torch.Tensor],
                       prefix: str = '') -> Dict[str, torch.Tensor]:
        """The base encoding's tensors (its own hook: DeiT's ``pos_embed`` for ``ape``), and, in the official
        ``'deit_lape'`` layout, ``blocks.i.pe_norm.{weight,bias}`` as ``norms.i.*``. See
        :meth:`PosEncoding.map_checkpoint`.

        Raises:
            CheckpointMismatchError: an official checkpoint for a model built with ``chain_norms=False`` (the
                official model chains its norms: the same weights would compute another function).
        """
        out = super().map_checkpoint(layout, state_dict, prefix)
        if layout != 'deit_lape':
            return out
        if not self.chain_norms:
            raise CheckpointMismatchError(
                f'official LaPE checkpoints chain their per-layer PE norms; build the model with '
                f'pe_kwargs=dict(chain_norms=True) to load one ({prefix}norms.* would otherwise compute another PE)')
        for key in [k for k in state_dict if k.startswith('blocks.') and '.pe_norm.' in k]:
            block, _, rest = key[len('blocks.'):].partition('.pe_norm.')
            out[f'{prefix}norms.{block}.{rest}'] = state_dict.pop(key)
        return out

    # ----------------------------------------------------------------------------------------------- parameters
    def reset_parameters(self) -> None:
        """The base encoding's own init; the norms to weight 1, bias 0."""
        self.base.reset_parameters()
        for norm in self.norms:
            norm.reset_parameters()

    def no_weight_decay(self) -> set:
        return {f'base.{n}' for n in self.base.no_weight_decay()}


def _lape_class(name: str, base: str) -> type:
    base_cls = get_pos_encoding_class(base)
    cls = type(f'LaPE_{base}', (LaPE,), dict(
        base_kind=base, supports_video=base_cls.supports_video,
        extrapolation_strategies=tuple(getattr(base_cls, 'extrapolation_strategies', ('none',))),
        family=f'LaPE over {base_cls.family}', __module__=__name__,
        __doc__=f'LaPE (arXiv:2212.13140) over ``{base}``: see :class:`LaPE`.'))
    return register_pos_encoding(name)(cls)


for _name, _base in LAPE_BASES.items():
    globals()[f'LaPE_{_base}'] = _lape_class(_name, _base)
