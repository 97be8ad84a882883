"""Every algorithm type on the default experiment: `python -m trinity algorithm=X`, one type after another.

All types share one checkpoint root, as repeated runs of the default experiment do: `sft` runs first (its
run is the warm-up alone) and every other type skips the finished warm-up (`stage_meta.json`) and starts
from its export, so each row's wall time is its own stage's. Each run is a separate process started as a
user starts it; the table reads each stage's `summary.json`: return code, held-out accuracy at the start
(the warm-up's end), at the end and at its best, wall time, and for on_policy_distill the teacher's accuracy.

    python bench/algorithms.py [--types grpo,raft,...] [--out docs/benchmarks/algorithms.json] [--smoke]

`--smoke`: sft and on_policy_distill with a few steps per stage, enough to run each to its end
(bench/results/smoke/ unless `--out` says where; its root is deleted).
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run_facts import SMOKE_HELP, out_path, run_facts, write_json

from trinity.config.algorithm import AlgorithmType

ACCURACY = "eval/arithmetic_test/accuracy/mean"
# the warm-up with its evaluation, and the teacher's evaluation (read into its own column); every type's two-step
# run is tests/algorithm/test_algorithm_runs.py, mix's last step (expert rows in its batches) test_finished_trainer.py
SMOKE_TYPES = ["sft", "on_policy_distill"]
# a few steps per stage, evaluated at the start and the end
SMOKE = [
    "stages.0.buffer.total_steps=4",
    "stages.0.trainer.save_interval=4",
    "buffer.total_steps=4",
    "buffer.batch_size=4",
    "explorer.eval_interval=4",
    "trainer.save_interval=4",
    "data.arithmetic.test_size=16",
]


def run_type(kind: str, root: Path, overrides: list) -> dict:
    """Run one type into the shared root; its return code, wall time and the last stage's summary."""
    command = [sys.executable, "-m", "trinity", f"algorithm={kind}", f"checkpoint_root_dir={root}", *overrides]
    print(f"== {kind}: {' '.join(command[1:])}", flush=True)
    started = time.perf_counter()
    rc = subprocess.run(command, stdin=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - started
    stage = "sft_warmup" if kind == "sft" else kind
    path = root / "trinity" / "arithmetic" / stage / "summary.json"
    summary = json.loads(path.read_text()) if path.exists() else {}
    accuracy = summary.get("eval", {}).get(ACCURACY, {})
    teacher = summary.get("teacher") or {}
    return {
        "type": kind,
        "rc": rc,
        "wall_s": round(wall, 1),
        "stage_wall_s": summary.get("wall_s"),
        "train_steps": summary.get("steps", {}).get("trainer"),
        "start": accuracy.get("start"),
        "final": accuracy.get("final"),
        "best": accuracy.get("best"),
        "best_step": accuracy.get("best_step"),
        "teacher": (teacher.get("eval") or {}).get(ACCURACY),
        "reverse_kl": teacher.get("reverse_kl"),
    }


def table(rows: list) -> str:
    def num(value, spec=".3f"):
        return "-" if value is None else format(value, spec)

    lines = [
        "| type | rc | start | final | gain | best (step) | teacher | wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        gain = None if row["start"] is None or row["final"] is None else row["final"] - row["start"]
        best = "-" if row["best"] is None else f"{row['best']:.3f} ({row['best_step']})"
        lines.append(
            f"| {row['type']} | {row['rc']} | {num(row['start'])} | {num(row['final'])} | {num(gain, '+.3f')} | "
            f"{best} | {num(row['teacher'])} | {num(row['wall_s'], '.0f')} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--types", help="comma-separated types (default: all; sft always runs first)")
    parser.add_argument("--out", help="the JSON file (default bench/results/algorithms.json)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("overrides", nargs="*", help="extra overrides of every run")
    args = parser.parse_args()
    out = out_path(args.out, "bench/results/algorithms.json", args.smoke)
    kinds = args.types.split(",") if args.types else SMOKE_TYPES if args.smoke else [t.value for t in AlgorithmType]
    kinds = ["sft", *(kind for kind in kinds if kind != "sft")]  # the warm-up first, shared by the rest
    overrides = [*(SMOKE if args.smoke else []), *args.overrides]
    facts = run_facts(smoke=args.smoke)
    root = Path(tempfile.mkdtemp(prefix="trinity_algorithms_"))
    rows = []
    try:
        for kind in kinds:
            rows.append(run_type(kind, root, overrides))
            print(table(rows[-1:]), flush=True)
    finally:
        if args.smoke:
            shutil.rmtree(root, ignore_errors=True)
    print(table(rows))
    write_json(out, {**facts, "overrides": overrides, "root": str(root), "rows": rows})
    failed = [row["type"] for row in rows if row["rc"] != 0]
    if failed:
        raise SystemExit(f"these types did not end with rc 0: {', '.join(failed)}")


if __name__ == "__main__":
    main()
