"""The named functions the `algorithm` section selects, each with its args schema and its formula.

This module is torch-free: validation, docs and the Studio read names, args and formulas from here.
The torch implementations live in `trinity.algorithm.*` and attach themselves to these registries
with `FunctionRegistry.implements(name)`. A dotted path (`my_pkg.losses.MyLoss`) selects a user
plug-in: an object with an `Args` dataclass (its arguments) and optionally a `formula` string.
"""

from dataclasses import dataclass
from typing import Any, Optional

from trinity.config.choices import Choice
from trinity.config.fields import setting
from trinity.config.function_registry import FunctionRegistry, FunctionSpec


class LossAggMode(Choice):
    """How per-token losses become one number (values use hyphens, so members are looked up by value)."""

    token_mean = "token-mean"
    seq_mean_token_sum = "seq-mean-token-sum"
    seq_mean_token_mean = "seq-mean-token-mean"
    seq_mean_token_sum_norm = "seq-mean-token-sum-norm"


class OPMDBaseline(Choice):
    mean = "mean"
    logavgexp = "logavgexp"


class StdCalLevel(Choice):
    group = "group"
    batch = "batch"


def _agg(default: LossAggMode = LossAggMode.token_mean) -> Any:
    return setting(default, help="Aggregation of token losses: token-mean, seq-mean-token-sum, ...")


# ---- advantage functions -------------------------------------------------------------------------


@dataclass
class GAEArgs:
    gamma: float = setting(1.0, help="Discount factor.", ge=0, le=1)
    lam: float = setting(1.0, help="GAE lambda.", ge=0, le=1)


@dataclass
class GRPOAdvantageArgs:
    epsilon: float = setting(1e-6, help="Added to the std before dividing.", ge=0)
    norm_adv_by_std_in_grpo: bool = setting(True, help="Divide by the group std (false: Dr. GRPO, mean-centred only).")
    std_threshold: Optional[float] = setting(None, help="Drop groups whose reward std is at most this.", ge=0)
    std_cal_level: StdCalLevel = setting(StdCalLevel.group, help="Std over the group or over the whole batch.")


@dataclass
class StepWiseGRPOArgs:
    epsilon: float = setting(1e-6, help="Added to the std before dividing.", ge=0)
    enable_step_norm: bool = setting(False, help="Divide each run's score by its number of steps.")
    std_threshold: Optional[float] = setting(None, help="Drop groups whose reward std is at most this.", ge=0)


@dataclass
class DAPOAdvantageArgs:
    epsilon: float = setting(1e-6, help="Added to the std before dividing.", ge=0)
    std_threshold: Optional[float] = setting(
        0.0,
        help="Dynamic sampling: drop groups whose shaped reward std is at most this (0.0: no variance); the "
        "explorer tops the step up with more tasks. Empty keeps every group.",
        ge=0,
    )
    overlong_buffer_len: Optional[int] = setting(
        None,
        help="L_cache: the last tokens before max_response_length over which the penalty grows from 0 to -1; 0 turns "
        "overlong shaping off; empty means max_response_length // 5 (DAPO: 4096 of 20480).",
        ge=0,
    )
    overlong_penalty_factor: float = setting(1.0, help="Scale of the overlong penalty added to the reward.", ge=0)
    max_response_length: Optional[int] = setting(
        None, help="L_max; empty means the train taskset's rollout_args.max_tokens (filled by validation).", ge=1
    )


@dataclass
class ReinforcePlusPlusArgs:
    gamma: float = setting(1.0, help="Discount factor.", ge=0, le=1)


@dataclass
class NoArgs:
    """The function takes no arguments."""


@dataclass
class OPMDAdvantageArgs:
    opmd_baseline: OPMDBaseline = setting(OPMDBaseline.mean, help="Baseline: group mean or tau-logavgexp.")
    tau: float = setting(1.0, help="Temperature of the logavgexp baseline.", gt=0)


@dataclass
class AsymREArgs:
    baseline_shift: float = setting(-0.1, help="Added to the group-mean baseline.")


@dataclass
class RAFTArgs:
    reward_threshold: float = setting(
        1.0,
        help="A response is trained on only if its reward is its group's highest and at least this "
        "(1.0: a right answer under the built-in math and arithmetic rewards).",
    )


@dataclass
class OnPolicyDistillArgs:
    kl_coef: float = setting(1.0, help="Scale of teacher-minus-student logprob advantages.", ge=0)


ADVANTAGE_FN = FunctionRegistry(
    "advantage_fn",
    "trinity.algorithm.advantage_fn",
    [
        FunctionSpec(
            "ppo",
            GAEArgs,
            "GAE: d_t = r_t + g*V_{t+1} - V_t, A_t = sum_l (g*lam)^l d_{t+l}, returns = A + V, A whitened",
        ),
        FunctionSpec(
            "grpo",
            GRPOAdvantageArgs,
            "A_i = (r_i - mean_G) / (std_G + eps) (no division when norm_adv_by_std_in_grpo=false)",
            grouped=True,
        ),
        FunctionSpec(
            "step_wise_grpo",
            StepWiseGRPOArgs,
            "GRPO over each run's last-step reward, broadcast to all its steps",
            grouped=True,
        ),
        FunctionSpec(
            "dapo",
            DAPOAdvantageArgs,
            "r' = r + f*R_len(|y|) (R_len: 0 up to L_max - L_cache, then linear to -1 at L_max, -1 beyond); "
            "GRPO on r'; groups with std(r') <= std_threshold dropped",
            grouped=True,
        ),
        FunctionSpec(
            "rloo", NoArgs, "A_i = n/(n-1) * (r_i - mean_G): reward minus the mean of the other n-1", grouped=True
        ),
        FunctionSpec("reinforce", NoArgs, "A_i = r_i"),
        FunctionSpec("reinforceplusplus", ReinforcePlusPlusArgs, "G_t = sum_k g^k r_{t+k}, A = whiten(G), returns = G"),
        FunctionSpec("remax", NoArgs, "A = reverse-cumsum(token rewards) - greedy-baseline reward"),
        FunctionSpec(
            "opmd", OPMDAdvantageArgs, "A_i = r_i - b, b = mean_G or tau*(logsumexp(r/tau) - log n)", grouped=True
        ),
        FunctionSpec("asymre", AsymREArgs, "A_i = r_i - (mean_G + baseline_shift)", grouped=True),
        FunctionSpec(
            "raft",
            RAFTArgs,
            "keep_i = r_i = max_G r and r_i >= reward_threshold; A_i = 1 on kept rows, the rest dropped",
        ),
        FunctionSpec("on_policy_distill", OnPolicyDistillArgs, "A_t = kl_coef * (teacher_logprob_t - old_logprob_t)"),
    ],
)


# ---- policy losses -------------------------------------------------------------------------------


@dataclass
class PPOPolicyLossArgs:
    clip_range: float = setting(0.2, help="Clip epsilon of the ratio.", gt=0, le=1)
    clip_range_low: Optional[float] = setting(None, help="Lower clip epsilon; empty means clip_range.", gt=0, le=1)
    clip_range_high: Optional[float] = setting(None, help="Upper clip epsilon; empty means clip_range.", gt=0)
    clip_ratio_c: float = setting(3.0, help="Dual-clip bound for negative advantages.", gt=1)
    loss_agg_mode: LossAggMode = _agg()


@dataclass
class GSPOPolicyLossArgs:
    clip_range_low: float = setting(3e-4, help="Lower clip epsilon of the sequence ratio.", gt=0)
    clip_range_high: float = setting(4e-4, help="Upper clip epsilon of the sequence ratio.", gt=0)
    loss_agg_mode: LossAggMode = _agg(LossAggMode.seq_mean_token_mean)


@dataclass
class OPMDPolicyLossArgs:
    tau: float = setting(1.0, help="Regularisation temperature; the loss is divided by 1 + tau.", ge=0)
    loss_agg_mode: LossAggMode = _agg()


@dataclass
class DPOPolicyLossArgs:
    beta: float = setting(0.1, help="Inverse temperature of the implicit reward.", gt=0, le=1)
    label_smoothing: float = setting(0.0, help="Probability the preference label is flipped.", ge=0, le=0.5)


@dataclass
class SFTPolicyLossArgs:
    loss_agg_mode: LossAggMode = _agg()


@dataclass
class MixPolicyLossArgs:
    mu: float = setting(0.1, help="Weight of the expert SFT loss.", ge=0, le=1)
    clip_range: float = setting(0.2, help="Clip epsilon of the PPO part.", gt=0, le=1)
    loss_agg_mode: LossAggMode = _agg()


@dataclass
class TOPRPolicyLossArgs:
    advantage_threshold: float = setting(0.0, help="Advantages above this are treated as positive.")
    loss_agg_mode: LossAggMode = _agg()


@dataclass
class CISPOPolicyLossArgs:
    clip_range_low: float = setting(1.0, help="Lower clip of the detached ratio.", ge=0)
    clip_range_high: float = setting(0.28, help="Upper clip of the detached ratio.", ge=0)
    enable_mask_clip: bool = setting(False, help="Also zero tokens whose ratio leaves the mask range.")
    mask_clip_range_low: float = setting(1.0, help="Lower bound of the mask range.", ge=0)
    mask_clip_range_high: float = setting(0.28, help="Upper bound of the mask range.", ge=0)
    loss_agg_mode: LossAggMode = _agg()


@dataclass
class SPPOPolicyLossArgs:
    epsilon: float = setting(0.3, help="Tokens count only while 1/(1+eps) <= ratio <= 1+eps.", gt=0)
    loss_agg_mode: LossAggMode = _agg()


@dataclass
class SAPOPolicyLossArgs:
    tau_pos: float = setting(1.0, help="Gate temperature for positive advantages.", gt=0)
    tau_neg: float = setting(1.05, help="Gate temperature for negative advantages (>= tau_pos).", gt=0)
    loss_agg_mode: LossAggMode = _agg()


@dataclass
class ISPolicyLossArgs:
    loss_agg_mode: LossAggMode = _agg()


POLICY_LOSS_FN = FunctionRegistry(
    "policy_loss_fn",
    "trinity.algorithm.policy_loss_fn",
    [
        FunctionSpec("ppo", PPOPolicyLossArgs, "L = max(-A*rho, -A*clip(rho, 1-lo, 1+hi)); for A<0, L = min(L, -A*c)"),
        FunctionSpec("gspo", GSPOPolicyLossArgs, "PPO clipping on s = exp(mean_t(logp - old_logp)) per sequence"),
        FunctionSpec("opmd", OPMDPolicyLossArgs, "L = agg(-A * logp) / (1 + tau)"),
        FunctionSpec(
            "dpo",
            DPOPolicyLossArgs,
            "L = -(1-ls)*log sig(b*D) - ls*log sig(-b*D), D = chosen minus rejected log-ratio to ref",
        ),
        FunctionSpec("sft", SFTPolicyLossArgs, "L = agg(-logp)"),
        FunctionSpec("mix", MixPolicyLossArgs, "L = (1-mu)*PPO(rollouts) + mu*SFT(expert rows)"),
        FunctionSpec("topr", TOPRPolicyLossArgs, "L = agg(-sg(a)*A*logp), a = clip(rho, 0, 1) if A <= thr else 1"),
        FunctionSpec("cispo", CISPOPolicyLossArgs, "L = agg(-A * sg(clip(rho, 1-lo, 1+hi)) * logp)"),
        FunctionSpec("sppo", SPPOPolicyLossArgs, "L = agg(-A * (logp - old_logp) * 1[1/(1+eps) <= rho <= 1+eps])"),
        FunctionSpec(
            "sapo", SAPOPolicyLossArgs, "L = agg(-A * sg(f) * logp), f = sig(tau*(rho-1)) * 4/tau, tau by sign of A"
        ),
        FunctionSpec("importance_sampling", ISPolicyLossArgs, "L = agg(-A * rho), log rho clamped to +-20"),
    ],
)


# ---- KL, entropy, sampling -----------------------------------------------------------------------


@dataclass
class KLLossArgs:
    kl_coef: float = setting(0.001, help="Weight of the KL loss (beta).", ge=0, le=1)


@dataclass
class KLPenaltyArgs:
    adaptive: bool = setting(False, help="Adapt kl_coef towards target_kl over horizon steps.")
    kl_coef: float = setting(0.001, help="Weight of the KL penalty subtracted from token rewards.", ge=0, le=1)
    target_kl: Optional[float] = setting(0.1, help="KL the adaptive controller aims for.", gt=0)
    horizon: Optional[int] = setting(10000, help="Experiences over which the adaptive controller reacts.", ge=1)


_KL_FORMULAS = [
    ("none", "0"),
    ("k1", "logp - ref"),
    ("k2", "(logp - ref)^2 / 2"),
    ("k3", "exp(ref - logp) - 1 - (ref - logp)"),
    ("low_var_kl", "k3 with the log ratio clamped to +-20 and the result to [-10, 10]"),
    ("abs", "|logp - ref|"),
]

KL_LOSS_FN = FunctionRegistry(
    "kl_loss_fn",
    "trinity.algorithm.kl_fn",
    [FunctionSpec(name, KLLossArgs, f"loss += kl_coef * agg({formula})") for name, formula in _KL_FORMULAS],
)
KL_PENALTY_FN = FunctionRegistry(
    "kl_penalty_fn",
    "trinity.algorithm.kl_fn",
    [FunctionSpec(name, KLPenaltyArgs, f"token_reward -= kl_coef * ({formula})") for name, formula in _KL_FORMULAS],
)


@dataclass
class EntropyArgs:
    entropy_coef: float = setting(0.0, help="Weight of the entropy bonus.", ge=0, le=1)


ENTROPY_LOSS_FN = FunctionRegistry(
    "entropy_loss_fn",
    "trinity.algorithm.entropy_loss_fn",
    [
        FunctionSpec("default", EntropyArgs, "loss -= entropy_coef * agg(entropy)"),
        FunctionSpec("mix", EntropyArgs, "loss -= entropy_coef * agg(entropy over non-expert rows)"),
        FunctionSpec("none", EntropyArgs, "no entropy term"),
    ],
)


@dataclass
class StalenessControlArgs:
    max_staleness: Optional[int] = setting(
        None, help="Drop experiences more than this many model versions old; empty keeps all.", ge=0
    )


@dataclass
class MixSampleArgs:
    expert_data_ratio: float = setting(
        0.5, help="Share of each train batch taken from the expert SFT dataset.", ge=0, le=1
    )
    sft_dataset_name: str = setting("sft_dataset", help="Key of the expert dataset in trainer_input.auxiliary_buffers.")


SAMPLE_STRATEGY = FunctionRegistry(
    "sample_strategy",
    "trinity.buffer.sample_strategy",
    [
        FunctionSpec("default", NoArgs, "read train_batch_size experiences from the experience buffer"),
        FunctionSpec("warmup", NoArgs, "deprecated alias of default"),
        FunctionSpec(
            "staleness_control", StalenessControlArgs, "default, skipping experiences older than step - max_staleness"
        ),
        FunctionSpec(
            "mix", MixSampleArgs, "ceil(ratio*bs) expert rows from the SFT dataset + the rest from the buffer"
        ),
    ],
)

# config key -> registry; `<key>_args` holds the selected function's arguments
REGISTRIES = {
    r.key: r for r in (SAMPLE_STRATEGY, ADVANTAGE_FN, KL_LOSS_FN, KL_PENALTY_FN, POLICY_LOSS_FN, ENTROPY_LOSS_FN)
}
