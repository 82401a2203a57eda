"""SeqPE: a small sequence encoder over each position's digits gives the position embedding.

Paper: "SeqPE: Transformer with Sequential Position Encoding" (Li et al., 2025, arXiv:2506.13277). What the paper
states (abstract, Fig. 1): an ``n``-dimensional position index is written as a symbolic sequence, each axis's index
as left-padded digits (position (2, 3) of a 4x4 grid is "0 2 0 3"); a lightweight sequential position encoder learns
its embedding end to end; two regularisers shape the embedding space: a **contrastive** objective aligning
embedding distances with a position-distance function, and a **knowledge-distillation** loss anchoring
out-of-distribution positions to in-distribution teacher representations. No official numbers are reproduced here
(no golden file exists); the encoder's sizes are this implementation's, the regularisers follow the official code's
form (below, with the differences named).

**Encoder.** Axis order ``(row, col)`` for images, ``(row, col, t)`` for videos (time last, so an image encoder
inflates by appending time slots). Position ``p`` (integers, ``0 <= p_a < base^k``) becomes the token sequence
``[s, d_1(p_1) .. d_k(p_1), .., d_1(p_A) .. d_k(p_A)]`` of a learned summary token ``s`` and the ``k = num_digits``
base-``base`` digits of each axis, most significant first. Token ``n`` embeds as ``E_digit[digit] + E_slot[n]``
(``E_slot`` tells the digit's axis and place). ``enc_depth`` pre-norm transformer blocks (timm's ``Block``, width
``enc_dim``, ``enc_heads`` heads), a LayerNorm, and a Linear ``enc_dim -> dim`` of the summary token's output give
``PE(p)``, added to the patch token at ``p``. Prefix tokens (class, registers) get nothing.

**Regularisers** (:meth:`SeqPE.aux_loss`, added to the training loss by ``zoo train --pe-aux-loss WEIGHT``), in
the form of the official image code (ghrua/seqpe, ``image_seqpe/models/pe_criterion.py``, ``pe_sampler.py``: the
facts, not the code), over the sampling range ``R = distill_scale x`` the training grid per axis:

* contrastive: ``n_anchors`` anchors ``u`` and, per anchor, ``n_candidates`` candidates ``v_m`` drawn uniformly from
  ``R``; logits ``l_m = cos(PE(u), PE(v_m)) / tau``; cross-entropy with the candidate nearest to ``u`` (Euclidean
  distance of the integer positions, first on ties) as the target class. (Official: dot products times a scale, and
  a mix of random, hard and near-range negatives.)
* distillation ("transfer" in the official code): ``n_anchors`` windows of the training grid's size shifted by ``s``
  (uniform in ``R`` minus the window, at least one axis shifted by a whole grid extent, so the window lies beyond the
  training grid along it); in each, ``n_candidates`` cells ``c`` of the grid; the students are ``PE(c + s)``, the
  teachers ``PE(c)`` (detached). With ``S`` and ``T`` the ``n_candidates x n_candidates`` row-softmaxed self-similarity
  matrices ``softmax_j cos(PE(x_i), PE(x_j)) / tau`` of the students and of the teachers,
  ``L_kd = KL(T || S) + KL(S || T)`` (``T`` fixed): shifted positions relate to each other as the trained ones do.
  (Official: dot products times a scale.)

``aux_loss() = contrastive_weight * L_ct + distill_weight * L_kd``, a scalar tensor with a gradient to every encoder
parameter; it draws with the global RNG (``torch.manual_seed`` makes it repeatable).

A new grid: the encoder is evaluated at the new integer positions (extrapolation up to ``base^k - 1`` per axis; larger
grids are refused with the fix). In eval mode the PE of a grid is cached per (grid, device, parameter versions).
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from timm.layers import trunc_normal_
from timm.models.vision_transformer import Block

from ._cache import TableCache, caching_allowed, param_key
from ._grid import parse_grid_size
from .absolute import add_to_patches
from .base import Positions, PosEncoding
from .registry import register_pos_encoding

__all__ = ['SeqPE', 'position_digits']


def position_digits(positions: torch.Tensor, num_digits: int, base: int = 10) -> torch.Tensor:
    """Left-padded digits of integer positions: ``(..., A)`` -> ``(..., A * num_digits)`` int64, per axis the
    ``num_digits`` base-``base`` digits, most significant first (``(2, 3)`` with 2 digits -> ``0 2 0 3``)."""
    p = positions.long().unsqueeze(-1)
    powers = base ** torch.arange(num_digits - 1, -1, -1, device=positions.device)
    return (torch.div(p, powers, rounding_mode='floor') % base).flatten(-2)


@register_pos_encoding('seqpe')
class SeqPE(PosEncoding):
    """SeqPE: a transformer over each position's digit sequence gives its embedding (see the module docstring).

    Args:
        dim: embedding width C.
        grid_size: training grid ``(H, W)`` or ``(T, H, W)`` in patches / tubelets (the contrastive objective's
            range and the distillation's in-distribution range).
        num_digits: digits per axis ``k`` (positions up to ``base^k - 1``).
        base: digit base (10, as the paper's example).
        enc_dim, enc_depth, enc_heads: the position encoder's width, blocks and heads.
        n_anchors, n_candidates: positions per regulariser draw (anchors; candidates / references per anchor).
        tau: temperature of both regularisers.
        distill_scale: the regularisers' sampling range, this many times the training grid per axis (>= 2, so a
            whole shifted window fits beyond the training grid).
        contrastive_weight, distill_weight: the two terms of :meth:`aux_loss`.

    Parameters: ``digit_embed`` ``(base, enc_dim)``, ``slot_embed`` ``(1 + A k, enc_dim)``, ``blocks.*``, ``norm.*``,
    ``proj.*`` (``enc_dim -> dim``).

    Raises:
        ValueError: bad sizes or options (naming the option and its range); at forward a grid beyond ``base^k`` per
            axis, or a grid with another number of axes than ``grid_size``.
    """
    family = 'SeqPE (learned sequence encoder over position digits)'
    adaptation = ('the digit encoder evaluated at the new integer positions (extrapolation; aux losses regularise '
                  'unseen positions)')

    def __init__(self, dim: int, grid_size: Tuple[int, ...], num_digits: int = 3, base: int = 10, enc_dim: int = 64,
                 enc_depth: int = 2, enc_heads: int = 4, n_anchors: int = 32, n_candidates: int = 16,
                 tau: float = 0.1, distill_scale: float = 4.0, contrastive_weight: float = 1.0,
                 distill_weight: float = 1.0):
        super().__init__()
        self.grid_size = parse_grid_size('seqpe', grid_size)
        self.video = len(self.grid_size) == 3
        ints = dict(num_digits=num_digits, base=base, enc_dim=enc_dim, enc_depth=enc_depth, enc_heads=enc_heads,
                    n_anchors=n_anchors, n_candidates=n_candidates)
        low = dict(base=2, n_candidates=2)
        for k, v in ints.items():
            if int(v) != v or v < low.get(k, 1):
                raise ValueError(f'seqpe {k} must be an integer >= {low.get(k, 1)}, got {v!r}')
        if enc_dim % enc_heads:
            raise ValueError(f'seqpe enc_dim ({enc_dim}) must be divisible by enc_heads ({enc_heads})')
        if not tau > 0 or not distill_scale >= 2 or contrastive_weight < 0 or distill_weight < 0:
            raise ValueError(f'seqpe needs tau > 0, distill_scale >= 2 and weights >= 0; got tau={tau}, '
                             f'distill_scale={distill_scale}, contrastive_weight={contrastive_weight}, '
                             f'distill_weight={distill_weight}')
        self.axes = len(self.grid_size)
        if max(self.grid_size) > base ** num_digits:
            raise ValueError(f'seqpe: the training grid {self.grid_size} has positions beyond {base ** num_digits - 1}'
                             f', the largest {num_digits} base-{base} digits can write; raise num_digits')
        self.dim, self.num_digits, self.base = dim, int(num_digits), int(base)
        self.n_anchors, self.n_candidates, self.tau = int(n_anchors), int(n_candidates), float(tau)
        self.distill_scale = float(distill_scale)
        self.contrastive_weight, self.distill_weight = float(contrastive_weight), float(distill_weight)
        self.digit_embed = nn.Parameter(torch.zeros(base, enc_dim))
        self.slot_embed = nn.Parameter(torch.zeros(1 + self.axes * num_digits, enc_dim))
        self.summary = nn.Parameter(torch.zeros(1, 1, enc_dim))
        self.blocks = nn.Sequential(*[Block(enc_dim, enc_heads, mlp_ratio=2.0, qkv_bias=True)
                                      for _ in range(enc_depth)])
        self.norm = nn.LayerNorm(enc_dim)
        self.proj = nn.Linear(enc_dim, dim)
        self._cache = TableCache()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Embeddings and Linear weights truncated normal (std 0.02), biases zero, norms one / zero."""
        for p in (self.digit_embed, self.slot_embed, self.summary):
            trunc_normal_(p, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                m.reset_parameters()
        self._cache.clear()

    # ---------------------------------------------------------------------------------------------- encoder
    def encode(self, positions: torch.Tensor) -> torch.Tensor:
        """``PE(p)`` of integer positions ``(N, A)`` (axes ``(row, col)`` or ``(row, col, t)``) -> ``(N, dim)``.

        Raises:
            ValueError: ``A`` is not this encoding's axis count, or (eager) a position outside ``[0, base^k)``.
        """
        if positions.dim() != 2 or positions.shape[-1] != self.axes:
            raise ValueError(f'seqpe.encode takes (N, {self.axes}) integer positions, got {tuple(positions.shape)}')
        if caching_allowed() and positions.numel() and (int(positions.min()) < 0 or
                                                        int(positions.max()) >= self.base ** self.num_digits):
            raise ValueError(f'seqpe: positions up to {int(positions.max())} need more than {self.num_digits} '
                             f'base-{self.base} digits; build the model with pe_kwargs=dict(num_digits=...)')
        tokens = self.digit_embed[position_digits(positions, self.num_digits, self.base)]  # (N, A k, e)
        tokens = torch.cat([self.summary.expand(tokens.shape[0], -1, -1), tokens], dim=1) + self.slot_embed
        return self.proj(self.norm(self.blocks(tokens))[:, 0])

    def grid_positions(self, grid: Sequence[int], device: Optional[torch.device] = None) -> torch.Tensor:
        """``(N, A)`` integer positions of a grid's patches in token order (t-major, row-major), axes ``(row, col)``
        for an image grid ``(H, W)``, ``(row, col, t)`` for a video grid ``(T, H, W)``."""
        axes = [torch.arange(n, device=device) for n in grid]
        mesh = [m.reshape(-1) for m in torch.meshgrid(*axes, indexing='ij')]
        return torch.stack(mesh[1:] + mesh[:1] if self.video else mesh, dim=-1)

    def table(self, grid: Sequence[int], device: Optional[torch.device] = None) -> torch.Tensor:
        """``(1, N, C)`` PE of every patch of ``grid``; cached in eval mode per (grid, device, parameter versions),
        recomputed in training."""
        grid = tuple(grid)

        def build():
            return self.encode(self.grid_positions(grid, device)).unsqueeze(0)
        if self.training:
            return build()
        return self._cache.get(lambda: (grid, device, param_key(self.parameters())), build)

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        grid = pos.grid_of('seqpe', self.video)
        if not self.video and pos.grid is not None and pos.grid[0] != 1:
            raise ValueError('seqpe was built for images (grid_size=(H, W)); build it with a (T, H, W) grid_size '
                             'for videos')
        return add_to_patches(x, self.table(grid, x.device).to(x.dtype), pos.num_prefix_tokens)

    def set_grid_size(self, grid_size: Tuple[int, ...]) -> None:
        """The new training grid of the regularisers (the encoder has no per-grid table)."""
        grid_size = parse_grid_size('seqpe', grid_size)
        if len(grid_size) != self.axes:
            raise ValueError(f'seqpe: built for {self.axes}D grids, got grid_size {grid_size}')
        self.grid_size = grid_size
        self._cache.clear()

    # ------------------------------------------------------------------------------------------ regularisers
    def _extents(self) -> torch.Tensor:
        g = self.grid_size
        return torch.tensor(g[1:] + g[:1] if self.video else g)

    def _range(self) -> torch.Tensor:
        """The regularisers' sampling range per axis: ``distill_scale`` x the training grid, at most ``base^k``."""
        ext = self._extents()
        return (ext.double() * self.distill_scale).floor().long().clamp(max=self.base ** self.num_digits)

    def _draw(self, n: int, extents: torch.Tensor, device) -> torch.Tensor:
        return (torch.rand(n, self.axes, device=device) * extents.to(device)).floor().long()

    def contrastive_loss(self) -> torch.Tensor:
        """The contrastive regulariser ``L_ct`` (module docstring), a scalar."""
        device = self.digit_embed.device
        rng = self._range()
        a, m = self.n_anchors, self.n_candidates
        anchors, cands = self._draw(a, rng, device), self._draw(a * m, rng, device).view(a, m, -1)
        emb = F.normalize(self.encode(torch.cat([anchors, cands.reshape(a * m, -1)])), dim=-1)
        e_anchor, e_cand = emb[:a], emb[a:].view(a, m, -1)
        logits = torch.einsum('ad,amd->am', e_anchor, e_cand) / self.tau
        target = (cands - anchors[:, None]).float().norm(dim=-1).argmin(dim=-1)
        return F.cross_entropy(logits, target)

    def distill_shifts(self, n: int, device=None) -> torch.Tensor:
        """``(n, A)`` window shifts of the distillation: uniform in ``[0, R_a - L_a]`` per axis, drawn again until at
        least one axis is shifted by ``>= L_a`` (the window lies beyond the training grid along it)."""
        ext, rng = self._extents().to(device), self._range().to(device)
        room = rng - ext + 1
        shifts = self._draw(n, room, device)
        for _ in range(64):
            inside = (shifts < ext).all(dim=-1)
            if not bool(inside.any()):
                return shifts
            shifts = torch.where(inside[:, None], self._draw(n, room, device), shifts)
        return torch.where((shifts < ext).all(dim=-1, keepdim=True), shifts + ext * (room > ext).long(), shifts)

    def distill_loss(self) -> torch.Tensor:
        """The distillation regulariser ``L_kd`` (module docstring), a scalar."""
        device = self.digit_embed.device
        a, m = self.n_anchors, self.n_candidates
        teacher = self._draw(a * m, self._extents(), device).view(a, m, -1)
        student = teacher + self.distill_shifts(a, device)[:, None]
        emb = F.normalize(self.encode(torch.cat([student.reshape(a * m, -1), teacher.reshape(a * m, -1)])), dim=-1)
        e_s, e_t = emb[:a * m].view(a, m, -1), emb[a * m:].view(a, m, -1).detach()
        log_s = F.log_softmax(e_s @ e_s.transpose(1, 2) / self.tau, dim=-1).flatten(0, 1)
        log_t = F.log_softmax(e_t @ e_t.transpose(1, 2) / self.tau, dim=-1).flatten(0, 1)
        return (F.kl_div(log_s, log_t, log_target=True, reduction='batchmean') +
                F.kl_div(log_t, log_s, log_target=True, reduction='batchmean'))

    def aux_loss(self) -> torch.Tensor:
        """``contrastive_weight * L_ct + distill_weight * L_kd``: a scalar tensor on the encoding's device, with a
        gradient to the encoder's parameters (``zoo train --pe-aux-loss WEIGHT`` adds ``WEIGHT`` times it)."""
        loss = self.digit_embed.new_zeros(())
        if self.contrastive_weight:
            loss = loss + self.contrastive_weight * self.contrastive_loss()
        if self.distill_weight:
            loss = loss + self.distill_weight * self.distill_loss()
        return loss

    def no_weight_decay(self) -> set:
        return {'digit_embed', 'slot_embed', 'summary'}
