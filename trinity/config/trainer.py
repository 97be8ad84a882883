"""Schema of the `trainer` group: distribution strategy, actor/critic optimisation, checkpoints, resume."""

from dataclasses import dataclass
from typing import List, Optional

from trinity.config.choices import Choice
from trinity.config.fields import setting


class TrainerType(Choice):
    native = "native"


class TrainerStrategy(Choice):
    fsdp = "fsdp"
    fsdp2 = "fsdp2"
    megatron = "megatron"


class ResumeMode(Choice):
    disable = "disable"
    auto = "auto"
    resume_path = "resume_path"


class ImplBackend(Choice):
    torch = "torch"
    triton = "triton"


class SaveHFCheckpoint(Choice):
    last = "last"
    always = "always"
    never = "never"


class CheckpointContent(Choice):
    model = "model"
    hf_model = "hf_model"
    hf_merged_model = "hf_merged_model"  # LoRA only: the base with the adapter merged in (save only)
    optimizer = "optimizer"
    extra = "extra"


class MixedPrecision(Choice):
    auto = "auto"
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"


class LRSchedulerType(Choice):
    constant = "constant"
    cosine = "cosine"


class RecomputeGranularity(Choice):
    selective = "selective"
    full = "full"


class RecomputeMethod(Choice):
    uniform = "uniform"
    block = "block"


class RecomputeModule(Choice):
    core_attn = "core_attn"
    moe_act = "moe_act"
    layernorm = "layernorm"
    mla_up_proj = "mla_up_proj"
    mlp = "mlp"
    moe = "moe"
    shared_experts = "shared_experts"


def _all_contents() -> list:
    return [CheckpointContent.model, CheckpointContent.hf_model, CheckpointContent.optimizer, CheckpointContent.extra]


def _critic_contents() -> list:
    return [CheckpointContent.model, CheckpointContent.optimizer, CheckpointContent.extra]


@dataclass
class ActorCheckpointConfig:
    save_contents: List[CheckpointContent] = setting(
        help="Parts of the actor written to a checkpoint (hf_model and hf_merged_model when save_hf_checkpoint "
        "says; hf_merged_model, with LoRA only, is the base with the adapter merged in, in `huggingface_merged`).",
        factory=_all_contents,
    )
    load_contents: List[CheckpointContent] = setting(
        help="Parts of the actor restored on resume.", factory=_all_contents
    )


@dataclass
class CriticCheckpointConfig:
    save_contents: List[CheckpointContent] = setting(
        help="Parts of the critic written to a checkpoint.", factory=_critic_contents
    )
    load_contents: List[CheckpointContent] = setting(
        help="Parts of the critic restored on resume.", factory=_critic_contents
    )


@dataclass
class ActorConfig:
    ppo_micro_batch_size_per_gpu: int = setting(4, help="Experiences per forward/backward pass on one device.", ge=1)
    ppo_max_token_len_per_gpu: int = setting(
        16384,
        help="Token budget of one micro batch when use_dynamic_bsz is on, counted padded (rows x widest row).",
        ge=1,
    )
    ulysses_sequence_parallel_size: int = setting(
        1,
        help="Devices one sequence is split across.",
        ge=1,
        le=8,
        unapplied="sequence parallelism is not implemented: each sequence stays on one device",
    )
    entropy_from_logits_with_chunking: bool = setting(False, help="Compute entropy in chunks to save memory.")
    entropy_checkpointing: bool = setting(False, help="Recompute entropy in backward instead of storing it.")
    checkpoint: ActorCheckpointConfig = setting(help="What actor checkpoints hold.", factory=ActorCheckpointConfig)


@dataclass
class RefConfig:
    log_prob_micro_batch_size_per_gpu: int = setting(
        8, help="Experiences per reference-model logprob pass on one device.", ge=1
    )


@dataclass
class CriticOptimConfig:
    lr: float = setting(1e-6, help="Learning rate of the critic.", gt=0)
    lr_scheduler_type: LRSchedulerType = setting(LRSchedulerType.constant, help="Critic learning-rate schedule.")
    lr_warmup_steps_ratio: float = setting(0.0, help="Share of steps spent warming the critic lr up.", ge=0, le=1)


@dataclass
class CriticConfig:
    optim: CriticOptimConfig = setting(help="Critic optimiser.", factory=CriticOptimConfig)
    grad_clip: float = setting(1.0, help="Max gradient norm of the critic; 0 disables clipping.", ge=0)
    cliprange_value: float = setting(0.5, help="Clip range of the value loss around old values.", gt=0)
    ppo_micro_batch_size_per_gpu: int = setting(8, help="Experiences per critic pass on one device.", ge=1)
    ulysses_sequence_parallel_size: int = setting(
        1,
        help="Devices one sequence is split across (critic).",
        ge=1,
        le=8,
        unapplied="sequence parallelism is not implemented: each sequence stays on one device",
    )
    checkpoint: CriticCheckpointConfig = setting(help="What critic checkpoints hold.", factory=CriticCheckpointConfig)


@dataclass
class TrainerConfig:
    """Fields every training strategy shares."""

    name: str = setting("trainer", help="Actor name; also names the trainer's meta file in the job directory.")
    trainer_type: TrainerType = setting(TrainerType.native, help="Training engine: trinity's own torch engine.")
    trainer_strategy: TrainerStrategy = setting(
        TrainerStrategy.fsdp, help="How the model is distributed; chosen by the trainer group option."
    )
    save_interval: int = setting(100, help="Train steps between checkpoints; 0 saves only at the end.", ge=0)
    save_hf_checkpoint: SaveHFCheckpoint = setting(
        SaveHFCheckpoint.last, help="When to also export HF safetensors: last checkpoint, always or never."
    )
    enable_preview: bool = setting(
        False,
        help="Log representative samples (min/max reward) while training.",
        unapplied="sample previews are not logged; read responses from a file or sql experience buffer",
    )
    grad_clip: float = setting(1.0, help="Max gradient norm of the actor; 0 disables clipping.", ge=0)
    ppo_epochs: int = setting(1, help="Passes over each train batch (actor and critic).", ge=1)
    balance_batch: bool = setting(True, help="Balance tokens across data-parallel ranks.")
    enable_gradient_checkpointing: bool = setting(True, help="Recompute activations in backward to save memory.")
    use_remove_padding: bool = setting(
        False,
        help="Pack sequences without padding tokens.",
        unapplied="micro batches are padded; use_dynamic_bsz already groups rows of similar length",
    )
    use_dynamic_bsz: bool = setting(
        True,
        help="Form micro batches of similar-length rows by token budget (ppo_max_token_len_per_gpu).",
    )
    use_fused_kernels: bool = setting(
        False,
        help="Use fused logprob/entropy kernels.",
        unapplied="no fused kernels; trainer.actor.entropy_from_logits_with_chunking saves the memory instead",
    )
    mixed_precision: MixedPrecision = setting(
        MixedPrecision.auto,
        help="Compute dtype of training; auto: bfloat16 on CUDA GPUs that support it, else float32.",
    )
    impl_backend: ImplBackend = setting(
        ImplBackend.triton, help="Backend of the fused kernels.", unapplied="there are no fused kernels to run"
    )
    resume_mode: ResumeMode = setting(
        ResumeMode.auto,
        help="auto: latest checkpoint; disable: start fresh (a non-empty job directory gets a timestamped "
        "name, as with continue_from_checkpoint=false); resume_path: resume at the step of resume_from_path.",
    )
    resume_from_path: str = setting(
        "", help="Checkpoint directory (.../global_step_N, any job's) for resume_mode=resume_path."
    )
    critic_warmup: int = setting(0, help="Steps that train only the critic before the actor starts.", ge=0)
    default_hdfs_dir: Optional[str] = setting(
        None,
        help="Remote directory (fsspec URL) checkpoints are copied to.",
        unapplied="checkpoints stay under checkpoint_root_dir; point it at shared storage instead",
    )
    del_local_ckpt_after_load: bool = setting(
        False,
        help="Delete the local checkpoint once it has been loaded.",
        unapplied="checkpoints are pruned by max_actor_ckpt_to_keep / max_critic_ckpt_to_keep",
    )
    max_actor_ckpt_to_keep: Optional[int] = setting(None, help="Newest actor checkpoints kept; empty keeps all.", ge=1)
    max_critic_ckpt_to_keep: Optional[int] = setting(
        None, help="Newest critic checkpoints kept; empty keeps all.", ge=1
    )
    actor: ActorConfig = setting(help="Actor (policy) training.", factory=ActorConfig)
    ref: RefConfig = setting(help="Reference model (used when the algorithm has a KL term).", factory=RefConfig)
    critic: CriticConfig = setting(
        help="Critic (value model) training, for algorithms with a critic.", factory=CriticConfig
    )


@dataclass
class FSDPConfig:
    param_offload: bool = setting(False, help="Keep parameters on CPU between uses.")
    optimizer_offload: bool = setting(False, help="Keep optimizer state on CPU.")
    forward_prefetch: bool = setting(False, help="Prefetch the next all-gather during forward.")
    fsdp_size: int = setting(-1, help="Ranks one shard group spans; -1 means all trainer ranks.", ge=-1)


@dataclass
class FSDP2Config:
    offload_policy: bool = setting(False, help="CPU offload policy: parameters, gradients and optimizer on CPU.")
    reshard_after_forward: bool = setting(True, help="Free gathered parameters after forward (re-gather in backward).")
    forward_prefetch: bool = setting(False, help="Prefetch the next all-gather during forward.")
    fsdp_size: int = setting(-1, help="Ranks one shard group spans; -1 means all trainer ranks.", ge=-1)


@dataclass
class FSDPTrainerConfig(TrainerConfig):
    """FSDP with per-flag offload (param / optimizer)."""

    trainer_strategy: TrainerStrategy = TrainerStrategy.fsdp
    fsdp_config: FSDPConfig = setting(help="Sharding options.", factory=FSDPConfig)


@dataclass
class FSDP2TrainerConfig(TrainerConfig):
    """FSDP2 (`fully_shard`) with a CPU offload policy."""

    trainer_strategy: TrainerStrategy = TrainerStrategy.fsdp2
    fsdp_config: FSDP2Config = setting(help="Sharding options.", factory=FSDP2Config)


@dataclass
class OverrideTransformerConfig:
    recompute_granularity: Optional[RecomputeGranularity] = setting(
        None, help="Activation recompute: selective or full."
    )
    recompute_modules: List[RecomputeModule] = setting(
        help="Modules recomputed when granularity is selective.", factory=lambda: [RecomputeModule.core_attn]
    )
    recompute_method: Optional[RecomputeMethod] = setting(None, help="How layers are grouped for full recompute.")
    recompute_num_layers: Optional[int] = setting(None, help="Layers per recompute group.", ge=1)


@dataclass
class MegatronConfig:
    param_offload: bool = setting(False, help="Keep parameters on CPU between uses.")
    grad_offload: bool = setting(False, help="Keep gradients on CPU.")
    optimizer_offload: bool = setting(False, help="Keep optimizer state on CPU.")
    tensor_model_parallel_size: int = setting(1, help="Tensor-parallel degree.", ge=1)
    pipeline_model_parallel_size: int = setting(1, help="Pipeline-parallel degree.", ge=1)
    virtual_pipeline_model_parallel_size: Optional[int] = setting(None, help="Virtual pipeline stages per rank.", ge=1)
    expert_model_parallel_size: int = setting(1, help="Expert-parallel degree (MoE).", ge=1)
    expert_tensor_parallel_size: Optional[int] = setting(None, help="Tensor-parallel degree inside experts.", ge=1)
    context_parallel_size: int = setting(1, help="Context-parallel degree.", ge=1)
    sequence_parallel: bool = setting(True, help="Shard activations along the sequence with tensor parallel.")
    use_distributed_optimizer: bool = setting(True, help="Shard optimizer state across data-parallel ranks.")
    use_dist_checkpointing: bool = setting(False, help="Write Megatron distributed checkpoints.")
    dist_checkpointing_path: Optional[str] = setting(None, help="Distributed checkpoint to load weights from.")
    use_mbridge: bool = setting(False, help="Convert HF weights with mbridge.")
    override_transformer_config: OverrideTransformerConfig = setting(
        help="Activation recompute settings.", factory=OverrideTransformerConfig
    )


@dataclass
class MegatronTrainerConfig(TrainerConfig):
    """Megatron-style tensor/pipeline/expert parallelism (needs megatron-core and CUDA)."""

    trainer_strategy: TrainerStrategy = TrainerStrategy.megatron
    megatron: MegatronConfig = setting(help="Parallelism and recompute options.", factory=MegatronConfig)
