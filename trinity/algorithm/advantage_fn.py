"""Advantage functions (`algorithm.advantage_fn`): a padded batch in, per-token advantages out.

Each class is built with its validated args (`cls(**algorithm.advantage_fn_args)`) and called as
`fn(batch) -> {"advantages": [B, R], "returns": [B, R], "metrics": {...}}`, plus `"keep"` [B] bool
when a std threshold can drop groups. The same object serves the explorer pipeline (one step's
experiences collated) and the trainer. Outputs are zero outside `response_mask` and never carry
gradients. Scalar scores come from `token_level_rewards.sum(-1)` (so a KL penalty applied to the
token rewards is seen) or, without it, from `rewards`.
"""

from typing import Dict, Optional

import torch

from trinity.algorithm.aggregate import masked_whiten
from trinity.algorithm.groups import (
    batch_std,
    dense_index,
    group_logavgexp,
    group_spread,
    group_stats,
    group_sum,
)
from trinity.algorithm.reward_shaping import overlong_penalty
from trinity.config.functions import ADVANTAGE_FN

Batch = Dict[str, torch.Tensor]


def sequence_scores(batch: Batch) -> torch.Tensor:
    """[B] one score per response."""
    if "token_level_rewards" in batch:
        return batch["token_level_rewards"].sum(-1)
    if "rewards" in batch:
        return batch["rewards"].float()
    raise KeyError("the batch has neither token_level_rewards nor rewards to compute advantages from")


def broadcast(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B] per-response advantages -> [B, R] on the trained tokens."""
    return scores[:, None] * mask.to(scores.dtype)


def _result(advantages: torch.Tensor, returns: Optional[torch.Tensor] = None, **metrics: float) -> dict:
    return {"advantages": advantages, "returns": advantages.clone() if returns is None else returns, "metrics": metrics}


class AdvantageFn:
    """Base: runs `compute` without autograd (advantages are constants of the loss)."""

    def __call__(self, batch: Batch) -> dict:
        with torch.no_grad():
            return self.compute(batch)

    def compute(self, batch: Batch) -> dict:
        raise NotImplementedError

    def filter_rule(self) -> str:
        """The rule by which this function drops rows (`"keep"`), for the explorer's error when too few remain."""
        return "no rule: it keeps every row"


@ADVANTAGE_FN.implements("ppo")
class GAEAdvantage(AdvantageFn):
    """GAE over the trained tokens of each response, then whitened over the batch.

    Untrained tokens (padding, or tool output inside a multi-turn response) are skipped: the
    recursion links each trained token to the next trained one, and the value after the last is 0.
    Values are read only on trained tokens, as are rewards.
    """

    def __init__(self, gamma: float, lam: float):
        self.gamma = gamma
        self.lam = lam

    def compute(self, batch: Batch) -> dict:
        rewards, mask = batch["token_level_rewards"], batch["response_mask"]
        m = mask.to(rewards.dtype)
        values = batch["values"].to(rewards.dtype) * m
        gaes = torch.zeros_like(rewards)
        next_value = rewards.new_zeros(rewards.shape[0])
        next_gae = rewards.new_zeros(rewards.shape[0])
        for t in reversed(range(rewards.shape[1])):
            delta = rewards[:, t] + self.gamma * next_value - values[:, t]
            gae = delta + self.gamma * self.lam * next_gae
            gaes[:, t] = gae
            next_value = torch.where(mask[:, t], values[:, t], next_value)
            next_gae = torch.where(mask[:, t], gae, next_gae)
        returns = (gaes + values) * m
        advantages = masked_whiten(gaes, mask) * m
        return _result(advantages, returns)


@ADVANTAGE_FN.implements("grpo")
class GRPOAdvantage(AdvantageFn):
    """(r - group mean) / (std + eps); std of the group or of the whole batch."""

    def __init__(
        self, epsilon: float, norm_adv_by_std_in_grpo: bool, std_threshold: Optional[float], std_cal_level: str
    ):
        self.epsilon = epsilon
        self.norm = norm_adv_by_std_in_grpo
        self.std_threshold = std_threshold
        self.std_cal_level = std_cal_level

    def compute(self, batch: Batch) -> dict:
        return self.normalise(sequence_scores(batch), batch)

    def filter_rule(self) -> str:
        return f"std_threshold={self.std_threshold} (groups whose rewards do not vary)"

    def normalise(self, scores: torch.Tensor, batch: Batch) -> dict:
        """The GRPO result for one score per row [B] (rewards, or rewards already shaped)."""
        mask = batch["response_mask"]
        stats = group_stats(scores, batch["group_ids"])
        centred = scores - stats.mean
        if self.norm:
            std = stats.std
            if self.std_cal_level == "batch":
                std = torch.where(stats.size == 1, stats.std, batch_std(scores).expand_as(std))
            centred = centred / (std + self.epsilon)
        out = _result(broadcast(centred, mask))
        if self.std_threshold is not None:
            constant = group_spread(scores, stats.index, stats.count) == 0  # exact: no rounding in a sum of squares
            drop = (stats.size == 1) | (stats.std <= self.std_threshold) | constant
            _apply_drop(out, ~drop)
            out["metrics"]["filtered_count"] = float(_groups_among(stats.index, drop))
        return out


@ADVANTAGE_FN.implements("dapo")
class DAPOAdvantage(GRPOAdvantage):
    """GRPO on overlong-shaped rewards (trinity.algorithm.reward_shaping); with a std threshold (0.0 by default)
    groups whose shaped rewards do not vary are dropped: dynamic sampling, whose top-up the explorer does."""

    def __init__(
        self,
        epsilon: float,
        std_threshold: Optional[float],
        overlong_buffer_len: Optional[int],
        overlong_penalty_factor: float,
        max_response_length: Optional[int],
    ):
        super().__init__(epsilon, True, std_threshold, "group")
        if overlong_buffer_len is None and max_response_length is not None:
            overlong_buffer_len = max_response_length // 5  # the documented default, as validation fills it
        self.max_response_length = max_response_length
        self.overlong_buffer_len = overlong_buffer_len
        self.overlong_penalty_factor = overlong_penalty_factor

    def compute(self, batch: Batch) -> dict:
        lengths = batch["response_mask"].sum(-1)
        if self.max_response_length is None and self.overlong_buffer_len != 0:
            raise ValueError("dapo's overlong shaping needs max_response_length (validation fills it)")
        penalty = overlong_penalty(
            lengths, self.max_response_length or 0, self.overlong_buffer_len or 0, self.overlong_penalty_factor
        )
        scores = sequence_scores(batch)
        out = self.normalise(scores + penalty.to(scores.dtype), batch)
        out["metrics"]["overlong_penalty_mean"] = float(penalty.mean())
        out["metrics"]["overlong_frac"] = float((penalty < 0).float().mean())
        return out


@ADVANTAGE_FN.implements("step_wise_grpo")
class StepWiseGRPOAdvantage(AdvantageFn):
    """GRPO over runs: each run (one multi-step trajectory) scores with its last step's reward.

    Rows are steps; `group_ids` names the task, `run_ids` the run, `step_ids` the step within it.
    """

    def __init__(self, epsilon: float, enable_step_norm: bool, std_threshold: Optional[float]):
        self.epsilon = epsilon
        self.enable_step_norm = enable_step_norm
        self.std_threshold = std_threshold

    def filter_rule(self) -> str:
        return f"std_threshold={self.std_threshold} (groups whose rewards do not vary)"

    def compute(self, batch: Batch) -> dict:
        scores, mask = sequence_scores(batch), batch["response_mask"]
        groups, steps = batch["group_ids"], batch["step_ids"]
        run_index, runs = dense_index(torch.stack([groups, batch["run_ids"]], dim=1))
        last_step = steps.new_full((runs,), torch.iinfo(steps.dtype).min).scatter_reduce(0, run_index, steps, "amax")
        is_last = steps == last_step[run_index]
        if torch.bincount(run_index[is_last], minlength=runs).ne(1).any():
            raise ValueError("a run has more than one experience with its last step index")
        run_score = group_sum(torch.where(is_last, scores, torch.zeros_like(scores)), run_index, runs)
        run_group = groups.new_zeros(runs).scatter_(0, run_index, groups)
        run_steps = torch.bincount(run_index, minlength=runs).to(scores.dtype)
        stats = group_stats(run_score, run_group)
        run_adv = (run_score - stats.mean) / (stats.std + self.epsilon)
        if self.enable_step_norm:
            run_adv = run_adv / run_steps
        out = _result(broadcast(run_adv[run_index], mask))
        if self.std_threshold is not None:
            drop_run = (stats.size == 1) | (stats.std <= self.std_threshold)
            _apply_drop(out, ~drop_run[run_index])
            skipped = _groups_among(stats.index, drop_run)
            out["metrics"]["filtered_count"] = float(skipped)
            out["metrics"]["skipped_group_ratio"] = skipped / stats.count
        return out


@ADVANTAGE_FN.implements("rloo")
class RLOOAdvantage(AdvantageFn):
    """r minus the mean of the other responses' rewards = n/(n-1) (r - mean); a lone response keeps r."""

    def compute(self, batch: Batch) -> dict:
        scores = sequence_scores(batch)
        stats = group_stats(scores, batch["group_ids"])
        scale = torch.where(stats.size > 1, stats.size / (stats.size - 1).clamp(min=1), torch.ones_like(stats.size))
        return _result(broadcast(scale * (scores - stats.mean), batch["response_mask"]))


@ADVANTAGE_FN.implements("reinforce")
class ReinforceAdvantage(AdvantageFn):
    """The raw reward."""

    def compute(self, batch: Batch) -> dict:
        return _result(broadcast(sequence_scores(batch), batch["response_mask"]))


@ADVANTAGE_FN.implements("reinforceplusplus")
class ReinforcePlusPlusAdvantage(AdvantageFn):
    """Discounted return-to-go of the token rewards, whitened over the batch; returns are unwhitened."""

    def __init__(self, gamma: float):
        self.gamma = gamma

    def compute(self, batch: Batch) -> dict:
        rewards, mask = batch["token_level_rewards"], batch["response_mask"]
        m = mask.to(rewards.dtype)
        returns = torch.zeros_like(rewards)
        running = rewards.new_zeros(rewards.shape[0])
        for t in reversed(range(rewards.shape[1])):
            running = rewards[:, t] + self.gamma * running
            returns[:, t] = running
        returns = returns * m
        return _result(masked_whiten(returns, mask) * m, returns)


@ADVANTAGE_FN.implements("remax")
class RemaxAdvantage(AdvantageFn):
    """Return-to-go minus the reward of the greedy response (`reward_baselines` [B])."""

    def compute(self, batch: Batch) -> dict:
        mask = batch["response_mask"]
        m = mask.to(batch["token_level_rewards"].dtype)
        returns = (batch["token_level_rewards"] * m).flip(-1).cumsum(-1).flip(-1) * m
        return _result((returns - batch["reward_baselines"][:, None]) * m, returns)


@ADVANTAGE_FN.implements("opmd")
class OPMDAdvantage(AdvantageFn):
    """r - b, b the group mean or tau-logavgexp of the group's rewards (0 for a lone response)."""

    def __init__(self, opmd_baseline: str, tau: float):
        self.opmd_baseline = opmd_baseline
        self.tau = tau

    def compute(self, batch: Batch) -> dict:
        scores = sequence_scores(batch)
        stats = group_stats(scores, batch["group_ids"])
        if self.opmd_baseline == "logavgexp":
            baseline = group_logavgexp(scores, stats.index, stats.count, self.tau)
            baseline = torch.where(stats.size == 1, torch.zeros_like(baseline), baseline)
        else:
            baseline = stats.mean
        return _result(broadcast(scores - baseline, batch["response_mask"]))


@ADVANTAGE_FN.implements("asymre")
class AsymREAdvantage(AdvantageFn):
    """r - (group mean + baseline_shift); a lone response keeps r (baseline 0, no shift)."""

    def __init__(self, baseline_shift: float):
        self.baseline_shift = baseline_shift

    def compute(self, batch: Batch) -> dict:
        scores = sequence_scores(batch)
        stats = group_stats(scores, batch["group_ids"])
        baseline = torch.where(stats.size == 1, torch.zeros_like(stats.mean), stats.mean + self.baseline_shift)
        return _result(broadcast(scores - baseline, batch["response_mask"]))


@ADVANTAGE_FN.implements("raft")
class RAFTFilter(AdvantageFn):
    """RAFT's reward ranking: of each group, the responses with its highest reward, if that reward reaches
    `reward_threshold`, are kept (advantage 1: the SFT loss trains on them); every other row is dropped, and
    the explorer tops the batch up with more tasks. A group whose best is below the threshold is dropped
    whole (`filtered_count`)."""

    def __init__(self, reward_threshold: float):
        self.reward_threshold = reward_threshold

    def filter_rule(self) -> str:
        return f"raft's reward_threshold={self.reward_threshold:g} (each group's best, if at least that)"

    def compute(self, batch: Batch) -> dict:
        scores = sequence_scores(batch)
        index, count = dense_index(batch["group_ids"])
        best = scores.new_full((count,), float("-inf")).scatter_reduce(0, index, scores, reduce="amax")
        keep = (scores >= best[index]) & (scores >= self.reward_threshold)
        out = _result(broadcast(keep.to(scores.dtype), batch["response_mask"]))
        _apply_drop(out, keep)
        out["metrics"].update(
            filtered_count=float(count - _groups_among(index, keep)),
            kept_share=float(keep.float().mean()),
            reward_threshold=self.reward_threshold,
        )
        return out


@ADVANTAGE_FN.implements("on_policy_distill")
class OnPolicyDistillAdvantage(AdvantageFn):
    """kl_coef * (teacher logprob - sampling logprob) per token."""

    def __init__(self, kl_coef: float):
        self.kl_coef = kl_coef

    def compute(self, batch: Batch) -> dict:
        m = batch["response_mask"].to(batch["old_logprobs"].dtype)
        gap = (batch["teacher_logprobs"] - batch["old_logprobs"]) * m
        # the student's sampled tokens, scored by both: mean(student - teacher logprob) estimates the reverse KL
        # KL(student || teacher) per token, the distance distillation closes
        reverse_kl = float(-gap.sum() / m.sum().clamp(min=1))
        return _result(self.kl_coef * gap, reverse_kl=reverse_kl)


def _apply_drop(out: dict, keep: torch.Tensor) -> None:
    out["keep"] = keep
    out["advantages"] = out["advantages"] * keep[:, None]
    out["returns"] = out["returns"] * keep[:, None]


def _groups_among(index: torch.Tensor, rows: torch.Tensor) -> int:
    """How many distinct groups the selected rows belong to."""
    return int(torch.unique(index[rows]).numel())
