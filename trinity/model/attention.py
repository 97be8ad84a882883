"""The attention trinity's models run with: PyTorch's scaled_dot_product_attention, except on CPU when a call's
keys are few, where two matrix products and a softmax are faster.

On CPU, SDPA runs a blocked flash kernel whose setup outweighs the work of short sequences. Measured on this
2-core machine, the tiny model's train step (128 rows of ~14 tokens: reference pass, forward, backward) took
111.5 ms with SDPA and 102 ms with the products (129 -> 111 ms with the grouped query and padded softmax below,
on a slower hour); with rows of 80-126 tokens both took the same (1.24 s); with 300-480 tokens SDPA was faster
(5.7 against 6.7 s), and its memory does not grow with the square of the length. So the choice is made per
call, by the keys' count: a long sequence keeps SDPA, and on CUDA every call is SDPA, as before. Generation
(one query a call): 43.1 -> 41.1 ms a tiny batch. Both compute the same attention (to ~1e-6; tested, gradients
too).

Models whose class follows transformers' attention interface use it (`use_for`); others keep their own.
"""

from typing import Any, Optional, Tuple

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "trinity"
# Key counts up to this take the plain products on CPU (the two were even at 80-126 keys).
SHORT_KEYS = 96
SOFTMAX_VECTOR = 16  # torch's CPU softmax is vectorized over the last dimension from this width on


def attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Optional[torch.Tensor],
    dropout: float = 0.0,
    scaling: Optional[float] = None,
    **kwargs: Any,
) -> Tuple[torch.Tensor, None]:
    """transformers' attention signature: query (batch, heads, q, dim), key and value (batch, kv heads, k, dim),
    a boolean mask (batch, 1, q, k) or None; returns the output as (batch, q, heads, dim)."""
    if query.device.type != "cpu" or key.shape[2] > SHORT_KEYS:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    # Grouped-query heads: each key/value head serves `groups` consecutive query heads, so the query is cut into
    # those groups instead of copying every key and value head `groups` times (transformers' repeat_kv): the
    # tiny model's train-step attention 2.06 -> 1.49 ms forward+backward a layer, a decode step 0.26 -> 0.14 ms.
    batch, heads, queries, dim = query.shape
    kv_heads, keys = key.shape[1], key.shape[2]
    grouped = query.reshape(batch, kv_heads, heads // kv_heads * queries, dim)
    scale = dim**-0.5 if scaling is None else scaling
    scores = (torch.matmul(grouped, key.transpose(2, 3)) * scale).view(batch, heads, queries, keys)
    if attention_mask is None and queries > 1 and getattr(module, "is_causal", True):
        # the mask was left out for SDPA's is_causal, which aligns the causal triangle at the top left
        attention_mask = torch.ones(queries, keys, dtype=torch.bool, device=query.device).tril()
    if attention_mask is not None:
        scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
    weights = _softmax(scores).to(query.dtype)
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights.reshape(batch, kv_heads, -1, keys), value).view(batch, heads, queries, dim)
    return output.transpose(1, 2).contiguous(), None


def _softmax(scores: torch.Tensor) -> torch.Tensor:
    """Softmax over the keys in float32. torch's CPU softmax runs a scalar loop over a last dimension shorter than
    its vector of 16 floats: the tiny model's scores (128 x 4 x 8 x 14) took 490 us forward and 750 us with the
    backward, padded to 16 with -inf (weight 0) 62 and 151 us."""
    width = scores.shape[-1]
    if width >= SOFTMAX_VECTOR:
        return torch.softmax(scores, dim=-1, dtype=torch.float32)
    padded = torch.nn.functional.pad(scores.float(), (0, SOFTMAX_VECTOR - width), value=float("-inf"))
    return torch.softmax(padded, dim=-1)[..., :width]


AttentionInterface.register(NAME, attention)
AttentionMaskInterface.register(NAME, sdpa_mask)


def use_for(model: Any) -> None:
    """Run `model` with this attention when its class takes an attention function (`is_backend_compatible`)."""
    if type(model).is_backend_compatible():
        model.set_attn_implementation(NAME)
