"""Buffer rules: batch arithmetic, tasksets, and the trainer's input buffers."""

from pathlib import Path

from trinity.config.buffer import PRIORITY_FN_ARGS, PromptType, StorageType, TasksetConfig, default_prompt_type
from trinity.config.errors import Report
from trinity.config.fields import coerce_args
from trinity.config.quota import rollout_rows_per_train_step
from trinity.config.root import Config, Mode
from trinity.config.topology import EXPLORER_MODES, PAIRED_MODES, TRAINER_MODES


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
    reads_rollouts = config.mode in TRAINER_MODES and not algo.trains_from_dataset and buffer.train_batch_size >= 1
    if reads_rollouts and rollout_rows_per_train_step(config) < 1:  # a batch of no rows is reported by its own rule
        report.problem(
            "algorithm.sample_strategy_args.expert_data_ratio",
            algo.sample_strategy_args.get("expert_data_ratio"),
            f"leaves no rollout row in a train batch of {buffer.train_batch_size}: the trainer counts its steps in "
            "rollout rows and would never train on the explorer's experiences",
            "lower it until ceil(expert_data_ratio x train_batch_size) < train_batch_size",
        )
    elif config.mode in PAIRED_MODES and config.synchronizer.sync_style != "trainer_driven":
        _check_feeding(config, report)
    if buffer.train_batch_size % algo.rows_per_example:
        report.problem(
            "buffer.train_batch_size",
            buffer.train_batch_size,
            f"{algo.algorithm_type.value} trains on (chosen, rejected) pairs",
            f"use a multiple of {algo.rows_per_example}",
        )
    if config.mode in EXPLORER_MODES:
        _check_tasksets(config, report)
    if config.mode in TRAINER_MODES:
        _check_trainer_input(config, report)
    elif config.mode == Mode.explore:  # the explorer alone still writes its experiences there
        _check_experience_buffer(config, "buffer.trainer_input.experience_buffer", report)


def _check_feeding(config: Config, report: Report) -> None:
    """The explorer's j-th weight sync waits for a version the trainer publishes after j x sync_interval train
    steps, and comes after sync_offset + j x sync_interval explore steps. Each explore step writes at least
    E = batch_size x repeat_times experiences (the explorer tops up steps that dropped rollouts, up to
    explorer.max_extra_explore_steps), so the run deadlocks exactly when the batch arithmetic leaves the trainer
    short at some sync: j x interval x R > (offset + j x interval) x E, R the rollout rows of a train step.
    That holds first at j = 1 when R <= E, and at the last sync when R > E (the trainer falls behind)."""
    buffer, sync = config.buffer, config.synchronizer
    per_step, per_train = buffer.batch_size * config.algorithm.repeat_times, rollout_rows_per_train_step(config)
    offset, interval = sync.sync_offset, sync.sync_interval
    syncs = [1]
    if per_train > per_step:
        syncs.append(max((buffer.total_steps - offset) // interval, 1) if buffer.total_steps else None)
    for j in syncs:
        if j is not None and j * interval * per_train <= (offset + j * interval) * per_step:
            continue
        explored = "every" if j is None else f"{offset + j * interval}"
        report.problem(
            "buffer.train_batch_size",
            buffer.train_batch_size,
            f"{per_step} experiences per explore step (batch_size x repeat_times; short steps are topped up) do not "
            f"feed train batches of {per_train}: after {explored} explore steps the explorer waits for weights the "
            "trainer can only publish after more batches than that; the run would deadlock",
            f"use train_batch_size <= {per_step if j is None else per_step * (offset + j * interval) // (j * interval)}"
            + ("" if j == 1 else f" ({per_step} for a run of any length)")
            + ", or raise synchronizer.sync_offset, or use synchronizer.sync_style=trainer_driven",
        )
        return


def _check_tasksets(config: Config, report: Report) -> None:
    inputs = config.buffer.explorer_input
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
        _fill_taskset(taskset, workflow, inputs.default_reward_fn_type, n, config.explorer.rollout_model)
        if key != "buffer.explorer_input.taskset" and not taskset.path:
            report.problem(f"{key}.path", taskset.path, "must be given", "set the eval taskset's path or remove it")


def _fill_taskset(taskset: TasksetConfig, workflow: str, reward_fn: str, n: int, engine) -> None:
    """Empty sampling arguments of a taskset are the rollout model's (already filled from model.*)."""
    args = taskset.rollout_args
    taskset.workflow_type = taskset.workflow_type or workflow
    taskset.reward_fn_type = taskset.reward_fn_type or reward_fn
    args.n = args.n or n
    for name, engine_name in (
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("top_k", "top_k"),
        ("max_tokens", "max_response_tokens"),
    ):
        if getattr(args, name) is None:
            setattr(args, name, getattr(engine, engine_name))


def _check_trainer_input(config: Config, report: Report) -> None:
    key = "buffer.trainer_input.experience_buffer"
    _check_experience_buffer(config, key, report)
    _check_replay(config.buffer.trainer_input.experience_buffer, key, report)
    _check_auxiliary_buffers(config, report)


def _check_experience_buffer(config: Config, key: str, report: Report) -> None:
    """A dataset to read for sft/dpo; otherwise where the explorer's experiences go (a default path)."""
    buffer, algo = config.buffer.trainer_input.experience_buffer, config.algorithm
    job_dir = Path(config.checkpoint_job_dir or ".")
    if algo.trains_from_dataset:
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
        buffer.format.prompt_type = default_prompt_type(algo.schema)


def _check_replay(buffer, key: str, report: Report) -> None:
    """Replay lives in the queue's memory; its priority function's arguments are coerced to their schema."""
    replay = buffer.replay_buffer
    if replay.enable and buffer.storage_type != StorageType.queue:
        report.problem(
            f"{key}.replay_buffer.enable",
            True,
            f"replays experiences from the queue's memory; storage_type={buffer.storage_type} has none",
            f"set {key}.storage_type=queue, or replay_buffer.enable=false",
        )
    args, problems = coerce_args(PRIORITY_FN_ARGS[replay.priority_fn], replay.priority_fn_args)
    for arg, value, rule in problems:
        report.problem(
            f"{key}.replay_buffer.priority_fn_args.{arg}",
            value,
            f"{rule} (priority_fn={replay.priority_fn})",
            "fix or remove it",
        )
    replay.priority_fn_args = args


def _check_auxiliary_buffers(config: Config, report: Report) -> None:
    """Datasets the trainer reads besides its experiences (mix's expert rows): present, file-backed."""
    trainer_input, algo = config.buffer.trainer_input, config.algorithm
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
        key = f"buffer.trainer_input.auxiliary_buffers.{name}"
        if not aux.path:
            report.problem(f"{key}.path", aux.path, "must be given", "set the dataset path")
        if aux.storage_type == StorageType.queue:
            report.note(
                f"{key}.storage_type", aux.storage_type, StorageType.file, "an auxiliary dataset is read from a file"
            )
            aux.storage_type = StorageType.file
        if aux.format.prompt_type is None:
            aux.format.prompt_type = PromptType.messages
