"""The task record: one taskset row plus everything a workflow needs to roll it out and score it."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from trinity.config.buffer import RolloutArgs


@dataclass
class Task:
    raw: Dict[str, Any]  # the row as read, all columns
    workflow_type: str
    reward_fn_type: str
    rollout_args: RolloutArgs
    prompt: Optional[str] = None  # plaintext tasksets: the prompt text (no chat template applied)
    messages: Optional[List[Dict[str, Any]]] = None  # messages tasksets: the chat, system prompt first
    system_prompt: Optional[str] = None  # the taskset's system prompt (already inside `messages`)
    answer: Any = None  # the reference answer (format.response_key), None when that key is empty
    workflow_args: Dict[str, Any] = field(default_factory=dict)
    reward_fn_args: Dict[str, Any] = field(default_factory=dict)
    is_eval: bool = False
    taskset: str = ""  # the taskset's name
    index: int = 0  # row of the taskset
    epoch: int = 0  # pass over the taskset this read belongs to

    @property
    def task_id(self) -> str:
        """Stable across epochs; the explore step (Experience.batch_id) tells repeated reads apart."""
        return str(self.index)

    @property
    def repeat_times(self) -> int:
        """Responses to sample for this task."""
        return self.rollout_args.n or 1
