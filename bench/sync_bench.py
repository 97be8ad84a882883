"""Weight-sync benchmark: each sync method end to end against its raw transport, measured in one run.

End to end = from the trainer starting to publish version N until the explorer holds version N in its
model (a trainer actor and an explorer actor on a local Ray cluster, a synthetic float32 state dict of
--size-mb). Raw transport, timed in the same run on the same tensors:
  memory      a plain memcpy of the tensors into the explorer's preallocated tensors
  checkpoint  a safetensors write + read of the dict (read = load_file and copy into the tensors, since
              safetensors maps lazily and the bytes are only read when touched)
  nccl        a plain torch.distributed broadcast of the same bytes (one flat buffer) over the same
              backend (gloo on CPU, nccl on CUDA) between the same two processes
Reported: median seconds of --repeats runs (after --warmup untimed ones), GB/s, and ratio = method GB/s / raw GB/s.
The row memory_vs_object_store compares the memory method with Ray's bare transport (put in the trainer, get
and copy into the model in the explorer, no Synchronizer): the memcpy baseline is one copy, while anything
that crosses the object store and is copied into a model makes two.

    python bench/sync_bench.py [--size-mb 256] [--repeats 3] [--out bench/results/sync_bench.json] [--smoke]

Writes JSON with the run's facts (bench/run_facts.py). `--smoke`: 4 MiB, one repeat and no warm-up, to check
the bench runs.
"""

import argparse
import asyncio
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import ray
import torch

from trinity.manager import RunningStatus, Synchronizer
from trinity.manager.group_spec import DEFAULT_BUCKET_BYTES
from trinity.manager.packing import pack_state_dict, unpack_state_dict
from trinity.manager.weight_sync import (
    NcclReceiver,
    NcclSender,
    loading,
    publish_checkpoint_shard,
    publish_memory,
    pull_weights,
    state_dict_meta,
)

METHODS = ("memory", "checkpoint", "nccl")
ROWS = 1024  # each big tensor is ROWS x ROWS float32 = 4 MiB, plus a small bias, like a stack of linear layers


def synthetic_state_dict(size_mb: int) -> dict:
    generator = torch.Generator().manual_seed(0)
    layers = max(1, size_mb * 2**20 // (ROWS * ROWS * 4))
    state = {}
    for layer in range(layers):
        state[f"layers.{layer}.weight"] = torch.randn(ROWS, ROWS, generator=generator)
        state[f"layers.{layer}.bias"] = torch.randn(ROWS, generator=generator)
    return state


def nbytes(state: dict) -> int:
    return sum(t.numel() * t.element_size() for t in state.values())


def checksum(state: dict) -> float:
    return float(sum(t.double().sum() for t in state.values()))


def _init_default_group(rank: int, port: int) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=600)
    )


@ray.remote(num_cpus=0)
class BenchTrainer:
    def __init__(self, size_mb: int):
        torch.set_num_threads(1)
        self.state = synthetic_state_dict(size_mb)
        self.flat = torch.cat([t.reshape(-1) for t in self.state.values()]).view(torch.uint8)

    def connect(self, config) -> None:
        self.config = config
        self.sync = Synchronizer.get_actor(config)
        ray.get(self.sync.set_trainer_status.remote(RunningStatus.RUNNING))

    def setup_nccl(self, bucket_bytes: int) -> None:
        self.sender = NcclSender(self.sync, state_dict_meta(self.state), bucket_bytes=bucket_bytes)
        self.sender.setup()

    def publish(self, method: str, step: int) -> float:
        start = time.monotonic()
        if method == "memory":
            publish_memory(self.sync, self.state, step)
        elif method == "checkpoint":
            publish_checkpoint_shard(self.sync, self.config.checkpoint_job_dir, step, 0, 1, self.state)
        else:
            self.sender.publish(self.state, step)
        return start

    def checksum(self) -> float:
        return checksum(self.state)

    def raw_group(self, port: int) -> None:
        _init_default_group(0, port)

    def raw_put(self) -> tuple:
        """The object-store floor of the memory method: one put of the packed tensors, no Synchronizer."""
        start = time.monotonic()
        return [ray.put(pack_state_dict(self.state))], start

    def raw_broadcast(self) -> float:
        import torch.distributed as dist

        start = time.monotonic()
        dist.broadcast(self.flat, src=0)
        return start


@ray.remote(num_cpus=0)
class BenchExplorer:
    def __init__(self, size_mb: int):
        torch.set_num_threads(1)
        self.model = {name: torch.zeros_like(t) for name, t in synthetic_state_dict(size_mb).items()}
        self.source = synthetic_state_dict(size_mb)
        self.flat = torch.empty(nbytes(self.model), dtype=torch.uint8)

    def connect(self, config) -> None:
        self.name = config.explorer.name
        self.sync = Synchronizer.get_actor(config)
        self.version = ray.get(self.sync.get_latest_model_version.remote())

    def load(self, named: dict, version: int) -> None:
        for name, tensor in named.items():
            self.model[name].copy_(tensor)

    def setup_weight_sync_group(self, spec) -> None:
        self.receiver = NcclReceiver(spec)

    def pull(self, method: str) -> float:
        """Wait for the next version and load it; the time it is in the model."""
        if method == "nccl":
            self.version = self.receiver.sync(self.sync, self.name, self.load)
        else:
            self.version = asyncio.run(pull_weights(self.sync, self.version, loading(self.load), self.name))
        return time.monotonic()

    def checksum(self) -> float:
        return checksum(self.model)

    def raw_memcpy(self) -> float:
        start = time.monotonic()
        for name, tensor in self.source.items():
            self.model[name].copy_(tensor)
        return time.monotonic() - start

    def raw_checkpoint(self, directory: str) -> float:
        from safetensors.torch import load_file, save_file

        path = os.path.join(directory, "raw.safetensors")
        start = time.monotonic()
        save_file(self.source, path)
        for name, tensor in load_file(path).items():
            self.model[name].copy_(tensor)
        elapsed = time.monotonic() - start
        os.unlink(path)
        return elapsed

    def raw_group(self, port: int) -> None:
        _init_default_group(1, port)

    def raw_get(self, box: list) -> float:
        self.load(unpack_state_dict(ray.get(box[0])), 0)
        return time.monotonic()

    def raw_broadcast(self) -> float:
        import torch.distributed as dist

        dist.broadcast(self.flat, src=0)
        return time.monotonic()


def wait_until_waiting(sync, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        statuses = ray.get(sync.get_explorer_statuses.remote())
        if statuses and all(s == RunningStatus.WAITING_SYNC for s in statuses.values()):
            return
        time.sleep(0.005)
    raise RuntimeError("the explorer never started waiting")


def time_method(method, config, trainer, explorer, repeats, warmup, bucket_bytes):
    ray.get([trainer.connect.remote(config), explorer.connect.remote(config)])
    sync = Synchronizer.get_actor(namespace=config.ray_namespace)
    if method == "nccl":
        ray.get(trainer.setup_nccl.remote(bucket_bytes))
    samples = []
    for step in range(1, warmup + repeats + 1):
        arrived = explorer.pull.remote(method)
        wait_until_waiting(sync)  # the explorer is blocked in its wait (pull) or at the handshake (nccl)
        started = trainer.publish.remote(method, step)
        elapsed = ray.get(arrived) - ray.get(started)
        if step > warmup:
            samples.append(elapsed)
    if abs(ray.get(trainer.checksum.remote()) - ray.get(explorer.checksum.remote())) > 1e-6:
        raise RuntimeError(f"{method}: the explorer's weights differ from the trainer's")
    ray.kill(sync)
    return samples


def time_raw(method, trainer, explorer, repeats, warmup, scratch):
    samples = []
    for index in range(warmup + repeats):
        if method == "memory":
            elapsed = ray.get(explorer.raw_memcpy.remote())
        elif method == "object_store":
            box, start = ray.get(trainer.raw_put.remote())
            elapsed = ray.get(explorer.raw_get.remote(box)) - start
        elif method == "checkpoint":
            elapsed = ray.get(explorer.raw_checkpoint.remote(scratch))
        else:
            arrived, started = explorer.raw_broadcast.remote(), trainer.raw_broadcast.remote()
            elapsed = ray.get(arrived) - ray.get(started)
        if index >= warmup:
            samples.append(elapsed)
    return samples


def row(size: int, method_s: float, raw_s: float) -> dict:
    return {
        "seconds": round(method_s, 4),
        "gb_per_s": round(size / method_s / 1e9, 3),
        "raw_seconds": round(raw_s, 4),
        "raw_gb_per_s": round(size / raw_s / 1e9, 3),
        "ratio": round(raw_s / method_s, 3),
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--warmup",
        type=int,
        default=3,
        help="untimed rounds first: memory first touched is slow, and the "
        "checkpoint method reaches its steady state (superseded dumps deleted, their pages reused) after 3",
    )
    parser.add_argument("--bucket-mb", type=float, default=None, help="nccl bucket size (default: the backend's)")
    parser.add_argument("--out", help="the JSON file (default bench/results/sync_bench.json)")
    parser.add_argument("--smoke", action="store_true", help="4 MiB, one repeat, no warm-up: check the bench runs")
    args = parser.parse_args(argv)

    from run_facts import out_path, run_facts, write_json

    from trinity.config import compose, validate

    if args.smoke:
        args.size_mb, args.repeats, args.warmup = 4, 1, 0
    out = out_path(args.out, str(Path(__file__).parent / "results" / "sync_bench.json"), args.smoke)
    facts = run_facts(smoke=args.smoke)

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    scratch = tempfile.mkdtemp(prefix="sync_bench_")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        trainer = BenchTrainer.options(name="trainer", namespace="sync-bench").remote(args.size_mb)
        explorer = BenchExplorer.options(name="explorer", namespace="sync-bench").remote(args.size_mb)
        ray.get([trainer.__ray_ready__.remote(), explorer.__ray_ready__.remote()])
        from trinity.manager.weight_sync import _free_port

        port = _free_port()
        ray.get([trainer.raw_group.remote(port), explorer.raw_group.remote(port)])
        state = synthetic_state_dict(args.size_mb)
        size, tensors = nbytes(state), len(state)
        del state
        bucket_bytes = int(args.bucket_mb * 2**20) if args.bucket_mb else DEFAULT_BUCKET_BYTES["gloo"]
        results = {}
        for method in METHODS:
            config = validate(
                compose(
                    [
                        f"checkpoint_root_dir={scratch}",
                        f"name=bench_{method}",
                        "stages=[]",  # the default experiment's stages set their own modes and sync methods
                        "mode=both",
                        f"synchronizer.sync_method={method}",
                        "synchronizer.sync_timeout=600",
                        "explorer.rollout_model.engine_num=1",
                    ]
                )
            ).configs[0]
            method_s = statistics.median(
                time_method(method, config, trainer, explorer, args.repeats, args.warmup, bucket_bytes)
            )
            raw_s = statistics.median(time_raw(method, trainer, explorer, args.repeats, args.warmup, scratch))
            results[method] = row(size, method_s, raw_s)
            if method == "memory":  # the same method against Ray's own transport, to separate its cost from ours
                floor_s = statistics.median(
                    time_raw("object_store", trainer, explorer, args.repeats, args.warmup, scratch)
                )
                results["memory_vs_object_store"] = row(size, method_s, floor_s)
    finally:
        ray.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)
    report = {
        **facts,
        "size_mb": round(size / 2**20, 1),
        "tensors": tensors,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "bucket_mb": bucket_bytes / 2**20,
        "device": "cpu",
        "cpus": os.cpu_count(),
        "results": results,
    }
    print_table(report)
    write_json(out, report)
    return report


def print_table(report: dict) -> None:
    print(f"sync bench: {report['size_mb']} MiB in {report['tensors']} tensors, median of {report['repeats']}")
    print(f"{'method':<24} {'seconds':>8} {'GB/s':>7} {'raw s':>8} {'raw GB/s':>9} {'ratio':>6}")
    for method, row in report["results"].items():
        print(
            f"{method:<24} {row['seconds']:>8.3f} {row['gb_per_s']:>7.2f} {row['raw_seconds']:>8.3f} "
            f"{row['raw_gb_per_s']:>9.2f} {row['ratio']:>6.2f}"
        )


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
