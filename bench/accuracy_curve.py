"""Accuracy curve of the default experiment: held-out greedy accuracy against GRPO steps.

Runs `python -m trinity` (the default experiment: SFT warm-up, then GRPO) in a fresh checkpoint root,
timing it, or reads an existing run with --job-dir. Step 0 is the SFT checkpoint (the GRPO stage
evaluates on startup), so the curve shows what GRPO adds over SFT. Prints a table, writes JSON and a
PNG (drawn like every run's own learning curve, `trinity.orchestration.curves`).

    python bench/accuracy_curve.py [--job-dir CKPT_ROOT/trinity/arithmetic] [--out bench/results] [override ...]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trinity.monitor import read_scalars
from trinity.orchestration.curves import line_figure

ACCURACY = "eval/arithmetic_test/accuracy/mean"
RL_STAGE = "grpo"


def run_default(root: Path, overrides: list) -> float:
    """Run the default experiment into `root`; returns its wall time in seconds."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "trinity", f"checkpoint_root_dir={root}", *overrides], check=True)
    return time.perf_counter() - started


def curve(job_dir: Path) -> list:
    """[(grpo step, accuracy)] from the RL stage's explorer events (the latest value per step)."""
    events = job_dir / RL_STAGE / "monitor" / "tensorboard" / "explorer"
    scalars = read_scalars(str(events))
    if ACCURACY not in scalars:
        raise SystemExit(f"{events} holds no {ACCURACY}: is {job_dir} a finished default experiment?")
    return [(int(step), float(value)) for step, value in scalars[ACCURACY]]


def plot(points: list, path: Path, title: str) -> None:
    """The GRPO curve with the SFT checkpoint's accuracy as a flat reference line."""
    first, last = points[0][0], points[-1][0]
    lines = [("GRPO", points), (f"SFT checkpoint ({points[0][1]:.3f})", [(first, points[0][1]), (last, points[0][1])])]
    path.write_bytes(line_figure(title, [("held-out accuracy (greedy) by GRPO step", lines)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job-dir", type=Path, help="an existing run's job directory (skips running)")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("overrides", nargs="*", help="extra overrides of the run")
    args = parser.parse_args()
    wall = None
    if args.job_dir is None:
        root = Path(tempfile.mkdtemp(prefix="trinity_accuracy_"))
        wall = run_default(root, args.overrides)
        args.job_dir = root / "trinity" / "arithmetic"
    points = curve(args.job_dir)
    print(f"{'GRPO step':>9} | {'accuracy':>8} | {'vs SFT':>7}")
    print("-" * 31)
    for step, value in points:
        print(f"{step:>9} | {value:>8.3f} | {value - points[0][1]:>+7.3f}")
    best = max(points, key=lambda p: p[1])
    summary = {
        "job_dir": str(args.job_dir),
        "wall_s": wall,
        "sft_accuracy": points[0][1],
        "final_accuracy": points[-1][1],
        "best": {"step": best[0], "accuracy": best[1]},
        "curve": [{"step": s, "accuracy": v} for s, v in points],
    }
    if wall is not None:
        print(f"wall time of the whole experiment: {wall:.0f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "accuracy_curve.json").write_text(json.dumps(summary, indent=2) + "\n")
    title = f"default experiment: SFT {points[0][1]:.3f} -> GRPO {points[-1][1]:.3f}"
    plot(points, args.out / "accuracy_curve.png", title)
    print(f"wrote {args.out / 'accuracy_curve.png'}")
    print(f"wrote {args.out / 'accuracy_curve.json'}")


if __name__ == "__main__":
    main()
