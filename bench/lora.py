"""LoRA against full fine-tuning on the same GRPO work, on the real model (SmolLM2-135M-Instruct, the
smollm2_math preset). Every run is its own `python -m trinity` process, started as a user starts it; each
LoRA run follows its full-weight twin at once (the machine is shared: pairs see the same load).

- training: the preset's own setup (mode colocate, vLLM, memory sync) for --steps steps, evaluated at the
  start and the end: median seconds of a train step (`time/train`), peak resident memory of the run's whole
  process tree (sampled every 0.2 s), held-out accuracy at the start and the end. LoRA trains at --lora-lr
  (an adapter needs a larger rate than the preset's 5e-6 for all weights; the table says which).
- sync: mode both, each sync method (memory, checkpoint, nccl) into each engine (hf, vllm), --sync-steps
  steps without evaluation: bytes per sync (`sync/bytes`), median seconds the trainer takes to publish
  (`time/sync`) and the explorer to load a version into its engines (`time/weight_load`).
Ratios are LoRA / full of the same pair.

    python bench/lora.py [--steps 20] [--sync-steps 3] [--lora-rank 16] [--lora-lr 1e-4] [--parts training,sync]
                         [--out docs/benchmarks/lora.json] [--smoke] [OVERRIDE ...]

OVERRIDEs apply to every run (e.g. `explorer.rollout_model.engine_type=hf` for the training pair).

`--smoke`: the tiny model on the default experiment's GRPO part, one pair of 2-step runs (mode both, memory
sync into the HF engine) read for both tables, to check the bench runs.
"""

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from peer import run_watched
from render_docs import lora_tables
from run_facts import SMOKE_HELP, out_path, run_facts, write_json

from trinity.monitor import read_scalars

PRESET = ["experiment=smollm2_math"]
SMOKE_PRESET = ["stages=[]", "buffer.batch_size=4", "algorithm.repeat_times=4", "data.arithmetic.test_size=16"]
SMOKE_SETUP = ["mode=both", "synchronizer.sync_method=memory", "explorer.rollout_model.engine_type=hf"]
METHODS = ["memory", "checkpoint", "nccl"]
ENGINES = ["hf", "vllm"]


def lora_overrides(rank: int, lr: float) -> list:
    return [f"model.lora_configs=[{{lora_rank: {rank}, lora_alpha: {2 * rank}}}]", f"algorithm.optimizer.lr={lr}"]


def run(overrides: list, root: Path) -> dict:
    """One run: its return code, wall seconds, peak tree RSS and the job directory's scalars."""
    run_dir = Path(tempfile.mkdtemp(dir=root))
    argv = [sys.executable, "-m", "trinity", f"checkpoint_root_dir={run_dir}", "name=lora_bench", *overrides]
    started = time.perf_counter()
    _, peak_mb = run_watched(argv, " ".join(argv))
    monitor = next(run_dir.glob("*/lora_bench/monitor/tensorboard"))
    return {
        "wall_s": time.perf_counter() - started,
        "peak_rss_mb": peak_mb,
        "trainer": read_scalars(str(monitor / "trainer")),
        "explorer": read_scalars(str(monitor / "explorer")),
    }


def median(series: list):
    return statistics.median(value for _, value in series) if series else None


def accuracy(explorer: dict) -> tuple:
    """Held-out accuracy at the first and the last evaluation."""
    tag = next((tag for tag in explorer if tag.startswith("eval/") and tag.endswith("/accuracy/mean")), None)
    points = explorer.get(tag, [])
    return (points[0][1], points[-1][1]) if points else (None, None)


def training_row(kind: str, result: dict) -> dict:
    start, final = accuracy(result["explorer"])
    return {
        "kind": kind,
        "train_step_s": median(result["trainer"].get("time/train", [])),
        "peak_rss_mb": result["peak_rss_mb"],
        "accuracy_start": start,
        "accuracy_final": final,
        "wall_s": result["wall_s"],
    }


def sync_row(kind: str, method: str, engine: str, result: dict) -> dict:
    return {
        "kind": kind,
        "method": method,
        "engine": engine,
        "sync_bytes": median(result["trainer"].get("sync/bytes", [])),
        "publish_s": median(result["trainer"].get("time/sync", [])),
        "load_s": median(result["explorer"].get("time/weight_load", [])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20, help="train steps of the training pair")
    parser.add_argument("--sync-steps", type=int, default=3, help="train steps (and syncs) of each sync run")
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--lora-lr", type=float, default=1e-4)
    parser.add_argument("--parts", default="training,sync", help="comma-separated: training, sync")
    parser.add_argument("--out", help="the JSON file (default bench/results/lora.json)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("overrides", nargs="*", help="extra overrides of every run")
    args = parser.parse_args()
    out = out_path(args.out, "bench/results/lora.json", args.smoke)
    preset = [*(SMOKE_PRESET if args.smoke else PRESET), *args.overrides]
    steps, sync_steps = (2, 2) if args.smoke else (args.steps, args.sync_steps)
    lora = lora_overrides(args.lora_rank, args.lora_lr)
    facts = run_facts(smoke=args.smoke)
    root = Path(tempfile.mkdtemp(prefix="trinity_lora_bench_"))
    parts = args.parts.split(",")
    training, sync = [], []
    try:
        if "training" in parts:
            common = [*preset, f"buffer.total_steps={steps}", f"explorer.eval_interval={steps}"]
            common += [f"trainer.save_interval={steps}", *(SMOKE_SETUP if args.smoke else [])]
            for kind, extra in (("full", []), ("lora", lora)):
                result = run([*common, *extra], root)
                training.append(training_row(kind, result))
                if args.smoke:
                    sync.append(sync_row(kind, "memory", "hf", result))
            print(lora_tables({"steps": steps, "lora": lora, "training": training}), flush=True)
        if "sync" in parts and not args.smoke:
            common = [*preset, "mode=both", f"buffer.total_steps={sync_steps}", "explorer.eval_on_startup=false"]
            common += [f"explorer.eval_interval={10 * sync_steps}", f"trainer.save_interval={sync_steps}"]
            common += ["explorer.rollout_model.engine_num=1"]
            for method in METHODS:
                for engine in ENGINES:
                    setup = [*common, f"synchronizer.sync_method={method}"]
                    setup += [f"explorer.rollout_model.engine_type={engine}"]
                    for kind, extra in (("full", []), ("lora", lora)):
                        sync.append(sync_row(kind, method, engine, run([*setup, *extra], root)))
                    print(lora_tables({"sync_steps": sync_steps, "sync": sync[-2:]}), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    record = {**facts, "preset": preset, "steps": steps, "sync_steps": sync_steps, "lora": lora}
    record.update(training=training, sync=sync)
    print(lora_tables(record))
    write_json(out, record)


if __name__ == "__main__":
    main()
