"""Rollout engines as Ray actors, and the proxy workflows use to talk to one.

`EngineActor` wraps one `LocalEngine`. It is an async actor: generate requests that arrive while
the engine is busy wait in a queue and are merged into the next batch (requests with the same
sampling settings share one `generate_rows` call, each row keeping its own token limit and
deadline), so `runner_per_model` concurrent runners fill one batch instead of queueing behind each
other. A runner that starts several tasks at once says how many (`expect`), and the next batch
waits for their requests (for as long as the runner allows) instead of starting with the first to
arrive: one batch per wave, not a small one and then the rest. Weight updates run on the same single worker
thread, so they never overlap a generation.

`RemoteEngine` implements `RolloutEngine` over an actor handle with a local tokenizer, so a
workflow runs unchanged against a local engine or an actor.
"""

import asyncio
import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import ray

from trinity.explorer.engine import EngineSpec, Prompt, RolloutEngine, TaskTimeout, TextCodec, engine_specs
from trinity.explorer.engine_links import link_to
from trinity.explorer.sampling import Sample, SamplingParams
from trinity.placement import in_bundle

# Extra seconds a caller waits beyond the deadline it passed, for the actor to answer with a TaskTimeout.
REPLY_GRACE_S = 5.0


@dataclass
class _Request:
    rows: List[Prompt]  # fitted prompts, each repeated n times
    limits: List[int]
    deadline: Optional[float]
    params: SamplingParams
    future: asyncio.Future


class EngineActor:
    def __init__(self, spec: EngineSpec):
        import torch

        from trinity.explorer.backends import create_engine

        if spec.device == "cpu":
            torch.set_num_threads(spec.threads)
        self.engine = create_engine(spec)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine")
        self._pending: List[_Request] = []
        self._draining: Optional[asyncio.Task] = None
        self._awaited: Optional[Tuple[int, float]] = None  # (requests still to come, until when): `expect`
        self._arrived = asyncio.Event()
        self._counts = {"requests": 0, "batches": 0, "rows": 0}
        self._receiver = None  # the nccl weight-sync group member, once joined
        self._api = None  # the OpenAI-compatible server, once started (`serve_openai`)

    async def ready(self) -> Dict[str, Any]:
        """What was loaded; awaited once after creation so load errors surface at startup."""
        spec = self.engine.spec
        return {"model_path": spec.model_path, "device": spec.device, "model_version": self.engine.model_version}

    async def model_version(self) -> int:
        return self.engine.model_version

    async def stats(self) -> Dict[str, int]:
        """Requests received, batches run and rows generated so far (requests / batches shows merging)."""
        return dict(self._counts)

    async def expect(self, count: int, within_s: float) -> None:
        """The caller is starting `count` tasks that each send a request now: the next batch waits for
        them, for at most `within_s` seconds (a task may fail before it asks)."""
        self._awaited = (count, time.monotonic() + within_s)

    async def update_weights(self, named_tensors: Dict[str, Any], version: int) -> int:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._worker, self.engine.update_weights, named_tensors, version)
        return version

    async def load_published(self, published: Any, version: int) -> int:
        """Load weights the Synchronizer announced (object-store or checkpoint): read here, zero-copy."""
        from trinity.manager.weight_sync import materialize

        loop = asyncio.get_running_loop()
        named = await loop.run_in_executor(self._worker, materialize, published, version)
        return await self.update_weights(named, version)

    async def join_weight_group(self, spec: Any, local_rank: int) -> None:
        """Join the trainer's broadcast group (nccl sync) as engine rank `local_rank`; blocks until it forms."""
        from trinity.manager.weight_sync import NcclReceiver

        loop = asyncio.get_running_loop()
        self._receiver = await loop.run_in_executor(None, NcclReceiver, spec, local_rank)

    async def receive_weights(self, version: int) -> int:
        """Receive one broadcast (all buckets), then load it into the model at once."""
        received: Dict[str, Any] = {}

        def keep(named: Dict[str, Any], _version: int) -> None:  # buckets reuse their buffers: copy out
            received.update({name: tensor.clone() for name, tensor in named.items()})

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._receiver.receive, keep, version)
        return await self.update_weights(received, version)

    async def serve_openai(self) -> str:
        """Serve this engine through an OpenAI-compatible API on a free port of this node (once); its URL."""
        from trinity.explorer.openai_parsing import ChatParsers
        from trinity.explorer.openai_server import ServedModel, build_app, serve

        if self._api is None:
            engine = self.engine
            parsers = ChatParsers(engine.codec.tokenizer, engine.spec.model)
            model = ServedModel(
                engine.spec.model_path,
                engine.codec,
                engine.defaults,
                self.generate,
                lambda: engine.model_version,
                parsers,
            )
            self._api = await serve(build_app(model), ray.util.get_node_ip_address())
        return self._api.url

    async def generate(
        self, prompts: Sequence[Prompt], params: SamplingParams, timeout: Optional[float] = None
    ) -> List[List[Sample]]:
        rows, limits = [], []
        for prompt in prompts:  # a prompt that does not fit fails this request alone
            fitted, limit = self.engine.fit_prompt(prompt, params.max_tokens)
            rows += [fitted] * params.n
            limits += [limit] * params.n
        deadline = None if timeout is None else time.monotonic() + timeout
        request = _Request(rows, limits, deadline, params, asyncio.get_running_loop().create_future())
        self._pending.append(request)
        self._counts["requests"] += 1
        if self._awaited is not None:
            self._awaited = (self._awaited[0] - 1, self._awaited[1])
            self._arrived.set()
        if self._draining is None or self._draining.done():
            self._draining = asyncio.ensure_future(self._drain())
        return await request.future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            await self._gather()
            batch, self._pending = self._pending, []
            groups: Dict[SamplingParams, List[_Request]] = {}
            now = time.monotonic()
            for request in batch:
                if request.future.done():  # cancelled by its caller
                    continue
                if request.deadline is not None and now >= request.deadline:
                    request.future.set_exception(TaskTimeout("the deadline passed while the request was queued"))
                    continue
                key = dataclasses.replace(request.params, n=1, max_tokens=1)
                groups.setdefault(key, []).append(request)
            for key, requests in groups.items():
                rows = [row for r in requests for row in r.rows]
                limits = [limit for r in requests for limit in r.limits]
                deadlines = [r.deadline for r in requests for _ in r.rows]
                params = dataclasses.replace(key, max_tokens=max(limits))
                self._counts["batches"] += 1
                self._counts["rows"] += len(rows)
                try:
                    results = await loop.run_in_executor(
                        self._worker, self.engine.generate_rows, rows, params, limits, deadlines
                    )
                except Exception as exc:  # noqa: BLE001 - handed to every caller of the batch
                    for request in requests:
                        if not request.future.done():
                            request.future.set_exception(exc)
                    continue
                start = 0
                for request in requests:
                    mine, start = results[start : start + len(request.rows)], start + len(request.rows)
                    if request.future.done():
                        continue
                    timeout = next((result for result in mine if isinstance(result, TaskTimeout)), None)
                    if timeout is not None:
                        request.future.set_exception(timeout)
                    else:
                        n = request.params.n
                        request.future.set_result([mine[i : i + n] for i in range(0, len(mine), n)])

    async def _gather(self) -> None:
        """Wait until the announced wave has all arrived, or its time is up."""
        while self._awaited is not None and self._awaited[0] > 0:
            left = self._awaited[1] - time.monotonic()
            if left <= 0:
                break
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), left)
            except asyncio.TimeoutError:
                break
        self._awaited = None


ENGINE_READY_S = 600.0  # loading a model (and starting its server) on a busy machine


def create_engines(
    config,
    name_prefix: Optional[str] = None,
    namespace: Optional[str] = None,
    ready_timeout: float = ENGINE_READY_S,
    model_index: int = 0,
    placement: Optional[Tuple[Any, int]] = None,
) -> List[Any]:
    """`engine_num` engine actors of one served model of a validated Config, loaded and ready:
    model_index 0 is `explorer.rollout_model`, i > 0 is `explorer.auxiliary_models[i - 1]`.

    CPU: each takes `cluster.cpu_threads_per_device` Ray CPUs (per tensor-parallel rank) and as many
    threads; CUDA: each takes `tensor_parallel_size` GPUs (and one CPU). Replica i samples with
    `seed + i`, so replicas never draw the same samples. Named `<name_prefix>_<i>` when a prefix is given. Raises
    TimeoutError naming the engines that were not ready after `ready_timeout` seconds. `placement`
    (placement group, first bundle index) pins engine i to bundle first + i of the job's reservation.
    """
    handles = start_engines(config, name_prefix, namespace, model_index, placement)
    wait_started(handles, config, ready_timeout, model_index)
    return handles


def start_engines(
    config,
    name_prefix: Optional[str] = None,
    namespace: Optional[str] = None,
    model_index: int = 0,
    placement: Optional[Tuple[Any, int]] = None,
    actor_class: Optional[type] = None,
) -> List[Any]:
    """The engine actors of `create_engines`, submitted: they load while the caller goes on (`wait_started`
    waits for them). `actor_class`: an EngineActor subclass to start instead (colocate's device process)."""
    spec = engine_specs(config)[model_index]
    spec.weights_path()  # build or convert once here rather than in every actor
    tp = spec.model.tensor_parallel_size
    resources = {"num_gpus": tp, "num_cpus": 1} if spec.device == "cuda" else {"num_cpus": spec.threads * tp}
    actor_class = ray.remote(actor_class or EngineActor)
    handles = []
    for index in range(spec.model.engine_num):
        options: Dict[str, Any] = dict(resources)
        if name_prefix:
            options["name"] = f"{name_prefix}_{index}"
        if namespace:
            options["namespace"] = namespace
        if placement is not None:
            group, first_bundle = placement
            options.update(in_bundle(group, first_bundle + index))
        replica = dataclasses.replace(spec, model=dataclasses.replace(spec.model, seed=spec.model.seed + index))
        handles.append(actor_class.options(**options).remote(replica))  # each replica samples its own stream
    return handles


def wait_started(handles: Sequence[Any], config, timeout: float = ENGINE_READY_S, model_index: int = 0) -> None:
    """Until every engine of `start_engines` has loaded (and serves its OpenAI API when the model enables it:
    a server that cannot start fails the job at start-up); TimeoutError naming the late ones."""
    wait_ready(handles, timeout)
    if engine_specs(config)[model_index].model.enable_openai_api:
        wait_serving(handles, timeout)


def wait_serving(handles: Sequence[Any], timeout: float) -> List[str]:
    """Every replica's OpenAI API URL, once each serves."""
    return _all_answer(handles, "serve_openai", timeout, "did not start their OpenAI APIs")


def wait_ready(handles: Sequence[Any], timeout: float) -> List[Dict[str, Any]]:
    return _all_answer(handles, "ready", timeout, "were not ready")


def _all_answer(handles: Sequence[Any], method: str, timeout: float, failure: str) -> list:
    """Call `method` on every engine actor; their answers, or TimeoutError naming the late ones."""
    refs = [getattr(handle, method).remote() for handle in handles]
    done, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    late = [index for index, ref in enumerate(refs) if ref not in done]
    if late:
        raise TimeoutError(f"rollout engines {late} of {len(refs)} {failure} within {timeout:g} s")
    return ray.get(refs)


class RemoteEngine(RolloutEngine):
    """A RolloutEngine backed by an EngineActor, through Ray or in process (`engine_links`); every call honours
    the task's deadline (monotonic), so no call waits on the engine unbounded.
    With `enable_openai_api`, workflows may also talk to the replica through OpenAI clients; with
    `enable_history` the completions those clients receive are recorded for experiences."""

    def __init__(self, engine: Any, spec: EngineSpec, codec: TextCodec, deadline: float):
        """`engine`: the actor's handle, or its in-process link (`engine_links.in_process_engine`)."""
        super().__init__(spec, codec)
        self.link = link_to(engine)
        self.deadline = deadline
        self.history: List[Any] = []  # openai_client.Turn records of this workflow run

    def _api_url(self) -> str:
        model = self.spec.model
        if not model.enable_openai_api:
            raise RuntimeError(
                "this engine serves no OpenAI API: set enable_openai_api=true on its model "
                "(explorer.rollout_model or the auxiliary model) to use get_openai_client()"
            )
        return self.link.call("serve_openai", timeout=self._remaining(None))

    def get_openai_client(self):
        """An `openai.OpenAI` bound to this replica (`client.model_path` names its model)."""
        from trinity.explorer.openai_client import openai_client

        history = self.history if self.spec.model.enable_history else None
        return openai_client(self._api_url(), self.spec.model_path, history, self._remaining(None))

    def get_openai_async_client(self):
        """An `openai.AsyncOpenAI` bound to this replica."""
        from trinity.explorer.openai_client import openai_async_client

        history = self.history if self.spec.model.enable_history else None
        return openai_async_client(self._api_url(), self.spec.model_path, history, self._remaining(None))

    def extract_experience_from_history(self, clear_history: bool = True) -> list:
        """The experiences of the completions this run's OpenAI clients received (needs enable_history)."""
        from trinity.explorer.openai_client import experiences

        if not self.spec.model.enable_history:
            raise RuntimeError("no history is recorded: set enable_history=true (with enable_openai_api=true)")
        found = experiences(self.history)
        if clear_history:
            self.history.clear()
        return found

    def _remaining(self, timeout: Optional[float]) -> float:
        """Seconds the call may take: up to the task's deadline, or `timeout` when that comes first."""
        remaining = self.deadline - time.monotonic()
        if timeout is not None:
            remaining = min(remaining, timeout)
        if remaining <= 0:
            raise TaskTimeout("the task's time ran out before this engine call")
        return remaining

    def generate(
        self, prompts: Sequence[Prompt], params: Optional[SamplingParams] = None, timeout: Optional[float] = None
    ) -> List[List[Sample]]:
        remaining = self._remaining(timeout)
        rows = [list(prompt) for prompt in prompts]
        return self.link.call("generate", rows, params or self.defaults, remaining, timeout=remaining + REPLY_GRACE_S)

    def update_weights(self, named_tensors: Dict[str, Any], version: int) -> None:
        self.link.call("update_weights", named_tensors, version, timeout=self._remaining(None))

    @property
    def model_version(self) -> int:
        return self.link.call("model_version", timeout=self._remaining(None))
