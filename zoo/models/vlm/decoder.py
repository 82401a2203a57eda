"""The video-LLM decoder: pre-norm blocks of RMSNorm, grouped-query attention and SwiGLU, tied embeddings, KV cache.

The attention is the zoo's one :class:`zoo.models.attention.Attention`; its rotation comes from the registered
``multimodal_rope`` encoding through :class:`zoo.encodings.Positions` with explicit per-token ids, so the scheme is a
name and the rotation math lives in one place (:mod:`zoo.encodings.rotation`). Papers: RMSNorm (Zhang & Sennrich,
arXiv:1910.07467), SwiGLU ("GLU Variants Improve Transformer", Shazeer, arXiv:2002.05202), GQA (Ainslie et al.,
arXiv:2305.13245); layout of Qwen2 ("Qwen2 Technical Report", arXiv:2407.10671).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from timm.layers import RmsNorm, SwiGLU
from timm.models._manipulate import checkpoint

from zoo.encodings import Positions, create_pos_encoding
from ..attention import Attention, KVCache

__all__ = ['DecoderBlock', 'Decoder']


class DecoderBlock(nn.Module):
    """``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``; causal attention with q/k bias (Qwen2), no output bias."""

    def __init__(self, dim: int, num_heads: int, num_kv_heads: int, head_dim: int, mlp_hidden: int,
                 eps: float = 1e-6):
        super().__init__()
        self.norm1 = RmsNorm(dim, eps=eps)
        self.attn = Attention(dim, num_heads, qkv_bias=True, num_kv_heads=num_kv_heads, head_dim=head_dim,
                              proj_bias=False)
        self.norm2 = RmsNorm(dim, eps=eps)
        self.mlp = SwiGLU(dim, mlp_hidden, bias=False)

    def forward(self, x: torch.Tensor, term=None, attn_mask: Optional[torch.Tensor] = None,
                kv_cache: Optional[KVCache] = None, layer_idx: int = 0) -> torch.Tensor:
        causal = getattr(term, 'causal', True)  # a term may give the whole pattern (PyPE inside visual frames)
        x = x + self.attn(self.norm1(x), term, attn_mask, causal, kv_cache, layer_idx)
        return x + self.mlp(self.norm2(x))


class Decoder(nn.Module):
    """Token embedding, ``depth`` :class:`DecoderBlock` s, final RMSNorm, and the tied output projection.

    Args:
        vocab_size: embedding rows (tokenizer size).
        dim: width.
        depth: blocks.
        num_heads: query heads.
        num_kv_heads: key/value heads (divides ``num_heads``).
        head_dim: per-head width (default ``dim // num_heads``).
        mlp_hidden: SwiGLU hidden width.
        scheme: a multimodal RoPE scheme name (``zoo.encodings.multimodal_rope.list_schemes()``).
        theta: RoPE base.
        mrope_section: the scheme's ``[t, h, w]`` split (published split scaled when ``None``).
        eps: RMSNorm epsilon.
        scheme_options: the scheme's evaluation options (held by the encoding ``pe``, which owns the scheme and
            gives the position ids: ``pe.position_ids``).
        extrapolation: the encoding's training-free strategy (``'none'``; ``pe.set_extrapolation`` switches it),
            e.g. ``dict(strategy='mspoe', layers=(2, 3))`` (:mod:`zoo.encodings.extrapolation`).
        p_rope: p-RoPE's fraction of rotary pairs that rotate (the encoding's ``p_rope``); 1 = plain RoPE.

    Raises:
        ValueError: unknown scheme; a geometry the scheme's frequency allocation cannot split exactly (the message
            names the fix: an explicit ``mrope_section``); ``num_kv_heads`` not dividing ``num_heads``.
    """

    def __init__(self, vocab_size: int, dim: int, depth: int, num_heads: int, num_kv_heads: int,
                 head_dim: Optional[int] = None, mlp_hidden: Optional[int] = None, scheme: str = 'mrope',
                 theta: float = 1_000_000.0, mrope_section: Optional[Sequence[int]] = None, eps: float = 1e-6,
                 scheme_options: Optional[Mapping[str, Any]] = None, extrapolation: Any = 'none',
                 p_rope: float = 1.0):
        super().__init__()
        head_dim = int(head_dim or dim // num_heads)
        mlp_hidden = int(mlp_hidden or 64 * -(-(8 * dim // 3) // 64))
        self.dim, self.depth, self.head_dim = dim, depth, head_dim
        self.embed = nn.Embedding(vocab_size, dim)
        self.pe = create_pos_encoding('multimodal_rope', dict(dim=dim, num_heads=num_heads, depth=depth),
                                      dict(num_kv_heads=num_kv_heads, scheme=scheme, theta=theta,
                                           mrope_section=mrope_section, head_dim=head_dim,
                                           scheme_options=scheme_options, extrapolation=extrapolation,
                                           p_rope=p_rope))
        self.blocks = nn.ModuleList([DecoderBlock(dim, num_heads, num_kv_heads, head_dim, mlp_hidden, eps)
                                     for _ in range(depth)])
        self.norm = RmsNorm(dim, eps=eps)
        self.grad_checkpointing = False
        self.init_weights()

    def init_weights(self) -> None:
        """Normal(0, 0.02) for embeddings and linear weights, zero biases, unit norm weights (GPT-2 / Qwen2)."""
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
                if getattr(m, 'bias', None) is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, RmsNorm):
                m.reset_parameters()

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Tied output projection: ``(..., dim)`` -> ``(..., vocab_size)``."""
        return F.linear(hidden, self.embed.weight)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
                kv_cache: Optional[KVCache] = None) -> torch.Tensor:
        """Run the blocks.

        Args:
            x: input embeddings ``(B, L, dim)``.
            position_ids: ``(A, B, L)`` ids of the ``L`` tokens (the scheme's axes; ``A = 1`` broadcasts); for a
                per-layer scheme (PyPE) ``(depth + 1, A, B, L)``: each layer's ids, then the visual frame index.
            attn_mask: ``(B, L_keys)`` bool key padding mask (True = real), cache keys included, or ``None``.
            kv_cache: past keys / values; this step's are appended.

        Returns:
            Final-normed hidden states ``(B, L, dim)``.
        """
        pos = Positions(None, ids=position_ids, attn_mask=attn_mask, is_causal=True)
        terms = self.pe.attn_terms(pos, x.dtype, x.device)
        if kv_cache is not None:  # per-layer state a term settles at the prefill and keeps (Ms-PoE's head order)
            states = getattr(kv_cache, 'term_state', None)
            if states is None:
                states = kv_cache.term_state = {}
            terms = list(terms)
            for i, t in enumerate(terms):
                if hasattr(t, 'state'):
                    t.state = states.setdefault(i, {})
        # A left-padded query sees no key at all; some SDPA kernels return NaN for it. Zero padded rows after every
        # block so that their keys and values stay finite (real tokens never attend to them).
        real = None if attn_mask is None else attn_mask[:, -x.shape[1]:].unsqueeze(-1)
        for i, blk in enumerate(self.blocks):
            term = terms[i]
            if self.grad_checkpointing and self.training and kv_cache is None and not torch.jit.is_scripting():
                tensors = term.tensors()
                x = checkpoint(lambda y, *ts, b=blk, t=term: b(y, t.with_tensors(ts), attn_mask), x, *tensors)
            else:
                x = blk(x, term, attn_mask, kv_cache, i)
            if real is not None:
                x = torch.where(real, x, torch.zeros((), dtype=x.dtype, device=x.device))
        return self.norm(x)
