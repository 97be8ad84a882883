"""Studio entries of the global and model keys, the LoRA adapter, the cluster and its device split (seed path:
`trinity.manager.config_registry.model_config_manager`)."""

import streamlit as st

from trinity.studio import entries
from trinity.studio.items import item_list
from trinity.studio.registry.registry import CONFIG_GENERATORS as CG
from trinity.studio.visibility import use_critic

set_total_gpu_num = entries.derived(CG, "set_total_gpu_num", "cluster.total_gpu_num", label="Total devices")
set_trainer_gpu_num = entries.derived(CG, "set_trainer_gpu_num", "cluster.trainer_gpu_num", label="Trainer devices")
set_project = entries.field(CG, "set_project")
set_exp_name = entries.field(CG, "set_exp_name", label="Experiment name")
set_checkpoint_root_dir = entries.field(CG, "set_checkpoint_root_dir")
check_checkpoint_root_dir = entries.check(CG, "check_checkpoint_root_dir")
set_monitor_type = entries.field(
    CG, "set_monitor_type", help_extra="wandb and mlflow read their API keys from the environment (e.g. WANDB_API_KEY)."
)
set_log_level = entries.field(CG, "set_log_level")
set_model_group = entries.group(
    CG, "set_model_group", "model", label="Model preset", help_text="tiny builds a small random-init model locally."
)
set_model_path = entries.field(
    CG, "set_model_path", help_extra="With the tiny preset an empty path builds the tiny model."
)
check_model_path = entries.check(CG, "check_model_path")
set_critic_model_path = entries.field(CG, "set_critic_model_path", visible=use_critic)
set_max_prompt_tokens = entries.field(CG, "set_max_prompt_tokens")
set_min_response_tokens = entries.field(CG, "set_min_response_tokens")
set_max_response_tokens = entries.field(CG, "set_max_response_tokens")
set_max_model_len = entries.field(CG, "set_max_model_len")
# one adapter per run: validation reports a second entry (derived is_dummy is no widget)
LORA_FIELDS = (
    "name",
    "path",
    "base_model_name",
    "lora_rank",
    "lora_alpha",
    "lora_dtype",
    "target_modules",
    "exclude_modules",
)
set_lora_configs = item_list(
    CG, "set_lora_configs", LORA_FIELDS, add_label="Add LoRA adapter", path="model.lora_configs"
)
set_node_num = entries.field(CG, "set_node_num")
set_gpu_per_node = entries.field(CG, "set_gpu_per_node")
set_cpu_devices_per_node = entries.field(
    CG,
    "set_cpu_devices_per_node",
    path="cluster.cpu_devices_per_node",
    visible=lambda: st.session_state.get("gpu_per_node") == 0,
)
