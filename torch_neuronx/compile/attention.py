"""How the neuron backend lowers scaled_dot_product_attention.

For a few query tokens (decoding), the fused CPU attention kernel spends
milliseconds per call on setup that a single query does not need; written
out as matmul, softmax and matmul, Inductor fuses the softmax and the masks
into the surrounding kernels instead. Longer queries (prefill, training) keep
the fused kernel, which never materialises the score matrix.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

SHORT_QUERY = 16


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    if dropout_p > 0.0 or query.shape[-2] > SHORT_QUERY or query.dim() < 3:
        return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                              is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        groups = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(groups, dim=-3)
        value = value.repeat_interleave(groups, dim=-3)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = torch.matmul(query, key.transpose(-2, -1)).float() * scale
    length, source_length = query.shape[-2], key.shape[-2]
    if is_causal:
        causal = torch.ones(length, source_length, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = torch.softmax(scores, dim=-1)
    # A query that may attend to nothing gets zeros, as the fused kernels give.
    weights = torch.where(torch.isnan(weights), 0.0, weights).to(value.dtype)
    return torch.matmul(weights, value)
