"""Trainer rules: resume paths and how parallel sizes divide the trainer's devices."""

from pathlib import Path

from trinity.config.errors import Report
from trinity.config.root import Config
from trinity.config.topology import TRAINER_MODES
from trinity.config.trainer import MegatronTrainerConfig, ResumeMode


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
        elif not any((Path(path).expanduser() / sub / "dcp").is_dir() for sub in ("actor", ".")):
            report.problem(
                "trainer.resume_from_path",
                path,
                "holds no training checkpoint (no actor/dcp)",
                "point it at a global_step_N directory a trainer saved (with trainer.save_interval)",
            )
    if config.mode not in TRAINER_MODES or not devices:
        return
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
