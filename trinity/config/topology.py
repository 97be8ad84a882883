"""Which processes a config's mode starts and which engines it serves: queried by validation and by
the code that places and starts a job's actors, so both read one answer."""

import os
from pathlib import Path
from typing import List, Tuple

from trinity.config.explorer import InferenceModelConfig
from trinity.config.root import Config, Mode

EXPLORER_MODES = (Mode.both, Mode.explore, Mode.bench, Mode.colocate)
TRAINER_MODES = (Mode.both, Mode.train, Mode.colocate)
PAIRED_MODES = (Mode.both, Mode.colocate)  # an explorer and a trainer run together and sync weights


def rank_name_prefix(config: Config) -> str:
    """Trainer rank r's actor is named `<prefix>_<r>`: a stalled job's watchdog names a frozen rank by it."""
    return f"{config.trainer.name}_rank"


def colocated_device_name(config: Config) -> str:
    """colocate: the name of the job's one device process, the explorer's engine and the trainer's rank 0."""
    return f"{rank_name_prefix(config)}_0"


def local_gpu_count() -> int:
    """Visible NVIDIA GPUs on this machine, without importing torch."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([device for device in visible.split(",") if device.strip() and device.strip() != "-1"])
    proc = Path("/proc/driver/nvidia/gpus")
    return len(list(proc.iterdir())) if proc.is_dir() else 0


def configured_engines(config: Config) -> List[InferenceModelConfig]:
    """The rollout model, then every auxiliary model, whether or not the explorer serves it."""
    return [config.explorer.rollout_model, *config.explorer.auxiliary_models]


def served_auxiliaries(config: Config) -> List[int]:
    """Indices into explorer.auxiliary_models of the models the explorer serves with engines (workflows
    reach them as `auxiliary_engines`); a distillation teacher (the first) runs on the trainer ranks."""
    indices = range(len(config.explorer.auxiliary_models))
    return [i for i in indices if not (i == 0 and config.algorithm.uses_teacher)]


def served_engines(config: Config) -> List[Tuple[str, InferenceModelConfig]]:
    """(config key, model) of every model the explorer serves: the rollout model, then the served
    auxiliaries, in the order their engines take the job's device bundles."""
    aux = config.explorer.auxiliary_models
    return [("explorer.rollout_model", config.explorer.rollout_model)] + [
        (f"explorer.auxiliary_models[{i}]", aux[i]) for i in served_auxiliaries(config)
    ]
