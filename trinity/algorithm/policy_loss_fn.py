"""Policy losses (`algorithm.policy_loss_fn`): per-token logprobs in, one differentiable scalar out.

Each class is built with its validated args (`cls(**algorithm.policy_loss_fn_args)`) and called as
`fn(logprobs, old_logprobs, advantages, response_mask, **extra) -> (loss, metrics)`, all per-token
tensors [B, R]. `extra` may hold `ref_logprobs` [B, R] (dpo needs it) and `expert_mask` [B] (mix);
keys a loss does not use are ignored, so a trainer can pass the same keys to every loss. Notation:
rho = exp(logp - old_logp); sg() is a stop-gradient (`detach`). Every ratio-based loss reports
`ppo_kl`, the masked mean of old_logp - logp.
"""

from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F

from trinity.algorithm.aggregate import aggregate_loss, masked_mean, masked_sum
from trinity.config.functions import POLICY_LOSS_FN

LOG_RATIO_LIMIT = 20.0  # |log rho| bound before exp, so a stale sample cannot overflow the ratio

Result = Tuple[torch.Tensor, Dict[str, float]]


def clamped_log_ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor) -> torch.Tensor:
    return torch.clamp(logprobs - old_logprobs, -LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)


def mean_of(values: torch.Tensor, mask: torch.Tensor) -> float:
    """A metric: the masked mean of `values` as a float."""
    return float(masked_mean(values.detach().float(), mask))


def clipped_surrogate(ratio: torch.Tensor, advantages: torch.Tensor, low: float, high: float) -> tuple:
    """(max(-A rho, -A clip(rho, 1-low, 1+high)), where the clipped term won)."""
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - low, 1.0 + high)
    return torch.maximum(unclipped, clipped), clipped > unclipped


class PolicyLoss:
    def __init__(self, loss_agg_mode: str = "token-mean"):
        self.loss_agg_mode = loss_agg_mode

    def agg(self, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return aggregate_loss(values, mask, self.loss_agg_mode)


@POLICY_LOSS_FN.implements("ppo")
class PPOPolicyLoss(PolicyLoss):
    """Clipped surrogate with asymmetric bounds; for A < 0 also capped at -A*c (dual clip)."""

    def __init__(
        self,
        clip_range: float,
        clip_range_low: Optional[float],
        clip_range_high: Optional[float],
        clip_ratio_c: float,
        loss_agg_mode: str,
    ):
        super().__init__(loss_agg_mode)
        self.low = clip_range if clip_range_low is None else clip_range_low
        self.high = clip_range if clip_range_high is None else clip_range_high
        self.clip_ratio_c = clip_ratio_c

    def __call__(self, logprobs, old_logprobs, advantages, response_mask, **extra) -> Result:
        log_rho = clamped_log_ratio(logprobs, old_logprobs)
        losses, clipped = clipped_surrogate(torch.exp(log_rho), advantages, self.low, self.high)
        dual = -advantages * self.clip_ratio_c
        negative = advantages < 0
        dual_clipped = negative & (losses > dual)
        losses = torch.where(negative, torch.minimum(losses, dual), losses)
        loss = self.agg(losses, response_mask)
        return loss, {
            "pg_loss": float(loss.detach()),
            "pg_clipfrac": mean_of(clipped, response_mask),
            "pg_clipfrac_lower": mean_of(dual_clipped, response_mask),
            "ppo_kl": mean_of(-log_rho, response_mask),
        }


@POLICY_LOSS_FN.implements("gspo")
class GSPOPolicyLoss(PolicyLoss):
    """PPO clipping on the sequence ratio s = exp(mean_t log rho); each token's gradient is s * grad logp_t.

    Per token, log s = sg(mean_t(logp - old_logp)) + logp_t - sg(logp_t); the sequence mean is
    clamped to +-20 like PPO's log ratio.
    """

    def __init__(self, clip_range_low: float, clip_range_high: float, loss_agg_mode: str):
        super().__init__(loss_agg_mode)
        self.low = clip_range_low
        self.high = clip_range_high

    def __call__(self, logprobs, old_logprobs, advantages, response_mask, **extra) -> Result:
        seq_log_rho = masked_mean(logprobs - old_logprobs, response_mask, dim=-1).detach()
        seq_log_rho = torch.clamp(seq_log_rho, -LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
        log_s = seq_log_rho[:, None] + logprobs - logprobs.detach()
        losses, clipped = clipped_surrogate(torch.exp(log_s), advantages, self.low, self.high)
        loss = self.agg(losses, response_mask)
        return loss, {
            "pg_loss": float(loss.detach()),
            "pg_clipfrac": mean_of(clipped, response_mask),
            "ppo_kl": mean_of(old_logprobs - logprobs, response_mask),
        }


@POLICY_LOSS_FN.implements("opmd")
class OPMDPolicyLoss(PolicyLoss):
    """agg(-A logp) / (1 + tau)."""

    def __init__(self, tau: float, loss_agg_mode: str):
        super().__init__(loss_agg_mode)
        self.tau = tau

    def __call__(self, logprobs, old_logprobs, advantages, response_mask, **extra) -> Result:
        loss = self.agg(-advantages * logprobs, response_mask) / (1.0 + self.tau)
        return loss, {"pg_loss": float(loss.detach())}


@POLICY_LOSS_FN.implements("dpo")
class DPOLoss:
    """Preference loss on (chosen, rejected) pairs: even rows chosen, the next odd row rejected.

    Log-ratios are summed over each response's trained tokens; `ref_logprobs` is required.
    """

    def __init__(self, beta: float, label_smoothing: float):
        self.beta = beta
        self.label_smoothing = label_smoothing

    def __call__(self, logprobs, old_logprobs, advantages, response_mask, ref_logprobs=None, **extra) -> Result:
        if ref_logprobs is None:
            raise ValueError("dpo needs ref_logprobs (the reference model's logprobs of the responses)")
        if logprobs.shape[0] % 2:
            raise ValueError(f"dpo needs (chosen, rejected) pairs, got an odd batch of {logprobs.shape[0]} rows")
        log_ratio = masked_sum(logprobs, response_mask, dim=-1) - masked_sum(ref_logprobs, response_mask, dim=-1)
        chosen, rejected = log_ratio[0::2], log_ratio[1::2]
        margin = self.beta * (chosen - rejected)
        smooth = self.label_smoothing
        losses = -(1 - smooth) * F.logsigmoid(margin) - smooth * F.logsigmoid(-margin)
        loss = losses.mean()
        return loss, {
            "dpo_loss": float(loss.detach()),
            "chosen_reward": float(self.beta * chosen.detach().mean()),
            "rejected_reward": float(self.beta * rejected.detach().mean()),
            "accuracy": float((chosen > rejected).float().mean()),
        }


@POLICY_LOSS_FN.implements("sft")
class SFTLoss(PolicyLoss):
    """agg(-logp): negative log-likelihood of the trained tokens."""

    def __call__(self, logprobs, old_logprobs, advantages, response_mask, **extra) -> Result:
        loss = self.agg(-logprobs, response_mask)
        return loss, {"sft_loss": float(loss.detach())}


@POLICY_LOSS_FN.implements("mix")
class MixPolicyLoss(PolicyLoss):
    """(1 - mu) * PPO over rollout rows + mu * SFT over expert rows (`expert_mask` [B]; None: no expert rows).

    Each part is aggregated over its own rows; a part with no rows contributes 0.
    """

    def __init__(self, mu: float, clip_range: float, loss_agg_mode: str):
        super().__init__(loss_agg_mode)
        self.mu = mu
        self.ppo = PPOPolicyLoss(clip_range, None, None, 3.0, loss_agg_mode)
        self.sft = SFTLoss(loss_agg_mode)

    def __call__(self, logprobs, old_logprobs, advantages, response_mask, expert_mask=None, **extra) -> Result:
        if expert_mask is None:
            expert_mask = torch.zeros(logprobs.shape[0], dtype=torch.bool, device=logprobs.device)
        usual = ~expert_mask
        metrics: Dict[str, float] = {}
        ppo_loss = sft_loss = logprobs.new_zeros(())
        if usual.any():
            ppo_loss, ppo_metrics = self.ppo(
                logprobs[usual], old_logprobs[usual], advantages[usual], response_mask[usual]
            )
            metrics.update({f"usual/{key}": value for key, value in ppo_metrics.items()})
        if expert_mask.any():
            sft_loss, sft_metrics = self.sft(logprobs[expert_mask], None, None, response_mask[expert_mask])
            metrics.update({f"expert/{key}": value for key, value in sft_metrics.items()})
        loss = (1 - self.mu) * ppo_loss + self.mu * sft_loss
        metrics["pg_loss"] = float(loss.detach())
        return loss, metrics


@POLICY_LOSS_FN.implements("topr")
class TOPRPolicyLoss(PolicyLoss):
    """agg(-sg(a) A logp): a = clip(rho, 0, 1) for A <= threshold, else 1 (plain REINFORCE)."""

    def __init__(self, advantage_threshold: float, loss_agg_mode: str):
        super().__init__(loss_agg_mode)
        self.advantage_threshold = advantage_threshold

    def __call__(self, logprobs, old_logprobs, advantages, response_mask, **extra) -> Result:
        ratio = torch.exp(logprobs - old_logprobs).detach()
        truncated = advantages <= self.advantage_threshold
        weight = torch.where(truncated, torch.clamp(ratio, 0.0, 1.0), torch.ones_like(ratio))
        loss = self.agg(-weight * advantages * logprobs, response_mask)
        return loss, {
            "pg_loss": float(loss.detach()),
            "truncated_frac": mean_of(truncated, response_mask),
            "ppo_kl": mean_of(old_logprobs - logprobs, response_mask),
        }


@POLICY_LOSS_FN.implements("cispo")
class CISPOPolicyLoss(PolicyLoss):
    """agg(-A sg(clip(rho, 1-lo, 1+hi)) sg(keep) logp); keep drops tokens whose ratio left the mask range
    in the direction the advantage pushes (rho > 1+mh with A > 0, rho < 1-ml with A < 0) when enabled."""

    def __init__(
        self,
        clip_range_low: float,
        clip_range_high: float,
        enable_mask_clip: bool,
        mask_clip_range_low: float,
        mask_clip_range_high: float,
        loss_agg_mode: str,
    ):
        super().__init__(loss_agg_mode)
        self.low, self.high = clip_range_low, clip_range_high
        self.enable_mask_clip = enable_mask_clip
        self.mask_low, self.mask_high = mask_clip_range_low, mask_clip_range_high

    def __call__(self, logprobs, old_logprobs, advantages, response_mask, **extra) -> Result:
        ratio = torch.exp(logprobs - old_logprobs).detach()
        weight = torch.clamp(ratio, 1.0 - self.low, 1.0 + self.high)
        metrics = {"is_clipfrac": mean_of(weight != ratio, response_mask)}
        if self.enable_mask_clip:
            dropped = ((ratio > 1.0 + self.mask_high) & (advantages > 0)) | (
                (ratio < 1.0 - self.mask_low) & (advantages < 0)
            )
            weight = weight * (~dropped).to(weight.dtype)
            metrics["mask_clipfrac"] = mean_of(dropped, response_mask)
        loss = self.agg(-advantages * weight * logprobs, response_mask)
        metrics["pg_loss"] = float(loss.detach())
        metrics["ppo_kl"] = mean_of(old_logprobs - logprobs, response_mask)
        return loss, metrics


@POLICY_LOSS_FN.implements("sppo")
class SPPOPolicyLoss(PolicyLoss):
    """agg(-A (logp - old_logp) 1[1/(1+eps) <= rho <= 1+eps]): tokens outside the ratio window get no gradient."""

    def __init__(self, epsilon: float, loss_agg_mode: str):
        super().__init__(loss_agg_mode)
        self.epsilon = epsilon

    def __call__(self, logprobs, old_logprobs, advantages, response_mask, **extra) -> Result:
        ratio = torch.exp(logprobs - old_logprobs).detach()
        inside = (ratio >= 1.0 / (1.0 + self.epsilon)) & (ratio <= 1.0 + self.epsilon)
        loss = self.agg(-advantages * (logprobs - old_logprobs) * inside.to(logprobs.dtype), response_mask)
        return loss, {
            "pg_loss": float(loss.detach()),
            "pg_clipfrac": mean_of(~inside, response_mask),
            "ppo_kl": mean_of(old_logprobs - logprobs, response_mask),
        }


@POLICY_LOSS_FN.implements("sapo")
class SAPOPolicyLoss(PolicyLoss):
    """agg(-A sg(f) logp), soft gate f = sigmoid(tau (rho - 1)) * 4 / tau; tau = tau_pos if A > 0 else tau_neg."""

    def __init__(self, tau_pos: float, tau_neg: float, loss_agg_mode: str):
        super().__init__(loss_agg_mode)
        self.tau_pos, self.tau_neg = tau_pos, tau_neg

    def __call__(self, logprobs, old_logprobs, advantages, response_mask, **extra) -> Result:
        ratio = torch.exp(logprobs - old_logprobs).detach()
        tau = torch.where(advantages > 0, ratio.new_tensor(self.tau_pos), ratio.new_tensor(self.tau_neg))
        gate = torch.sigmoid(tau * (ratio - 1.0)) * 4.0 / tau
        loss = self.agg(-advantages * gate * logprobs, response_mask)
        return loss, {
            "pg_loss": float(loss.detach()),
            "soft_gate_mean": mean_of(gate, response_mask),
            "ppo_kl": mean_of(old_logprobs - logprobs, response_mask),
        }


@POLICY_LOSS_FN.implements("importance_sampling")
class ImportanceSamplingLoss(PolicyLoss):
    """agg(-A rho) with log rho clamped to +-20 (unclipped off-policy policy gradient)."""

    def __call__(self, logprobs, old_logprobs, advantages, response_mask, **extra) -> Result:
        log_rho = clamped_log_ratio(logprobs, old_logprobs)
        loss = self.agg(-advantages * torch.exp(log_rho), response_mask)
        return loss, {"pg_loss": float(loss.detach()), "ppo_kl": mean_of(-log_rho, response_mask)}
