"""Reward shaping from a response's length: DAPO's soft overlong punishment.

A response cut off at the length limit is not known to be wrong, so a hard penalty for truncation
punishes sound reasoning that ran long. DAPO instead adds a penalty that grows over the last L_cache
tokens before the limit L_max (paper eq. 13):

    R_length(|y|) = 0                              if |y| <= L_max - L_cache
                  = ((L_max - L_cache) - |y|) / L_cache   if L_max - L_cache < |y| <= L_max
                  = -1                             if |y| > L_max

The shaped reward is r + factor * R_length(|y|).
"""

import torch


def overlong_penalty(lengths: torch.Tensor, max_length: int, buffer_len: int, factor: float = 1.0) -> torch.Tensor:
    """[B] factor * R_length of each response length [B]; all zeros when `buffer_len` is 0 (shaping off)."""
    lengths = lengths.to(torch.float32)
    if buffer_len == 0:
        return torch.zeros_like(lengths)
    if not 0 < buffer_len < max_length:
        raise ValueError(f"overlong_buffer_len must be in (0, {max_length}) for max_response_length={max_length}")
    start = max_length - buffer_len
    inside = (start - lengths) / buffer_len
    penalty = torch.where(lengths <= start, torch.zeros_like(lengths), inside)
    penalty = torch.where(lengths > max_length, torch.full_like(lengths, -1.0), penalty)
    return factor * penalty
