"""Where step metrics go: TensorBoard event files (default), wandb or mlflow, under the job directory.

Each role (trainer, explorer NAME) writes its own stream, `<job_dir>/monitor/<type>/<role>`, so
several explorers and the trainer never interleave. wandb defaults to offline mode and mlflow to a
SQLite store in that directory (`mlflow.db`, artifacts beside it); both are optional packages, which
validation checks before anything starts.
"""

import math
import os
from pathlib import Path
from typing import Dict

from trinity.config.root import Config


class Monitor:
    def __init__(self, config: Config, role: str):
        self.kind = config.monitor.monitor_type.value
        self.directory = Path(config.checkpoint_job_dir) / "monitor" / self.kind / role
        self.directory.mkdir(parents=True, exist_ok=True)
        args = dict(config.monitor.monitor_args)
        run_name = f"{config.name}/{role}"
        if self.kind == "tensorboard":
            from torch.utils.tensorboard.writer import FileWriter

            self._writer = FileWriter(str(self.directory))
        elif self.kind == "wandb":
            import wandb

            args.setdefault("mode", "offline")
            self._run = wandb.init(
                project=config.project,
                group=config.group or None,
                name=run_name,
                dir=str(self.directory),
                reinit="create_new",
                **args,
            )
        else:
            import mlflow

            mlflow.set_tracking_uri(args.pop("tracking_uri", None) or sqlite_uri(self.directory / "mlflow.db"))
            experiment = args.pop("experiment_id", None) or _mlflow_experiment(
                mlflow, config.project, self.directory / "artifacts"
            )
            self._run = mlflow.start_run(experiment_id=experiment, run_name=run_name, **args)
            self._mlflow = mlflow

    def log(self, metrics: Dict[str, float], step: int) -> None:
        """The step's values reach the event file (flushed to the OS) or the backend before this returns."""
        finite = {key: float(value) for key, value in metrics.items() if _number(value)}
        if self.kind == "tensorboard":
            # One event holds all the step's values (the records `add_scalar` writes, one event per value
            # there): ~45 metrics take 0.3 ms instead of 2.7, on the event loop that runs both roles in colocate.
            from tensorboard.compat.proto.summary_pb2 import Summary

            values = [Summary.Value(tag=key, simple_value=value) for key, value in finite.items()]
            self._writer.add_summary(Summary(value=values), step)
            self._writer.flush()
        elif self.kind == "wandb":
            self._run.log(finite, step=step)
        else:
            self._mlflow.log_metrics({key.replace("/", "."): value for key, value in finite.items()}, step=step)

    def close(self) -> None:
        if self.kind == "tensorboard":
            self._writer.close()
        elif self.kind == "wandb":
            self._run.finish()
        else:
            self._mlflow.end_run()


def sqlite_uri(path: Path) -> str:
    """mlflow's default store: a SQLite file (its file store refuses to start unless MLFLOW_ALLOW_FILE_STORE)."""
    return f"sqlite:///{path.resolve()}"


def _mlflow_experiment(mlflow, name: str, artifacts: Path) -> str:
    """The experiment's id, created with its artifacts beside the store (mlflow's default is ./mlruns in
    the actor's working directory). Another process may create it first: then it is looked up again."""
    from mlflow.exceptions import MlflowException

    experiment = mlflow.get_experiment_by_name(name)
    if experiment is None:
        try:
            return mlflow.create_experiment(name, artifact_location=artifacts.resolve().as_uri())
        except MlflowException:
            experiment = mlflow.get_experiment_by_name(name)
            if experiment is None:
                raise
    return experiment.experiment_id


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read_scalars(directory: str, wall_time: bool = False) -> Dict[str, list]:
    """tag -> [(step, value)] from the TensorBoard event files under `directory`, one value per step
    (with `wall_time`: [(step, wall time, value)]).

    A resumed run logs again the steps it repeats; the value written last (by wall time) wins."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    latest: Dict[str, Dict[int, tuple]] = {}
    for root, _, files in os.walk(directory):
        if any(name.startswith("events.out.tfevents") for name in files):
            accumulator = EventAccumulator(root, size_guidance={"scalars": 0})
            accumulator.Reload()
            for tag in accumulator.Tags()["scalars"]:
                steps = latest.setdefault(tag, {})
                for event in accumulator.Scalars(tag):
                    if event.step not in steps or event.wall_time >= steps[event.step][0]:
                        steps[event.step] = (event.wall_time, event.value)
    if wall_time:
        return {tag: sorted((step, *entry) for step, entry in steps.items()) for tag, steps in latest.items()}
    return {tag: sorted((step, value) for step, (_, value) in steps.items()) for tag, steps in latest.items()}
