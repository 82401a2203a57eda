"""CoPE: contextual position encoding (Golovneva et al. 2024, "Contextual Position Encoding: Learning to Count What's
Important", arXiv:2405.18719, Sec. 3), for causal attention.

Per head, with query ``q_i``, keys ``k_j`` and a learned table ``E`` of ``npos`` position embeddings (``(d, npos)``,
one per layer, shared by the heads):

1. gates ``g[i, j] = sigmoid(q_i . k_j / sqrt(d))`` on the keys ``j`` that query ``i`` may see (0 elsewhere);
2. positions ``p[i, j] = sum_{t=j..i} g[i, t]`` (fractional, counted back from the query, which is included), clamped
   to ``npos - 1``;
3. position logits ``z[i, e] = q_i . E[:, e]``, interpolated at ``p``:
   ``pos_logit = z[i, ceil p] (p - floor p) + z[i, floor p] (1 - (p - floor p))``;
4. attention logits ``q_i . k_j / sqrt(d) + pos_logit`` (the paper, Eq. 5; our default), or with ``divide=True``
   ``(q_i . k_j + pos_logit) / sqrt(d)`` (the official code's default, facebookresearch/RAM ``projects/cope``).

The functions work on any leading dims; they compute in float32. In the decoder the rule is a bias term
(:class:`zoo.encodings.multimodal.encoding.CoPETerm`), so the attention stays one SDPA call, and a decoding step
recomputes its query's positions over the cached keys (exactly its row of the full sequence).
"""
from __future__ import annotations

from typing import Optional

import torch

__all__ = ['cope_gates', 'cope_positions', 'cope_position_logits', 'cope_bias']


def cope_gates(q: torch.Tensor, k: torch.Tensor, allowed: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``sigmoid(q . k / sqrt(d))`` ``(..., Lq, Lk)`` float32, zero where ``allowed`` (bool or 0/1, broadcastable)
    is False."""
    g = torch.sigmoid((q.float() @ k.float().transpose(-1, -2)) / q.shape[-1] ** 0.5)
    return g if allowed is None else g * allowed.to(g.dtype)


def cope_positions(gates: torch.Tensor, npos: int) -> torch.Tensor:
    """Reverse cumulative sum of the gates over the keys, clamped to ``npos - 1``: ``(..., Lq, Lk)`` float32."""
    return gates.flip(-1).cumsum(-1).flip(-1).clamp(max=npos - 1)


def cope_position_logits(q: torch.Tensor, pos_emb: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``q . E`` interpolated at the fractional ``positions``.

    Args:
        q: ``(..., Lq, d)``.
        pos_emb: ``(d, npos)`` table ``E`` (column ``e`` embeds integer position ``e``).
        positions: ``(..., Lq, Lk)`` in ``[0, npos - 1]``.

    Returns:
        ``(..., Lq, Lk)`` float32.
    """
    z = q.float() @ pos_emb.float()                                                   # (..., Lq, npos)
    lo = positions.floor()
    w = positions - lo
    z_lo = z.gather(-1, lo.long())
    z_hi = z.gather(-1, positions.ceil().long())
    return z_hi * w + z_lo * (1 - w)


def cope_bias(q: torch.Tensor, k: torch.Tensor, pos_emb: torch.Tensor, allowed: torch.Tensor,
              divide: bool = False, query: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The CoPE term added to ``q . k / sqrt(d)``: ``pos_logit`` (paper), or ``pos_logit / sqrt(d)`` with ``divide``
    (official default). ``(..., Lq, Lk)`` float32; ``allowed`` ``(..., Lq, Lk)`` bool marks the visible keys (causal
    and not padding; the caller masks the rest of the logits). ``query``: the query for ``q . E`` when it differs
    from the one of the gates (the un-rotated query under RoPE); default ``q``."""
    pos = cope_positions(cope_gates(q, k, allowed), pos_emb.shape[-1])
    out = cope_position_logits(q if query is None else query, pos_emb, pos)
    return out / q.shape[-1] ** 0.5 if divide else out
