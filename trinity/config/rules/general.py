"""Rules of the top level: mode, job directory and namespace, the built-in dataset, the monitor."""

import importlib.util
import os

from trinity.config.errors import Report
from trinity.config.paths import job_dir_of
from trinity.config.root import Config, Mode, MonitorType


def check_global(config: Config, report: Report) -> None:
    kind = config.algorithm.algorithm_type.value
    if config.mode is None:
        config.mode = Mode.train if config.algorithm.trains_from_dataset else Mode.both
    if config.mode == Mode.serve:
        report.problem(
            "mode",
            config.mode,
            "is not supported yet",
            "use mode=both (explorer + trainer), colocate (both on one device), train, explore or bench",
        )
    if config.algorithm.trains_from_dataset and config.mode not in (Mode.train, Mode.bench):
        report.problem(
            "mode",
            config.mode,
            f"{kind} trains from a dataset and has no explorer",
            "set mode=train (or mode=bench to evaluate its checkpoints), or leave mode empty"
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
        report.problem(
            "data.dir",
            data.dir,
            f"data.builtin={data.builtin} needs a directory to generate into",
            "set data.dir (e.g. <checkpoint_root_dir>/data/arithmetic)",
        )
    else:
        data.dir = os.path.abspath(os.path.expanduser(data.dir))
    operations = data.arithmetic.operations
    if not operations or set(operations) - set("+-*"):
        report.problem("data.arithmetic.operations", operations, "must be a non-empty string of + - *", "e.g. +-")
    calculator = data.calculator
    if data.builtin == "calculator" and calculator.sizes() > calculator.distinct_questions() // 2:
        report.problem(
            "data.calculator.sft_size",
            calculator.sft_size,
            f"test, train and sft sizes ({calculator.sizes()}) exceed half the distinct questions of "
            f"{calculator.operands} operands up to {calculator.max_operand}",
            "raise data.calculator.max_operand or operands, or lower the sizes",
        )


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
    elif package == "mlflow" and not config.monitor.monitor_args.get("tracking_uri"):
        missing = [name for name in ("sqlalchemy", "alembic") if importlib.util.find_spec(name) is None]
        if missing:  # mlflow-skinny lacks them; the default store is a SQLite file (trinity.monitor)
            report.problem(
                "monitor.monitor_type",
                config.monitor.monitor_type,
                f"mlflow's local SQLite store needs {' and '.join(missing)}, which mlflow-skinny does not install",
                f"pip install {' '.join(missing)} (or the full mlflow package), "
                "or set monitor.monitor_args.tracking_uri",
            )
