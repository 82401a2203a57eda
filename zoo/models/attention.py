"""The one attention layer and the pre-norm block shared by the image ViT, the video ViT and the video-LLM decoder.

``Attention`` consults an optional :class:`~zoo.encodings.AttnTerm` from the position encoding and knows nothing
about which encoding made it. It supports a key padding mask, causal attention, grouped-query attention (GQA,
Ainslie et al., arXiv:2305.13245) and a KV cache in which new tokens are rotated (and their values transformed) at
their own positions before they are appended. Everything goes through ``F.scaled_dot_product_attention`` (the
encoding's bias and the masks merged into ``attn_mask``) unless the term declares ``needs_attn_weights`` (a
post-softmax multiplier such as URPE's, or iRPE on values). A term with ``query_block`` set gets one SDPA call per
block of queries, its bias computed per block (``bias_rows``), so no ``(L, L)`` bias exists whole at video sizes.
"""
from __future__ import annotations

from typing import List, Optional, Tuple, Type

import torch
import torch.nn.functional as F
from torch import nn

from timm.layers import DropPath, LayerScale, Mlp, use_fused_attn

from zoo.encodings import AttnTerm

__all__ = ['Attention', 'Block', 'KVCache', 'build_attn_mask']


class KVCache:
    """Keys and values of past tokens, one ``(k, v)`` pair per layer, each ``(B, kv_heads, L_past, head_dim)``.

    Keys are stored already rotated (each token at its own position), so a cached token is never rotated twice.
    """

    def __init__(self, num_layers: int):
        self.layers: List[Optional[Tuple[torch.Tensor, torch.Tensor]]] = [None] * num_layers

    def __len__(self) -> int:
        first = self.layers[0]
        return 0 if first is None else first[0].shape[-2]

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Append this step's ``k, v`` to layer ``layer`` and return all keys and values so far."""
        past = self.layers[layer]
        if past is not None:
            k, v = torch.cat([past[0], k], dim=-2), torch.cat([past[1], v], dim=-2)
        self.layers[layer] = (k, v)
        return k, v

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows ``index`` (beam search / dropping finished samples)."""
        self.layers = [None if p is None else (p[0][index], p[1][index]) for p in self.layers]


def build_attn_mask(bias: Optional[torch.Tensor], key_mask: Optional[torch.Tensor], is_causal: bool,
                    num_queries: int, num_keys: int, dtype: torch.dtype, device: torch.device,
                    query_offset: Optional[int] = None) -> Tuple[Optional[torch.Tensor], bool]:
    """Merge an additive bias, a key padding mask and causality into one SDPA ``attn_mask``.

    Args:
        bias: additive logits broadcastable to ``(B, heads, Lq, Lk)`` or None.
        key_mask: ``(B, Lk)`` bool, True for keys that may be attended, or None.
        is_causal: query ``i`` sits at key position ``query_offset + i`` and sees keys at or before it.
        query_offset: key position of the first query; default ``Lk - Lq`` (the queries are the last ``Lq`` keys).
            A block of queries passes its own start.

    Returns:
        ``(attn_mask, is_causal_flag)``: the flag is True only when causality alone is asked for and can be passed
        to SDPA as ``is_causal`` (no cache offset, no block offset, no other mask).

    Raises:
        ValueError: a key mask whose length is not the number of keys.
    """
    if query_offset is None:
        query_offset = num_keys - num_queries
    if bias is None and key_mask is None:
        if not is_causal:
            return None, False
        if num_queries == num_keys and query_offset == 0:
            return None, True
    allowed = None
    if key_mask is not None:
        if key_mask.dim() != 2 or key_mask.shape[-1] != num_keys:
            raise ValueError(f'attn_mask must be a (B, {num_keys}) key padding mask (True = real token), got '
                             f'{tuple(key_mask.shape)}')
        allowed = key_mask.to(device=device, dtype=torch.bool)[:, None, None, :]
    if is_causal:
        q_pos = torch.arange(num_queries, device=device)[:, None] + query_offset
        causal = torch.arange(num_keys, device=device)[None, :] <= q_pos
        allowed = causal if allowed is None else allowed & causal
    if bias is None:
        return allowed, False
    if allowed is None:
        return bias.to(dtype), False
    return bias.to(dtype).masked_fill(~allowed, float('-inf')), False


class Attention(nn.Module):
    """Multi-head self-attention that consults an optional :class:`AttnTerm` from the position encoding.

    Order: ``term.transform_input`` -> project q, k, v -> optional q/k norm -> ``term.rotate`` and
    ``term.transform_values`` -> KV cache append -> ``term.bias`` -> SDPA with bias, padding and causal masks merged
    into ``attn_mask`` -> ``term.transform_output``.
    The explicit path (``term.needs_attn_weights``, or timm's fused attention switched off) multiplies the
    post-softmax weights by ``term.attn_multiplier`` and adds ``term.value_term(attn)``. With ``term.query_block`` set
    (and more queries than that), the fused path runs one SDPA call per block of queries with the bias rows of that
    block (``term.bias_rows``).

    Args:
        dim: model width C.
        num_heads: query heads.
        num_kv_heads: key/value heads for grouped-query attention (divides ``num_heads``); default ``num_heads``,
            which keeps timm's fused ``qkv`` layout ``(3 C, C)``.
        qkv_bias, qk_norm, attn_drop, proj_drop, norm_layer: as timm's ``Attention``.
        head_dim: per-head width (default ``dim // num_heads``).

    Raises:
        ValueError: ``dim`` not divisible by ``num_heads`` (without ``head_dim``), or ``num_kv_heads`` not dividing
            ``num_heads``.
    """

    def __init__(self, dim: int, num_heads: int = 8, qkv_bias: bool = False, qk_norm: bool = False,
                 attn_drop: float = 0., proj_drop: float = 0., norm_layer: Type[nn.Module] = nn.LayerNorm,
                 num_kv_heads: Optional[int] = None, head_dim: Optional[int] = None, proj_bias: bool = True):
        super().__init__()
        if head_dim is None and dim % num_heads:
            raise ValueError(f'embed_dim {dim} is not divisible by num_heads {num_heads}')
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f'num_kv_heads={num_kv_heads} must divide num_heads={num_heads}')
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim or dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.fused_attn = use_fused_attn()
        self.qkv = nn.Linear(dim, (num_heads + 2 * num_kv_heads) * self.head_dim, bias=qkv_bias)
        self.q_norm = norm_layer(self.head_dim) if qk_norm else nn.Identity()
        self.k_norm = norm_layer(self.head_dim) if qk_norm else nn.Identity()
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(num_heads * self.head_dim, dim, bias=proj_bias)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x: torch.Tensor, term: Optional[AttnTerm] = None, attn_mask: Optional[torch.Tensor] = None,
                is_causal: bool = False, kv_cache: Optional[KVCache] = None, layer_idx: int = 0) -> torch.Tensor:
        """Args:
            x: tokens ``(B, L, C)``.
            term: the encoding's term for this layer, or None.
            attn_mask: ``(B, L_keys)`` bool key padding mask (True = real), keys of the cache included.
            is_causal: causal attention (the queries are the last ``L`` keys).
            kv_cache: past keys/values; this step's are appended in place.
            layer_idx: this layer's slot in ``kv_cache``.

        Returns:
            ``(B, L, C)``.
        """
        B, N, _ = x.shape
        hq, hkv, hd = self.num_heads, self.num_kv_heads, self.head_dim
        if term is not None:
            x = term.transform_input(x)
        qkv = self.qkv(x).reshape(B, N, hq + 2 * hkv, hd).transpose(1, 2)
        q, k, v = qkv.split([hq, hkv, hkv], dim=1)
        q, k = self.q_norm(q), self.k_norm(k)
        if term is not None:
            q, k = term.rotate(q, k)
            v = term.transform_values(v)
        if kv_cache is not None:
            k, v = kv_cache.update(layer_idx, k, v)
        if hkv != hq:
            k, v = k.repeat_interleave(hq // hkv, dim=1), v.repeat_interleave(hq // hkv, dim=1)
        explicit = not self.fused_attn or (term is not None and term.needs_attn_weights)
        block = None if term is None or explicit else term.query_block
        if block is not None and N > block:
            x = self._blocked_sdpa(q, k, v, term, attn_mask, is_causal, block)
        elif not explicit:
            bias = term.bias(q, k, self.scale) if term is not None else None
            mask, causal = build_attn_mask(bias, attn_mask, is_causal, N, k.shape[-2], q.dtype, q.device)
            # a term may widen q and k (Vista's split channels): keep the logit scale of the head dim
            wide = None if q.shape[-1] == hd else self.scale
            x = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                               dropout_p=self.attn_drop.p if self.training else 0., scale=wide)
        else:
            x = self._explicit(q, k, v, term, attn_mask, is_causal)
        if term is not None:
            x = term.transform_output(x)
        x = x.transpose(1, 2)
        if torch.compiler.is_exporting():
            # torch.export records the head merge as a view when SDPA's fake output has the (B, L, heads, head_dim)
            # layout; the ONNX exporter then decomposes a masked SDPA into ops with the (B, heads, L, head_dim)
            # layout and that view fails ('Cannot view a tensor', iRPE at ViT-Ti/224). An explicit copy is a valid
            # input for the view in both layouts; eager keeps reshape (a view when SDPA's layout allows it).
            x = x.clone(memory_format=torch.contiguous_format)
        x = x.reshape(B, N, hq * hd)
        return self.proj_drop(self.proj(x))

    def _explicit(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, term: Optional[AttnTerm],
                  attn_mask: Optional[torch.Tensor], is_causal: bool) -> torch.Tensor:
        """Softmax attention written out: bias and masks, softmax, the term's post-softmax multiplier, dropout,
        ``attn @ v`` plus the term's value term. Returns ``(B, heads, Lq, head_dim)``."""
        n = q.shape[-2]
        bias = term.bias(q, k, self.scale) if term is not None else None
        mask, causal = build_attn_mask(bias, attn_mask, is_causal, n, k.shape[-2], q.dtype, q.device)
        del bias  # kept alive by mask only when it is the mask
        attn = (q * self.scale) @ k.transpose(-2, -1)
        if causal:  # only returned when queries and keys coincide
            mask = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        if mask is not None:  # in place on the fresh scores (their matmul's backward needs q and k only)
            attn = attn.masked_fill_(~mask, float('-inf')) if mask.dtype == torch.bool else attn.add_(mask)
        del mask
        attn = attn.softmax(dim=-1)
        multiplier = term.attn_multiplier(q, k) if term is not None else None
        if multiplier is not None:
            attn = attn * multiplier.to(attn.dtype)
        attn = self.attn_drop(attn)
        x = attn @ v
        extra = term.value_term(attn) if term is not None else None
        if extra is not None:
            x = x.add_(extra.to(x.dtype))
        return x

    def _blocked_sdpa(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, term: AttnTerm,
                      attn_mask: Optional[torch.Tensor], is_causal: bool, block: int) -> torch.Tensor:
        """One SDPA call per block of at most ``block`` queries (the blocks as equal as possible; called only with
        more than ``block`` queries), each with its rows of the term's bias (``bias_rows``) merged with the padding /
        causal masks; the ``(Lq, Lk)`` bias never exists whole. Eager only: the term sets ``query_block`` only when
        sizes are Python ints. Returns ``(B, heads, Lq, head_dim)``."""
        n, n_keys = q.shape[-2], k.shape[-2]
        offset = n_keys - n  # key position of the first query (a KV cache puts the queries last)
        drop = self.attn_drop.p if self.training else 0.
        # the output is allocated once and filled block by block: no list of per-block outputs interleaved with the
        # blocks' transient biases on the heap (which kept the allocator from reusing or returning their memory)
        out = q.new_empty(*q.shape[:-1], v.shape[-1])
        # blocks as equal as possible, none above ``block``: no short tail block (SDPA's CPU kernel tiles the queries
        # by 32 below 192 of them and by 64 from there, so a short block costs more per query)
        block = -(-n // -(-n // block))
        for start in range(0, n, block):
            stop = min(n, start + block)
            qb = q[:, :, start:stop]
            bias = term.bias_rows(qb, k, self.scale, offset + start, offset + stop)
            mask, causal = build_attn_mask(bias, attn_mask, is_causal, stop - start, n_keys, q.dtype, q.device,
                                           query_offset=offset + start)
            del bias  # one block's bias alive at a time (the next block's is built after this one is freed)
            out[:, :, start:stop] = F.scaled_dot_product_attention(
                qb, k, v, attn_mask=mask, is_causal=causal, dropout_p=drop,
                scale=None if q.shape[-1] == self.head_dim else self.scale)
            del mask
        return out


class Block(nn.Module):
    """Pre-norm transformer block with timm's key names (``norm1, attn, ls1, norm2, mlp, ls2``)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4., qkv_bias: bool = False,
                 qk_norm: bool = False, proj_drop: float = 0., attn_drop: float = 0.,
                 init_values: Optional[float] = None, drop_path: float = 0., act_layer: Type[nn.Module] = nn.GELU,
                 norm_layer: Type[nn.Module] = nn.LayerNorm, mlp_layer: Type[nn.Module] = Mlp,
                 num_kv_heads: Optional[int] = None):
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = Attention(dim, num_heads, qkv_bias=qkv_bias, qk_norm=qk_norm, attn_drop=attn_drop,
                              proj_drop=proj_drop, norm_layer=norm_layer, num_kv_heads=num_kv_heads)
        self.ls1 = LayerScale(dim, init_values=init_values) if init_values else nn.Identity()
        self.drop_path1 = DropPath(drop_path) if drop_path > 0. else nn.Identity()
        self.norm2 = norm_layer(dim)
        self.mlp = mlp_layer(in_features=dim, hidden_features=int(dim * mlp_ratio), act_layer=act_layer,
                             drop=proj_drop)
        self.ls2 = LayerScale(dim, init_values=init_values) if init_values else nn.Identity()
        self.drop_path2 = DropPath(drop_path) if drop_path > 0. else nn.Identity()

    def forward(self, x: torch.Tensor, term: Optional[AttnTerm] = None, attn_mask: Optional[torch.Tensor] = None,
                is_causal: bool = False, kv_cache: Optional[KVCache] = None, layer_idx: int = 0) -> torch.Tensor:
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x), term, attn_mask, is_causal, kv_cache, layer_idx)))
        x = x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))
        return x
