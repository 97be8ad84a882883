"""The experience record: one response (or one turn of it) that the explorer made and the trainer learns from.

Token layout: `tokens` holds prompt + response; per-token fields (`logprobs`, `action_mask`,
`advantages`, `returns`, `teacher_logprobs`) cover the response part only, so each has length
`len(tokens) - prompt_length`. Responses to one task form a group (same `batch_id` and `task_id`,
distinct `run_id`), which is what group advantages (GRPO, RLOO, ...) normalise over.

Two encodings: `to_dict`/`from_dict` (JSON-able, for jsonl files and SQL JSON columns) and
`to_bytes`/`from_bytes` (safetensors, for the queue and SQL blobs: compact and without pickle). `to_bytes`
lays the safetensors format out itself (a length, a JSON header, the raw little-endian data): the
library's writer costs ~5x as much on records this small, and the explorer encodes every row of a step.
"""

import json
import struct
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Optional

import torch
from safetensors.torch import load as load_tensors

from trinity.safetensors_dtypes import TAG_TO_TORCH_NAME

TENSOR_FIELDS = ("tokens", "logprobs", "action_mask", "advantages", "returns", "teacher_logprobs")
DTYPES = {
    "tokens": torch.int64,
    "logprobs": torch.float32,
    "action_mask": torch.bool,
    "advantages": torch.float32,
    "returns": torch.float32,
    "teacher_logprobs": torch.float32,
}
SAFETENSORS_TAGS = {getattr(torch, name[len("torch.") :]): tag for tag, name in TAG_TO_TORCH_NAME.items()}


@dataclass
class Experience:
    tokens: torch.Tensor
    prompt_length: int
    logprobs: Optional[torch.Tensor] = None  # sampling policy's logprob of each response token
    action_mask: Optional[torch.Tensor] = None  # response tokens the loss trains on; None means all
    reward: Optional[float] = None
    advantages: Optional[torch.Tensor] = None  # set when advantages are computed explorer-side
    returns: Optional[torch.Tensor] = None
    teacher_logprobs: Optional[torch.Tensor] = None  # on-policy distillation
    model_version: int = 0  # trainer step of the weights that produced it (0: base model)
    batch_id: str = ""  # explore step (or dataset batch) it belongs to
    task_id: str = ""  # the task; with batch_id it names the group
    run_id: int = 0  # which of the task's repeat_times responses
    step: int = 0  # turn index in multi-step workflows
    info: Dict[str, Any] = field(default_factory=dict)  # JSON-able extras (is_expert, use_count, ...)
    metrics: Dict[str, float] = field(default_factory=dict)  # workflow metrics (accuracy, format, ...)
    prompt_text: Optional[str] = None
    response_text: Optional[str] = None

    def __post_init__(self) -> None:
        for name in TENSOR_FIELDS:
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, torch.as_tensor(value, dtype=DTYPES[name]))
        response = len(self.tokens) - self.prompt_length
        if response < 0:
            raise ValueError(f"prompt_length {self.prompt_length} exceeds the {len(self.tokens)} tokens")
        for name in TENSOR_FIELDS[1:]:
            value = getattr(self, name)
            if value is not None and len(value) != response:
                raise ValueError(f"{name} has {len(value)} entries for a response of {response} tokens")

    @property
    def response_length(self) -> int:
        return len(self.tokens) - self.prompt_length

    @property
    def group_id(self) -> str:
        """Responses to the same task in the same step share it."""
        return f"{self.batch_id}/{self.task_id}"

    @property
    def eid(self) -> str:
        return f"{self.batch_id}/{self.task_id}/{self.run_id}/{self.step}"

    def mask(self) -> torch.Tensor:
        """The action mask, all True when none was given."""
        if self.action_mask is None:
            return torch.ones(self.response_length, dtype=torch.bool)
        return self.action_mask

    # ---- JSON-able dict ----------------------------------------------------------------------

    def to_dict(self) -> dict:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.tolist() if isinstance(value, torch.Tensor) else value
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Experience":
        return cls(**data)

    # ---- bytes (safetensors: tensors + a JSON record of the scalars) --------------------------

    def to_bytes(self) -> bytes:
        header: Dict[str, Any] = {}
        chunks, offset = [], 0
        for name in TENSOR_FIELDS:
            tensor = getattr(self, name)
            if tensor is not None:
                data = tensor.contiguous().numpy().tobytes()
                header[name] = {
                    "dtype": SAFETENSORS_TAGS[tensor.dtype],
                    "shape": list(tensor.shape),
                    "data_offsets": [offset, offset + len(data)],
                }
                chunks.append(data)
                offset += len(data)
        scalars = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in TENSOR_FIELDS}
        header["__metadata__"] = {"record": json.dumps(scalars)}
        encoded = json.dumps(header, separators=(",", ":")).encode()
        encoded += b" " * (-len(encoded) % 8)  # the format pads the header with spaces to 8-byte alignment
        return b"".join([struct.pack("<Q", len(encoded)), encoded, *chunks])

    @classmethod
    def from_bytes(cls, data: bytes) -> "Experience":
        (header_length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + header_length])
        scalars = json.loads(header["__metadata__"]["record"])
        return cls(**scalars, **load_tensors(data))
