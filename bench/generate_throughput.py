"""Generate throughput of the hf rollout engine on the tiny model, against raw `model.generate`.

Both sides sample the same left-padded batch with KV cache for exactly `max_tokens` new tokens
(min_tokens = max_tokens, so early stops do not skew the count); the engine additionally records
each token's logprob and samples with its own generator. Reported: median seconds over repeats,
generated tokens/s, and engine/raw time ratio (1.0 = no overhead), measured in the same run.

    python bench/generate_throughput.py [--threads 1] [--repeats 5] [--out bench/results/generate_throughput.json]
"""

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from trinity.config import compose, validate
from trinity.explorer.backends import create_engine, engine_specs
from trinity.explorer.sampling import SamplingParams
from trinity.model.load import load_causal_lm

CASES = [(1, 8, 8), (8, 8, 8), (8, 8, 32), (16, 8, 32)]  # (prompts, samples per prompt, new tokens)


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="bench/results/generate_throughput.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as scratch:
        config = validate(compose([f"checkpoint_root_dir={scratch}", f"model.tiny.cache_dir={scratch}"])).configs[0]
        engine = create_engine(engine_specs(config)[0])
        raw = load_causal_lm(config.model.model_path)
        parameters = sum(p.numel() for p in raw.parameters())
        rows = []
        for prompts, n, tokens in CASES:
            texts = [f"{i * 7 % 100}+{i * 13 % 100}=" for i in range(prompts)]
            ids = [engine.encode(text) for text in texts]
            params = SamplingParams(n=n, temperature=1.0, max_tokens=tokens, min_tokens=tokens)
            batch = [row for row in ids for _ in range(n)]
            width = max(len(row) for row in batch)
            input_ids = torch.tensor([[engine.codec.pad_token_id] * (width - len(row)) + row for row in batch])
            mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in batch])

            def run_engine(ids=ids, params=params):
                engine.generate(ids, params)

            def run_raw(input_ids=input_ids, mask=mask, tokens=tokens):
                with torch.inference_mode():
                    raw.generate(
                        input_ids=input_ids,
                        attention_mask=mask,
                        do_sample=True,
                        top_k=0,
                        max_new_tokens=tokens,
                        min_new_tokens=tokens,
                        pad_token_id=engine.codec.pad_token_id,
                    )

            engine_s, raw_s = median_seconds(run_engine, args.repeats), median_seconds(run_raw, args.repeats)
            generated = prompts * n * tokens
            rows.append(
                {
                    "batch": prompts * n,
                    "new_tokens": tokens,
                    "engine_s": engine_s,
                    "raw_s": raw_s,
                    "engine_tokens_per_s": generated / engine_s,
                    "raw_tokens_per_s": generated / raw_s,
                    "engine_over_raw": engine_s / raw_s,
                }
            )

    print(f"tiny model: {parameters / 1e6:.2f}M parameters, {args.threads} torch thread(s), median of {args.repeats}")
    print(
        f"{'batch':>5} {'tokens':>6} {'engine s':>9} {'raw s':>8} {'engine tok/s':>12} {'raw tok/s':>10} {'ratio':>6}"
    )
    for row in rows:
        print(
            f"{row['batch']:>5} {row['new_tokens']:>6} {row['engine_s']:>9.3f} {row['raw_s']:>8.3f} "
            f"{row['engine_tokens_per_s']:>12.0f} {row['raw_tokens_per_s']:>10.0f} {row['engine_over_raw']:>6.2f}"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"threads": args.threads, "repeats": args.repeats, "parameters": parameters, "rows": rows}
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
