"""Accuracy curve of a preset (default: the default experiment): held-out greedy accuracy by GRPO step.

Runs `python -m trinity experiment=NAME` in a fresh checkpoint root, timing it, or reads an existing run
with --job-dir. Step 0 is where GRPO starts (the GRPO stage evaluates on startup): the SFT checkpoint of a
preset with a warm-up stage (arithmetic, calculator), the pretrained model of a single-stage one
(smollm2_math), so the curve shows what GRPO adds. Prints a table, writes JSON (with the commit, date,
machine and load) and a PNG (drawn like every run's own learning curve, `trinity.reporting.curves`),
both named after the preset.

    python bench/accuracy_curve.py [--experiment arithmetic|calculator|smollm2_math]
                                   [--job-dir CKPT_ROOT/trinity/NAME] [--out bench/results] [--smoke] [override ...]

The JSON's `command` is this script's command line, `run_command` the trinity run it made. `--smoke`: the
preset with 2 steps per stage and an evaluation at GRPO steps 0 and 2 (into bench/results/smoke/ unless
`--out` says where; its checkpoint root is deleted afterwards), to check the bench runs.
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run_facts import SMOKE_DIR, SMOKE_HELP, refuse_docs, run_facts, write_json

from trinity.monitor import read_scalars
from trinity.reporting.curves import line_figure

RL_STAGE = "grpo"
# a smoke run: 2 steps of 4 tasks in every stage, evaluated at GRPO step 0 (the start) and 2
SMOKE = ["buffer.total_steps=2", "buffer.batch_size=4", "explorer.eval_interval=2", "trainer.save_interval=2"]


def smoke_overrides(experiment: str) -> list:
    """SMOKE, the same step count for every stage before the last (the warm-ups), and a held-out set of 16
    questions where the preset's built-in data has a size for it."""
    from trinity.config import compose

    composed = compose([f"experiment={experiment}"])
    keys = ("buffer.total_steps", "trainer.save_interval")
    warmups = [f"stages.{i}.{key}=2" for i in range(len(composed.get("stages") or []) - 1) for key in keys]
    builtin = composed.data.get("builtin")
    tests = [f"data.{builtin}.test_size=16"] if builtin and "test_size" in (composed.data.get(builtin) or {}) else []
    return [*SMOKE, *warmups, *tests]


def stages_of(experiment: str, root: Path, overrides: list) -> list:
    """Each stage's name, mode, algorithm and steps, as the run resolves them."""
    from trinity.config import compose, validate

    configs = validate(compose([f"experiment={experiment}", f"checkpoint_root_dir={root}", *overrides])).configs
    return [
        {
            "name": c.name,
            "mode": str(getattr(c.mode, "value", c.mode)),
            "algorithm": str(c.algorithm.algorithm_type),
            "steps": c.buffer.total_steps,
        }
        for c in configs
    ]


def run_preset(experiment: str, root: Path, overrides: list) -> float:
    """Run the preset into `root`; returns its wall time in seconds."""
    started = time.perf_counter()
    command = [sys.executable, "-m", "trinity", f"experiment={experiment}", f"checkpoint_root_dir={root}", *overrides]
    subprocess.run(command, check=True)
    return time.perf_counter() - started


def curve(job_dir: Path, experiment: str) -> list:
    """[(grpo step, accuracy)] from the RL stage's explorer events (the latest value per step), or the job's
    own for a single-stage preset; the presets name their held-out taskset `<experiment>_test`."""
    stage = job_dir / RL_STAGE if (job_dir / RL_STAGE).is_dir() else job_dir
    events = stage / "monitor" / "tensorboard" / "explorer"
    accuracy = f"eval/{experiment}_test/accuracy/mean"
    scalars = read_scalars(str(events))
    if accuracy not in scalars:
        raise SystemExit(f"{events} holds no {accuracy}: is {job_dir} a finished {experiment} run?")
    return [(int(step), float(value)) for step, value in scalars[accuracy]]


def plot(points: list, path: Path, title: str, start: str) -> None:
    """The GRPO curve with the starting model's accuracy as a flat reference line."""
    first, last = points[0][0], points[-1][0]
    lines = [("GRPO", points), (f"{start} ({points[0][1]:.3f})", [(first, points[0][1]), (last, points[0][1])])]
    path.write_bytes(line_figure(title, [("held-out accuracy (greedy) by GRPO step", lines)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--experiment", default="arithmetic", help="the preset (conf/experiment/NAME.yaml)")
    parser.add_argument("--job-dir", type=Path, help="an existing run's job directory (skips running)")
    parser.add_argument("--out", type=Path, help="the directory of the JSON and PNG (default bench/results)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("overrides", nargs="*", help="extra overrides of the run")
    args = parser.parse_args()
    args.out = refuse_docs(args.out or (SMOKE_DIR if args.smoke else Path("bench/results")), args.smoke)
    rooted = [o for o in args.overrides if o.split("=", 1)[0].lstrip("+~") == "checkpoint_root_dir"]
    if rooted:
        raise SystemExit(
            f"{rooted[0]}: the benchmark runs the preset in a fresh checkpoint root of its own; to "
            "read a run made elsewhere, pass its job dir with --job-dir"
        )
    overrides = [*(smoke_overrides(args.experiment) if args.smoke else []), *args.overrides]
    wall, facts, root = None, run_facts(smoke=args.smoke), None
    run_command = ["python", "-m", "trinity", f"experiment={args.experiment}", *overrides]
    stages = None
    try:
        if args.job_dir is None:
            root = Path(tempfile.mkdtemp(prefix="trinity_accuracy_"))
            stages = stages_of(args.experiment, root, overrides)
            wall = run_preset(args.experiment, root, overrides)
            args.job_dir = root / "trinity" / args.experiment
        points = curve(args.job_dir, args.experiment)
        start = "SFT checkpoint" if (args.job_dir / RL_STAGE).is_dir() else "pretrained model"
    finally:
        if args.smoke and root is not None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{'GRPO step':>9} | {'accuracy':>8} | {'vs start':>8}")
    print("-" * 31)
    for step, value in points:
        print(f"{step:>9} | {value:>8.3f} | {value - points[0][1]:>+8.3f}")
    best = max(points, key=lambda p: p[1])
    summary = {
        **facts,
        "run_command": run_command if root is not None else None,
        "experiment": args.experiment,
        "stages": stages,
        "job_dir": str(args.job_dir),
        "wall_s": wall,
        "start": start,
        "start_accuracy": points[0][1],
        "final_accuracy": points[-1][1],
        "best": {"step": best[0], "accuracy": best[1]},
        "curve": [{"step": s, "accuracy": v} for s, v in points],
    }
    if wall is not None:
        print(f"wall time of the whole experiment: {wall:.0f} s")
    stem = "accuracy_curve" if args.experiment == "arithmetic" else f"accuracy_curve_{args.experiment}"
    write_json(args.out / f"{stem}.json", summary)
    title = f"{args.experiment}: {start} {points[0][1]:.3f} -> GRPO {points[-1][1]:.3f}"
    plot(points, args.out / f"{stem}.png", title, start)
    print(f"wrote {args.out / stem}.png")


if __name__ == "__main__":
    main()
