"""Schema of the `buffer` group: tasksets the explorer reads, and the experience buffer the trainer reads."""

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from trinity.config.algorithm import DataSchema
from trinity.config.choices import Choice
from trinity.config.fields import setting
from trinity.config.model import TOP_LOGPROBS


class StorageType(Choice):
    queue = "queue"
    file = "file"
    sql = "sql"


class PromptType(Choice):
    messages = "messages"
    plaintext = "plaintext"


def default_prompt_type(schema: DataSchema) -> PromptType:
    """How dataset rows hold their prompt when the format leaves it open: dpo pairs as plain text, else chat."""
    return PromptType.plaintext if schema == DataSchema.dpo else PromptType.messages


class PriorityFn(Choice):
    linear_decay = "linear_decay"
    decay_limit_randomization = "decay_limit_randomization"


@dataclass
class LinearDecayArgs:
    """priority = model_version - decay * use_count; always re-inserted after use."""

    decay: float = setting(2.0, help="Priority lost per use.", ge=0)


@dataclass
class DecayLimitRandomizationArgs:
    """linear_decay plus N(0, sigma) noise; re-inserted only while use_count < use_count_limit."""

    decay: float = setting(2.0, help="Priority lost per use.", ge=0)
    use_count_limit: int = setting(3, help="Uses before an experience is dropped; <= 0 means unlimited.")
    sigma: float = setting(0.0, help="Std of the Gaussian noise added to the priority.", ge=0)


PRIORITY_FN_ARGS = {
    PriorityFn.linear_decay: LinearDecayArgs,
    PriorityFn.decay_limit_randomization: DecayLimitRandomizationArgs,
}


@dataclass
class TaskFormatConfig:
    """Where a taskset row keeps its prompt and reference answer."""

    prompt_type: PromptType = setting(
        PromptType.plaintext, help="plaintext: prompt_key holds text; messages: chat list."
    )
    prompt_key: str = setting("question", help="Column with the prompt.")
    response_key: str = setting("answer", help="Column with the reference answer.")
    system_prompt: Optional[str] = setting(None, help="System message put before every prompt.")
    workflow_key: str = setting("", help="Column naming a per-row workflow type (empty: none).")
    reward_fn_key: str = setting("", help="Column naming a per-row reward function (empty: none).")


@dataclass
class RolloutArgs:
    """Sampling arguments of one taskset. Precedence: a value set here, else the rollout model's
    (explorer.rollout_model.*), which is itself the model section's (model.*) when left empty."""

    temperature: Optional[float] = setting(
        None, help="Sampling temperature; empty means explorer.rollout_model.temperature.", ge=0, le=2, auto=True
    )
    top_p: Optional[float] = setting(
        None, help="Nucleus mass; empty means explorer.rollout_model.top_p.", gt=0, le=1, auto=True
    )
    top_k: Optional[int] = setting(None, help="Top-k; empty means explorer.rollout_model.top_k.", ge=-1, auto=True)
    logprobs: int = setting(0, help="Extra top-k logprobs per generated token.", ge=0, le=20, unapplied=TOP_LOGPROBS)
    max_tokens: Optional[int] = setting(
        None, help="Most tokens per response; empty means explorer.rollout_model.max_response_tokens.", ge=1, auto=True
    )
    n: Optional[int] = setting(
        None,
        help="Responses per task; train tasksets always use algorithm.repeat_times, eval default 1.",
        ge=1,
        auto=True,
    )


@dataclass
class TasksetConfig:
    """A set of tasks read with HF datasets from a local json/jsonl/parquet file or dataset name."""

    name: str = setting("taskset", help="Name used in metrics and state files.")
    storage_type: StorageType = setting(
        StorageType.file, help="file: json/jsonl/parquet or dataset name; sql: a table."
    )
    path: Optional[str] = setting(None, help="File, directory or dataset name of the tasks.")
    split: str = setting("train", help="Dataset split.")
    subset_name: Optional[str] = setting(None, help="Dataset subset (config) name.")
    format: TaskFormatConfig = setting(help="Columns of a task row.", factory=TaskFormatConfig)
    rollout_args: RolloutArgs = setting(help="Sampling arguments.", factory=RolloutArgs)
    workflow_type: Optional[str] = setting(None, help="Workflow; empty means the explorer_input default.", auto=True)
    reward_fn_type: Optional[str] = setting(
        None, help="Reward function; empty means the explorer_input default.", auto=True
    )
    workflow_args: Dict[str, Any] = setting(help="Extra arguments for the workflow.", factory=dict)
    reward_fn_args: Dict[str, Any] = setting(help="Extra arguments for the reward function.", factory=dict)


@dataclass
class ExplorerInputConfig:
    taskset: TasksetConfig = setting(help="The training taskset.", factory=TasksetConfig)
    eval_tasksets: List[TasksetConfig] = setting(
        help="Tasksets evaluated every explorer.eval_interval steps.", factory=list
    )
    default_workflow_type: str = setting("math_workflow", help="Workflow of tasksets that name none.")
    default_eval_workflow_type: str = setting("math_workflow", help="Workflow of eval tasksets that name none.")
    default_reward_fn_type: str = setting("math_reward", help="Reward function of tasksets that name none.")


@dataclass
class DatasetFormatConfig:
    """Columns of an SFT or DPO dataset row."""

    prompt_type: Optional[PromptType] = setting(
        None, help="messages or plaintext; empty means messages for sft and plaintext for dpo.", auto=True
    )
    prompt_key: str = setting("prompt", help="Column with the prompt (plaintext).")
    response_key: str = setting("response", help="Column with the response (sft, plaintext).")
    messages_key: str = setting("messages", help="Column with the chat messages (messages).")
    chosen_key: str = setting("chosen", help="Column with the preferred response (dpo).")
    rejected_key: str = setting("rejected", help="Column with the rejected response (dpo).")
    system_prompt: Optional[str] = setting(None, help="System message put before every prompt.")


@dataclass
class ReplayBufferConfig:
    enable: bool = setting(False, help="Serve experiences by priority and allow reuse.")
    priority_fn: PriorityFn = setting(PriorityFn.linear_decay, help="How an experience's priority is computed.")
    reuse_cooldown_time: Optional[float] = setting(
        None, help="Seconds before a used experience may be served again; empty means no reuse.", ge=0, le=1e5
    )
    priority_fn_args: Dict[str, Any] = setting(
        help="Arguments of priority_fn; missing ones take its defaults.", factory=dict
    )


@dataclass
class ExperienceBufferConfig:
    """Where experiences (or, for sft/dpo, dataset rows) wait for the trainer."""

    name: str = setting(
        "experience_buffer", help="Name of the buffer; its queue (actor) or SQL table is named after it."
    )
    storage_type: StorageType = setting(
        StorageType.queue,
        help="queue (in memory: in colocate's device process, else a Ray actor), file (jsonl) or sql.",
    )
    path: Optional[str] = setting(
        None, help="jsonl file or SQLAlchemy URL; sft/dpo: the dataset. Empty means under the job dir.", auto=True
    )
    capacity: int = setting(10000, help="Most experiences a queue holds; writers wait when it is full.", ge=1)
    max_read_timeout: float = setting(1800, help="Seconds a read waits for a full batch.", gt=0)
    max_retry_times: int = setting(3, help="Retries of a failed storage operation.", ge=0)
    max_retry_interval: float = setting(1, help="Seconds between storage retries.", gt=0)
    split: str = setting("train", help="Dataset split (sft/dpo).")
    subset_name: Optional[str] = setting(None, help="Dataset subset (config) name (sft/dpo).")
    format: DatasetFormatConfig = setting(help="Columns of a dataset row (sft/dpo).", factory=DatasetFormatConfig)
    replay_buffer: ReplayBufferConfig = setting(help="Priority replay.", factory=ReplayBufferConfig)


@dataclass
class TrainerInputConfig:
    experience_buffer: ExperienceBufferConfig = setting(
        help="The buffer the trainer samples from.", factory=ExperienceBufferConfig
    )
    auxiliary_buffers: Dict[str, ExperienceBufferConfig] = setting(
        help="Extra datasets by name, e.g. sft_dataset for the mix algorithm.", factory=dict
    )


@dataclass
class BufferConfig:
    batch_size: int = setting(96, help="Tasks per explore step.", ge=1)
    train_batch_size: Optional[int] = setting(
        None, help="Experiences per train step; empty means batch_size * algorithm.repeat_times.", ge=1, auto=True
    )
    train_batch_size_per_device: Optional[int] = setting(None, help="train_batch_size / trainer devices.", derived=True)
    total_epochs: int = setting(20, help="Passes over the taskset (or dataset).", ge=1)
    total_steps: Optional[int] = setting(
        None, help="Explore (or train) steps; when set, total_epochs is ignored.", ge=1
    )
    explorer_input: ExplorerInputConfig = setting(help="What the explorer reads.", factory=ExplorerInputConfig)
    trainer_input: TrainerInputConfig = setting(help="What the trainer reads.", factory=TrainerInputConfig)
