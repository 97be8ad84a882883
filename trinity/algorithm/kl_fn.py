"""KL estimators between the policy and the reference model, as a loss term or as a reward penalty.

One class per estimator serves both `algorithm.kl_loss_fn` (built with KLLossArgs: kl_coef) and
`algorithm.kl_penalty_fn` (built with KLPenaltyArgs: adaptive, kl_coef, target_kl, horizon):
* `token_kl(logprobs, ref_logprobs) -> [B, R]` the per-token estimate;
* loss: `fn(logprobs, ref_logprobs, mask, agg_mode) -> (kl_coef * agg(kl), {kl_loss, kl_coef})`;
* penalty: `fn.apply(token_level_rewards, old_logprobs, ref_logprobs, mask) -> (rewards - kl_coef*kl*mask,
  {kl, kl_coef})`, then `fn.update(current_kl=metrics["kl"], n_steps=batch_size)` moves an adaptive
  coefficient: e = clip(kl/target - 1, -0.2, 0.2), kl_coef *= 1 + e * n_steps / horizon.
`kl_coef` is the current coefficient; `state_dict()`/`load_state_dict()` carry it across a resume.
"""

from typing import Dict, Optional, Tuple

import torch

from trinity.algorithm.aggregate import aggregate_loss, masked_mean
from trinity.config.functions import KL_LOSS_FN, KL_PENALTY_FN

Result = Tuple[torch.Tensor, Dict[str, float]]


class KLFn:
    def __init__(
        self, kl_coef: float, adaptive: bool = False, target_kl: Optional[float] = None, horizon: Optional[int] = None
    ):
        if adaptive and (target_kl is None or horizon is None):
            raise ValueError("adaptive KL control needs target_kl and horizon")
        self.kl_coef = kl_coef
        self.adaptive = adaptive
        self.target_kl = target_kl
        self.horizon = horizon

    def token_kl(self, logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, logprobs, ref_logprobs, mask, agg_mode: str) -> Result:
        kl = aggregate_loss(self.token_kl(logprobs, ref_logprobs), mask, agg_mode)
        return self.kl_coef * kl, {"kl_loss": float(kl.detach()), "kl_coef": self.kl_coef}

    def apply(self, token_level_rewards, old_logprobs, ref_logprobs, mask) -> Result:
        kl = self.token_kl(old_logprobs, ref_logprobs).detach() * mask.to(token_level_rewards.dtype)
        current = float(masked_mean(kl, mask, dim=-1).mean())
        return token_level_rewards - self.kl_coef * kl, {"kl": current, "kl_coef": self.kl_coef}

    def update(self, current_kl: float, n_steps: int) -> None:
        if self.adaptive:
            error = min(max(current_kl / self.target_kl - 1.0, -0.2), 0.2)
            self.kl_coef *= 1.0 + error * n_steps / self.horizon

    def state_dict(self) -> dict:
        return {"kl_coef": self.kl_coef}

    def load_state_dict(self, state: dict) -> None:
        self.kl_coef = float(state["kl_coef"])


def _bind(name: str):
    def bind(cls):
        return KL_PENALTY_FN.implements(name)(KL_LOSS_FN.implements(name)(cls))

    return bind


@_bind("none")
class NoKL(KLFn):
    """No KL term: the loss is 0 and rewards pass through (so there is nothing to adapt)."""

    def __init__(self, kl_coef: float, adaptive: bool = False, target_kl=None, horizon=None):
        super().__init__(kl_coef)

    def token_kl(self, logprobs, ref_logprobs):
        return torch.zeros_like(logprobs)

    def __call__(self, logprobs, ref_logprobs, mask, agg_mode: str) -> Result:
        return logprobs.new_zeros(()), {}

    def apply(self, token_level_rewards, old_logprobs, ref_logprobs, mask) -> Result:
        return token_level_rewards, {}


@_bind("k1")
class K1(KLFn):
    def token_kl(self, logprobs, ref_logprobs):
        return logprobs - ref_logprobs


@_bind("k2")
class K2(KLFn):
    def token_kl(self, logprobs, ref_logprobs):
        return 0.5 * (logprobs - ref_logprobs) ** 2


@_bind("k3")
class K3(KLFn):
    def token_kl(self, logprobs, ref_logprobs):
        log_ratio = ref_logprobs - logprobs
        return torch.exp(log_ratio) - 1.0 - log_ratio


@_bind("low_var_kl")
class LowVarKL(KLFn):
    """k3 with the log ratio clamped to +-20 and the estimate to [-10, 10]."""

    def token_kl(self, logprobs, ref_logprobs):
        log_ratio = torch.clamp(ref_logprobs - logprobs, -20.0, 20.0)
        return torch.clamp(torch.exp(log_ratio) - 1.0 - log_ratio, -10.0, 10.0)


@_bind("abs")
class AbsKL(KLFn):
    def token_kl(self, logprobs, ref_logprobs):
        return torch.abs(logprobs - ref_logprobs)
