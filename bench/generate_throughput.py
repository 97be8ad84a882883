"""Generate throughput of the rollout engines (vLLM, HF) against raw `model.generate`, on the tiny model,
on a bigger locally built random model and on the real SmolLM2-135M-Instruct (`model=smollm2`: the
smollm2_math preset's rollout batch, 4 prompts x 8 samples x 48 tokens, and its 128-question evaluation).

Every side samples the same prompts for exactly `max_tokens` new tokens (min_tokens = max_tokens, so
early stops do not skew the count), with the same number of threads: the HF engine and raw generate
with `torch.set_num_threads(threads)`, the vLLM engine on `threads` cores it claims for itself. The
engines also record each token's logprob and sample with their own generators. Reported per case:
median seconds over repeats, generated tokens/s and tokens/s per thread, and each engine's time
against raw generate's, all measured in the same run (rounds interleaved: engine, raw, engine, ...).

    python bench/generate_throughput.py [--threads 1] [--repeats 3] [--engines vllm,hf]
                                        [--models tiny,h512-l8,smollm2] [--out bench/results/generate_throughput.json]
                                        [--smoke]

Writes JSON with the run's facts (bench/run_facts.py). `--smoke`: the tiny model, one batch of 2 prompts x 2
samples x 4 tokens, one round, to check the bench runs.
"""

import argparse
import os
import statistics
import tempfile
import time

import torch
from run_facts import SMOKE_HELP, out_path, run_facts, write_json

from trinity.config import compose, validate
from trinity.explorer.backends import create_engine
from trinity.explorer.engine import engine_specs
from trinity.explorer.sampling import SamplingParams
from trinity.model.load import load_causal_lm, resolve_model_path

MODELS = {
    "tiny": ([], [(8, 8, 8), (16, 8, 32)]),  # (prompts, samples per prompt, new tokens)
    "h512-l8": (
        [
            "model.tiny.hidden_size=512",
            "model.tiny.intermediate_size=1536",
            "model.tiny.num_hidden_layers=8",
            "model.tiny.num_attention_heads=8",
            "model.tiny.num_key_value_heads=4",
        ],
        [(8, 8, 256)],
    ),
    "smollm2": (["model=smollm2"], [(4, 8, 48), (128, 1, 48)]),
}
SMOKE_CASES = [(2, 2, 4)]


def interleaved_medians(runs: dict, repeats: int) -> dict:
    """name -> median seconds, each run once as warm-up, then `repeats` rounds of every run in turn."""
    for run in runs.values():
        run()
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def raw_generate(model, pad_id: int, ids: list, n: int, tokens: int):
    batch = [row for row in ids for _ in range(n)]
    width = max(len(row) for row in batch)
    input_ids = torch.tensor([[pad_id] * (width - len(row)) + row for row in batch])
    mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in batch])

    def run() -> None:
        with torch.inference_mode():
            model.generate(
                input_ids=input_ids,
                attention_mask=mask,
                do_sample=True,
                top_k=0,
                max_new_tokens=tokens,
                min_new_tokens=tokens,
                pad_token_id=pad_id,
            )

    return run


def bench_model(name: str, overrides: list, cases: list, engines: list, args, scratch: str) -> list:
    base = [
        f"checkpoint_root_dir={scratch}",
        "stages=[]",
        f"cluster.cpu_threads_per_device={args.threads}",
        "model.max_model_len=320",
    ]
    if "model=smollm2" not in overrides:  # the tiny builds go to a scratch cache; the real model to trinity's
        base.append(f"model.tiny.cache_dir={scratch}/models")
    built = {}
    for engine_type in engines:
        config = validate(compose([*base, *overrides, f"explorer.rollout_model.engine_type={engine_type}"])).configs[0]
        built[engine_type] = create_engine(engine_specs(config)[0])
    codec = next(iter(built.values())).codec
    raw = load_causal_lm(resolve_model_path(config.model))
    parameters = sum(p.numel() for p in raw.parameters())
    rows = []
    for prompts, n, tokens in cases:
        ids = [codec.encode(f"{i * 7 % 100}+{i * 13 % 100}=") for i in range(prompts)]
        params = SamplingParams(n=n, temperature=1.0, max_tokens=tokens, min_tokens=tokens)
        runs = {side: (lambda e=engine, i=ids, p=params: e.generate(i, p)) for side, engine in built.items()}
        runs["raw"] = raw_generate(raw, codec.pad_token_id, ids, n, tokens)
        seconds = interleaved_medians(runs, args.repeats)
        generated = prompts * n * tokens
        for side, value in seconds.items():
            rows.append(
                {
                    "model": name,
                    "parameters": parameters,
                    "batch": prompts * n,
                    "new_tokens": tokens,
                    "side": side,
                    "seconds": value,
                    "tokens_per_s": generated / value,
                    "tokens_per_s_per_thread": generated / value / args.threads,
                    "over_raw": value / seconds["raw"],
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--engines", default="vllm,hf")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--out", help="the JSON file (default bench/results/generate_throughput.json)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.models, args.repeats = "tiny", 1
    out = out_path(args.out, "bench/results/generate_throughput.json", args.smoke)
    torch.set_num_threads(args.threads)
    engines = args.engines.split(",")
    facts, rows = run_facts(smoke=args.smoke), []
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.models.split(","):
            overrides, cases = MODELS[name]
            rows += bench_model(name, overrides, SMOKE_CASES if args.smoke else cases, engines, args, scratch)
    load = os.getloadavg()[0]
    print(f"{args.threads} thread(s) per side, median of {args.repeats} interleaved rounds, load average {load:.2f}")
    print(
        f"{'model':>8} {'params':>7} {'batch':>5} {'tokens':>6} {'side':>5} {'seconds':>8} {'tok/s':>8} "
        f"{'tok/s/thread':>12} {'vs raw':>6}"
    )
    for row in rows:
        print(
            f"{row['model']:>8} {row['parameters'] / 1e6:>6.1f}M {row['batch']:>5} {row['new_tokens']:>6} "
            f"{row['side']:>5} {row['seconds']:>8.3f} {row['tokens_per_s']:>8.0f} "
            f"{row['tokens_per_s_per_thread']:>12.0f} {row['over_raw']:>6.2f}"
        )
    write_json(out, {**facts, "threads": args.threads, "repeats": args.repeats, "load_after": load, "rows": rows})


if __name__ == "__main__":
    main()
