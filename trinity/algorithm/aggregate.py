"""Masked reductions: how per-token values over a right-padded [B, R] batch become one number.

Every loss and statistic in the algorithm library goes through these, so padding never counts.
"""

from typing import Optional

import torch

from trinity.config.functions import LossAggMode

LOSS_AGG_MODES = tuple(mode.value for mode in LossAggMode)
EPS = 1e-8  # added to token counts so an all-padding mask gives 0, not NaN


def masked_sum(values: torch.Tensor, mask: torch.Tensor, dim: Optional[int] = None) -> torch.Tensor:
    mask = mask.to(values.dtype)
    return (values * mask).sum() if dim is None else (values * mask).sum(dim)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: Optional[int] = None) -> torch.Tensor:
    """Sum over the mask divided by (count + 1e-8)."""
    count = mask.to(values.dtype).sum() if dim is None else mask.to(values.dtype).sum(dim)
    return masked_sum(values, mask, dim) / (count + EPS)


def masked_whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(values - mean) / sqrt(var + 1e-8) over the masked entries of the whole batch.

    The variance is Bessel-corrected (divides by count - 1; by 1 when a single entry is masked, which
    whitens it to 0 instead of dividing by zero).
    """
    mean = masked_mean(values, mask)
    count = mask.to(values.dtype).sum()
    var = masked_sum((values - mean) ** 2, mask) / (count - 1).clamp(min=1)
    return (values - mean) * torch.rsqrt(var + EPS)


def aggregate_loss(
    values: torch.Tensor, mask: torch.Tensor, mode: str, normalizer: Optional[float] = None
) -> torch.Tensor:
    """One scalar from per-token `values` [B, R] over `mask` [B, R].

    token-mean: masked mean over all tokens; seq-mean-token-sum: mean over rows of each row's masked
    sum; seq-mean-token-mean: mean over rows of each row's masked mean (a row with no tokens counts
    as 0); seq-mean-token-sum-norm: total masked sum / normalizer (default mask.shape[-1]).
    """
    if mode == "token-mean":
        return masked_mean(values, mask)
    if mode == "seq-mean-token-sum":
        return masked_sum(values, mask, dim=-1).mean()
    if mode == "seq-mean-token-mean":
        return masked_mean(values, mask, dim=-1).mean()
    if mode == "seq-mean-token-sum-norm":
        return masked_sum(values, mask) / (mask.shape[-1] if normalizer is None else normalizer)
    raise ValueError(f"unknown loss_agg_mode {mode!r}; use one of {', '.join(LOSS_AGG_MODES)}")
