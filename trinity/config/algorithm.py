"""Schema of the `algorithm` group: one dataclass per algorithm type, holding its default functions.

The functions themselves (names, args, formulas) are declared in `trinity.config.functions`; here
each type picks its defaults and declares its traits as class constants (critic, reference, where
advantages are computed, which data schema the trainer reads).
"""

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional

from trinity.config.choices import Choice
from trinity.config.fields import setting
from trinity.config.trainer import LRSchedulerType


class AlgorithmType(Choice):
    ppo = "ppo"
    grpo = "grpo"
    opmd = "opmd"
    dpo = "dpo"
    sft = "sft"
    mix = "mix"
    rloo = "rloo"
    reinforceplusplus = "reinforceplusplus"
    gspo = "gspo"
    cispo = "cispo"
    topr = "topr"
    asymre = "asymre"
    sppo = "sppo"
    raft = "raft"
    sapo = "sapo"
    dapo = "dapo"
    multi_step_grpo = "multi_step_grpo"
    on_policy_distill = "on_policy_distill"


class DataSchema(Choice):
    experience = "experience"
    sft = "sft"
    dpo = "dpo"


class OptimizerType(Choice):
    adamw = "adamw"
    sgd = "sgd"


@dataclass
class OptimizerConfig:
    """Actor optimiser and learning-rate schedule."""

    lr: float = setting(1e-6, help="Learning rate of the actor.", gt=0)
    lr_warmup_steps: int = setting(-1, help="Warm-up steps; -1 means use lr_warmup_steps_ratio.", ge=-1)
    lr_warmup_steps_ratio: float = setting(0.0, help="Share of total steps spent warming the lr up.", ge=0, le=1)
    lr_scheduler_type: LRSchedulerType = setting(LRSchedulerType.constant, help="Learning-rate schedule after warm-up.")
    min_lr_ratio: float = setting(0.01, help="Cosine schedule floor as a share of lr.", ge=0, le=1)
    optimizer_type: OptimizerType = setting(OptimizerType.adamw, help="Optimiser.")
    betas: List[float] = setting(help="Adam betas.", factory=lambda: [0.9, 0.999])
    weight_decay: float = setting(0.01, help="Decoupled weight decay.", ge=0)


@dataclass
class AlgorithmConfig:
    """Fields every algorithm type shares; the subclasses below set each type's defaults."""

    use_critic: ClassVar[bool] = False
    reference_in_loss: ClassVar[bool] = False  # the loss itself reads reference logprobs (dpo)
    compute_advantage_in_trainer: ClassVar[bool] = False
    uses_teacher: ClassVar[bool] = False  # trainer ranks score responses with explorer.auxiliary_models[0]
    schema: ClassVar[DataSchema] = DataSchema.experience
    trains_from_dataset: ClassVar[bool] = False  # reads a dataset, not rollouts: no explorer, checkpoint sync
    rows_per_example: ClassVar[int] = 1  # buffer rows that make one training example

    algorithm_type: AlgorithmType = setting(AlgorithmType.grpo, help="Algorithm; chosen by the algorithm group option.")
    repeat_times: int = setting(2, help="Responses sampled per task (the group size).", ge=1)
    sample_strategy: str = setting("default", help="How the trainer draws each batch: default, mix, staleness_control.")
    sample_strategy_args: Dict[str, Any] = setting(help="Arguments of sample_strategy.", factory=dict)
    advantage_fn: Optional[str] = setting("grpo", help="Advantage function; empty for algorithms without one.")
    advantage_fn_args: Dict[str, Any] = setting(help="Arguments of advantage_fn.", factory=dict)
    kl_loss_fn: str = setting("k2", help="KL estimator added to the loss: none, k1, k2, k3, low_var_kl, abs.")
    kl_loss_fn_args: Dict[str, Any] = setting(help="Arguments of kl_loss_fn.", factory=dict)
    kl_penalty_fn: str = setting("none", help="KL estimator subtracted from token rewards: none, k1, k2, ...")
    kl_penalty_fn_args: Dict[str, Any] = setting(help="Arguments of kl_penalty_fn.", factory=dict)
    policy_loss_fn: str = setting("ppo", help="Policy loss: ppo, gspo, opmd, dpo, sft, mix, ...")
    policy_loss_fn_args: Dict[str, Any] = setting(help="Arguments of policy_loss_fn.", factory=dict)
    entropy_loss_fn: str = setting("default", help="Entropy bonus: default, mix or none.")
    entropy_loss_fn_args: Dict[str, Any] = setting(help="Arguments of entropy_loss_fn.", factory=dict)
    optimizer: OptimizerConfig = setting(help="Actor optimiser.", factory=OptimizerConfig)

    def uses_reference(self) -> bool:
        """Whether a reference model is needed: a KL term, or a loss that reads reference logprobs."""
        return self.reference_in_loss or self.kl_loss_fn != "none" or self.kl_penalty_fn != "none"


@dataclass
class PPOConfig(AlgorithmConfig):
    """PPO with a critic (critic_model_path + value head, trainer.critic.*): GAE in the trainer, clipped losses."""

    use_critic: ClassVar[bool] = True
    compute_advantage_in_trainer: ClassVar[bool] = True
    algorithm_type: AlgorithmType = AlgorithmType.ppo
    repeat_times: int = 1
    advantage_fn: Optional[str] = "ppo"


@dataclass
class GRPOConfig(AlgorithmConfig):
    """GRPO: group-normalised rewards as advantages (explorer-side), PPO-clip loss, k2 KL loss."""

    algorithm_type: AlgorithmType = AlgorithmType.grpo


@dataclass
class OPMDConfig(AlgorithmConfig):
    """Online policy mirror descent: mean-baseline advantages, OPMD loss."""

    algorithm_type: AlgorithmType = AlgorithmType.opmd
    advantage_fn: Optional[str] = "opmd"
    policy_loss_fn: str = "opmd"


@dataclass
class DPOConfig(AlgorithmConfig):
    """Direct preference optimisation on chosen/rejected pairs read from a dataset."""

    reference_in_loss: ClassVar[bool] = True
    schema: ClassVar[DataSchema] = DataSchema.dpo
    trains_from_dataset: ClassVar[bool] = True
    rows_per_example: ClassVar[int] = 2  # (chosen, rejected)
    algorithm_type: AlgorithmType = AlgorithmType.dpo
    advantage_fn: Optional[str] = None
    policy_loss_fn: str = "dpo"


@dataclass
class SFTConfig(AlgorithmConfig):
    """Supervised fine-tuning on a dataset of prompts and responses."""

    schema: ClassVar[DataSchema] = DataSchema.sft
    trains_from_dataset: ClassVar[bool] = True
    algorithm_type: AlgorithmType = AlgorithmType.sft
    repeat_times: int = 1
    advantage_fn: Optional[str] = None
    kl_loss_fn: str = "none"
    policy_loss_fn: str = "sft"
    entropy_loss_fn: str = "none"


@dataclass
class MixConfig(AlgorithmConfig):
    """GRPO on rollouts mixed with an SFT loss on expert data (mu, expert_data_ratio)."""

    algorithm_type: AlgorithmType = AlgorithmType.mix
    repeat_times: int = 8
    sample_strategy: str = "mix"
    policy_loss_fn: str = "mix"
    entropy_loss_fn: str = "mix"


@dataclass
class RLOOConfig(AlgorithmConfig):
    """REINFORCE leave-one-out baseline, computed in the trainer."""

    compute_advantage_in_trainer: ClassVar[bool] = True
    algorithm_type: AlgorithmType = AlgorithmType.rloo
    advantage_fn: Optional[str] = "rloo"


@dataclass
class ReinforcePlusPlusConfig(AlgorithmConfig):
    """REINFORCE++: discounted returns whitened over the batch, computed in the trainer."""

    compute_advantage_in_trainer: ClassVar[bool] = True
    algorithm_type: AlgorithmType = AlgorithmType.reinforceplusplus
    advantage_fn: Optional[str] = "reinforceplusplus"


@dataclass
class GSPOConfig(AlgorithmConfig):
    """Group sequence policy optimisation: GRPO advantages, sequence-level ratio clipping."""

    algorithm_type: AlgorithmType = AlgorithmType.gspo
    policy_loss_fn: str = "gspo"


@dataclass
class CISPOConfig(AlgorithmConfig):
    """Clipped importance-sampling-weight policy optimisation."""

    algorithm_type: AlgorithmType = AlgorithmType.cispo
    policy_loss_fn: str = "cispo"


@dataclass
class TOPRConfig(AlgorithmConfig):
    """Tapered off-policy REINFORCE: raw-reward advantages, truncated ratio on negatives."""

    algorithm_type: AlgorithmType = AlgorithmType.topr
    advantage_fn: Optional[str] = "reinforce"
    policy_loss_fn: str = "topr"


@dataclass
class AsymREConfig(AlgorithmConfig):
    """Asymmetric REINFORCE: baseline shifted below the group mean, no KL."""

    algorithm_type: AlgorithmType = AlgorithmType.asymre
    advantage_fn: Optional[str] = "asymre"
    kl_loss_fn: str = "none"
    policy_loss_fn: str = "opmd"
    entropy_loss_fn: str = "none"


@dataclass
class SPPOConfig(AlgorithmConfig):
    """Self-play-style policy optimisation with a ratio window, no KL."""

    algorithm_type: AlgorithmType = AlgorithmType.sppo
    advantage_fn: Optional[str] = "opmd"
    kl_loss_fn: str = "none"
    policy_loss_fn: str = "sppo"
    entropy_loss_fn: str = "none"


@dataclass
class RAFTConfig(AlgorithmConfig):
    """Reward-ranked fine-tuning: the SFT loss on each group's best-rewarded rollouts (kept by advantage_fn raft)."""

    algorithm_type: AlgorithmType = AlgorithmType.raft
    repeat_times: int = 1
    advantage_fn: Optional[str] = "raft"
    kl_loss_fn: str = "none"
    policy_loss_fn: str = "sft"
    entropy_loss_fn: str = "none"


@dataclass
class SAPOConfig(AlgorithmConfig):
    """Soft adaptive policy optimisation: GRPO advantages, sigmoid-gated ratio."""

    algorithm_type: AlgorithmType = AlgorithmType.sapo
    policy_loss_fn: str = "sapo"


def _clip_higher() -> Dict[str, Any]:
    """DAPO's PPO arguments: a wider upper clip (0.28) than lower (0.2), losses averaged over all batch tokens."""
    return {"clip_range_low": 0.2, "clip_range_high": 0.28, "loss_agg_mode": "token-mean"}


@dataclass
class DAPOConfig(AlgorithmConfig):
    """DAPO: dynamic sampling (flat groups dropped, step topped up), clip-higher, token-mean, overlong shaping."""

    algorithm_type: AlgorithmType = AlgorithmType.dapo
    advantage_fn: Optional[str] = "dapo"
    kl_loss_fn: str = "none"
    entropy_loss_fn: str = "none"
    policy_loss_fn_args: Dict[str, Any] = field(default_factory=_clip_higher)


@dataclass
class MultiStepGRPOConfig(AlgorithmConfig):
    """GRPO over multi-turn runs: each run's last-step reward group-normalised and broadcast to all its steps
    (per-turn experiences of trinity.explorer.dialogue, one run id per trajectory)."""

    algorithm_type: AlgorithmType = AlgorithmType.multi_step_grpo
    repeat_times: int = 8
    advantage_fn: Optional[str] = "step_wise_grpo"


@dataclass
class OnPolicyDistillConfig(AlgorithmConfig):
    """On-policy distillation: teacher-minus-student logprobs as advantages (teacher: explorer.auxiliary_models[0])."""

    compute_advantage_in_trainer: ClassVar[bool] = True
    uses_teacher: ClassVar[bool] = True
    algorithm_type: AlgorithmType = AlgorithmType.on_policy_distill
    repeat_times: int = 8
    advantage_fn: Optional[str] = "on_policy_distill"
    kl_loss_fn: str = "none"
    entropy_loss_fn: str = "none"


ALGORITHM_SCHEMAS = {
    cls.algorithm_type: cls
    for cls in (
        PPOConfig,
        GRPOConfig,
        OPMDConfig,
        DPOConfig,
        SFTConfig,
        MixConfig,
        RLOOConfig,
        ReinforcePlusPlusConfig,
        GSPOConfig,
        CISPOConfig,
        TOPRConfig,
        AsymREConfig,
        SPPOConfig,
        RAFTConfig,
        SAPOConfig,
        DAPOConfig,
        MultiStepGRPOConfig,
        OnPolicyDistillConfig,
    )
}
