"""Weight sync into a running vLLM engine, per method, against vLLM's raw `reload_weights` of the same tensors.

End to end = from a trainer-side actor starting to publish version N (the model's full HF state dict)
until the vLLM engine actor serves version N: the same path a run takes (the Synchronizer, an
explorer-side actor that pulls or joins the broadcast, the engine actor's `load_published` /
`receive_weights`, name and shape checks, the in-place reload and the prefix-cache reset).
Two baselines, timed in the same run and interleaved with it, both on the engine's worker thread and cores:
  raw reload   one `reload_weights` call of vLLM's model runner with the same tensors already in the
               engine's memory (what a sync would cost if moving the weights were free);
  floor        the method's bare transport chained with that reload, no Synchronizer, checks or
               bookkeeping: memory = `ray.put` in the trainer, `ray.get` in the engine, reload;
               checkpoint = one safetensors file written and read, reload; nccl = one gloo (nccl on
               CUDA) broadcast of the flat bytes between the two processes, reload from views of them.

Reported per model and method: median seconds of --repeats rounds (after --warmup), MB/s, and the ratios
raw reload seconds / method seconds (the issue's goal: >= 0.8) and floor seconds / method seconds (what
trinity adds to the transport it uses).
Every round checks that the engine serves the new version; that the swapped weights equal the trainer's
bit for bit is proven by tests/explorer/test_vllm_engine.py (CPU linear weights are repacked, so reading
them back needs the test's identity trick, too slow for a benchmark loop).

    python bench/vllm_sync_bench.py [--models tiny,h512-l8] [--methods memory,checkpoint,nccl]
                                    [--repeats 5] [--warmup 2] [--out bench/results/vllm_sync_bench.json]
                                    [--smoke]

Writes JSON with the run's facts (bench/run_facts.py). `--smoke`: the tiny model, one round and no warm-up,
the memory method unless `--methods` names others (each method starts an engine of its own, ~25 s here), to
check the bench runs.
"""

import argparse
import asyncio
import datetime
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import ray
import torch
import torch.distributed as dist
from run_facts import SMOKE_HELP, out_path, run_facts, write_json

from trinity.config import compose, validate
from trinity.explorer.engine import engine_specs
from trinity.explorer.engine_actor import EngineActor
from trinity.manager import RunningStatus, Synchronizer
from trinity.manager.weight_sync import (
    NcclSender,
    nccl_handshake,
    publish_checkpoint_shard,
    publish_memory,
    pull_weights,
    state_dict_meta,
)
from trinity.model.load import load_causal_lm

MODELS = {
    "tiny": [],
    "h512-l8": [
        "model.tiny.hidden_size=512",
        "model.tiny.intermediate_size=1536",
        "model.tiny.num_hidden_layers=8",
        "model.tiny.num_attention_heads=8",
        "model.tiny.num_key_value_heads=4",
    ],
}
METHODS = ("memory", "checkpoint", "nccl")


def _raw_reload(worker, named) -> None:
    """vLLM's own in-place reload on one worker: the baseline."""
    worker.model_runner.reload_weights(weights_iterator=iter(named))


def _gloo_pair(rank: int, port: int):
    """A bare two-process gloo group (the torch primitive, none of trinity's weight-sync code)."""
    timeout = datetime.timedelta(seconds=300)
    store = dist.TCPStore("127.0.0.1", port, 2, is_master=rank == 0, timeout=timeout)
    return dist.ProcessGroupGloo(store, rank, 2, timeout)


def _views(flat: torch.Tensor, meta: list) -> list:
    """(name, tensor) views over one flat byte buffer laid out in `meta` order."""
    named, start = [], 0
    for name, dtype, shape in meta:
        size = torch.Size(shape).numel() * dtype.itemsize
        named.append((name, flat[start : start + size].view(dtype).view(shape)))
        start += size
    return named


class BenchEngine(EngineActor):
    """The product's engine actor, plus the baselines: a bare reload, and each transport chained with it."""

    def hold(self, model_path: str) -> None:
        """Keep the model's parameters (each tied tensor once, as vLLM loads them) in this process."""
        model = load_causal_lm(model_path)
        self.held = [(name, param.detach().clone()) for name, param in model.named_parameters()]

    def _reload(self, named: list) -> None:
        """A bare reload on the engine's worker thread and cores."""

        def run() -> None:
            previous = os.sched_getaffinity(0)
            if self.engine.cores:
                os.sched_setaffinity(0, self.engine.cores)
            try:
                self.engine.llm.collective_rpc(_raw_reload, args=(named,))
            finally:
                os.sched_setaffinity(0, previous)

        self._worker.submit(run).result()

    def raw_reload(self) -> float:
        """Seconds of one bare reload of the held tensors."""
        start = time.perf_counter()
        self._reload(self.held)
        return time.perf_counter() - start

    def floor_memory(self, box: list) -> float:
        with warnings.catch_warnings():  # read-only shared memory: only read
            warnings.filterwarnings("ignore", message=".*not writable.*")
            named = [(n, torch.from_numpy(b).view(d).view(s)) for n, (b, d, s) in ray.get(box[0]).items()]
        self._reload(named)
        return time.monotonic()

    def floor_checkpoint(self, path: str) -> float:
        from safetensors.torch import load_file

        self._reload(list(load_file(path).items()))
        return time.monotonic()

    def join_pair(self, port: int, meta: list) -> None:
        self.pair, self.meta = _gloo_pair(1, port), meta
        self.flat = torch.empty(sum(torch.Size(s).numel() * d.itemsize for _, d, s in meta), dtype=torch.uint8)

    def floor_nccl(self) -> float:
        self.pair.broadcast(self.flat, 0).wait()
        self._reload(_views(self.flat, self.meta))
        return time.monotonic()


class BenchTrainer:
    """Trainer rank 0's side: the full HF state dict, published by one method."""

    def __init__(self, config, model_path: str):
        torch.set_num_threads(1)
        self.config = config
        model = load_causal_lm(model_path)
        self.state = {name: t.detach().clone() for name, t in model.state_dict().items()}
        self.unique = [name for name, _ in model.named_parameters()]  # each tied tensor once, as vLLM loads
        self.sync = Synchronizer.get_actor(config)
        ray.get(self.sync.set_trainer_status.remote(RunningStatus.RUNNING))
        self.sender = None

    def setup_nccl(self) -> None:
        self.sender = NcclSender(self.sync, state_dict_meta(self.state))
        self.sender.setup()

    def perturb(self, step: int) -> None:
        """New weights each version, so every reload really changes the engine."""
        generator = torch.Generator().manual_seed(step)
        for tensor in self.state.values():
            tensor.add_(torch.randn(tensor.shape, generator=generator), alpha=1e-3)

    def floor_start(self, method: str, path: str):
        """Start the bare transport of the floor; (what the engine needs, start time)."""
        unique = {name: self.state[name] for name in self.unique}
        start = time.monotonic()
        if method == "memory":  # numpy byte views: Ray's zero-copy path (pickled tensors would copy several times)
            return [
                ray.put({n: (t.reshape(-1).view(torch.uint8).numpy(), t.dtype, t.shape) for n, t in unique.items()})
            ], start
        if method == "checkpoint":
            from safetensors.torch import save_file

            save_file(unique, path)
            return path, start
        self.pair.broadcast(torch.cat([t.reshape(-1).view(torch.uint8) for t in unique.values()]), 0).wait()
        return None, start

    def pair_meta(self) -> list:
        return [(name, self.state[name].dtype, tuple(self.state[name].shape)) for name in self.unique]

    def join_pair(self, port: int) -> None:
        self.pair = _gloo_pair(0, port)

    def publish(self, method: str, step: int) -> float:
        start = time.monotonic()
        if method == "memory":
            publish_memory(self.sync, self.state, step)
        elif method == "checkpoint":
            publish_checkpoint_shard(self.sync, self.config.checkpoint_job_dir, step, 0, 1, self.state)
        else:
            self.sender.publish(self.state, step)
        return start


class BenchExplorer:
    """The explorer's side of a sync, as `Explorer.sync_weight` does it, for one engine."""

    def __init__(self, config, engine):
        self.name = config.explorer.name
        self.engines = [engine]
        self.sync = Synchronizer.get_actor(config)
        self.version = 0

    async def pull(self, method: str) -> float:
        """Wait for the next version and have the engine serve it; the time it does."""
        if method == "nccl":
            version = await asyncio.to_thread(nccl_handshake, self.sync, self.name)
            await asyncio.gather(*[engine.receive_weights.remote(version) for engine in self.engines])
            self.version = version
        else:
            self.version = await pull_weights(self.sync, self.version, self._load_published, self.name)
        return time.monotonic()

    async def _load_published(self, published, version: int) -> None:
        await asyncio.gather(*[engine.load_published.remote(published, version) for engine in self.engines])

    async def setup_weight_sync_group(self, spec) -> None:
        await asyncio.gather(*[engine.join_weight_group.remote(spec, i) for i, engine in enumerate(self.engines)])


def wait_until_waiting(sync, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        statuses = ray.get(sync.get_explorer_statuses.remote())
        if statuses and all(s == RunningStatus.WAITING_SYNC for s in statuses.values()):
            return
        time.sleep(0.005)
    raise RuntimeError("the explorer never started waiting for weights")


def bench_method(method: str, overrides: list, scratch: str, args) -> dict:
    """One method on one model: a fresh engine, trainer and explorer; rounds of sync and raw interleaved."""
    config = validate(compose([*overrides, f"name=vllm_sync_{method}", f"synchronizer.sync_method={method}"])).configs[
        0
    ]
    spec = engine_specs(config)[0]
    model_path = spec.weights_path()
    namespace = config.ray_namespace
    engine = ray.remote(BenchEngine).options(num_cpus=spec.threads, namespace=namespace).remote(spec)
    trainer = ray.remote(BenchTrainer).options(num_cpus=0, namespace=namespace).remote(config, model_path)
    explorer = (
        ray.remote(BenchExplorer)
        .options(name=config.explorer.name, namespace=namespace, num_cpus=0)
        .remote(config, engine)
    )
    sync = Synchronizer.get_actor(config)
    try:
        ray.get([engine.ready.remote(), engine.hold.remote(model_path), explorer.__ray_ready__.remote()])
        if method == "nccl":
            ray.get(trainer.setup_nccl.remote())
            port = free_port()
            meta = ray.get(trainer.pair_meta.remote())
            ray.get([trainer.join_pair.remote(port), engine.join_pair.remote(port, meta)])
        synced, raw, floor = [], [], []
        for step in range(1, args.warmup + args.repeats + 1):
            ray.get(trainer.perturb.remote(step))
            arrived = explorer.pull.remote(method)
            wait_until_waiting(sync)
            started = trainer.publish.remote(method, step)
            elapsed = ray.get(arrived) - ray.get(started)
            if ray.get(engine.model_version.remote()) != step:
                raise RuntimeError(f"{method}: the engine does not serve version {step}")
            raw_s = ray.get(engine.raw_reload.remote())
            floor_s = time_floor(method, trainer, engine, f"{scratch}/floor_{method}.safetensors")
            if step > args.warmup:
                synced.append(elapsed)
                raw.append(raw_s)
                floor.append(floor_s)
        size = sum(t.numel() * t.element_size() for _, t in load_causal_lm(model_path).named_parameters())
    finally:
        for actor in (explorer, trainer, engine, sync):
            ray.kill(actor)
    method_s, raw_s, floor_s = statistics.median(synced), statistics.median(raw), statistics.median(floor)
    return {
        "method": method,
        "mb": round(size / 2**20, 1),
        "seconds": method_s,
        "raw_seconds": raw_s,
        "floor_seconds": floor_s,
        "mb_per_s": size / 2**20 / method_s,
        "ratio": raw_s / method_s,
        "floor_ratio": floor_s / method_s,
    }


def time_floor(method: str, trainer, engine, path: str) -> float:
    """The floor's seconds: from the trainer starting the bare transport to the engine's reload done."""
    if method == "nccl":
        arrived, started = engine.floor_nccl.remote(), trainer.floor_start.remote(method, path)
        return ray.get(arrived) - ray.get(started)[1]
    handle, start = ray.get(trainer.floor_start.remote(method, path))
    done = engine.floor_memory.remote(handle) if method == "memory" else engine.floor_checkpoint.remote(handle)
    elapsed = ray.get(done) - start
    if method == "checkpoint":
        os.unlink(path)
    return elapsed


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--methods", help=f"default {','.join(METHODS)}; in a smoke run memory")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--out", help="the JSON file (default bench/results/vllm_sync_bench.json)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args(argv)
    if args.smoke:
        args.models, args.repeats, args.warmup = "tiny", 1, 0
    args.methods = args.methods or ("memory" if args.smoke else ",".join(METHODS))
    out = out_path(args.out, str(Path(__file__).parent / "results" / "vllm_sync_bench.json"), args.smoke)
    facts = run_facts(smoke=args.smoke)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    rows = []
    with tempfile.TemporaryDirectory(prefix="vllm_sync_bench_") as scratch:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            for model in args.models.split(","):
                base = [
                    f"checkpoint_root_dir={scratch}",
                    f"model.tiny.cache_dir={scratch}/models",
                    "stages=[]",
                    "mode=both",
                    "synchronizer.sync_timeout=600",
                    "explorer.rollout_model.engine_type=vllm",
                    *MODELS[model],
                ]
                for method in args.methods.split(","):
                    rows.append({"model": model, **bench_method(method, base, scratch, args)})
        finally:
            ray.shutdown()
    report = {
        **facts,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "load": os.getloadavg()[0],
        "cpus": os.cpu_count(),
        "device": "cpu",
        "rows": rows,
    }
    print_table(report)
    write_json(out, report)
    return report


def print_table(report: dict) -> None:
    print(f"weight sync into vLLM: median of {report['repeats']} interleaved rounds, load average {report['load']:.2f}")
    print(
        f"{'model':>8} {'MB':>6} {'method':>10} {'seconds':>8} {'MB/s':>6} {'raw reload s':>12} {'raw/method':>10} "
        f"{'floor s':>8} {'floor/method':>12}"
    )
    for row in report["rows"]:
        print(
            f"{row['model']:>8} {row['mb']:>6.1f} {row['method']:>10} {row['seconds']:>8.4f} {row['mb_per_s']:>6.0f} "
            f"{row['raw_seconds']:>12.4f} {row['ratio']:>10.2f} {row['floor_seconds']:>8.4f} "
            f"{row['floor_ratio']:>12.2f}"
        )


if __name__ == "__main__":
    sys.exit(0 if main()["rows"] else 1)
