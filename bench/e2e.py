"""End-to-end benchmark: the default GRPO stage, synchronous (sync_offset=0) vs one-step off-policy (sync_offset=1).

Both runs use the same seed, batch and step count on a fresh local Ray cluster of this machine. For
each it reports the steady-state step time (median gap between trainer steps), its median split
(rollout, train, sync, waiting), throughput (trained response tokens per second of step time), the
peak resident memory of the trainer rank and engine processes, and the ratio off-policy / synchronous.
Prints a table and writes JSON with the run's facts (bench/run_facts.py).

    python bench/e2e.py [--steps 12] [--engine hf|vllm] [--out bench/results/e2e.json] [--smoke] [override ...]

`--smoke`: 2 steps of 4 tasks a run (one gap between trainer steps), to check the bench runs.
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import ray
from run_facts import SMOKE_HELP, out_path, run_facts, write_json

from trinity.config import compose, validate
from trinity.monitor import read_scalars
from trinity.orchestration.cluster import connect
from trinity.orchestration.job import run_job

SPLIT = {
    "rollout": ("explorer", "time/rollout"),
    "  of which rewards": ("explorer", "rollout/time/reward_s"),
    "write": ("explorer", "time/write"),
    "explorer sync": ("explorer", "time/sync"),
    "train": ("trainer", "time/train"),
    "trainer sync": ("trainer", "time/sync"),
    "wait for batch": ("trainer", "time/wait_for_batch"),
}


def peak_rss_mb(pid: int) -> float:
    """VmHWM of a live process: its peak resident set since it started."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_once(offset: int, steps: int, extra: list, root: Path) -> dict:
    config = validate(
        compose(
            [
                f"checkpoint_root_dir={root}",
                "stages=[]",
                f"name=offset{offset}",
                f"synchronizer.sync_offset={offset}",
                f"buffer.total_steps={steps}",
                "explorer.eval_on_startup=false",
                f"explorer.eval_interval={10 * steps}",
                "trainer.save_interval=0",
                *extra,
            ]
        )
    ).configs[0]
    connect(config)
    peaks: dict = {}
    stop = {"done": False}

    def watch() -> None:  # sample peak RSS of the job's worker processes while it runs
        import threading

        def loop():
            while not stop["done"]:
                for role in (config.explorer.name, config.trainer.name):
                    try:
                        handle = ray.get_actor(role, namespace=config.ray_namespace)
                        for name, pid in ray.get(handle.process_ids.remote(), timeout=5).items():
                            peaks[name] = max(peaks.get(name, 0.0), peak_rss_mb(pid))
                    except Exception:  # noqa: BLE001 - the actors start and stop during the run
                        pass
                time.sleep(1.0)

        threading.Thread(target=loop, daemon=True).start()

    watch()
    started = time.perf_counter()
    run_job(config)
    wall = time.perf_counter() - started
    stop["done"] = True
    job = Path(config.checkpoint_job_dir) / "monitor" / "tensorboard"
    scalars = {role: read_scalars(str(job / role)) for role in ("explorer", "trainer")}
    split = {
        name: statistics.median([v for _, v in scalars[role].get(tag, [(0, 0.0)])])
        for name, (role, tag) in SPLIT.items()
    }
    # steady state: the median gap between consecutive trainer steps, without start-up and shut-down
    stamps = [t for _, t, _ in read_scalars(str(job / "trainer"), wall_time=True)["time/train"]]
    step_s = statistics.median(b - a for a, b in zip(stamps, stamps[1:], strict=False))
    lengths = [v for _, v in scalars["trainer"]["batch/response_length_mean"]]
    tokens_per_step = statistics.median(lengths) * config.buffer.train_batch_size
    return {
        "wall_s": wall,
        "step_s": step_s,
        "split_s": split,
        "peak_rss_mb": peaks,
        "trained_response_tokens_per_s": tokens_per_step / step_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--out", help="the JSON file (default bench/results/e2e.json)")
    parser.add_argument("--engine", choices=["hf", "vllm"], default="hf", help="the rollout engine of both runs")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("overrides", nargs="*", help="extra config overrides for both runs")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.overrides = 2, ["buffer.batch_size=4", *args.overrides]
    out = out_path(args.out, "bench/results/e2e.json", args.smoke)
    facts = run_facts(smoke=args.smoke)
    with tempfile.TemporaryDirectory() as root:
        extra = [f"explorer.rollout_model.engine_type={args.engine}", *args.overrides]
        results = {offset: run_once(offset, args.steps, extra, Path(root)) for offset in (0, 1)}
    sync, off = results[0], results[1]
    rows = [("step time (s)", sync["step_s"], off["step_s"])]
    rows += [(f"  {name} (s)", sync["split_s"][name], off["split_s"][name]) for name in SPLIT]
    rows.append(("trained tokens/s", sync["trained_response_tokens_per_s"], off["trained_response_tokens_per_s"]))
    print(f"{'':24}{'sync_offset=0':>15}{'sync_offset=1':>15}{'ratio 1/0':>11}")
    for name, a, b in rows:
        print(f"{name:24}{a:15.3f}{b:15.3f}{(b / a if a else float('nan')):11.2f}")
    for offset, result in results.items():
        peaks = ", ".join(f"{name} {mb:.0f} MB" for name, mb in sorted(result["peak_rss_mb"].items()))
        print(f"peak RSS, sync_offset={offset}: {peaks}")
    record = {**facts, "steps": args.steps, "engine": args.engine, "overrides": args.overrides}
    write_json(out, {**record, "results": {str(offset): result for offset, result in results.items()}})


if __name__ == "__main__":
    main()
