"""trinity against TRL's GRPOTrainer and a bare single-process GRPO loop, on the same GRPO work (issue 14).

Every contestant runs as its own process on the same locally built model and arithmetic train set
(bench/peer_loops.py says what "the same work" is, setting by setting): trinity synchronous
(`sync_offset=0`) and one-step off-policy (`sync_offset=1`), each in mode both (explorer and trainer on their
own device processes) and in mode colocate (one device process, taking turns), through `python -m trinity
stages=[]`; TRL's GRPOTrainer and the bare loop through bench/peer_loops.py. Rounds are interleaved (each
round runs every contestant once, in turn) because this machine is shared and noisy; the load average is noted
per run.

Per run: steady-state seconds per step (median gap between finished steps after `--warmup` steps),
start-up (process start to the first finished step), and peak resident memory summed over the run's
whole process tree (sampled every 0.2 s; Ray's workers are children of the driver's local cluster).
Per contestant: medians over rounds, and the median over rounds of its ratio to TRL and to the bare
loop measured in the same round. Prints a table and writes JSON.

    python bench/peer.py [--model tiny|larger] [--rounds 5] [--steps 16] [--warmup 4] [--out FILE]
                         [--contestants NAME ...]

Needs the bench extra (`pip install -e ".[bench]"`, TRL 1.16).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from trinity.config import compose, validate
from trinity.model.tiny import ensure_tiny_model
from trinity.monitor import read_scalars
from trinity.orchestration.job import prepare_data

MODELS = {  # trinity overrides; `larger` is ~17M parameters with up to 64-token responses
    "tiny": ["model.max_response_tokens=8"],
    "larger": ["model.tiny.hidden_size=384", "model.tiny.intermediate_size=1536", "model.tiny.num_hidden_layers=8",
               "model.tiny.num_attention_heads=6", "model.tiny.num_key_value_heads=2",
               "model.max_response_tokens=64"],
}  # fmt: skip
TRINITY = {  # contestant -> its mode and synchronizer.sync_offset
    "trinity sync": ("both", 0),
    "trinity off-policy": ("both", 1),
    "trinity colocate": ("colocate", 0),
    "trinity colocate off-policy": ("colocate", 1),
}
CONTESTANTS = (*TRINITY, "trl", "bare")
LOOPS = Path(__file__).with_name("peer_loops.py")


def prepare(model: str, root: Path):
    """The validated default GRPO config for `model`, with its model built and its data generated."""
    config = validate(compose([f"checkpoint_root_dir={root}", "stages=[]", *MODELS[model]])).configs[0]
    prepare_data(config)
    ensure_tiny_model(config.model)
    return config


def command(name: str, config, model: str, steps: int, run_dir: Path) -> list:
    if name in TRINITY:
        mode, offset = TRINITY[name]
        return [sys.executable, "-m", "trinity", "stages=[]", f"checkpoint_root_dir={run_dir}", "name=peer",
                f"mode={mode}", f"buffer.total_steps={steps}", f"synchronizer.sync_offset={offset}",
                "explorer.eval_on_startup=false",
                f"explorer.eval_interval={10 * steps}", "trainer.save_interval=0", *MODELS[model]]  # fmt: skip
    return [sys.executable, str(LOOPS), name, "--model-dir", config.model.model_path, "--steps", str(steps),
            "--data", config.buffer.explorer_input.taskset.path,
            "--max-tokens", str(config.model.max_response_tokens)]  # fmt: skip


def tree_rss_mb(process: psutil.Process) -> float:
    """The resident memory of `process` and its descendants; 0 when one ended while the tree was listed
    (the next sample counts it again)."""
    try:
        members = [process, *process.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0
    for member in members:
        try:
            total += member.memory_info().rss
        except psutil.Error:  # gone between the listing and the read
            pass
    return total / 2**20


def run(name: str, config, model: str, steps: int, scratch: Path) -> dict:
    """One run of one contestant: its finished-step times, peak tree RSS and start time."""
    run_dir = Path(tempfile.mkdtemp(dir=scratch))
    load = os.getloadavg()[0]
    started = time.time()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    argv = command(name, config, model, steps, run_dir)
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    peak, watched = [0.0], psutil.Process(child.pid)

    def sample() -> None:
        while child.poll() is None:
            peak[0] = max(peak[0], tree_rss_mb(watched))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = child.communicate()
    sampler.join()
    if child.returncode:
        raise RuntimeError(f"{name} exited {child.returncode}:\n{output[-3000:]}")
    stamps = step_times(name, output, run_dir)
    if len(stamps) != steps:
        raise RuntimeError(f"{name} reported {len(stamps)} steps of {steps}")
    return {"stamps": stamps, "started": started, "peak_rss_mb": peak[0], "load_avg": load}


def step_times(name: str, output: str, run_dir: Path) -> list:
    if name.startswith("trinity"):
        events = read_scalars(str(run_dir / "trinity" / "peer" / "monitor" / "tensorboard" / "trainer"), wall_time=True)
        return [t for _, t, _ in events["actor/loss"]]
    return [json.loads(line)["t"] for line in output.splitlines() if line.startswith('{"step"')]


def summarise(result: dict, warmup: int) -> dict:
    stamps = result["stamps"]
    gaps = [b - a for a, b in zip(stamps[warmup:], stamps[warmup + 1 :], strict=False)]
    return {"step_s": statistics.median(gaps), "startup_s": stamps[0] - result["started"],
            "peak_rss_mb": result["peak_rss_mb"], "load_avg": result["load_avg"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="tiny")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=4, help="finished steps left out of the steady state")
    parser.add_argument("--out", default="bench/results/peer.json")
    parser.add_argument("--contestants", nargs="+", choices=CONTESTANTS, default=list(CONTESTANTS),
                        help="a subset to run (the baselines trl and bare always run: ratios need them)")  # fmt: skip
    args = parser.parse_args()
    contestants = [name for name in CONTESTANTS if name in {*args.contestants, "trl", "bare"}]
    with tempfile.TemporaryDirectory() as scratch:
        config = prepare(args.model, Path(scratch))
        rounds = []
        for number in range(args.rounds):
            rounds.append({name: summarise(run(name, config, args.model, args.steps, Path(scratch)), args.warmup)
                           for name in contestants})  # fmt: skip
            print(f"round {number + 1}: " + ", ".join(f"{n} {r['step_s']:.3f} s/step" for n, r in rounds[-1].items()))
    table = {name: table_row(name, rounds) for name in contestants}
    print_table(table, args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": args.model, "steps": args.steps, "warmup": args.warmup, "rounds": rounds,
                               "table": table, "cpus": os.cpu_count()}, indent=2))  # fmt: skip
    print(f"wrote {out}")


def table_row(name: str, rounds: list) -> dict:
    def median(key: str, of: str = name) -> float:
        return statistics.median(r[of][key] for r in rounds)

    return {"step_s": median("step_s"), "startup_s": median("startup_s"), "peak_rss_mb": median("peak_rss_mb"),
            "vs_bare": statistics.median(r[name]["step_s"] / r["bare"]["step_s"] for r in rounds),
            "vs_trl": statistics.median(r[name]["step_s"] / r["trl"]["step_s"] for r in rounds),
            "load_avg": median("load_avg")}  # fmt: skip


def print_table(table: dict, args) -> None:
    print(f"\nGRPO steps, {args.model} model, {args.rounds} interleaved rounds of {args.steps} steps "
          f"(steady state after {args.warmup}); medians over rounds")  # fmt: skip
    print(f"{'':28}{'s/step':>8}{'vs bare':>9}{'vs TRL':>8}{'peak RSS MB':>13}{'start-up s':>12}{'load':>6}")
    for name, row in table.items():
        print(f"{name:28}{row['step_s']:8.3f}{row['vs_bare']:9.2f}{row['vs_trl']:8.2f}"
              f"{row['peak_rss_mb']:13.0f}{row['startup_s']:12.1f}{row['load_avg']:6.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
