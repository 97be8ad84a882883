"""Cross-field rules and derived values, applied in order to a typed Config.

Each rule reads the config, reports problems (key, value, rule, fix) to the Report, and fills the
values it derives: this is the only place derived values are computed. Later rules may rely on
values filled by earlier ones (the device split before the batch arithmetic, for example).
"""

import hashlib
import importlib.util
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Callable, List, Tuple

from trinity.config.algorithm import DataSchema
from trinity.config.buffer import PRIORITY_FN_ARGS, PromptType, StorageType, TasksetConfig
from trinity.config.errors import Report
from trinity.config.explorer import EngineType, InferenceModelConfig
from trinity.config.fields import coerce_args
from trinity.config.functions import REGISTRIES
from trinity.config.model import TinyModelConfig
from trinity.config.paths import job_dir_of
from trinity.config.root import Config, DeviceType, Mode, MonitorType, SyncMethod
from trinity.config.trainer import MegatronTrainerConfig, ResumeMode
from trinity.explorer.registry import REWARD_FNS, WORKFLOWS

EXPLORER_MODES = (Mode.both, Mode.explore, Mode.bench)
TRAINER_MODES = (Mode.both, Mode.train)


def _offline(config: Config) -> bool:
    """sft and dpo train from a dataset instead of from rollouts."""
    return config.algorithm.schema in (DataSchema.sft, DataSchema.dpo)


# ---- global --------------------------------------------------------------------------------------


def check_global(config: Config, report: Report) -> None:
    kind = config.algorithm.algorithm_type.value
    if config.mode is None:
        config.mode = Mode.train if _offline(config) else Mode.both
    if config.mode in (Mode.serve, Mode.colocate):
        report.problem(
            "mode", config.mode, "is not supported yet", "use mode=both (explorer + trainer), train, explore or bench"
        )
    if _offline(config) and config.mode != Mode.train:
        report.problem(
            "mode",
            config.mode,
            f"{kind} trains from a dataset and has no explorer",
            "set mode=train, or leave mode empty"
            + (" (or run a single stage: stages=[] mode=train)" if report.prefix else ""),
        )
    root = config.checkpoint_root_dir.strip()
    if not root:
        report.problem(
            "checkpoint_root_dir",
            config.checkpoint_root_dir,
            "must be given",
            "set checkpoint_root_dir=/abs/path (a relative path is taken from the current directory)",
        )
        return
    absolute = os.path.abspath(os.path.expanduser(root))
    if absolute != root:
        report.note("checkpoint_root_dir", root, absolute, "made absolute against the working directory")
    config.checkpoint_root_dir = absolute
    job_dir = job_dir_of(absolute, config.project, config.group, config.name)
    config.checkpoint_job_dir = str(job_dir)
    if not config.ray_namespace:
        config.ray_namespace = "/".join(part for part in (config.project, config.group, config.name) if part)
    config.log.save_dir = str(job_dir / "log")


def check_data(config: Config, report: Report) -> None:
    data = config.data
    if data.builtin is None:
        return
    if not data.dir.strip():
        report.problem("data.dir", data.dir, f"data.builtin={data.builtin} needs a directory to generate into",
                       "set data.dir (e.g. <checkpoint_root_dir>/data/arithmetic)")  # fmt: skip
    else:
        data.dir = os.path.abspath(os.path.expanduser(data.dir))
    operations = data.arithmetic.operations
    if not operations or set(operations) - set("+-*"):
        report.problem("data.arithmetic.operations", operations, "must be a non-empty string of + - *", "e.g. +-")


def check_monitor(config: Config, report: Report) -> None:
    needs = {MonitorType.wandb: "wandb", MonitorType.mlflow: "mlflow", MonitorType.tensorboard: "tensorboard"}
    package = needs[config.monitor.monitor_type]
    if importlib.util.find_spec(package) is None:
        report.problem(
            "monitor.monitor_type",
            config.monitor.monitor_type,
            f"needs the {package} package, which is not installed",
            f"pip install {package}, or use monitor.monitor_type=tensorboard",
        )


# ---- algorithm -----------------------------------------------------------------------------------


def check_algorithm(config: Config, report: Report) -> None:
    algo = config.algorithm
    kind = algo.algorithm_type.value
    for key, registry in REGISTRIES.items():
        name = getattr(algo, key)
        if name is None:
            if key == "advantage_fn" and type(algo).advantage_fn is not None:
                report.problem(f"algorithm.{key}", None, f"{kind} needs an advantage function", f"set algorithm.{key}")
            continue
        try:
            spec = registry.resolve(name)
        except ValueError as exc:
            report.problem(
                f"algorithm.{key}", name, str(exc), f"use one of {', '.join(registry.names())}, or my_pkg.mod.MyFn"
            )
            continue
        args, problems = coerce_args(spec.args, getattr(algo, f"{key}_args"))
        for arg, value, rule in problems:
            report.problem(
                f"algorithm.{key}_args.{arg}",
                value,
                f"{rule} ({key}={name})",
                f"fix or remove algorithm.{key}_args.{arg}",
            )
        setattr(algo, f"{key}_args", args)
        if key == "advantage_fn" and spec.grouped and algo.repeat_times == 1:
            report.problem(
                "algorithm.repeat_times",
                algo.repeat_times,
                f"advantage_fn={name} compares responses within a group, so it needs at least 2 per task",
                "set algorithm.repeat_times=2 or more",
            )
    if kind == "dpo" and algo.repeat_times != 2:
        report.note("algorithm.repeat_times", algo.repeat_times, 2, "dpo reads (chosen, rejected) pairs")
        algo.repeat_times = 2
    if algo.kl_penalty_fn != "none" and not (algo.advantage_fn and algo.compute_advantage_in_trainer):
        report.problem(
            "algorithm.kl_penalty_fn",
            algo.kl_penalty_fn,
            f"a reward KL penalty only reaches trainer-side advantages; {kind} "
            + ("computes its advantages in the explorer" if algo.advantage_fn else "has no advantages"),
            "use algorithm.kl_loss_fn instead, or a type with trainer-side advantages (ppo, rloo, reinforceplusplus)",
        )
    penalty = algo.kl_penalty_fn_args
    if algo.kl_penalty_fn != "none" and penalty.get("adaptive"):
        for arg in ("target_kl", "horizon"):
            if penalty.get(arg) is None:
                report.problem(
                    f"algorithm.kl_penalty_fn_args.{arg}",
                    None,
                    "adaptive KL control needs target_kl and horizon",
                    f"set algorithm.kl_penalty_fn_args.{arg}, or adaptive=false",
                )
    loss = algo.policy_loss_fn_args
    if algo.policy_loss_fn == "sapo" and loss.get("tau_neg", 0) < loss.get("tau_pos", 0):
        report.problem(
            "algorithm.policy_loss_fn_args.tau_neg",
            loss["tau_neg"],
            "must be >= tau_pos",
            "raise tau_neg or lower tau_pos",
        )
    if algo.uses_teacher and not config.explorer.auxiliary_models:
        report.problem(
            "explorer.auxiliary_models",
            [],
            f"{kind} scores each response with a teacher model: the first auxiliary model",
            "add explorer.auxiliary_models='[{model_path: /path/to/teacher}]'",
        )
    expert_users = [key for key in ("policy_loss_fn", "entropy_loss_fn") if getattr(algo, key) == "mix"]
    if expert_users and algo.sample_strategy != "mix":
        report.problem(
            "algorithm.sample_strategy",
            algo.sample_strategy,
            f"{expert_users[0]}=mix needs expert rows from the mix sample strategy",
            "set algorithm.sample_strategy=mix",
        )


# ---- model ---------------------------------------------------------------------------------------


def _looks_like_path(value: str) -> bool:
    return value.startswith(("/", "./", "../", "~"))


def tiny_model_dir(model: TinyModelConfig) -> str:
    """The build directory of a tiny model: one per distinct spec, under tiny.cache_dir."""
    spec = {key: str(value) for key, value in asdict(model.tiny).items() if key != "cache_dir"}
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    return os.path.join(os.path.expanduser(model.tiny.cache_dir), f"tiny-{model.tiny.architecture.value}-{digest}")


def check_model(config: Config, report: Report) -> None:
    model = config.model
    if isinstance(model, TinyModelConfig):
        if not model.model_path:
            model.model_path = tiny_model_dir(model)
    elif not model.model_path:
        report.problem(
            "model.model_path",
            "",
            "must be given",
            "set model.model_path=<HF model dir or hub name>, or use model=tiny",
        )
    elif _looks_like_path(model.model_path) and not Path(model.model_path).expanduser().exists():
        report.problem("model.model_path", model.model_path, "does not exist", "point it at an HF model directory")
    if not model.critic_model_path:
        model.critic_model_path = model.model_path
    if model.chat_template_path and model.custom_chat_template is None:
        try:
            model.custom_chat_template = Path(model.chat_template_path).expanduser().read_text()
        except OSError as exc:
            report.problem(
                "model.chat_template_path", model.chat_template_path, f"cannot be read ({exc.strerror})", "fix the path"
            )
    _derive_lengths(config, report)


def _derive_lengths(config: Config, report: Report) -> None:
    """Length rules: prompt + response fit max_model_len; whichever is empty is derived from the others."""
    model = config.model
    total, prompt, response = model.max_model_len, model.max_prompt_tokens, model.max_response_tokens
    if total is None:
        if prompt is None or response is None:
            report.problem(
                "model.max_model_len",
                None,
                "cannot be derived unless max_prompt_tokens and max_response_tokens are both set",
                "set model.max_model_len (or both max_prompt_tokens and max_response_tokens)",
            )
            return
        model.max_model_len = prompt + response
        return
    if prompt is not None and response is not None:
        if prompt + response > total:
            report.problem(
                "model.max_model_len",
                total,
                f"max_prompt_tokens ({prompt}) + max_response_tokens ({response}) = {prompt + response} does not fit",
                f"raise model.max_model_len to at least {prompt + response}, "
                "or lower max_prompt_tokens / max_response_tokens",
            )
    elif prompt is None and response is None:
        model.max_prompt_tokens = total // 2
        model.max_response_tokens = total - total // 2
    elif prompt is None:
        model.max_response_tokens = min(response, total - 1)
        model.max_prompt_tokens = total - model.max_response_tokens
    else:
        model.max_prompt_tokens = min(prompt, total - 1)
        model.max_response_tokens = total - model.max_prompt_tokens
    if model.max_response_tokens is not None and model.min_response_tokens >= model.max_response_tokens:
        new = max(model.max_response_tokens - 1, 0)
        report.note("model.min_response_tokens", model.min_response_tokens, new, "must stay below max_response_tokens")
        model.min_response_tokens = new


# ---- devices -------------------------------------------------------------------------------------


def local_gpu_count() -> int:
    """Visible NVIDIA GPUs on this machine, without importing torch."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([device for device in visible.split(",") if device.strip() and device.strip() != "-1"])
    proc = Path("/proc/driver/nvidia/gpus")
    return len(list(proc.iterdir())) if proc.is_dir() else 0


def _engines(config: Config) -> List[InferenceModelConfig]:
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


def _check_engines(config: Config, report: Report) -> None:
    cluster = config.cluster
    for index, engine in enumerate(_engines(config)):
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
        if engine.engine_type == EngineType.vllm and cluster.device_type == DeviceType.cpu:
            report.problem(
                f"{key}.engine_type",
                engine.engine_type,
                "vllm needs CUDA GPUs and none are configured",
                "use explorer=default (hf), or set cluster.gpu_per_node",
            )


# ---- synchronizer --------------------------------------------------------------------------------


def check_synchronizer(config: Config, report: Report) -> None:
    sync = config.synchronizer
    if _offline(config):
        if sync.sync_method != SyncMethod.checkpoint:
            report.note(
                "synchronizer.sync_method",
                sync.sync_method,
                SyncMethod.checkpoint,
                "sft/dpo publish weights through checkpoints",
            )
            sync.sync_method = SyncMethod.checkpoint
        if config.trainer.save_interval and sync.sync_interval != config.trainer.save_interval:
            report.note(
                "synchronizer.sync_interval",
                sync.sync_interval,
                config.trainer.save_interval,
                "sft/dpo sync at every checkpoint",
            )
            sync.sync_interval = config.trainer.save_interval
    elif config.mode != Mode.both and sync.sync_method != SyncMethod.checkpoint:
        why = f"without trainer and explorer together (mode={config.mode}) weights travel by checkpoint"
        report.note("synchronizer.sync_method", sync.sync_method, SyncMethod.checkpoint, why)
        sync.sync_method = SyncMethod.checkpoint
    explorer = config.explorer
    if config.mode != Mode.bench and not _offline(config) and explorer.eval_interval % sync.sync_interval:
        rounded = max(explorer.eval_interval // sync.sync_interval, 1) * sync.sync_interval
        report.note(
            "explorer.eval_interval", explorer.eval_interval, rounded, "evaluations happen right after a weight sync"
        )
        explorer.eval_interval = rounded


# ---- explorer ------------------------------------------------------------------------------------

INHERITED = (
    "temperature",
    "top_p",
    "top_k",
    "max_model_len",
    "max_prompt_tokens",
    "max_response_tokens",
    "min_response_tokens",
    "repetition_penalty",
)


def check_explorer(config: Config, report: Report) -> None:
    model = config.model
    for index, engine in enumerate(_engines(config)):
        if engine.model_path is None:
            if index == 0:
                engine.model_path = model.model_path
            elif config.mode in EXPLORER_MODES or (index == 1 and config.algorithm.uses_teacher):
                report.problem(
                    f"explorer.auxiliary_models[{index - 1}].model_path",
                    None,
                    "must be given",
                    "set the auxiliary model's model_path",
                )
        elif index > 0 and _looks_like_path(engine.model_path) and not Path(engine.model_path).expanduser().exists():
            report.problem(
                f"explorer.auxiliary_models[{index - 1}].model_path",
                engine.model_path,
                "does not exist",
                "point it at an HF model directory",
            )
        for field_name in INHERITED:
            if getattr(engine, field_name) is None:
                setattr(engine, field_name, getattr(model, field_name))
        if engine.chat_template is None:
            engine.chat_template = model.custom_chat_template


# ---- buffer --------------------------------------------------------------------------------------


def check_buffer(config: Config, report: Report) -> None:
    buffer, algo, cluster = config.buffer, config.algorithm, config.cluster
    if buffer.train_batch_size is None:
        buffer.train_batch_size = buffer.batch_size * algo.repeat_times
    trainer_devices = cluster.trainer_gpu_num
    if config.mode in TRAINER_MODES and trainer_devices:
        if buffer.train_batch_size % trainer_devices:
            multiple = -(-buffer.train_batch_size // trainer_devices) * trainer_devices
            report.problem(
                "buffer.train_batch_size",
                buffer.train_batch_size,
                f"must split evenly across the {trainer_devices} trainer devices",
                f"set buffer.train_batch_size (or batch_size * repeat_times) to a multiple of {trainer_devices}, "
                f"e.g. {multiple}",
            )
        buffer.train_batch_size_per_device = buffer.train_batch_size // trainer_devices
        micro = config.trainer.actor.ppo_micro_batch_size_per_gpu
        if not config.trainer.use_dynamic_bsz and micro > buffer.train_batch_size_per_device:
            report.problem(
                "trainer.actor.ppo_micro_batch_size_per_gpu",
                micro,
                f"exceeds the per-device batch ({buffer.train_batch_size_per_device})",
                f"set it to at most {buffer.train_batch_size_per_device}",
            )
    sync = config.synchronizer
    per_step = buffer.batch_size * algo.repeat_times
    if (config.mode == Mode.both and sync.sync_style != "trainer_driven"
            and buffer.train_batch_size > (sync.sync_offset + sync.sync_interval) * per_step):  # fmt: skip
        report.problem(
            "buffer.train_batch_size", buffer.train_batch_size,
            f"the explorer waits for new weights after {sync.sync_offset + sync.sync_interval} step(s) of "
            f"{per_step} experiences, before the trainer has a full batch: the run would deadlock",
            f"use train_batch_size <= {(sync.sync_offset + sync.sync_interval) * per_step}, or raise "
            "synchronizer.sync_interval / sync_offset",
        )  # fmt: skip
    if algo.algorithm_type.value == "dpo" and buffer.train_batch_size % 2:
        report.problem(
            "buffer.train_batch_size",
            buffer.train_batch_size,
            "dpo trains on (chosen, rejected) pairs",
            "use an even train_batch_size",
        )
    if config.mode in EXPLORER_MODES:
        _check_tasksets(config, report)
    if config.mode in TRAINER_MODES:
        _check_trainer_input(config, report)


def _check_tasksets(config: Config, report: Report) -> None:
    inputs, model = config.buffer.explorer_input, config.model
    train = inputs.taskset
    if config.mode != Mode.bench and not train.path:
        report.problem(
            "buffer.explorer_input.taskset.path",
            train.path,
            "must be given: the explorer reads its tasks from it",
            "set buffer.explorer_input.taskset.path=<json/jsonl/parquet file or dataset name>",
        )
    if train.rollout_args.n not in (None, config.algorithm.repeat_times):
        report.problem(
            "buffer.explorer_input.taskset.rollout_args.n",
            train.rollout_args.n,
            "the train taskset samples algorithm.repeat_times responses per task",
            "set algorithm.repeat_times instead",
        )
    if config.mode == Mode.bench and not inputs.eval_tasksets:
        report.problem(
            "buffer.explorer_input.eval_tasksets",
            [],
            "bench mode evaluates on eval tasksets",
            "add at least one eval taskset",
        )
    tasksets = [("buffer.explorer_input.taskset", train, inputs.default_workflow_type, config.algorithm.repeat_times)]
    tasksets += [
        (f"buffer.explorer_input.eval_tasksets[{i}]", taskset, inputs.default_eval_workflow_type, 1)
        for i, taskset in enumerate(inputs.eval_tasksets)
    ]
    for key, taskset, workflow, n in tasksets:
        _fill_taskset(taskset, workflow, inputs.default_reward_fn_type, n, model)
        if key != "buffer.explorer_input.taskset" and not taskset.path:
            report.problem(f"{key}.path", taskset.path, "must be given", "set the eval taskset's path or remove it")


def _fill_taskset(taskset: TasksetConfig, workflow: str, reward_fn: str, n: int, model) -> None:
    args = taskset.rollout_args
    taskset.workflow_type = taskset.workflow_type or workflow
    taskset.reward_fn_type = taskset.reward_fn_type or reward_fn
    args.n = args.n or n
    args.top_p = model.top_p if args.top_p is None else args.top_p
    args.top_k = model.top_k if args.top_k is None else args.top_k
    args.max_tokens = args.max_tokens or model.max_response_tokens


def _check_trainer_input(config: Config, report: Report) -> None:
    trainer_input, algo = config.buffer.trainer_input, config.algorithm
    buffer = trainer_input.experience_buffer
    key = "buffer.trainer_input.experience_buffer"
    job_dir = Path(config.checkpoint_job_dir or ".")
    if _offline(config):
        if not buffer.path:
            report.problem(
                f"{key}.path",
                buffer.path,
                f"{algo.algorithm_type.value} reads its dataset from here",
                f"set {key}.path=<dataset file or name>",
            )
        if buffer.storage_type == StorageType.queue:
            report.note(f"{key}.storage_type", buffer.storage_type, StorageType.file, "a dataset is read from a file")
            buffer.storage_type = StorageType.file
    elif not buffer.path:
        if buffer.storage_type == StorageType.sql:
            buffer.path = f"sqlite:///{job_dir / 'buffer' / buffer.name}.db"
        elif buffer.storage_type == StorageType.file:
            buffer.path = str(job_dir / "buffer" / f"{buffer.name}.jsonl")
    if buffer.format.prompt_type is None:
        buffer.format.prompt_type = PromptType.plaintext if algo.schema == DataSchema.dpo else PromptType.messages
    replay = buffer.replay_buffer
    args, problems = coerce_args(PRIORITY_FN_ARGS[replay.priority_fn], replay.priority_fn_args)
    for arg, value, rule in problems:
        report.problem(
            f"{key}.replay_buffer.priority_fn_args.{arg}",
            value,
            f"{rule} (priority_fn={replay.priority_fn})",
            "fix or remove it",
        )
    replay.priority_fn_args = args
    if algo.sample_strategy == "mix":
        name = algo.sample_strategy_args.get("sft_dataset_name", "sft_dataset")
        if name not in trainer_input.auxiliary_buffers:
            report.problem(
                f"buffer.trainer_input.auxiliary_buffers.{name}",
                None,
                "the mix sample strategy reads expert SFT data from it",
                f"add buffer.trainer_input.auxiliary_buffers.{name} with a path",
            )
    for name, aux in trainer_input.auxiliary_buffers.items():
        if not aux.path:
            report.problem(
                f"buffer.trainer_input.auxiliary_buffers.{name}.path", aux.path, "must be given", "set the dataset path"
            )
        if aux.storage_type == StorageType.queue:
            report.note(
                f"buffer.trainer_input.auxiliary_buffers.{name}.storage_type",
                aux.storage_type,
                StorageType.file,
                "an auxiliary dataset is read from a file",
            )
            aux.storage_type = StorageType.file
        if aux.format.prompt_type is None:
            aux.format.prompt_type = PromptType.messages


def check_workflows(config: Config, report: Report) -> None:
    """Workflow and reward names exist (built-in or importable plug-in) before anything starts."""
    if config.mode not in EXPLORER_MODES:
        return
    inputs = config.buffer.explorer_input
    defaults = [
        ("default_workflow_type", WORKFLOWS),
        ("default_eval_workflow_type", WORKFLOWS),
        ("default_reward_fn_type", REWARD_FNS),
    ]
    named = [(f"buffer.explorer_input.{key}", getattr(inputs, key), registry) for key, registry in defaults]
    tasksets = [("buffer.explorer_input.taskset", inputs.taskset)]
    tasksets += [(f"buffer.explorer_input.eval_tasksets[{i}]", t) for i, t in enumerate(inputs.eval_tasksets)]
    default_names = {name for _, name, _ in named}
    for key, taskset in tasksets:
        for field_name, registry in (("workflow_type", WORKFLOWS), ("reward_fn_type", REWARD_FNS)):
            name = getattr(taskset, field_name)
            if name not in default_names:  # a default is reported once, under its own key
                named.append((f"{key}.{field_name}", name, registry))
    for key, name, registry in named:
        problem = registry.problem(name)
        if problem:
            report.problem(key, name, problem, f"use one of {', '.join(registry.names())}, or my_pkg.module.Name")


# ---- trainer -------------------------------------------------------------------------------------


def check_trainer(config: Config, report: Report) -> None:
    trainer, devices = config.trainer, config.cluster.trainer_gpu_num
    if trainer.resume_mode == ResumeMode.resume_path:
        path = trainer.resume_from_path
        if not path or "global_step_" not in path:
            report.problem(
                "trainer.resume_from_path",
                path,
                "resume_mode=resume_path needs a .../global_step_N directory",
                "set trainer.resume_from_path",
            )
        elif not Path(path).expanduser().is_dir():
            report.problem(
                "trainer.resume_from_path", path, "does not exist", "point it at an existing global_step_N directory"
            )
    if config.mode not in TRAINER_MODES or not devices:
        return
    for key in ("actor", "critic"):
        sp = getattr(trainer, key).ulysses_sequence_parallel_size
        if devices % sp:
            report.problem(
                f"trainer.{key}.ulysses_sequence_parallel_size",
                sp,
                f"must divide the {devices} trainer devices",
                "pick a divisor",
            )
    shard = getattr(getattr(trainer, "fsdp_config", None), "fsdp_size", -1)
    if shard > 0 and (shard > devices or devices % shard):
        report.problem(
            "trainer.fsdp_config.fsdp_size",
            shard,
            f"must divide the {devices} trainer devices",
            "use -1 (all ranks) or a divisor",
        )
    if isinstance(trainer, MegatronTrainerConfig):
        mega = trainer.megatron
        model_parallel = (
            mega.tensor_model_parallel_size * mega.pipeline_model_parallel_size * mega.context_parallel_size
        )
        if devices % model_parallel:
            report.problem(
                "trainer.megatron.tensor_model_parallel_size",
                mega.tensor_model_parallel_size,
                f"tensor x pipeline x context parallel = {model_parallel} must divide the {devices} trainer devices",
                "change the parallel sizes",
            )


RULES: List[Callable[[Config, Report], None]] = [
    check_global,
    check_data,
    check_monitor,
    check_algorithm,
    check_model,
    check_cluster,
    check_synchronizer,
    check_explorer,
    check_buffer,
    check_workflows,
    check_trainer,
]
