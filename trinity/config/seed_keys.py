"""Where each config entry of the seed's `config_registry` (`set_<name>` / `check_<name>`) lives here.

The seed names the Studio's entries; this table maps every one of them to the schema field(s) it
edits. The Studio builds its entries from it and the config reference lists it; the field's default,
type, range and help always come from the schema itself. Where our default deliberately differs from
the original system's, `documented` keeps the original's (the reference shows both) and `note` says why.
The original's documented defaults as a whole are a test oracle: tests/seed_defaults.py.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from trinity.config.fields import FieldInfo, field_infos, nested_dataclass
from trinity.config.functions import REGISTRIES
from trinity.config.root import Config
from trinity.config.store import SCHEMAS

# group -> the schema option a path resolves against when the entry names no variant
DEFAULT_SCHEMAS = {"algorithm": "grpo", "buffer": "buffer", "explorer": "hf", "model": "hf", "trainer": "fsdp"}


@dataclass(frozen=True)
class SeedKey:
    """One seed entry. kind: field (one path), composite (several paths), derived (read-only value),
    check (a validation rule; `paths` are the keys whose problems it reports), ui (no config value)."""

    function: str  # the seed's function name: set_<config name>, check_<config name>, get_..., ...
    module: str
    kind: str
    paths: Tuple[str, ...] = ()
    variant: Dict[str, str] = field(default_factory=dict)
    note: str = ""
    documented: Dict[str, Any] = field(default_factory=dict)  # path -> the original's default, where ours differs


def resolve_field(path: str, variant: Optional[Dict[str, str]] = None) -> FieldInfo:
    """The schema field at a dotted path; `variant` picks group options ({'trainer': 'fsdp2'}) and
    selected functions ({'policy_loss_fn': 'dpo'}) for paths that only exist under them."""
    variant = variant or {}
    parts = path.split(".")
    if parts[0] == "algorithm" and len(parts) == 3 and parts[1].endswith("_args"):
        fn_key = parts[1][: -len("_args")]
        return field_infos(REGISTRIES[fn_key].resolve(variant[fn_key]).args)[parts[2]]
    cls: type = Config
    for index, part in enumerate(parts):
        info = field_infos(cls)[part]
        if index == len(parts) - 1:
            return info
        if index == 0 and part in SCHEMAS:
            cls = SCHEMAS[part][variant.get(part, DEFAULT_SCHEMAS[part])]
        else:
            child = nested_dataclass(info.type)
            if child is None:
                raise KeyError(f"{'.'.join(parts[: index + 1])} is not a section")
            cls = child
    raise KeyError(path)


_SAME = object()  # marker: our default is the documented one


def _field(module, name, path, variant=None, documented=_SAME, note=""):
    differs = {} if documented is _SAME else {path: documented}
    return SeedKey(f"set_{name}", module, "field", (path,), variant or {}, note, differs)


def _composite(module, name, paths, documented=None, note=""):
    return SeedKey(f"set_{name}", module, "composite", tuple(paths), {}, note, documented or {})


def _derived(module, function, path, note):
    return SeedKey(function, module, "derived", (path,), note=note)


def _check(module, name, *paths, note):
    return SeedKey(f"check_{name}", module, "check", tuple(paths), note=note)


def _ui(module, function, note):
    return SeedKey(function, module, "ui", note=note)


M, A, B, E, T = "model", "algorithm", "buffer", "explorer", "trainer"
TS, EB = "buffer.explorer_input.taskset", "buffer.trainer_input.experience_buffer"
RM, FS, MG = "explorer.rollout_model", "trainer.fsdp_config", "trainer.megatron"
OTC = "trainer.megatron.override_transformer_config"
MEGATRON = {"trainer": "megatron"}

SEED_KEYS = [
    # model_config_manager
    _derived(M, "set_total_gpu_num", "cluster.total_gpu_num", "node_num x devices per node"),
    _derived(
        M, "set_trainer_gpu_num", "cluster.trainer_gpu_num", "devices left after the rollout and auxiliary engines"
    ),
    _field(M, "project", "project"),
    _field(M, "exp_name", "name"),
    _field(M, "checkpoint_root_dir", "checkpoint_root_dir"),
    _check(M, "checkpoint_root_dir", "checkpoint_root_dir", note="given; relative paths are made absolute"),
    _field(M, "monitor_type", "monitor.monitor_type"),
    _field(M, "log_level", "log.level"),
    _field(M, "model_path", "model.model_path"),
    _check(
        M, "model_path", "model.model_path", note="given (model=tiny derives it), and existing when it is a local path"
    ),
    _field(M, "critic_model_path", "model.critic_model_path"),
    _field(M, "max_prompt_tokens", "model.max_prompt_tokens"),
    _field(M, "min_response_tokens", "model.min_response_tokens"),
    _field(M, "max_response_tokens", "model.max_response_tokens"),
    _field(M, "max_model_len", "model.max_model_len"),
    _field(M, "node_num", "cluster.node_num"),
    _field(
        M, "gpu_per_node", "cluster.gpu_per_node", documented=8, note="0 detects local GPUs and falls back to CPU mode"
    ),
    # algorithm_config_manager
    _field(A, "algorithm_type", "algorithm.algorithm_type", note="chosen with the algorithm group: algorithm=NAME"),
    _field(A, "repeat_times", "algorithm.repeat_times"),
    _field(A, "sample_strategy", "algorithm.sample_strategy"),
    _field(
        A,
        "expert_data_ratio_in_sample_strategy",
        "algorithm.sample_strategy_args.expert_data_ratio",
        {"sample_strategy": "mix"},
    ),
    _field(A, "advantage_fn", "algorithm.advantage_fn"),
    _field(A, "gamma_in_advantage_fn", "algorithm.advantage_fn_args.gamma", {"advantage_fn": "ppo"}),
    _field(A, "lam_in_advantage_fn", "algorithm.advantage_fn_args.lam", {"advantage_fn": "ppo"}),
    _field(A, "epsilon_in_advantage_fn", "algorithm.advantage_fn_args.epsilon", {"advantage_fn": "grpo"}),
    _field(A, "opmd_baseline_in_advantage_fn", "algorithm.advantage_fn_args.opmd_baseline", {"advantage_fn": "opmd"}),
    _field(A, "tau_in_advantage_fn", "algorithm.advantage_fn_args.tau", {"advantage_fn": "opmd"}),
    _field(A, "kl_loss_fn", "algorithm.kl_loss_fn"),
    _field(A, "kl_coef_in_kl_loss_fn", "algorithm.kl_loss_fn_args.kl_coef", {"kl_loss_fn": "k2"}),
    _field(A, "kl_penalty_fn", "algorithm.kl_penalty_fn"),
    _field(A, "adaptive_in_kl_penalty_fn", "algorithm.kl_penalty_fn_args.adaptive", {"kl_penalty_fn": "k2"}),
    _field(A, "kl_coef_in_kl_penalty_fn", "algorithm.kl_penalty_fn_args.kl_coef", {"kl_penalty_fn": "k2"}),
    _field(A, "policy_loss_fn", "algorithm.policy_loss_fn"),
    _field(A, "clip_range_in_policy_loss_fn", "algorithm.policy_loss_fn_args.clip_range", {"policy_loss_fn": "ppo"}),
    _field(A, "sft_loss_agg_mode", "algorithm.policy_loss_fn_args.loss_agg_mode", {"policy_loss_fn": "sft"}),
    _field(A, "beta_in_policy_loss_fn", "algorithm.policy_loss_fn_args.beta", {"policy_loss_fn": "dpo"}),
    _field(
        A,
        "label_smoothing_in_policy_loss_fn",
        "algorithm.policy_loss_fn_args.label_smoothing",
        {"policy_loss_fn": "dpo"},
    ),
    _field(A, "tau_in_policy_loss_fn", "algorithm.policy_loss_fn_args.tau", {"policy_loss_fn": "opmd"}),
    _field(A, "mu_in_policy_loss_fn", "algorithm.policy_loss_fn_args.mu", {"policy_loss_fn": "mix"}),
    _field(A, "entropy_loss_fn", "algorithm.entropy_loss_fn"),
    _field(
        A,
        "entropy_coef_in_entropy_loss_fn",
        "algorithm.entropy_loss_fn_args.entropy_coef",
        {"entropy_loss_fn": "default"},
    ),
    # buffer_config_manager
    _field(B, "total_epochs", "buffer.total_epochs"),
    _field(B, "total_steps", "buffer.total_steps"),
    _field(B, "explore_batch_size", "buffer.batch_size"),
    _derived(B, "get_train_batch_size", "buffer.train_batch_size", "getter: batch_size x repeat_times unless set"),
    _derived(
        B,
        "get_train_batch_size_per_gpu",
        "buffer.train_batch_size_per_device",
        "getter: train_batch_size / trainer devices",
    ),
    _field(B, "train_batch_size", "buffer.train_batch_size"),
    _check(B, "train_batch_size", "buffer.train_batch_size", note="splits evenly across the trainer devices"),
    _field(B, "buffer_max_retry_times", f"{EB}.max_retry_times"),
    _field(B, "max_retry_interval", f"{EB}.max_retry_interval"),
    _field(B, "taskset_path", f"{TS}.path", documented="", note="empty is null"),
    _check(B, "taskset_path", f"{TS}.path", note="given for RL algorithms"),
    _composite(
        B,
        "taskset_args",
        (
            f"{TS}.subset_name",
            f"{TS}.split",
            f"{TS}.format.prompt_key",
            f"{TS}.format.response_key",
            f"{TS}.rollout_args.temperature",
            f"{TS}.rollout_args.logprobs",
        ),
        documented={f"{TS}.rollout_args.temperature": 1.0},
        note="an empty temperature is the rollout model's (explorer.rollout_model, then model.temperature)",
    ),
    _field(B, "eval_tasksets", "buffer.explorer_input.eval_tasksets"),
    _field(B, "default_workflow_type", "buffer.explorer_input.default_workflow_type"),
    _field(B, "default_eval_workflow_type", "buffer.explorer_input.default_eval_workflow_type"),
    _field(B, "default_reward_fn_type", "buffer.explorer_input.default_reward_fn_type"),
    _field(B, "storage_type", f"{EB}.storage_type"),
    _field(B, "enable_replay_buffer", f"{EB}.replay_buffer.enable"),
    _field(B, "reuse_cooldown_time", f"{EB}.replay_buffer.reuse_cooldown_time"),
    _field(B, "priority_fn", f"{EB}.replay_buffer.priority_fn"),
    _ui(B, "parse_priority_fn_args", "parses the page's JSON text into replay_buffer.priority_fn_args"),
    _field(
        B,
        "priority_fn_args",
        f"{EB}.replay_buffer.priority_fn_args",
        documented="",
        note="a dict; missing args take the function's defaults",
    ),
    _field(B, "experience_buffer_path", f"{EB}.path", documented="", note="empty is null"),
    _check(B, "experience_buffer_path", f"{EB}.path", note="given for sft and dpo"),
    _composite(
        B,
        "dpo_dataset_kwargs",
        (
            f"{EB}.subset_name",
            f"{EB}.split",
            f"{EB}.format.prompt_type",
            f"{EB}.format.prompt_key",
            f"{EB}.format.chosen_key",
            f"{EB}.format.rejected_key",
        ),
        documented={f"{EB}.format.prompt_type": "plaintext"},
        note="empty prompt_type means plaintext for dpo",
    ),
    _composite(
        B,
        "sft_dataset_kwargs",
        (
            f"{EB}.subset_name",
            f"{EB}.split",
            f"{EB}.format.prompt_type",
            f"{EB}.format.prompt_key",
            f"{EB}.format.response_key",
            f"{EB}.format.messages_key",
        ),
        documented={f"{EB}.format.prompt_type": "messages"},
        note="empty prompt_type means messages for sft",
    ),
    # explorer_config_manager
    _ui(E, "explorer_visible", "shows explorer entries only when mode is both"),
    _field(E, "runner_per_model", "explorer.runner_per_model"),
    _field(E, "eval_interval", "explorer.eval_interval"),
    _field(E, "engine_num", f"{RM}.engine_num"),
    _field(E, "tensor_parallel_size", f"{RM}.tensor_parallel_size"),
    _check(
        E,
        "tensor_parallel_size",
        f"{RM}.engine_num",
        f"{RM}.tensor_parallel_size",
        "cluster.trainer_gpu_num",
        note="leave at least one device for the trainer, and whole nodes when it spans several",
    ),
    _field(E, "enforce_eager", f"{RM}.enforce_eager"),
    _field(E, "enable_prefix_caching", f"{RM}.enable_prefix_caching"),
    _field(E, "enable_chunked_prefill", f"{RM}.enable_chunked_prefill"),
    _field(E, "gpu_memory_utilization", f"{RM}.gpu_memory_utilization"),
    _field(E, "dtype", f"{RM}.dtype"),
    _field(E, "seed", f"{RM}.seed"),
    _field(E, "enable_thinking", f"{RM}.enable_thinking"),
    _field(E, "enable_history", f"{RM}.enable_history"),
    _field(E, "enable_openai_api", f"{RM}.enable_openai_api"),
    _field(E, "enable_auto_tool_choice", f"{RM}.enable_auto_tool_choice"),
    _field(E, "tool_call_parser", f"{RM}.tool_call_parser"),
    _field(E, "reasoning_parser", f"{RM}.reasoning_parser"),
    _field(E, "auxiliary_models", "explorer.auxiliary_models"),
    _check(
        E,
        "auxiliary_models",
        "explorer.auxiliary_models",
        "cluster.trainer_gpu_num",
        note="each has a model_path and the trainer keeps at least one device",
    ),
    _field(
        E,
        "sync_method",
        "synchronizer.sync_method",
        documented="nccl",
        note="empty derives it from the mode (nccl in both, memory in colocate, checkpoint otherwise)",
    ),
    _field(E, "sync_style", "synchronizer.sync_style"),
    _field(E, "sync_interval", "synchronizer.sync_interval"),
    _field(E, "sync_timeout", "synchronizer.sync_timeout"),
    # trainer_config_manager
    _derived(T, "set_trainer_gpu_num_display", "cluster.trainer_gpu_num", "shown read-only"),
    _ui(T, "use_critic", "true when the selected algorithm type has a critic (ppo)"),
    _field(
        T, "trainer_type", "trainer.trainer_type", documented="verl", note="trinity trains with its own torch engine"
    ),
    _field(T, "save_interval", "trainer.save_interval"),
    _field(T, "enable_preview", "trainer.enable_preview", documented=True, note="previews are not logged (unapplied)"),
    _field(T, "actor_grad_clip", "trainer.grad_clip"),
    _composite(
        T,
        "training_args",
        (
            "trainer.balance_batch",
            "trainer.enable_gradient_checkpointing",
            "trainer.use_remove_padding",
            "trainer.use_dynamic_bsz",
            "trainer.use_fused_kernels",
        ),
        documented={"trainer.use_remove_padding": True},
        note="one flag per multiselect option; padding is not removed (unapplied), so it defaults to off",
    ),
    _field(T, "ppo_epochs", "trainer.ppo_epochs"),
    _field(T, "training_strategy", "trainer.trainer_strategy", note="chosen with the trainer group: trainer=NAME"),
    _field(T, "param_offload", f"{FS}.param_offload", note="trainer=megatron: trainer.megatron.param_offload"),
    _field(T, "grad_offload", f"{MG}.grad_offload", MEGATRON),
    _field(
        T, "optimizer_offload", f"{FS}.optimizer_offload", note="trainer=megatron: trainer.megatron.optimizer_offload"
    ),
    _field(T, "forward_prefetch", f"{FS}.forward_prefetch"),
    _field(T, "offload_policy", f"{FS}.offload_policy", {"trainer": "fsdp2"}),
    _field(T, "reshard_after_forward", f"{FS}.reshard_after_forward", {"trainer": "fsdp2"}),
    _field(T, "tensor_model_parallel_size", f"{MG}.tensor_model_parallel_size", MEGATRON),
    _field(T, "pipeline_model_parallel_size", f"{MG}.pipeline_model_parallel_size", MEGATRON),
    _field(T, "virtual_pipeline_model_parallel_size", f"{MG}.virtual_pipeline_model_parallel_size", MEGATRON),
    _field(T, "expert_model_parallel_size", f"{MG}.expert_model_parallel_size", MEGATRON),
    _field(T, "expert_tensor_parallel_size", f"{MG}.expert_tensor_parallel_size", MEGATRON),
    _field(T, "context_parallel_size", f"{MG}.context_parallel_size", MEGATRON),
    _field(T, "sequence_parallel", f"{MG}.sequence_parallel", MEGATRON),
    _field(T, "use_distributed_optimizer", f"{MG}.use_distributed_optimizer", MEGATRON),
    _field(T, "use_dist_checkpointing", f"{MG}.use_dist_checkpointing", MEGATRON),
    _field(T, "dist_checkpointing_path", f"{MG}.dist_checkpointing_path", MEGATRON),
    _field(T, "use_mbridge", f"{MG}.use_mbridge", MEGATRON),
    _field(T, "recompute_granularity", f"{OTC}.recompute_granularity", MEGATRON),
    _field(T, "recompute_modules", f"{OTC}.recompute_modules", MEGATRON),
    _field(T, "recompute_method", f"{OTC}.recompute_method", MEGATRON),
    _field(T, "recompute_num_layers", f"{OTC}.recompute_num_layers", MEGATRON),
    _field(T, "resume_mode", "trainer.resume_mode"),
    _field(T, "resume_from_path", "trainer.resume_from_path"),
    _check(
        T,
        "resume_from_path",
        "trainer.resume_from_path",
        note="an existing .../global_step_N dir when resume_mode=resume_path",
    ),
    _field(T, "impl_backend", "trainer.impl_backend"),
    _field(T, "critic_warmup", "trainer.critic_warmup"),
    _field(T, "default_hdfs_dir", "trainer.default_hdfs_dir"),
    _field(T, "del_local_ckpt_after_load", "trainer.del_local_ckpt_after_load"),
    _field(T, "max_actor_ckpt_to_keep", "trainer.max_actor_ckpt_to_keep"),
    _field(T, "max_critic_ckpt_to_keep", "trainer.max_critic_ckpt_to_keep"),
    _field(
        T,
        "norm_adv_by_std_in_grpo",
        "algorithm.advantage_fn_args.norm_adv_by_std_in_grpo",
        {"advantage_fn": "grpo"},
        note="an argument of the grpo advantage",
    ),
    _derived(
        T,
        "set_use_kl_in_reward",
        "algorithm.kl_penalty_fn",
        "true when kl_penalty_fn is not none (default none: false)",
    ),
    _field(
        T,
        "kl_penalty",
        "algorithm.kl_penalty_fn",
        documented="low_var_kl",
        note="the reward-KL estimator is kl_penalty_fn (kl=k1, mse=k2, abs, low_var_kl); off by default, "
        "as use_kl_in_reward",
    ),
    _field(
        T,
        "kl_ctrl_type",
        "algorithm.kl_penalty_fn_args.adaptive",
        {"kl_penalty_fn": "k2"},
        documented="fixed",
        note="fixed = adaptive false, adaptive = adaptive true",
    ),
    _field(T, "kl_ctrl_coef", "algorithm.kl_penalty_fn_args.kl_coef", {"kl_penalty_fn": "k2"}),
    _field(T, "horizon", "algorithm.kl_penalty_fn_args.horizon", {"kl_penalty_fn": "k2"}),
    _field(T, "target_kl", "algorithm.kl_penalty_fn_args.target_kl", {"kl_penalty_fn": "k2"}),
    _field(T, "actor_ppo_micro_batch_size_per_gpu", "trainer.actor.ppo_micro_batch_size_per_gpu"),
    _field(T, "ref_log_prob_micro_batch_size_per_gpu", "trainer.ref.log_prob_micro_batch_size_per_gpu"),
    _field(T, "actor_ppo_max_token_len_per_gpu", "trainer.actor.ppo_max_token_len_per_gpu"),
    _field(T, "actor_ulysses_sequence_parallel_size", "trainer.actor.ulysses_sequence_parallel_size"),
    _field(T, "actor_entropy_from_logits_with_chunking", "trainer.actor.entropy_from_logits_with_chunking"),
    _field(T, "actor_entropy_checkpointing", "trainer.actor.entropy_checkpointing"),
    _field(T, "actor_lr", "algorithm.optimizer.lr"),
    _field(T, "actor_warmup_style", "algorithm.optimizer.lr_scheduler_type"),
    _field(T, "actor_lr_warmup_steps_ratio", "algorithm.optimizer.lr_warmup_steps_ratio"),
    _field(T, "actor_save_checkpoint", "trainer.actor.checkpoint.save_contents"),
    _field(T, "actor_load_checkpoint", "trainer.actor.checkpoint.load_contents"),
    _field(T, "critic_lr", "trainer.critic.optim.lr"),
    _field(T, "critic_warmup_style", "trainer.critic.optim.lr_scheduler_type"),
    _field(T, "critic_lr_warmup_steps_ratio", "trainer.critic.optim.lr_warmup_steps_ratio"),
    _field(T, "critic_grad_clip", "trainer.critic.grad_clip"),
    _field(T, "critic_cliprange_value", "trainer.critic.cliprange_value"),
    _field(T, "critic_ppo_micro_batch_size_per_gpu", "trainer.critic.ppo_micro_batch_size_per_gpu"),
    _field(T, "critic_ulysses_sequence_parallel_size", "trainer.critic.ulysses_sequence_parallel_size"),
    _field(T, "critic_save_checkpoint", "trainer.critic.checkpoint.save_contents"),
    _field(T, "critic_load_checkpoint", "trainer.critic.checkpoint.load_contents"),
]
