"""The PPO critic's clipped value loss (`trainer.critic.cliprange_value`)."""

from typing import Dict, Tuple

import torch

from trinity.algorithm.aggregate import aggregate_loss, masked_mean


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    cliprange_value: float,
    agg_mode: str,
) -> Tuple[torch.Tensor, Dict[str, float]]:
    """0.5 * agg(max((V - G)^2, (V_clip - G)^2)), V_clip = old_V + clip(V - old_V, -c, c).

    Clipping keeps one update from moving a value estimate further than c from the value it had
    when the batch was scored; all tensors are [B, R] on the response tokens.
    """
    clipped = old_values + torch.clamp(values - old_values, -cliprange_value, cliprange_value)
    plain_sq = (values - returns) ** 2
    clipped_sq = (clipped - returns) ** 2
    loss = 0.5 * aggregate_loss(torch.maximum(plain_sq, clipped_sq), mask, agg_mode)
    return loss, {
        "vf_loss": float(loss.detach()),
        "vf_clipfrac": float(masked_mean((clipped_sq > plain_sq).float(), mask)),
        "vpred_mean": float(masked_mean(values.detach(), mask)),
    }
