"""What one finished job (one stage) leaves for its user: `<job dir>/summary.json` and, when it has
evaluation or rewards, `<job dir>/learning_curve.png`.

Written by the job itself as the stage ends, so any caller (the launcher, a test, a script) finds
them; the launcher reads them back to print its tables (`trinity.reporting.report`). The numbers
come from the job's own records: step counts from its final metrics, curves from its TensorBoard
event files (the whole history, earlier runs of a resumed job included), the checkpoint from the
"latest" pointer. With another monitor (wandb, mlflow) there are no event files to read, so only the
final values are known.
"""

import datetime
import json
import logging
import shlex
import statistics
from pathlib import Path
from typing import Dict, List, Optional

from trinity.atomic_file import atomic_write_bytes, atomic_write_text
from trinity.config.root import Config
from trinity.job_layout import actor_dir, latest_step
from trinity.model.lora import ADAPTER_CONFIG
from trinity.monitor import read_scalars
from trinity.reporting.curves import job_figure
from trinity.reporting.tags import EVAL_SCORE, REVERSE_KL, REWARD, TOKENS_PER_S, is_eval_score

logger = logging.getLogger(__name__)

SUMMARY_FILE = "summary.json"
CURVE_FILE = "learning_curve.png"


def write_summary(
    config: Config,
    metrics: Dict[str, float],
    wall_s: float,
    stage: Optional[str] = None,
    teacher: Optional[Dict[str, float]] = None,
) -> dict:
    """Collect the job's summary, draw its learning curve, write both into the job dir; returns the summary."""
    summary = collect(config, metrics, wall_s, stage, teacher)
    job_dir = Path(summary["paths"]["job_dir"])
    summary["paths"]["learning_curve"] = _draw(summary, job_dir / CURVE_FILE)
    atomic_write_text(job_dir / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
    return summary


def read_summary(job_dir: str) -> Optional[dict]:
    """The summary a finished job wrote, or None when it wrote none (still running, failed, or older)."""
    path = Path(job_dir) / SUMMARY_FILE
    return json.loads(path.read_text()) if path.exists() else None


def collect(
    config: Config,
    metrics: Dict[str, float],
    wall_s: float,
    stage: Optional[str] = None,
    teacher: Optional[Dict[str, float]] = None,
) -> dict:
    """The summary of a finished job as a JSON-ready dict (see the module docstring for the sources)."""
    curves = _curves(config)
    if curves is None:  # no event files: the final values only, no steps, no best
        unknown = dict.fromkeys(("start", "start_step", "final_step", "best", "best_step"))
        evals = {tag: {**unknown, "final": float(value)} for tag, value in metrics.items() if is_eval_score(tag)}
        reward = {"mean": None, "final": metrics.get(REWARD), "steps": None}
        throughput = metrics.get(TOKENS_PER_S)
        curves, main, distance = {}, main_metric(evals, []), None
    else:
        evals = {tag: score(points) for tag, points in curves.items() if is_eval_score(tag)}
        rewards, tokens = curves.get(REWARD, []), [value for _, value in curves.pop(TOKENS_PER_S, [])]
        reward = {
            "mean": statistics.fmean(v for _, v in rewards) if rewards else None,
            "final": rewards[-1][1] if rewards else None,
            "steps": len(rewards),
        }
        throughput = statistics.fmean(tokens) if tokens else None
        main = main_metric(evals, rewards)
        distance = curves.pop(REVERSE_KL, None)
    return {
        "name": config.name,
        "project": config.project,
        "stage": stage,
        "mode": config.mode.value,
        "algorithm": config.algorithm.algorithm_type.value,
        "finished_at": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "steps": {"trainer": _int(metrics.get("trainer/step")), "explorer": _int(metrics.get("explorer/step"))},
        "wall_s": round(wall_s, 3),
        "main_metric": main,
        "eval": evals,
        "reward": reward,
        "throughput": {"train_tokens_per_s": throughput},
        "teacher": _teacher(teacher, distance),
        "paths": paths(config),
        "curves": {tag: [list(point) for point in points] for tag, points in curves.items()},
    }


def score(points: List[tuple]) -> dict:
    """First, final and best value of a score curve, each with its step (the earliest step of a tied best):
    the first is where the job started (an evaluation on startup), so final - start is what the job added."""
    start_step, start = points[0]
    final_step, final = points[-1]
    best_step, best = max(points, key=lambda point: point[1])
    return {
        "start": start,
        "start_step": start_step,
        "final": final,
        "final_step": final_step,
        "best": best,
        "best_step": best_step,
    }


def main_metric(evals: Dict[str, dict], rewards: List[tuple]) -> Optional[dict]:
    """The number a run is judged by: held-out accuracy if evaluated, else held-out reward, else the
    mean rollout reward."""
    for wanted in ("accuracy", "reward"):
        for tag in sorted(evals):
            if EVAL_SCORE.match(tag).group("metric") == wanted:
                return {"tag": tag, **evals[tag]}
    if rewards:
        return {"tag": REWARD, **score(rewards)}
    return None


def _teacher(teacher: Optional[Dict[str, float]], distance: Optional[List[tuple]]) -> Optional[dict]:
    """A distillation stage's teacher: its model, its held-out scores (the final metrics of its evaluation) and
    the student's reverse KL to it per token (first, final and best = lowest, by train step)."""
    if teacher is None:
        return None
    closest = min(distance, key=lambda point: point[1]) if distance else None
    return {
        "model_path": teacher["model_path"],
        "eval": {tag: value for tag, value in teacher.items() if is_eval_score(tag)},
        "reverse_kl": None if not distance else {**score(distance), "best": closest[1], "best_step": closest[0]},
    }


def paths(config: Config) -> dict:
    """Where the job's outputs are: its directory, newest checkpoint, HF export and metrics."""
    job_dir = Path(config.checkpoint_job_dir).resolve()
    step = latest_step(str(job_dir))
    checkpoint = None if step is None else actor_dir(job_dir, step)
    export = None if checkpoint is None else checkpoint / "huggingface"
    monitor = job_dir / "monitor" / config.monitor.monitor_type.value
    tensorboard = config.monitor.monitor_type.value == "tensorboard"
    return {
        "job_dir": str(job_dir),
        "checkpoint_step": step,
        "checkpoint": None if checkpoint is None else str(checkpoint),
        "hf_export": str(export) if export is not None and _holds_export(export) else None,
        "monitor_dir": str(monitor),
        "tensorboard_dir": str(monitor) if tensorboard else None,
        "tensorboard_command": tensorboard_command(str(monitor)) if tensorboard else None,
    }


def _holds_export(directory: Path) -> bool:
    """An HF model directory, or with LoRA a PEFT adapter directory."""
    return (directory / "config.json").exists() or (directory / ADAPTER_CONFIG).exists()


def tensorboard_command(logdir: str) -> str:
    return f"tensorboard --logdir {shlex.quote(logdir)}"


def _curves(config: Config) -> Optional[Dict[str, List[tuple]]]:
    """tag -> [(step, value)] of the eval scores, the rollout reward and the trainer's throughput, from
    the job's event files; None when the job logs elsewhere (wandb, mlflow)."""
    if config.monitor.monitor_type.value != "tensorboard":
        return None
    directory = Path(config.checkpoint_job_dir) / "monitor" / "tensorboard"
    scalars = _quietly(read_scalars, str(directory)) if directory.is_dir() else {}
    return {
        tag: [(int(step), float(value)) for step, value in points]
        for tag, points in scalars.items()
        if is_eval_score(tag) or tag in (REWARD, TOKENS_PER_S, REVERSE_KL)
    }


def _quietly(read, *args):
    """TensorBoard's reader logs a line per event file at INFO ("No path found after ..."): not the
    user's business at the end of a run."""
    tensorboard = logging.getLogger("tensorboard")
    level = tensorboard.level
    tensorboard.setLevel(max(level, logging.WARNING))
    try:
        return read(*args)
    finally:
        tensorboard.setLevel(level)


def _draw(summary: dict, path: Path) -> Optional[str]:
    """The job's learning-curve PNG when it has something to draw; a drawing failure costs only the picture."""
    if not summary["curves"]:
        return None
    try:
        atomic_write_bytes(path, job_figure(summary))
    except Exception as exc:  # noqa: BLE001 - the run's results stand without their picture
        logger.warning("could not draw the learning curve %s: %s", path, exc)
        return None
    return str(path)


def _int(value) -> Optional[int]:
    return None if value is None else int(value)
