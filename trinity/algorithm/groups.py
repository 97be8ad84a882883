"""Per-group statistics of one score per row, vectorised with scatter ops (no Python loop over groups).

A group is the set of rows sharing an id (the responses to one task). The reference rule for a group
of a single response is mean 0 and std 1, so its score passes through unchanged.
"""

from dataclasses import dataclass

import torch


@dataclass
class GroupStats:
    """Per-row views of the statistics of the row's group."""

    index: torch.Tensor  # [B] dense group index 0..G-1
    count: int  # G
    size: torch.Tensor  # [B] rows in the row's group
    mean: torch.Tensor  # [B] group mean (0 for a group of one)
    std: torch.Tensor  # [B] unbiased group std (1 for a group of one)


def dense_index(ids: torch.Tensor) -> tuple:
    """([B] index in 0..G-1, G) for integer ids [B], or for id tuples [B, k] (rows compared whole)."""
    unique, index = torch.unique(ids, return_inverse=True, dim=0)
    return index, len(unique)


def group_sum(values: torch.Tensor, index: torch.Tensor, count: int) -> torch.Tensor:
    """[G] sum of `values` [B] per group."""
    return values.new_zeros(count).index_add_(0, index, values)


def group_stats(scores: torch.Tensor, group_ids: torch.Tensor) -> GroupStats:
    index, count = dense_index(group_ids)
    size = torch.bincount(index, minlength=count).to(scores.dtype)
    mean = group_sum(scores, index, count) / size
    sq = group_sum((scores - mean[index]) ** 2, index, count)
    std = (sq / (size - 1).clamp(min=1)).sqrt()
    single = size == 1
    mean = torch.where(single, torch.zeros_like(mean), mean)
    std = torch.where(single, torch.ones_like(std), std)
    return GroupStats(index, count, size[index], mean[index], std[index])


def group_spread(scores: torch.Tensor, index: torch.Tensor, count: int) -> torch.Tensor:
    """[B] max minus min of the row's group: exactly 0 when every score is equal, which a std computed
    through a rounded mean may miss (four rewards of 0.1 can give a std of 1e-8)."""
    high = scores.new_full((count,), float("-inf")).scatter_reduce(0, index, scores, reduce="amax")
    low = scores.new_full((count,), float("inf")).scatter_reduce(0, index, scores, reduce="amin")
    return (high - low)[index]


def group_logavgexp(scores: torch.Tensor, index: torch.Tensor, count: int, tau: float) -> torch.Tensor:
    """[B] tau * (logsumexp(r / tau) - log n) over the row's group, computed stably."""
    scaled = scores / tau
    peak = scaled.new_full((count,), float("-inf")).scatter_reduce(0, index, scaled, reduce="amax")
    total = group_sum(torch.exp(scaled - peak[index]), index, count)
    size = torch.bincount(index, minlength=count).to(scores.dtype)
    return (tau * (peak + torch.log(total) - torch.log(size)))[index]


def batch_std(scores: torch.Tensor) -> torch.Tensor:
    """Unbiased std of all scores (1 for a batch of one, by the same rule as a group of one)."""
    return scores.std() if scores.numel() > 1 else scores.new_ones(())
