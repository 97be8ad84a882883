"""How experiences should travel through the queue buffer: `Experience.to_bytes()` or pickled objects.

Same Ray queue actor, same batches, one run. Rows:
  raw       a bare actor echoing the same payload bytes (transport floor, no queue logic)
  bytes     queue actor, payloads are to_bytes() (encode + put + get + decode, as QueueWriter/Reader do)
  objects   queue actor, payloads are the Experience objects themselves (Ray pickles them)
Prints medians and ratios to `raw`, writes JSON with the run's facts (bench/run_facts.py).

    python bench/buffer_queue.py [--repeats 15] [--out bench/results/buffer_queue.json] [--smoke]

`--smoke`: one repeat of batches of 4, to check the bench runs.
"""

import argparse
import os
import statistics
import time

import ray
import torch
from run_facts import SMOKE_HELP, out_path, run_facts, write_json

from trinity.buffer.experience import Experience
from trinity.buffer.queue_storage import QueueStorage

SIZES = {"small (64+64 tokens)": (64, 64), "large (512+2048 tokens)": (512, 2048)}
BATCH = 64


@ray.remote(num_cpus=0)
class Echo:
    def put(self, items):
        self.items = items
        return len(items)

    def get(self):
        return self.items


def experiences(prompt: int, response: int, batch: int = BATCH):
    return [
        Experience(
            tokens=torch.randint(0, 30000, (prompt + response,)),
            prompt_length=prompt,
            logprobs=torch.randn(response),
            action_mask=torch.ones(response, dtype=torch.bool),
            advantages=torch.randn(response),
            reward=1.0,
            model_version=3,
            info={"use_count": 0},
        )
        for _ in range(batch)
    ]


def timed(fn, repeats: int) -> float:
    fn()  # warm up
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def measure(label: str, batch, queue, echo, repeats: int) -> dict:
    encoded = [e.to_bytes() for e in batch]

    def raw():
        ray.get(echo.put.remote(encoded))
        ray.get(echo.get.remote())

    def as_bytes():
        items = [(e.to_bytes(), e.model_version, 0) for e in batch]
        ray.get(queue.put_batch.remote(items, 60.0))
        _, got = ray.get(queue.get_batch.remote(len(batch), 60.0))
        [Experience.from_bytes(payload) for payload, _ in got]

    def as_objects():
        ray.get(queue.put_batch.remote([(e, e.model_version, 0) for e in batch], 60.0))
        ray.get(queue.get_batch.remote(len(batch), 60.0))

    row = {"size": label, "batch": len(batch), "payload_mb": sum(map(len, encoded)) / 1e6}
    row.update({name: timed(fn, repeats) for name, fn in (("raw", raw), ("bytes", as_bytes), ("objects", as_objects))})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="the JSON file (default bench/results/buffer_queue.json)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    batch = 4 if args.smoke else BATCH
    if args.smoke:
        args.repeats = 1
    out = out_path(args.out, "bench/results/buffer_queue.json", args.smoke)
    facts = run_facts(smoke=args.smoke)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    queue = ray.remote(QueueStorage).options(num_cpus=0).remote("bench", 100000, None)
    echo = Echo.remote()
    results = [measure(label, experiences(*size, batch), queue, echo, args.repeats) for label, size in SIZES.items()]
    ray.shutdown()
    print(f"{'size':<26}{'MB':>7}{'raw ms':>9}{'bytes ms':>10}{'objects ms':>12}{'bytes/raw':>11}{'objects/raw':>13}")
    for r in results:
        print(
            f"{r['size']:<26}{r['payload_mb']:>7.2f}{r['raw'] * 1e3:>9.1f}{r['bytes'] * 1e3:>10.1f}"
            f"{r['objects'] * 1e3:>12.1f}{r['bytes'] / r['raw']:>11.2f}{r['objects'] / r['raw']:>13.2f}"
        )
    write_json(out, {**facts, "repeats": args.repeats, "results": results})


if __name__ == "__main__":
    main()
