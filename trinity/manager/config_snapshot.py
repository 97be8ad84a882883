"""The job's config as plain JSON, and what may differ between the saved copy and a resumed run.

A resumed run must compute the same thing as the run it continues; only keys that change *how long*,
*how observably* or *how patiently* it runs, never *what* it computes, may differ. They are listed
once, here, with the reason each is safe.
"""

import dataclasses
import enum
import fnmatch
import json
from pathlib import PurePath
from typing import Any, Dict, List, Tuple

SPREAD = "how the same devices spread over nodes, not what they compute"

# dotted key (fnmatch pattern) -> why a resumed run may change it
RESUMABLE_KEYS: Dict[str, str] = {
    "buffer.total_steps": "training longer or shorter than first planned continues the same run",
    "buffer.total_epochs": "training longer or shorter than first planned continues the same run",
    "buffer.trainer_input.experience_buffer.max_read_timeout": "a wait bound, not part of the computation",
    "synchronizer.sync_timeout": "a wait bound, not part of the computation",
    "explorer.max_timeout": "retry policy of slow tasks; results of finished tasks are unchanged",
    "explorer.max_retry_times": "retry policy of failed tasks",
    "explorer.eval_interval": "evaluation does not feed training",
    "explorer.eval_on_startup": "evaluation does not feed training",
    "trainer.save_interval": "checkpoint cadence only",
    "trainer.max_actor_ckpt_to_keep": "checkpoint retention only",
    "trainer.max_critic_ckpt_to_keep": "checkpoint retention only",
    "trainer.enable_preview": "logs sample previews only",
    "log.*": "logging only",
    "monitor.*": "where metrics are sent",
    "dry_run": "a dry run never reaches the resume",
    "continue_from_checkpoint": "the switch that asks for this resume",
    "checkpoint_root_dir": "the job directory may be moved; its content is what resumes",
    "checkpoint_job_dir": "the job directory may be moved; its content is what resumes",
    "cluster.ray_address": "which Ray cluster runs the job does not change what it computes",
    # a rerun after a lost node may spread the same engines and trainer ranks over fewer nodes; their
    # counts (cluster.rollout_gpu_num, auxiliary_model_gpu_num, trainer_gpu_num) must not change
    **{f"cluster.{key}": SPREAD for key in ("node_num", "gpu_per_node", "cpu_devices_per_node", "devices_per_node")},
    **{f"cluster.{key}": SPREAD for key in ("total_gpu_num", "trainer_node_num", "trainer_gpu_num_per_node")},
    "cluster.cpu_threads_per_device": "torch threads of a CPU device process: how fast, not what it computes",
}

ABSENT = "<absent>"


def config_to_json(config: Any) -> Dict[str, Any]:
    """A dataclass config as JSON-ready data: nested dicts and lists, enums as their values."""
    return json.loads(json.dumps(dataclasses.asdict(config), default=_json_value))


def _json_value(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"config value {value!r} of type {type(value).__name__} is not JSON serialisable")


def flatten(data: Any, prefix: str = "") -> Dict[str, Any]:
    """Dotted key -> leaf value; list items are addressed as key[i]."""
    if isinstance(data, dict) and data:
        out: Dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(data, list) and data:
        out = {}
        for index, value in enumerate(data):
            out.update(flatten(value, f"{prefix}[{index}]"))
        return out
    return {prefix: data}


def is_resumable(key: str) -> bool:
    return any(fnmatch.fnmatchcase(key, pattern) or key.startswith(pattern + ".") for pattern in RESUMABLE_KEYS)


def config_differences(saved: Dict[str, Any], current: Dict[str, Any]) -> List[Tuple[str, Any, Any]]:
    """(dotted key, saved value, current value) for every key that differs and may not differ on resume."""
    old, new = flatten(saved), flatten(current)
    differences = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key, ABSENT), new.get(key, ABSENT)
        if before != after and not is_resumable(key):
            differences.append((key, before, after))
    return differences
