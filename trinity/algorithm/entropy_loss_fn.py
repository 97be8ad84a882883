"""Entropy bonus (`algorithm.entropy_loss_fn`): a term the trainer subtracts from the loss.

Built with EntropyArgs (`cls(entropy_coef=...)`) and called as
`fn(entropy [B, R], mask [B, R], agg_mode, expert_mask=None) -> (bonus, metrics)`; the actor loss is
`pg_loss - bonus + kl_loss`. `entropy_loss` in the metrics is agg(entropy) before the coefficient.
"""

from typing import Dict, Optional, Tuple

import torch

from trinity.algorithm.aggregate import aggregate_loss
from trinity.config.functions import ENTROPY_LOSS_FN

Result = Tuple[torch.Tensor, Dict[str, float]]


@ENTROPY_LOSS_FN.implements("default")
class EntropyBonus:
    """entropy_coef * agg(entropy) over all rows."""

    def __init__(self, entropy_coef: float):
        self.entropy_coef = entropy_coef

    def __call__(self, entropy, mask, agg_mode: str, expert_mask: Optional[torch.Tensor] = None) -> Result:
        return self.bonus(entropy, mask, agg_mode)

    def bonus(self, entropy, mask, agg_mode: str) -> Result:
        value = aggregate_loss(entropy, mask, agg_mode)
        return self.entropy_coef * value, {"entropy_loss": float(value.detach()), "entropy_coef": self.entropy_coef}


@ENTROPY_LOSS_FN.implements("mix")
class MixEntropyBonus(EntropyBonus):
    """The bonus over rollout rows only: expert rows (`expert_mask`, None meaning none) are imitated, not explored."""

    def __call__(self, entropy, mask, agg_mode: str, expert_mask: Optional[torch.Tensor] = None) -> Result:
        if expert_mask is None:
            return self.bonus(entropy, mask, agg_mode)
        usual = ~expert_mask
        if not usual.any():
            return entropy.new_zeros(()), {"entropy_coef": self.entropy_coef}
        return self.bonus(entropy[usual], mask[usual], agg_mode)


@ENTROPY_LOSS_FN.implements("none")
class NoEntropyBonus:
    """No entropy term."""

    def __init__(self, entropy_coef: float):
        self.entropy_coef = entropy_coef

    def __call__(self, entropy, mask, agg_mode: str, expert_mask: Optional[torch.Tensor] = None) -> Result:
        return entropy.new_zeros(()), {}
