"""Synchronizer rules: the sync method and interval each mode and algorithm can use."""

from trinity.config.errors import Report
from trinity.config.root import Config, Mode, SyncMethod


def check_synchronizer(config: Config, report: Report) -> None:
    sync = config.synchronizer
    if config.algorithm.trains_from_dataset:
        _only_checkpoint(
            config, f"{config.algorithm.algorithm_type.value} publishes its weights through checkpoints", report
        )
        if config.trainer.save_interval and sync.sync_interval != config.trainer.save_interval:
            report.note(
                "synchronizer.sync_interval",
                sync.sync_interval,
                config.trainer.save_interval,
                "sft/dpo sync at every checkpoint",
            )
            sync.sync_interval = config.trainer.save_interval
    elif config.mode == Mode.colocate:
        _hand_over_in_process(config, report)
    elif config.mode != Mode.both:
        _only_checkpoint(
            config, f"without trainer and explorer together (mode={config.mode}) weights travel by checkpoint", report
        )
    elif sync.sync_method is None:
        sync.sync_method = SyncMethod.nccl
    explorer = config.explorer
    if (
        config.mode != Mode.bench
        and not config.algorithm.trains_from_dataset
        and explorer.eval_interval % sync.sync_interval
    ):
        rounded = max(explorer.eval_interval // sync.sync_interval, 1) * sync.sync_interval
        report.note(
            "explorer.eval_interval", explorer.eval_interval, rounded, "evaluations happen right after a weight sync"
        )
        explorer.eval_interval = rounded


def _only_checkpoint(config: Config, why: str, report: Report) -> None:
    sync = config.synchronizer
    if sync.sync_method is None:
        sync.sync_method = SyncMethod.checkpoint
    elif sync.sync_method != SyncMethod.checkpoint:
        report.problem(
            "synchronizer.sync_method",
            sync.sync_method,
            why,
            "set synchronizer.sync_method=checkpoint or leave it empty",
        )


def _hand_over_in_process(config: Config, report: Report) -> None:
    """colocate: the trainer copies its weights into the engine of its own process (method memory)."""
    sync = config.synchronizer
    if sync.sync_method is None:
        sync.sync_method = SyncMethod.memory
    elif sync.sync_method != SyncMethod.memory:
        why = {
            SyncMethod.nccl: "colocate's engine and trainer share one process: weights are copied in it, "
            "never broadcast",
            SyncMethod.checkpoint: "colocate copies the weights into the engine of the trainer's own process, "
            "without files",
        }[sync.sync_method]
        report.problem(
            "synchronizer.sync_method", sync.sync_method, why, "set synchronizer.sync_method=memory or leave it empty"
        )
