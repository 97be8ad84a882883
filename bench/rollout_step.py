"""One explore step's rollout time through the task runner and one engine actor, by runner_per_model.

A step is `--tasks` math tasks x `--repeat` samples x exactly `--tokens` new tokens on the tiny
model. Baseline, measured in the same run: the same rows as one `generate` call on a local engine
(the floor for any runner: one batch, no Ray, no workflow, no reward). More concurrent runners let
the actor merge tasks into bigger batches; the ratio column shows what that buys.

    python bench/rollout_step.py [--tasks 8 --repeat 8 --tokens 8 --repeats 5] [--out FILE] [--smoke]

Writes JSON with the run's facts (bench/run_facts.py). `--smoke`: 2 tasks x 2 samples x 2 tokens, one
repeat, to check the bench runs.
"""

import argparse
import os
import statistics
import tempfile
import time

import ray
import torch
from run_facts import SMOKE_HELP, out_path, run_facts, write_json

from trinity.config import compose, validate
from trinity.explorer.backends import create_engine
from trinity.explorer.engine import engine_specs
from trinity.explorer.engine_actor import create_engines
from trinity.explorer.runner import TaskRunner
from trinity.explorer.sampling import SamplingParams


def median_seconds(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="the JSON file (default bench/results/rollout_step.json)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.repeat, args.tokens, args.repeats = 2, 2, 2, 1
    out = out_path(args.out, "bench/results/rollout_step.json", args.smoke)
    facts = run_facts(smoke=args.smoke)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    torch.set_num_threads(1)  # like an engine actor (cluster.cpu_threads_per_device=1)

    with tempfile.TemporaryDirectory() as scratch:
        config = validate(compose([f"checkpoint_root_dir={scratch}", f"model.tiny.cache_dir={scratch}"])).configs[0]
        spec = engine_specs(config)[0]
        rollout = {"max_tokens": args.tokens, "min_tokens": args.tokens}
        tasks = [
            {
                "task_id": i,
                "question": f"{i}+{i}=",
                "answer": str(2 * i),
                "repeat_times": args.repeat,
                "rollout_args": rollout,
            }
            for i in range(args.tasks)
        ]
        local = create_engine(spec)
        prompts = [local.encode(task["question"]) for task in tasks]
        params = SamplingParams(n=args.repeat, max_tokens=args.tokens, min_tokens=args.tokens)
        baseline = median_seconds(lambda: local.generate(prompts, params), args.repeats)

        ray.init(address="local", num_cpus=2, include_dashboard=False)
        try:
            engines = create_engines(config)
            rows = []
            for runners in (1, 2, 4, 8):
                runner = TaskRunner(engines, spec, runner_per_model=runners, max_retry_times=0, max_timeout=600)
                seconds = median_seconds(lambda runner=runner: runner.run(tasks), args.repeats)
                rows.append({"runner_per_model": runners, "step_s": seconds, "over_one_batch": seconds / baseline})
        finally:
            ray.shutdown()

    print(
        f"{args.tasks} tasks x {args.repeat} samples x {args.tokens} tokens, 1 engine actor, median of {args.repeats}"
    )
    print(f"one local generate call (baseline): {baseline:.3f} s")
    print(f"{'runners':>7} {'step s':>8} {'ratio':>6}")
    for row in rows:
        print(f"{row['runner_per_model']:>7} {row['step_s']:>8.3f} {row['over_one_batch']:>6.2f}")
    work = {key: getattr(args, key) for key in ("tasks", "repeat", "tokens", "repeats")}
    write_json(out, {**facts, **work, "baseline_s": baseline, "rows": rows})


if __name__ == "__main__":
    main()
