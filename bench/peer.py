"""trinity against TRL's GRPOTrainer and a bare single-process GRPO loop, on the same GRPO work.

Every contestant runs as its own process on the same model and train set: trinity through `python -m
trinity` (synchronous `sync_offset=0` and one-step off-policy `sync_offset=1`, in mode both, explorer and
trainer on their own device processes, and in mode colocate, one device process taking turns); TRL's
GRPOTrainer and the bare loop through bench/peer_loops.py. Each contestant runs in a virtual environment
holding only what its users install (bench/peer_envs.py, created on first use): trinity in the README's
install (with vLLM and the GGUF reader for the real model), never in the development environment, and the
baselines in theirs. The baselines' work
is read from trinity's resolved config (`work_of`: prompts, samples, tokens, learning rate, chat prompts);
the settings they hard-code are checked against it by tests/test_bench_peer.py. Rounds are interleaved
(each round runs every contestant once, in turn) because this machine is shared and noisy.

Models: `tiny` (trinity's ~1M-parameter model, the default experiment's arithmetic, 16 prompts x 8 samples x
<= 8 tokens), `larger` (~17M parameters, <= 64 tokens) and `smollm2` (SmolLM2-135M-Instruct, the
smollm2_math preset's chat word problems, 4 prompts x 4 samples x <= 32 tokens; trinity rolls out with vLLM
as the preset does, and with its HF engine as `trinity colocate hf`).

Per run: steady-state seconds per step (median gap between finished steps after `--warmup` steps),
start-up (process start to the first finished step), and peak resident memory summed over the run's
whole process tree (sampled every 0.2 s; Ray's workers are children of the driver's local cluster).
Per contestant: medians over rounds, and the median over rounds of its ratio to TRL and to the bare
loop measured in the same round. Prints a table and writes JSON with the commit, date, machine, load,
command, every contestant's package versions and the work.

    python bench/peer.py [--model tiny|larger|smollm2] [--rounds 5] [--steps 16] [--warmup 4] [--out FILE]
                         [--contestants NAME ...] [--smoke] [--render FILE]

`--render FILE` prints the markdown tables of a peer JSON file as docs/benchmarks.md shows them
(bench/render_docs.py). `--smoke` checks the bench in seconds, on the tiny model, one round of 3 steps:
`trinity colocate` and the bare loop, both run by this environment's python (a smoke run creates no
environment: that is a pip install of minutes, and CI starts without them; the code is the same, only the
figures would not be the contestants' own); TRL is not installed in the development environment, so its loop
is left out, and the JSON says so.
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
from peer_envs import ensure_env, versions
from run_facts import SMOKE_HELP, out_path, run_facts, write_json

from trinity.config import compose, validate
from trinity.model.load import resolve_model_path
from trinity.monitor import read_scalars
from trinity.orchestration.job import prepare_data

TINY_LARGER = [
    "model.tiny.hidden_size=384",
    "model.tiny.intermediate_size=1536",
    "model.tiny.num_hidden_layers=8",
    "model.tiny.num_attention_heads=6",
    "model.tiny.num_key_value_heads=2",
]
MODELS = {  # trinity overrides of each model's work
    "tiny": ["stages=[]", "model.max_response_tokens=8"],
    "larger": ["stages=[]", *TINY_LARGER, "model.max_response_tokens=64"],
    "smollm2": [
        "experiment=smollm2_math",
        "buffer.batch_size=4",
        "algorithm.repeat_times=4",
        "model.max_response_tokens=32",
        "algorithm.advantage_fn_args.std_threshold=null",
    ],
}
TRINITY = {  # contestant -> its overrides
    "trinity sync": ["mode=both", "synchronizer.sync_offset=0"],
    "trinity off-policy": ["mode=both", "synchronizer.sync_offset=1"],
    "trinity colocate": ["mode=colocate", "synchronizer.sync_offset=0"],
    "trinity colocate off-policy": ["mode=colocate", "synchronizer.sync_offset=1"],
    "trinity colocate hf": ["mode=colocate", "explorer.rollout_model.engine_type=hf"],
}
DEFAULT_CONTESTANTS = {
    "tiny": ["trinity sync", "trinity off-policy", "trinity colocate", "trinity colocate off-policy"],
    "larger": ["trinity sync", "trinity off-policy", "trinity colocate", "trinity colocate off-policy"],
    "smollm2": ["trinity colocate", "trinity colocate hf"],
}
BASELINES = ("trl", "bare")
LOOPS = Path(__file__).with_name("peer_loops.py")
SMOKE_SKIPPED = {
    "trl": "a smoke run creates no environment (a pip install of minutes), and TRL is not installed in the "
    "development environment"
}


def prepare(model: str, root: Path):
    """The validated GRPO config of `model`'s work, with its model built (or converted) and its data generated."""
    config = validate(compose([f"checkpoint_root_dir={root}", *MODELS[model]])).configs[0]
    prepare_data(config)
    config.model.model_path = resolve_model_path(config.model)
    return config


def work_of(config) -> dict:
    """The GRPO work of a resolved config, as the baselines must reproduce it."""
    algorithm, taskset = config.algorithm, config.buffer.explorer_input.taskset
    return {
        "prompts": config.buffer.batch_size,
        "group": algorithm.repeat_times,
        "max_tokens": config.model.max_response_tokens,
        "lr": algorithm.optimizer.lr,
        "system_prompt": taskset.format.system_prompt,
        "temperature": taskset.rollout_args.temperature,
        "top_p": taskset.rollout_args.top_p,
        "top_k": taskset.rollout_args.top_k,
        "kl_loss_fn": algorithm.kl_loss_fn,
        "kl_coef": algorithm.kl_loss_fn_args.get("kl_coef", 0.0) if algorithm.kl_loss_fn != "none" else 0.0,
        "format_bonus": taskset.reward_fn_args.get("format_bonus", 0.1),
        "clip": algorithm.policy_loss_fn_args.get("clip_range"),
        "loss_agg_mode": algorithm.policy_loss_fn_args.get("loss_agg_mode"),
        "advantage_epsilon": algorithm.advantage_fn_args.get("epsilon"),
        "weight_decay": algorithm.optimizer.weight_decay,
        "lr_scheduler": algorithm.optimizer.lr_scheduler_type.value,
        "grad_clip": config.trainer.grad_clip,
        "ppo_epochs": config.trainer.ppo_epochs,
    }


def baseline_python(name: str, smoke: bool) -> Path:
    """The baseline's own environment's python; in a smoke run this environment's (see the module's doc)."""
    return Path(sys.executable) if smoke else ensure_env(name)


def trinity_python(model: str, smoke: bool) -> Path:
    """trinity's environment as its users install it (bench/peer_envs.py): the README's install, or for the real
    model the one docs/models.md gives (vLLM and the GGUF reader); in a smoke run this environment's."""
    if smoke:
        return Path(sys.executable)
    return ensure_env("trinity-vllm" if model == "smollm2" else "trinity")


def command(name: str, config, model: str, steps: int, run_dir: Path, smoke: bool = False) -> list:
    if name in TRINITY:
        return [
            str(trinity_python(model, smoke)),
            "-m",
            "trinity",
            *MODELS[model],
            f"checkpoint_root_dir={run_dir}",
            "name=peer",
            *TRINITY[name],
            f"buffer.total_steps={steps}",
            "explorer.eval_on_startup=false",
            f"explorer.eval_interval={10 * steps}",
            "trainer.save_interval=0",
        ]
    work = work_of(config)
    loop = [str(baseline_python(name, smoke)), str(LOOPS), name, "--model-dir", config.model.model_path]
    loop += ["--data", config.buffer.explorer_input.taskset.path, "--steps", str(steps)]
    loop += ["--prompts", str(work["prompts"]), "--group", str(work["group"])]
    loop += ["--max-tokens", str(work["max_tokens"]), "--lr", str(work["lr"])]
    loop += ["--temperature", str(work["temperature"]), "--kl-coef", str(work["kl_coef"])]
    loop += ["--format-bonus", str(work["format_bonus"])]
    return loop + (["--system-prompt", work["system_prompt"]] if work["system_prompt"] else [])


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


def run(name: str, config, model: str, steps: int, scratch: Path, smoke: bool = False) -> dict:
    """One run of one contestant: its finished-step times, peak tree RSS and start time."""
    run_dir = Path(tempfile.mkdtemp(dir=scratch))
    load = os.getloadavg()[0]
    started = time.time()
    output, peak_mb = run_watched(command(name, config, model, steps, run_dir, smoke), name)
    stamps = step_times(name, output, run_dir)
    if len(stamps) != steps:
        raise RuntimeError(f"{name} reported {len(stamps)} steps of {steps}")
    return {"stamps": stamps, "started": started, "peak_rss_mb": peak_mb, "load_avg": load}


def run_watched(argv: list, name: str) -> tuple:
    """Run `argv` (Ray's auth off) to its end, sampling its process tree's resident memory every 0.2 s;
    (its combined output, the peak in MB). A non-zero exit raises with the output's end."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
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
    return output, peak[0]


def step_times(name: str, output: str, run_dir: Path) -> list:
    if name.startswith("trinity"):
        events = read_scalars(str(run_dir / "trinity" / "peer" / "monitor" / "tensorboard" / "trainer"), wall_time=True)
        return [t for _, t, _ in events["actor/loss"]]
    return [json.loads(line)["t"] for line in output.splitlines() if line.startswith('{"step"')]


def summarise(result: dict, warmup: int) -> dict:
    stamps = result["stamps"]
    gaps = [b - a for a, b in zip(stamps[warmup:], stamps[warmup + 1 :], strict=False)]
    return {
        "step_s": statistics.median(gaps),
        "startup_s": stamps[0] - result["started"],
        "peak_rss_mb": result["peak_rss_mb"],
        "load_avg": result["load_avg"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="tiny")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=4, help="finished steps left out of the steady state")
    parser.add_argument("--out", help="the JSON file (default bench/results/peer_<model>.json)")
    parser.add_argument(
        "--contestants",
        nargs="+",
        choices=sorted(TRINITY),
        help="trinity contestants (default: the model's; the baselines trl and bare always run)",
    )
    parser.add_argument("--render", type=Path, help="print the markdown table of a peer JSON file and exit")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.render:
        from render_docs import peer_tables

        print(peer_tables(json.loads(args.render.read_text())))
        return
    skipped = {}
    if args.smoke:
        args.model, args.rounds, args.steps, args.warmup = "tiny", 1, 3, 1
        args.contestants, skipped = args.contestants or ["trinity colocate"], SMOKE_SKIPPED
    out = out_path(args.out, f"bench/results/peer_{args.model}.json", args.smoke)
    contestants = [*(args.contestants or DEFAULT_CONTESTANTS[args.model]), *(b for b in BASELINES if b not in skipped)]
    facts = {
        **run_facts(smoke=args.smoke),
        "versions": contestant_versions(contestants, args.model, args.smoke),
        "skipped": skipped,
    }
    with tempfile.TemporaryDirectory() as scratch:
        config = prepare(args.model, Path(scratch))
        rounds = []
        for number in range(args.rounds):
            rounds.append(
                {
                    name: summarise(run(name, config, args.model, args.steps, Path(scratch), args.smoke), args.warmup)
                    for name in contestants
                }
            )
            print(f"round {number + 1}: " + ", ".join(f"{n} {r['step_s']:.3f} s/step" for n, r in rounds[-1].items()))
        work = work_of(config)
    table = {name: table_row(name, rounds) for name in contestants}
    print_table(table, args)
    record = {**facts, "model": args.model, "steps": args.steps, "warmup": args.warmup, "work": work}
    write_json(out, {**record, "rounds": rounds, "table": table})


def contestant_versions(contestants: list, model: str, smoke: bool = False) -> dict:
    """Each contestant's package versions, read in the environment it runs in."""
    trinity = versions(trinity_python(model, smoke))
    return {name: trinity if name in TRINITY else versions(baseline_python(name, smoke)) for name in contestants}


def table_row(name: str, rounds: list) -> dict:
    def median(key: str) -> float:
        return statistics.median(r[name][key] for r in rounds)

    def ratio(key: str, to: str):
        """The median over rounds of the ratio to `to`; None when `to` did not run (a smoke run's TRL)."""
        if to not in rounds[0]:
            return None
        return statistics.median(r[name][key] / r[to][key] for r in rounds)

    return {
        "step_s": median("step_s"),
        "startup_s": median("startup_s"),
        "peak_rss_mb": median("peak_rss_mb"),
        "vs_bare": ratio("step_s", "bare"),
        "vs_trl": ratio("step_s", "trl"),
        "rss_vs_trl": ratio("peak_rss_mb", "trl"),
        "startup_vs_trl": ratio("startup_s", "trl"),
        "load_avg": median("load_avg"),
    }


def print_table(table: dict, args) -> None:
    print(
        f"\nGRPO steps, {args.model} model, {args.rounds} interleaved rounds of {args.steps} steps "
        f"(steady state after {args.warmup}); medians over rounds"
    )
    print(
        f"{'':28}{'s/step':>8}{'vs bare':>9}{'vs TRL':>8}{'peak RSS MB':>13}{'vs TRL':>8}{'start-up s':>12}"
        f"{'vs TRL':>8}{'load':>6}"
    )

    def ratio(value, width: int) -> str:
        return f"{value:{width}.2f}" if value is not None else f"{'-':>{width}}"

    for name, row in table.items():
        print(
            f"{name:28}{row['step_s']:8.3f}{ratio(row['vs_bare'], 9)}{ratio(row['vs_trl'], 8)}"
            f"{row['peak_rss_mb']:13.0f}{ratio(row['rss_vs_trl'], 8)}{row['startup_s']:12.1f}"
            f"{ratio(row['startup_vs_trl'], 8)}{row['load_avg']:6.1f}"
        )


if __name__ == "__main__":
    main()
