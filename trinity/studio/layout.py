"""Where each entry sits on the page: the essential fields in the beginner mode, every entry (in tabs) in
the expert mode. A row is one `registry.get_configs(...)`: entries hidden for the selection drop out of it."""

from typing import List, Optional

import streamlit as st

from trinity.config.fields import field_infos
from trinity.config.functions import REGISTRIES
from trinity.studio import page
from trinity.studio.entries import ARG_VIEWS, arg_key
from trinity.studio.visibility import explorer_visible, offline, use_critic
from trinity.studio.widgets import render_derived

# function arguments the trainer tab shows in its own rows, so the advanced rows leave them out
SHOWN_ELSEWHERE = ("kl_coef_in_kl_loss_fn", "entropy_coef_in_entropy_loss_fn")


def get_train_batch_size() -> Optional[int]:
    """Experiences per train step as validation derives it (batch_size x repeat_times unless set)."""
    return page.current().derived("buffer.train_batch_size")


def get_train_batch_size_per_gpu() -> Optional[int]:
    """Experiences per trainer device and step, as validation derives it."""
    return page.current().derived("buffer.train_batch_size_per_device")


def beginner(registry) -> None:
    """The essential fields: project, checkpoint dir, model, algorithm, dataset, batch sizes, devices, sync."""
    row = registry.get_configs
    st.header("Global")
    row("project", "exp_name")
    row("checkpoint_root_dir")
    row("monitor_type", "log_level", "save_interval")
    st.header("Model")
    row("model_group", "model_path", "max_model_len", columns_spec=[1, 3, 1])
    st.header("Algorithm")
    row("algorithm_type", "repeat_times", "actor_lr", "critic_lr")
    st.header("Dataset")
    if offline():
        row("experience_buffer_path", "train_batch_size", columns_spec=[3, 1])
        row("dpo_dataset_kwargs")
        row("sft_dataset_kwargs")
    else:
        row("taskset_path", "explore_batch_size", columns_spec=[3, 1])
        row("taskset_args")
        row("default_workflow_type", "default_reward_fn_type")
    row("total_epochs", "total_steps")
    st.header("Resources")
    row("node_num", "gpu_per_node", "cpu_devices_per_node")
    row("engine_num", "tensor_parallel_size")
    row("trainer_gpu_num_display", "actor_ulysses_sequence_parallel_size")
    if explorer_visible():
        st.header("Synchronizer")
        row("sync_method", "sync_style", "sync_interval")


def expert(registry) -> None:
    """Every entry, in tabs; the explorer tab only while the explorer runs."""
    sections = {"Model": _model, "Buffer": _buffer, "Explorer and Synchronizer": _explorer, "Trainer": _trainer}
    if not explorer_visible():
        del sections["Explorer and Synchronizer"]
    names = [*sections, "Other keys"]
    tabs = dict(zip(names, st.tabs(names), strict=True))
    for name, section in sections.items():
        with tabs[name]:
            section(registry)
    with tabs["Other keys"]:
        st.text_area(
            "Other keys (one Hydra override per line)",
            key=page.EXTRA_KEY,
            height=160,
            help="Keys no field above sets, e.g. explorer.max_timeout=600. A loaded file's other keys land here.",
        )
        page.report_problems(page.EXTRA_KEY, [page.EXTRA_KEY, *page.current().extra_keys], registry.unfinished_fields)


def _model(registry) -> None:
    row = registry.get_configs
    row("project", "exp_name")
    row("checkpoint_root_dir")
    row("model_group", "model_path", columns_spec=[1, 4])
    row("critic_model_path")
    row("monitor_type", "log_level", "node_num", "gpu_per_node", "cpu_devices_per_node")
    row("max_prompt_tokens", "max_response_tokens", "min_response_tokens", "max_model_len")
    with st.expander("LoRA adapter", expanded=True):
        row("lora_configs")


def _buffer(registry) -> None:
    row = registry.get_configs
    row("total_epochs", "total_steps", "explore_batch_size", "train_batch_size")
    _batch_row()
    row("default_workflow_type", "default_eval_workflow_type", "default_reward_fn_type")
    if offline():
        with st.expander("Dataset", expanded=True):
            row("experience_buffer_path")
            row("storage_type")
            row("dpo_dataset_kwargs")
            row("sft_dataset_kwargs")
    else:
        with st.expander("Taskset", expanded=True):
            row("taskset_path")
            row("taskset_args")
        with st.expander("Eval tasksets", expanded=True):
            row("eval_tasksets")
        with st.expander("Experience buffer", expanded=True):
            row("storage_type", "experience_buffer_path", columns_spec=[1, 3])
            row("enable_replay_buffer")
            row("reuse_cooldown_time", "priority_fn")
            row("priority_fn_args")
    row("buffer_max_retry_times", "max_retry_interval")


def _batch_row() -> None:
    """The batch sizes validation derives, read-only."""
    per_step, per_device = st.columns(2)
    with per_step:
        render_derived("derived_train_batch_size", get_train_batch_size(), "Train batch size (derived)", "")
    with per_device:
        render_derived(
            "derived_train_batch_size_per_gpu", get_train_batch_size_per_gpu(), "Per trainer device (derived)", ""
        )


def _explorer(registry) -> None:
    row = registry.get_configs
    row("sync_method", "sync_style", "sync_interval", "sync_timeout")
    row("runner_per_model", "eval_interval")
    with st.expander("Rollout model", expanded=True):
        row("explorer_group", "engine_num", "tensor_parallel_size")
        row("total_gpu_num", "trainer_gpu_num")
        row("gpu_memory_utilization", "dtype", "seed")
        row("enforce_eager", "enable_prefix_caching", "enable_chunked_prefill")
        row("enable_thinking", "enable_history")
        row("enable_openai_api", "enable_auto_tool_choice")
        row("tool_call_parser", "reasoning_parser")
    with st.expander("Auxiliary models", expanded=True):
        row("auxiliary_models")


def _trainer(registry) -> None:
    row = registry.get_configs
    row("algorithm_type", "repeat_times", "save_interval")
    row("policy_loss_fn", "advantage_fn", "sample_strategy")
    row("kl_penalty_fn", "use_kl_in_reward", "kl_loss_fn", "kl_coef_in_kl_loss_fn")
    row("entropy_loss_fn", "entropy_coef_in_entropy_loss_fn")
    with st.expander("Advanced algorithm config", expanded=True):
        names = advanced_arg_names(registry)
        for start in range(0, len(names), 3):
            row(*names[start : start + 3])
    row("trainer_type", "enable_preview")
    tabs = st.tabs(["Training", "Actor and reference"] + (["Critic"] if use_critic() else []))
    with tabs[0]:
        _training(registry)
    with tabs[1]:
        _actor(registry)
    if use_critic():
        with tabs[2]:
            _critic(registry)


def _training(registry) -> None:
    row = registry.get_configs
    row("training_args")
    row("ppo_epochs", "training_strategy", "resume_mode", "impl_backend")
    row("resume_from_path")
    row("param_offload", "optimizer_offload", "forward_prefetch")
    row("offload_policy", "reshard_after_forward")
    row("grad_offload", "sequence_parallel", "use_distributed_optimizer")
    row("tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size")
    row("expert_model_parallel_size", "expert_tensor_parallel_size", "context_parallel_size")
    row("use_dist_checkpointing", "dist_checkpointing_path", "use_mbridge")
    row("recompute_granularity", "recompute_method", "recompute_num_layers")
    row("recompute_modules")
    with st.expander("Checkpoints and resume", expanded=False):
        row("critic_warmup")
        row("default_hdfs_dir")
        row("del_local_ckpt_after_load")
        row("max_actor_ckpt_to_keep", "max_critic_ckpt_to_keep")


def _actor(registry) -> None:
    row = registry.get_configs
    row("actor_lr", "actor_warmup_style", "actor_lr_warmup_steps_ratio")
    row("actor_grad_clip", "actor_ulysses_sequence_parallel_size")
    row(
        "actor_ppo_micro_batch_size_per_gpu", "ref_log_prob_micro_batch_size_per_gpu", "actor_ppo_max_token_len_per_gpu"
    )
    row("actor_entropy_from_logits_with_chunking", "actor_entropy_checkpointing")
    row("actor_load_checkpoint")
    row("actor_save_checkpoint")


def _critic(registry) -> None:
    row = registry.get_configs
    row("critic_ppo_micro_batch_size_per_gpu", "critic_ulysses_sequence_parallel_size")
    row("critic_lr", "critic_warmup_style", "critic_lr_warmup_steps_ratio")
    row("critic_grad_clip", "critic_cliprange_value")
    row("critic_load_checkpoint", "critic_save_checkpoint")


def advanced_arg_names(registry) -> List[str]:
    """The entries of the selected functions' arguments, in function order, for the advanced rows: a seed
    name that shows the argument for this selection (e.g. sft_loss_agg_mode) before its generic owner."""
    chosen = page.selection()
    names = []
    for fn_key, functions in REGISTRIES.items():
        name = chosen.function(fn_key)
        if name in (None, "none"):
            continue
        try:
            spec = functions.resolve(name)
        except ValueError:
            continue
        for arg in field_infos(spec.args):
            key = arg_key(fn_key, arg)
            shown = next((n for n in [*ARG_VIEWS.get(key, []), key] if registry.get(n) is not None), None)
            if shown is not None and shown not in SHOWN_ELSEWHERE:
                names.append(shown)
    return names
