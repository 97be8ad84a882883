"""Studio entries of the buffer: batch sizes, the taskset, eval tasksets, the experience buffer and the
sft/dpo dataset (seed path: `trinity.manager.config_registry.buffer_config_manager`)."""

from typing import Any

from trinity.config.buffer import PRIORITY_FN_ARGS, PriorityFn
from trinity.config.fields import field_infos
from trinity.studio import entries
from trinity.studio.items import item_list
from trinity.studio.registry.registry import CONFIG_GENERATORS as CG
from trinity.studio.values import parse_json_mapping
from trinity.studio.visibility import data_schema, explorer_visible, offline, replay_enabled


def parse_priority_fn_args(text: Any) -> dict:
    """The page's JSON text of replay_buffer.priority_fn_args as a dict (ValueError says what is wrong)."""
    return parse_json_mapping(text)


def _priority_args_help() -> str:
    lines = []
    for fn in PriorityFn:
        args = ", ".join(
            f"{name} (default {info.default}): {info.help}" for name, info in field_infos(PRIORITY_FN_ARGS[fn]).items()
        )
        lines.append(f"**{fn.value}**: {args}")
    return "Arguments as a JSON object; missing ones take the defaults.\n\n" + "\n\n".join(lines)


def _dataset(kind: str):
    return lambda: data_schema().value == kind


set_total_epochs = entries.field(CG, "set_total_epochs")
set_total_steps = entries.field(CG, "set_total_steps")
set_explore_batch_size = entries.field(CG, "set_explore_batch_size", visible=explorer_visible)
set_train_batch_size = entries.field(
    CG, "set_train_batch_size", help_extra="Leave it empty to use batch_size x repeat_times."
)
check_train_batch_size = entries.check(CG, "check_train_batch_size")
set_buffer_max_retry_times = entries.field(CG, "set_buffer_max_retry_times")
set_max_retry_interval = entries.field(CG, "set_max_retry_interval")
set_taskset_path = entries.field(CG, "set_taskset_path", visible=explorer_visible)
check_taskset_path = entries.check(CG, "check_taskset_path")
set_taskset_args = entries.composite(CG, "set_taskset_args", visible=explorer_visible)
set_eval_tasksets = item_list(
    CG,
    "set_eval_tasksets",
    (
        "name",
        "path",
        "subset_name",
        "split",
        "format.prompt_key",
        "format.response_key",
        "rollout_args.temperature",
        "rollout_args.logprobs",
        "rollout_args.n",
        "workflow_type",
        "reward_fn_type",
    ),
    add_label="Add eval taskset",
    new_values=lambda index: {"name": f"eval_{index}"},
    visible=explorer_visible,
)
set_default_workflow_type = entries.field(CG, "set_default_workflow_type", visible=explorer_visible)
set_default_eval_workflow_type = entries.field(CG, "set_default_eval_workflow_type", visible=explorer_visible)
set_default_reward_fn_type = entries.field(CG, "set_default_reward_fn_type", visible=explorer_visible)
set_storage_type = entries.field(CG, "set_storage_type")
set_enable_replay_buffer = entries.field(CG, "set_enable_replay_buffer", visible=lambda: not offline())
set_reuse_cooldown_time = entries.field(CG, "set_reuse_cooldown_time", visible=replay_enabled)
set_priority_fn = entries.field(CG, "set_priority_fn", visible=replay_enabled)
set_priority_fn_args = entries.field(
    CG, "set_priority_fn_args", visible=replay_enabled, help_extra=_priority_args_help()
)
set_experience_buffer_path = entries.field(
    CG,
    "set_experience_buffer_path",
    label=lambda: "Dataset path" if offline() else "Experience buffer path",
    help_extra="sft/dpo: the dataset to train on; otherwise empty means a file or table under the job dir.",
)
check_experience_buffer_path = entries.check(CG, "check_experience_buffer_path")
set_dpo_dataset_kwargs = entries.composite(CG, "set_dpo_dataset_kwargs", visible=_dataset("dpo"))
set_sft_dataset_kwargs = entries.composite(CG, "set_sft_dataset_kwargs", visible=_dataset("sft"))
set_buffer_group = entries.group(
    CG,
    "set_buffer_group",
    "buffer",
    label="Buffer preset",
    help_text="Kept from a loaded config; storage_type sets the storage.",
)
