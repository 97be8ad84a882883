"""LoRA against full fine-tuning on the same GRPO work, on the real model (SmolLM2-135M-Instruct, the
smollm2_math preset). Every run is its own `python -m trinity` process, started as a user starts it; each
LoRA run follows its full-weight twin at once (the machine is shared: pairs see the same load).

- training: the preset's own setup (mode colocate, vLLM, memory sync) for --steps steps, evaluated at the
  start and the end: median seconds of a train step (`time/train`), peak resident memory of the run's whole
  process tree (sampled every 0.2 s), held-out accuracy at the start and the end. LoRA trains at --lora-lr
  (an adapter needs a larger rate than the preset's 5e-6 for all weights; the table says which).
- sync: mode both, each sync method (memory, checkpoint, nccl) into each engine (hf, vllm), --sync-steps
  steps without evaluation: bytes per sync (`sync/bytes`), median seconds the trainer takes to publish
  (`time/sync`) and the explorer to load a version into its engines (`time/weight_load`); LoRA merged into
  the engine's weights (the default) and, for vLLM, unmerged (`explorer.rollout_model.merge_lora=false`).
- engine: three vLLM engines of the real model in this process (no LoRA, an adapter merged, an adapter
  unmerged), each given a random version of its weights (the model's state dict, or the adapter's): seconds
  to load it (`update_weights`), then seconds to generate the preset's rollout batch (4 prompts x 8 samples
  x 48 tokens) and a 128-question evaluation batch, median of --repeats interleaved rounds.
Ratios are LoRA / full of the same method and engine (or of the same round).

    python bench/lora.py [--steps 20] [--sync-steps 3] [--lora-rank 16] [--lora-lr 1e-4] [--repeats 3]
                         [--parts training,sync,engine] [--out docs/benchmarks/lora.json] [--smoke] [OVERRIDE ...]

OVERRIDEs apply to every run (e.g. `explorer.rollout_model.engine_type=hf` for the training pair).

`--smoke`: the tiny model on the default experiment's GRPO part, one pair of 2-step runs (mode both, memory
sync into the HF engine) read for both tables, and the engine part on the tiny model (one small batch, one
round), to check the bench runs.
"""

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from generate_throughput import interleaved_medians
from peer import run_watched
from render_docs import lora_tables
from run_facts import SMOKE_HELP, out_path, run_facts, write_json

from trinity.monitor import read_scalars

PRESET = ["experiment=smollm2_math"]
SMOKE_PRESET = ["stages=[]", "buffer.batch_size=4", "algorithm.repeat_times=4", "data.arithmetic.test_size=16"]
SMOKE_SETUP = ["mode=both", "synchronizer.sync_method=memory", "explorer.rollout_model.engine_type=hf"]
METHODS = ["memory", "checkpoint", "nccl"]
ENGINES = ["hf", "vllm"]
UNMERGED = "explorer.rollout_model.merge_lora=false"
BATCHES = [(4, 8, 48), (128, 1, 48)]  # (prompts, samples each, new tokens): the preset's rollout and evaluation
SMOKE_BATCHES = [(2, 2, 4)]


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


def engine_rows(rank: int, repeats: int, smoke: bool) -> list:
    """The engine part: load and generate seconds of a vLLM engine without LoRA, with the adapter merged and
    with it unmerged, on the same prompts (see the module docstring)."""
    import torch

    from trinity.config import compose, validate
    from trinity.explorer.backends import create_engine
    from trinity.explorer.engine import engine_specs
    from trinity.explorer.sampling import SamplingParams
    from trinity.model.load import load_causal_lm
    from trinity.model.lora import adapter_shapes

    lora = f"model.lora_configs=[{{lora_rank: {rank}, lora_alpha: {2 * rank}}}]"
    sides = {"full": [], "lora merged": [lora], "lora unmerged": [lora, UNMERGED]}
    generator = torch.Generator().manual_seed(0)
    with tempfile.TemporaryDirectory() as scratch:
        common = [f"checkpoint_root_dir={scratch}", "stages=[]", "explorer.rollout_model.engine_type=vllm"]
        common += [f"model.tiny.cache_dir={scratch}/models"] if smoke else ["model=smollm2", "model.max_model_len=256"]
        engines, versions = {}, {}
        for side, extra in sides.items():
            spec = engine_specs(validate(compose([*common, *extra])).configs[0])[0]
            engines[side] = create_engine(spec)
            if spec.lora is None:
                state = load_causal_lm(spec.weights_path()).state_dict()
                versions[side] = {name: torch.randn_like(t) * 0.02 + t for name, t in state.items()}
            else:
                shapes = adapter_shapes(spec.weights_path(), spec.lora, spec.trust_remote_code)
                versions[side] = {name: torch.randn(s, generator=generator) * 0.02 for name, s in shapes.items()}
        load = {side: [] for side in sides}
        for version in range(1, repeats + 2):  # the first load of each is a warm-up
            for side, engine in engines.items():
                started = time.perf_counter()
                engine.update_weights(versions[side], version=version)
                load[side].append(time.perf_counter() - started)
        codec = next(iter(engines.values())).codec
        rows = []
        for prompts, n, tokens in SMOKE_BATCHES if smoke else BATCHES:
            ids = [codec.encode(f"{i * 7 % 100}+{i * 13 % 100}=") for i in range(prompts)]
            params = SamplingParams(n=n, temperature=1.0, max_tokens=tokens, min_tokens=tokens)
            runs = {side: (lambda e=engine, i=ids, p=params: e.generate(i, p)) for side, engine in engines.items()}
            medians = interleaved_medians(runs, repeats)
            for side in sides:
                rows.append(
                    {
                        "kind": side,
                        "batch": f"{prompts} x {n} x {tokens}",
                        "generate_s": medians[side],
                        "load_s": statistics.median(load[side][1:]),
                        "load_mb": sum(t.numel() * t.element_size() for t in versions[side].values()) / 2**20,
                    }
                )
    return rows


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
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds of the engine part")
    parser.add_argument("--parts", default="training,sync,engine", help="comma-separated: training, sync, engine")
    parser.add_argument("--out", help="the JSON file (default bench/results/lora.json)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("overrides", nargs="*", help="extra overrides of every run")
    args = parser.parse_args()
    out = out_path(args.out, "bench/results/lora.json", args.smoke)
    preset = [*(SMOKE_PRESET if args.smoke else PRESET), *args.overrides]
    steps, sync_steps, repeats = (2, 2, 1) if args.smoke else (args.steps, args.sync_steps, args.repeats)
    lora = lora_overrides(args.lora_rank, args.lora_lr)
    facts = run_facts(smoke=args.smoke)
    root = Path(tempfile.mkdtemp(prefix="trinity_lora_bench_"))
    parts = args.parts.split(",")
    training, sync, engines = [], [], []
    try:
        if "training" in parts:
            common = [*preset, f"buffer.total_steps={steps}", f"explorer.eval_interval={steps}"]
            common += [f"trainer.save_interval={steps}", *(SMOKE_SETUP if args.smoke else [])]
            for kind, extra in (("full", []), ("lora", lora)):
                result = run([*common, *extra], root)
                training.append(training_row(kind, result))
                if args.smoke:
                    sync.append(sync_row("full" if kind == "full" else "lora merged", "memory", "hf", result))
            print(lora_tables({"steps": steps, "lora": lora, "training": training, "preset": preset}), flush=True)
        if "sync" in parts and not args.smoke:
            common = [*preset, "mode=both", f"buffer.total_steps={sync_steps}", "explorer.eval_on_startup=false"]
            common += [f"explorer.eval_interval={10 * sync_steps}", f"trainer.save_interval={sync_steps}"]
            common += ["explorer.rollout_model.engine_num=1"]
            for method in METHODS:
                for engine in ENGINES:
                    setup = [*common, f"synchronizer.sync_method={method}"]
                    setup += [f"explorer.rollout_model.engine_type={engine}"]
                    runs = [("full", []), ("lora merged", lora)]
                    runs += [("lora unmerged", [*lora, UNMERGED])] if engine == "vllm" else []
                    for kind, extra in runs:
                        sync.append(sync_row(kind, method, engine, run([*setup, *extra], root)))
                    print(lora_tables({"sync_steps": sync_steps, "sync": sync[-len(runs) :]}), flush=True)
        if "engine" in parts:
            engines = engine_rows(args.lora_rank, repeats, args.smoke)
            print(lora_tables({"repeats": repeats, "engine": engines}), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    record = {**facts, "preset": preset, "steps": steps, "sync_steps": sync_steps, "lora": lora}
    record.update(training=training, sync=sync, engine=engines, repeats=repeats)
    print(lora_tables(record))
    write_json(out, record)


if __name__ == "__main__":
    main()
