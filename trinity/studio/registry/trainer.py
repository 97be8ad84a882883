"""Studio entries of the trainer: strategy and its distribution rows, actor, reference and critic
training, checkpoints and resume (seed path: `trinity.manager.config_registry.trainer_config_manager`).
Several seed names here are other spellings of algorithm fields (kl_penalty, kl_ctrl_*, horizon,
target_kl); they edit the same values."""

from trinity.config.functions import REGISTRIES
from trinity.studio import entries, page
from trinity.studio.entries import arg_key, function_selected
from trinity.studio.registry.registry import CONFIG_GENERATORS as CG
from trinity.studio.visibility import adaptive_kl, use_critic, value

MEGATRON_OFFLOAD = "trainer.megatron"


def _critic(function: str, **options):
    return entries.field(CG, function, visible=use_critic, **options)


set_trainer_gpu_num_display = entries.derived(
    CG, "set_trainer_gpu_num_display", "cluster.trainer_gpu_num", label="Trainer devices"
)
set_trainer_type = entries.field(CG, "set_trainer_type")
set_save_interval = entries.field(CG, "set_save_interval")
set_enable_preview = entries.field(CG, "set_enable_preview")
set_actor_grad_clip = entries.field(CG, "set_actor_grad_clip")
set_training_args = entries.flags(CG, "set_training_args", label="Training args")
set_ppo_epochs = entries.field(CG, "set_ppo_epochs")
set_training_strategy = entries.group(
    CG, "set_training_strategy", "trainer", label="Training strategy", path="trainer.trainer_strategy"
)
set_param_offload = entries.field(CG, "set_param_offload", also=(f"{MEGATRON_OFFLOAD}.param_offload",))
set_grad_offload = entries.field(CG, "set_grad_offload")
set_optimizer_offload = entries.field(CG, "set_optimizer_offload", also=(f"{MEGATRON_OFFLOAD}.optimizer_offload",))
set_forward_prefetch = entries.field(CG, "set_forward_prefetch")
set_offload_policy = entries.field(CG, "set_offload_policy")
set_reshard_after_forward = entries.field(CG, "set_reshard_after_forward")
set_tensor_model_parallel_size = entries.field(CG, "set_tensor_model_parallel_size")
set_pipeline_model_parallel_size = entries.field(CG, "set_pipeline_model_parallel_size")
set_virtual_pipeline_model_parallel_size = entries.field(CG, "set_virtual_pipeline_model_parallel_size")
set_expert_model_parallel_size = entries.field(CG, "set_expert_model_parallel_size")
set_expert_tensor_parallel_size = entries.field(CG, "set_expert_tensor_parallel_size")
set_context_parallel_size = entries.field(CG, "set_context_parallel_size")
set_sequence_parallel = entries.field(CG, "set_sequence_parallel")
set_use_distributed_optimizer = entries.field(CG, "set_use_distributed_optimizer")
set_use_dist_checkpointing = entries.field(CG, "set_use_dist_checkpointing")
set_dist_checkpointing_path = entries.field(CG, "set_dist_checkpointing_path")
set_use_mbridge = entries.field(CG, "set_use_mbridge")
set_recompute_granularity = entries.field(CG, "set_recompute_granularity")
set_recompute_modules = entries.field(CG, "set_recompute_modules")
set_recompute_method = entries.field(CG, "set_recompute_method")
set_recompute_num_layers = entries.field(CG, "set_recompute_num_layers")
set_resume_mode = entries.field(CG, "set_resume_mode")
set_resume_from_path = entries.field(CG, "set_resume_from_path", visible=lambda: value("resume_mode") == "resume_path")
check_resume_from_path = entries.check(CG, "check_resume_from_path")
set_impl_backend = entries.field(CG, "set_impl_backend")
set_critic_warmup = _critic("set_critic_warmup")
set_default_hdfs_dir = entries.field(CG, "set_default_hdfs_dir")
set_del_local_ckpt_after_load = entries.field(CG, "set_del_local_ckpt_after_load")
set_max_actor_ckpt_to_keep = entries.field(CG, "set_max_actor_ckpt_to_keep")
set_max_critic_ckpt_to_keep = _critic("set_max_critic_ckpt_to_keep")
set_norm_adv_by_std_in_grpo = entries.field(
    CG,
    "set_norm_adv_by_std_in_grpo",
    key=arg_key("advantage_fn", "norm_adv_by_std_in_grpo"),
    visible=lambda: function_selected("advantage_fn"),
    shown_for_argument=True,
)
set_use_kl_in_reward = entries.derived(
    CG,
    "set_use_kl_in_reward",
    "algorithm.kl_penalty_fn",
    label="Use KL in reward",
    value=lambda: page.selection().function("kl_penalty_fn") not in (None, "none"),
)
set_kl_penalty = entries.field(
    CG, "set_kl_penalty", key="kl_penalty_fn", options=lambda: REGISTRIES["kl_penalty_fn"].names()
)
set_kl_ctrl_type = entries.field(
    CG,
    "set_kl_ctrl_type",
    key=arg_key("kl_penalty_fn", "adaptive"),
    options=lambda: [False, True],
    format_func=lambda adaptive: "adaptive" if adaptive else "fixed",
    visible=lambda: function_selected("kl_penalty_fn"),
)
set_kl_ctrl_coef = entries.field(
    CG, "set_kl_ctrl_coef", key=arg_key("kl_penalty_fn", "kl_coef"), visible=lambda: function_selected("kl_penalty_fn")
)
set_horizon = entries.field(
    CG,
    "set_horizon",
    key=arg_key("kl_penalty_fn", "horizon"),
    visible=lambda: function_selected("kl_penalty_fn") and adaptive_kl(),
    shown_for_argument=True,
)
set_target_kl = entries.field(
    CG,
    "set_target_kl",
    key=arg_key("kl_penalty_fn", "target_kl"),
    visible=lambda: function_selected("kl_penalty_fn") and adaptive_kl(),
    shown_for_argument=True,
)
set_actor_ppo_micro_batch_size_per_gpu = entries.field(CG, "set_actor_ppo_micro_batch_size_per_gpu")
set_ref_log_prob_micro_batch_size_per_gpu = entries.field(CG, "set_ref_log_prob_micro_batch_size_per_gpu")
set_actor_ppo_max_token_len_per_gpu = entries.field(CG, "set_actor_ppo_max_token_len_per_gpu")
set_actor_ulysses_sequence_parallel_size = entries.field(CG, "set_actor_ulysses_sequence_parallel_size")
set_actor_entropy_from_logits_with_chunking = entries.field(CG, "set_actor_entropy_from_logits_with_chunking")
set_actor_entropy_checkpointing = entries.field(CG, "set_actor_entropy_checkpointing")
set_actor_lr = entries.field(CG, "set_actor_lr")
set_actor_warmup_style = entries.field(CG, "set_actor_warmup_style")
set_actor_lr_warmup_steps_ratio = entries.field(CG, "set_actor_lr_warmup_steps_ratio")
set_actor_save_checkpoint = entries.field(CG, "set_actor_save_checkpoint")
set_actor_load_checkpoint = entries.field(CG, "set_actor_load_checkpoint")
set_critic_lr = _critic("set_critic_lr")
set_critic_warmup_style = _critic("set_critic_warmup_style")
set_critic_lr_warmup_steps_ratio = _critic("set_critic_lr_warmup_steps_ratio")
set_critic_grad_clip = _critic("set_critic_grad_clip")
set_critic_cliprange_value = _critic("set_critic_cliprange_value")
set_critic_ppo_micro_batch_size_per_gpu = _critic("set_critic_ppo_micro_batch_size_per_gpu")
set_critic_ulysses_sequence_parallel_size = _critic("set_critic_ulysses_sequence_parallel_size")
set_critic_save_checkpoint = _critic("set_critic_save_checkpoint")
set_critic_load_checkpoint = _critic("set_critic_load_checkpoint")
