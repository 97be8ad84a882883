"""What a dry run prints: the resolved config of each stage, the derived values, and what changed."""

from omegaconf import OmegaConf

from trinity.config.algorithm import DataSchema
from trinity.config.functions import REGISTRIES
from trinity.config.root import Config
from trinity.config.runtime import runtime_gaps
from trinity.config.validate import Validated


def describe(validated: Validated) -> str:
    parts = []
    for config in validated.configs:
        title = f"stage {config.name}" if len(validated.configs) > 1 else config.name
        parts.append(f"== Resolved config ({title}) ==\n{OmegaConf.to_yaml(OmegaConf.structured(config))}")
        parts.append(f"== Derived values ({title}) ==\n{derived_summary(config)}")
    if validated.notes:
        parts.append("== Changed by validation ==\n" + "\n".join(f"  - {note}" for note in validated.notes))
    gaps = {str(problem) for config in validated.configs for problem in runtime_gaps(config)}
    if gaps:
        parts.append("== Valid, but a run would stop here ==\n" + "\n".join(f"  - {gap}" for gap in sorted(gaps)))
    parts.append("Config is valid (dry run: nothing was started).")
    return "\n\n".join(parts)


def derived_summary(config: Config) -> str:
    cluster, model, sync = config.cluster, config.model, config.synchronizer
    rollout = config.explorer.rollout_model
    algo = config.algorithm
    lines = [
        f"mode:          {config.mode.value}",
        f"job dir:       {config.checkpoint_job_dir}",
        f"ray namespace: {config.ray_namespace}",
        f"log dir:       {config.log.save_dir}",
        f"devices:       {cluster.device_type.value}: {cluster.node_num} node(s) x {cluster.devices_per_node} = "
        f"{cluster.total_gpu_num}; explorer {cluster.rollout_gpu_num} ({rollout.engine_num} engine(s) x tp "
        f"{rollout.tensor_parallel_size}) + auxiliary {cluster.auxiliary_model_gpu_num}; trainer "
        f"{cluster.trainer_gpu_num} on {cluster.trainer_node_num} node(s)",
        f"batch:         {batch_text(config)}",
        f"lengths:       prompt {model.max_prompt_tokens} + response {model.max_response_tokens} "
        f"<= max_model_len {model.max_model_len}",
        f"sync:          {sync.sync_method.value} every {sync.sync_interval} step(s), style "
        f"{sync.sync_style.value}, offset {sync.sync_offset}, timeout {sync.sync_timeout:g} s",
        f"algorithm:     {algo.algorithm_type.value} (critic: {algo.use_critic}, reference model: "
        f"{algo.uses_reference()}, advantages: {advantage_site(config)})",
    ]
    for key in REGISTRIES:
        name = getattr(algo, key)
        if name is not None:
            args = ", ".join(f"{arg}={value}" for arg, value in getattr(algo, f"{key}_args").items())
            lines.append(f"  {key + ':':17}{name}({args})")
    return "\n".join(lines)


def batch_text(config: Config) -> str:
    buffer, algo = config.buffer, config.algorithm
    per_device = (
        f"{buffer.train_batch_size_per_device} per trainer device" if config.cluster.trainer_gpu_num else "no trainer"
    )
    if algo.schema != DataSchema.experience:
        return f"train_batch_size {buffer.train_batch_size} dataset rows; {per_device}"
    return (
        f"{buffer.batch_size} tasks x {algo.repeat_times} responses -> train_batch_size {buffer.train_batch_size}; "
        f"{per_device}"
    )


def advantage_site(config: Config) -> str:
    algo = config.algorithm
    if algo.advantage_fn is None:
        return "none"
    return "trainer" if algo.compute_advantage_in_trainer else "explorer"
