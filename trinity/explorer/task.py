"""The task a workflow runs: what to ask, the reference answer, which workflow and reward, how to sample.

Workflows and the runner take a `RolloutTask`; `as_rollout_task` accepts one, a plain dict with the
same keys, or the taskset reader's record (`trinity.buffer.task.Task`: prompt or messages,
workflow_type, reward_fn_type, a RolloutArgs dataclass), read by attribute.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

Messages = List[Dict[str, str]]


@dataclass
class RolloutTask:
    task_id: str
    question: Union[str, Messages]  # plaintext prompt, or chat messages (role/content dicts)
    answer: Optional[str] = None  # reference answer the reward function compares against
    workflow: str = "math_workflow"
    reward_fn: str = "math_reward"
    repeat_times: int = 1  # responses per task (rollout_args.n of the taskset)
    rollout_args: Dict[str, Any] = field(default_factory=dict)  # temperature, top_p, top_k, max_tokens, ...
    workflow_args: Dict[str, Any] = field(default_factory=dict)
    reward_fn_args: Dict[str, Any] = field(default_factory=dict)
    system_prompt: Optional[str] = None  # given: the prompt is formatted as a chat
    is_eval: bool = False
    batch_id: str = ""  # explore step (or "<step>/<eval taskset>") the task belongs to

    def __post_init__(self) -> None:
        self.task_id = str(self.task_id)
        if not isinstance(self.question, (str, list)) or not self.question:
            raise ValueError(f"task {self.task_id}: question must be a non-empty string or message list")
        if self.repeat_times < 1:
            raise ValueError(f"task {self.task_id}: repeat_times must be >= 1, got {self.repeat_times}")

    @property
    def is_chat(self) -> bool:
        return isinstance(self.question, list) or self.system_prompt is not None

    def messages(self) -> Messages:
        """The prompt as chat messages (the system prompt first when given)."""
        messages = (
            list(self.question) if isinstance(self.question, list) else [{"role": "user", "content": self.question}]
        )
        if self.system_prompt is not None:
            messages = [{"role": "system", "content": self.system_prompt}, *messages]
        return messages

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RolloutTask":
        data = dict(data)
        for alias in ("messages", "prompt"):
            if alias in data and "question" not in data:
                data["question"] = data.pop(alias)
        if "repeat_times" not in data:  # a taskset row carries its response count as rollout_args.n
            data["repeat_times"] = (data.get("rollout_args") or {}).get("n") or 1
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"task {data.get('task_id')!r}: unknown keys {unknown}; known: {sorted(known)}")
        return cls(**data)


def as_rollout_task(task: Any) -> RolloutTask:
    if isinstance(task, RolloutTask):
        return task
    if isinstance(task, Mapping):
        return RolloutTask.from_dict(task)
    if hasattr(task, "workflow_type") and hasattr(task, "reward_fn_type"):
        return _from_record(task)
    raise TypeError(f"cannot make a task of {type(task).__name__}: pass a RolloutTask, a dict or a taskset Task")


def _from_record(task: Any) -> RolloutTask:
    """A taskset reader's record. Its `messages` already hold the system prompt, so it is not added twice."""
    rollout = task.rollout_args
    rollout = dataclasses.asdict(rollout) if dataclasses.is_dataclass(rollout) else dict(rollout or {})
    messages = task.messages
    return RolloutTask(
        task_id=task.task_id,
        question=list(messages) if messages else task.prompt,
        answer=None if task.answer is None else str(task.answer),
        workflow=task.workflow_type,
        reward_fn=task.reward_fn_type,
        repeat_times=task.repeat_times,
        rollout_args=rollout,
        workflow_args=dict(task.workflow_args),
        reward_fn_args=dict(task.reward_fn_args),
        system_prompt=None if messages else task.system_prompt,
        is_eval=task.is_eval,
    )
