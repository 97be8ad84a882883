"""The end of a launch, on the driver: each finished job's summary as a table, and for a sweep one table
comparing its jobs (best first), with `sweep_summary.json` and `sweep_learning_curves.png` in the sweep dir.

Reads only what the jobs wrote (`summary.json` per stage, `trinity.reporting.summary`), so it
prints the same numbers a later reader of the job directories finds.
"""

import json
import os
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from trinity.atomic_file import atomic_write_bytes, atomic_write_text
from trinity.config.validate import Validated
from trinity.reporting.curves import label, sweep_figure
from trinity.reporting.summary import SUMMARY_FILE, main_metric, read_summary, tensorboard_command
from trinity.reporting.tags import REWARD

SWEEP_SUMMARY_FILE = "sweep_summary.json"
SWEEP_CURVES_FILE = "sweep_learning_curves.png"

Stages = List[Tuple[str, Optional[dict]]]  # (job dir, its summary or None) per stage


def report(runs: Sequence[Validated], sweep_dir: Optional[str] = None) -> str:
    """Print (and return) the tables of the finished `runs`; with a `sweep_dir`, compare them as a sweep
    and write the sweep's files there."""
    jobs = [[(c.checkpoint_job_dir, read_summary(c.checkpoint_job_dir)) for c in v.configs] for v in runs]
    if sweep_dir is None:
        text = "\n\n".join(format_job(stages) for stages in jobs)
    else:
        text = format_sweep(jobs, write_sweep(jobs, sweep_dir))
    print(f"\n{text}", flush=True)  # a blank line parts it from the jobs' logs
    return text


# ---- one job -------------------------------------------------------------------------------------


def _number(value, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _best(score: Optional[dict]) -> str:
    if not score or score.get("best") is None:
        return "-"
    return f"{score['best']:.3f} (step {score['best_step']})"


def _main_label(summary: dict) -> str:
    main = summary["main_metric"]
    return "-" if main is None else label(main["tag"])


COLUMNS: List[Tuple[str, Callable[[dict], str]]] = [
    ("mode", lambda s: s["mode"]),
    ("train steps", lambda s: _number(s["steps"]["trainer"], "d")),
    ("explore steps", lambda s: _number(s["steps"]["explorer"], "d")),
    ("wall", lambda s: f"{s['wall_s']:.1f} s"),
    ("main metric", _main_label),
    ("start", lambda s: _number((s["main_metric"] or {}).get("start"))),
    ("final", lambda s: _number((s["main_metric"] or {}).get("final"))),
    ("best (step)", lambda s: _best(s["main_metric"])),
    ("mean reward", lambda s: _number(s["reward"]["mean"])),
    ("tokens/s", lambda s: _number(s["throughput"]["train_tokens_per_s"], ".0f")),
]


def table(header: List[str], rows: List[List[str]]) -> str:
    """Left-aligned columns, two spaces apart, a rule under the header."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def format_job(stages: Stages) -> str:
    """One row per stage, then each eval score (final and best) and where the outputs are."""
    staged = len(stages) > 1
    first = next((s for _, s in stages if s is not None), None)
    name = first["name"].rsplit("/", 1)[0] if staged and first else (first or {}).get("name", "")
    header = (["stage"] if staged else []) + [title for title, _ in COLUMNS]
    rows, details = [], []
    for job_dir, summary in stages:
        stage = [Path(job_dir).name] if staged else []
        if summary is None:
            rows.append(stage + ["(no summary.json: the stage did not finish in this run)"] + [""] * (len(COLUMNS) - 1))
            continue
        rows.append(stage + [cell(summary) for _, cell in COLUMNS])
        details += _details(summary, f"[{Path(job_dir).name}] " if staged else "")
    logdir = str(Path(stages[0][0]).resolve().parent) if staged else (first or {}).get("paths", {}).get("monitor_dir")
    lines = [f"run summary: {name}", table(header, rows), *details]
    if first and first["paths"]["tensorboard_command"]:
        lines.append(f"TensorBoard:  {tensorboard_command(logdir)}")
    return "\n".join(lines)


def _score_line(score: dict) -> str:
    """start X (step s), final Y (step f, +gain), best Z (step b); the final value alone without curves (or
    from a summary.json written before scores kept their start)."""
    if score["final_step"] is None or score.get("start") is None:
        return f"final {score['final']:.3f}"
    gain = score["final"] - score["start"]
    return (
        f"start {score['start']:.3f} (step {score['start_step']}), "
        f"final {score['final']:.3f} (step {score['final_step']}, {gain:+.3f}), best {_best(score)}"
    )


def _details(summary: dict, prefix: str) -> List[str]:
    paths = summary["paths"]
    lines = [f"{prefix}eval {label(tag)}: {_score_line(score)}" for tag, score in sorted(summary["eval"].items())]
    teacher = summary.get("teacher")
    if teacher:
        lines.append(f"{prefix}teacher:     {teacher['model_path']}")
        lines += [f"{prefix}teacher eval {label(tag)}: {value:.3f}" for tag, value in sorted(teacher["eval"].items())]
        distance = teacher["reverse_kl"]
        if distance:
            lines.append(
                f"{prefix}student's reverse KL to the teacher (nats/token, lower is closer): "
                f"start {distance['start']:.3f} (step {distance['start_step']}), "
                f"final {distance['final']:.3f} (step {distance['final_step']})"
            )
    checkpoint = paths["checkpoint"] and f"{paths['checkpoint']} (step {paths['checkpoint_step']})"
    places = [
        ("job dir", paths["job_dir"]),
        ("checkpoint", checkpoint),
        ("HF export", paths["hf_export"]),
        ("curves", paths.get("learning_curve")),
        ("summary", Path(paths["job_dir"]) / SUMMARY_FILE),
    ]
    for title, value in places:
        lines.append(f"{prefix}{title + ':':<12}  {value or '-'}")
    return lines


# ---- a sweep -------------------------------------------------------------------------------------


def sweep_metric(jobs: List[Stages]) -> str:
    """What a sweep is ranked by: the held-out accuracy if any job has one, else the mean rollout reward."""
    evals = {tag: score for stages in jobs if (s := _result(stages)) for tag, score in s["eval"].items()}
    main = main_metric(evals, [])
    return main["tag"] if main else REWARD


def _result(stages: Stages) -> Optional[dict]:
    """A job's result: its last stage's summary."""
    return stages[-1][1]


def _value(summary: Optional[dict], tag: str) -> Optional[float]:
    if summary is None:
        return None
    return summary["reward"]["mean"] if tag == REWARD else summary["eval"].get(tag, {}).get("final")


def ranked(jobs: List[Stages], tag: str) -> List[Stages]:
    """Best first by `tag`, ties broken by mean reward; jobs without it (or a summary) last, in launch order."""
    values = [(_value(_result(stages), tag), _value(_result(stages), REWARD)) for stages in jobs]
    order = sorted(
        range(len(jobs)), key=lambda i: (values[i][0] is None, -(values[i][0] or 0.0), -(values[i][1] or 0.0))
    )
    return [jobs[i] for i in order]


def _job_name(stages: Stages) -> str:
    summary = _result(stages)
    if summary is None:
        return str(Path(stages[-1][0]).name)
    return summary["name"].rsplit("/", 1)[0] if len(stages) > 1 else summary["name"]


def write_sweep(jobs: List[Stages], sweep_dir: str) -> dict:
    """`sweep_summary.json` (ranking and every stage's summary) and the comparison PNG; returns the former."""
    tag = sweep_metric(jobs)
    order = ranked(jobs, tag)
    sweep = {
        "sweep_dir": str(Path(sweep_dir).resolve()),
        "main_metric": tag,
        "ranking": [
            {"rank": i + 1, "job": _job_name(s), "value": _value(_result(s), tag), "job_dir": s[-1][0]}
            for i, s in enumerate(order)
        ],
        "jobs": [{"job": _job_name(s), "stages": [summary for _, summary in s]} for s in order],
        "learning_curves": None,
    }
    finished = [(_job_name(s), _result(s)) for s in order if _result(s) is not None]
    if any(tag in s["curves"] or REWARD in s["curves"] for _, s in finished):
        path = Path(sweep_dir) / SWEEP_CURVES_FILE
        atomic_write_bytes(path, sweep_figure(finished, tag))
        sweep["learning_curves"] = str(path.resolve())
    atomic_write_text(Path(sweep_dir) / SWEEP_SUMMARY_FILE, json.dumps(sweep, indent=2) + "\n")
    return sweep


def format_sweep(jobs: List[Stages], sweep: dict) -> str:
    """One row per job, best first (wall time over all its stages), then where the sweep's files are."""
    tag = sweep["main_metric"]
    by_name = {_job_name(s): s for s in jobs}
    main = f"{label(tag)} final" if tag != REWARD else "final reward"
    header = ["#", "job", "train steps", "explore steps", "wall", main, "best (step)", "mean reward", "tokens/s"]
    rows = [_sweep_row(entry, by_name[entry["job"]], tag) for entry in sweep["ranking"]]
    root = os.path.commonpath([s[-1][0] for s in jobs]) if jobs else sweep["sweep_dir"]
    ranked_by = label(tag) + (" (final)" if tag != REWARD else "")
    lines = [f"sweep summary: {len(jobs)} jobs, best first by {ranked_by}", table(header, rows)]
    lines += [f"job dirs:     {root}", f"TensorBoard:  {tensorboard_command(root)}"]
    lines += [f"sweep files:  {Path(sweep['sweep_dir']) / SWEEP_SUMMARY_FILE}"]
    if sweep["learning_curves"]:
        lines[-1] += f", {sweep['learning_curves']}"
    return "\n".join(lines)


def _sweep_row(entry: dict, stages: Stages, tag: str) -> List[str]:
    summary = _result(stages)
    if summary is None:
        return [str(entry["rank"]), entry["job"], "(no summary.json: the job did not finish)"] + [""] * 6
    score = summary["main_metric"] if tag == REWARD else summary["eval"].get(tag)
    wall = sum(s["wall_s"] for _, s in stages if s is not None)
    steps = [_number(summary["steps"][role], "d") for role in ("trainer", "explorer")]
    return [
        str(entry["rank"]),
        entry["job"],
        *steps,
        f"{wall:.1f} s",
        _number((score or {}).get("final")),
        _best(score),
        _number(summary["reward"]["mean"]),
        _number(summary["throughput"]["train_tokens_per_s"], ".0f"),
    ]
