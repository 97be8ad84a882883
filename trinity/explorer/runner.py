"""Runs a batch of tasks over the engine actors: `runner_per_model` concurrent workflows per engine,
`max_retry_times` retries and `max_timeout` seconds per attempt.

Each attempt runs its workflow in its own daemon thread against a `RemoteEngine` that carries the
attempt's deadline, so every generate call stops when the time is up. The runner itself never
waits on a workflow past its deadline: a hung attempt (even one stuck outside the engine) is
recorded as timed out and its slot reused, so a step always finishes. A task whose attempts all
fail becomes a `TaskFailure` with the last error; it never raises out of `run`.
"""

import functools
import logging
import statistics
import time
import traceback
from collections import Counter, deque
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, replace
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

from trinity.buffer.experience import Experience
from trinity.config.plugins import REWARD_FNS, WORKFLOWS
from trinity.config.topology import served_auxiliaries
from trinity.explorer.engine import EngineSpec, TaskTimeout, TextCodec, engine_specs
from trinity.explorer.engine_actor import RemoteEngine
from trinity.explorer.engine_links import link_to
from trinity.explorer.task import RolloutTask, as_rollout_task
from trinity.explorer.task_threads import TaskThreads
from trinity.explorer.workflows.base import REWARD_SECONDS

logger = logging.getLogger(__name__)

# How long an engine holds a batch for the first requests of the attempts a runner starts together:
# a wave of tasks sends them within milliseconds; a task that fails before it asks costs this much.
GATHER_S = 0.1


@dataclass
class TaskFailure:
    task_id: str
    attempts: int
    error: str  # the last attempt's error, "Type: message"
    timed_out: bool  # the last attempt ran past max_timeout


@dataclass
class RunResult:
    experiences: List[Experience]
    metrics: Dict[str, float]
    failures: List[TaskFailure]


@dataclass
class _Attempt:
    index: int  # position of the task in the batch
    number: int  # 1 for the first try
    slot: int
    deadline: float


class TaskRunner:
    def __init__(
        self,
        engines: Sequence[Any],
        spec: EngineSpec,
        runner_per_model: int = 1,
        max_retry_times: int = 0,
        max_timeout: float = 1800.0,
        auxiliary: Sequence[Tuple[Sequence[Any], EngineSpec]] = (),
        gather_s: float = GATHER_S,
    ):
        """`auxiliary`: (engine actors, spec) per auxiliary model that workflows may query; `gather_s`:
        how long an engine holds a batch for the tasks started with it (`_announce`)."""
        if not engines:
            raise ValueError("a TaskRunner needs at least one engine actor")
        self.codec = _codec(spec)
        self.engines = [link_to(engine) for engine in engines]
        self.spec = spec
        self.auxiliary = [(list(handles), aux_spec, _codec(aux_spec)) for handles, aux_spec in auxiliary]
        self.slots = [engine for engine in range(len(self.engines)) for _ in range(runner_per_model)]
        self.max_retry_times = max_retry_times
        self.max_timeout = max_timeout
        self.gather_s = gather_s
        self.threads = TaskThreads()

    @classmethod
    def from_config(cls, config, engines: Sequence[Any], auxiliary: Sequence[Sequence[Any]] = ()) -> "TaskRunner":
        """`auxiliary`: the engine actors of each served auxiliary model (see Explorer)."""
        explorer, specs = config.explorer, engine_specs(config)
        served = served_auxiliaries(config)
        return cls(
            engines,
            specs[0],
            runner_per_model=explorer.runner_per_model,
            max_retry_times=explorer.max_retry_times,
            max_timeout=explorer.max_timeout,
            auxiliary=[(handles, specs[index + 1]) for handles, index in zip(auxiliary, served, strict=True)],
        )

    def run(self, tasks: Sequence[Any], batch_id: str = "") -> RunResult:
        """Experiences of every task that succeeded, failures of the others, and step metrics."""
        started = time.monotonic()
        batch: List[Optional[RolloutTask]] = []
        failures: List[TaskFailure] = []
        for raw in tasks:
            try:
                task = as_rollout_task(raw)
                batch.append(replace(task, batch_id=batch_id) if batch_id else task)
            except (TypeError, ValueError) as exc:
                batch.append(None)
                failures.append(TaskFailure(str(_task_id(raw)), 0, _describe(exc), False))
        results: Dict[int, List[Experience]] = {}
        queue: Deque[Tuple[int, int]] = deque((i, 1) for i, task in enumerate(batch) if task is not None)
        free = list(range(len(self.slots)))
        running: Dict[Future, _Attempt] = {}
        retries = 0
        while queue or running:
            wave = []
            while queue and free:
                index, number = queue.popleft()
                wave.append(_Attempt(index, number, free.pop(0), time.monotonic() + self.max_timeout))
            self._announce(wave)
            for attempt in wave:
                running[self._start(batch[attempt.index], attempt)] = attempt
            next_deadline = min(a.deadline for a in running.values())
            done, _ = wait(
                list(running), timeout=max(0.0, next_deadline - time.monotonic()), return_when=FIRST_COMPLETED
            )
            now = time.monotonic()
            for future, attempt in list(running.items()):
                if future not in done and now < attempt.deadline:
                    continue
                del running[future]
                free.append(attempt.slot)
                error = future.exception() if future in done else TaskTimeout(f"ran past {self.max_timeout:g} s")
                if error is None:
                    results[attempt.index] = future.result()
                    continue
                task = batch[attempt.index]
                logger.warning("task %s attempt %d failed: %s", task.task_id, attempt.number, _describe(error))
                if attempt.number <= self.max_retry_times:
                    retries += 1
                    queue.append((attempt.index, attempt.number + 1))
                else:
                    failures.append(
                        TaskFailure(task.task_id, attempt.number, _describe(error), isinstance(error, TaskTimeout))
                    )
        experiences = [exp for index in sorted(results) for exp in results[index]]
        metrics = step_metrics(experiences, len(batch), len(failures), retries, time.monotonic() - started)
        return RunResult(experiences, metrics, failures)

    def _announce(self, wave: List[_Attempt]) -> None:
        """Tell each engine how many of the attempts starting now are its, so it batches their first
        requests together (`EngineActor.expect`); fire and forget: a dead engine fails the requests."""
        for engine, count in Counter(self.slots[attempt.slot] for attempt in wave).items():
            if count > 1:
                self.engines[engine].send("expect", count, self.gather_s)

    def _start(self, task: RolloutTask, attempt: _Attempt) -> Future:
        future: Future = Future()
        engine = RemoteEngine(self.engines[self.slots[attempt.slot]], self.spec, self.codec, attempt.deadline)
        auxiliary = [
            RemoteEngine(handles[attempt.slot % len(handles)], spec, codec, attempt.deadline)
            for handles, spec, codec in self.auxiliary
        ]

        def target() -> Callable[[], None]:
            try:
                return functools.partial(future.set_result, run_task(task, engine, auxiliary))
            except BaseException as exc:  # noqa: BLE001 - every failure is the task's, recorded by run()
                logger.debug("task %s failed:\n%s", task.task_id, traceback.format_exc())
                return functools.partial(future.set_exception, exc)

        self.threads.run(target, f"task-{task.task_id}-{attempt.number}")
        return future


def run_task(task: RolloutTask, engine, auxiliary_engines: Sequence[Any] = ()) -> List[Experience]:
    """One attempt at one task: its workflow with its reward function, against `engine` (and the
    auxiliary models' engines, which the workflow finds in `self.auxiliary_engines`)."""
    workflow_class = WORKFLOWS.resolve(task.workflow)
    reward_fn = REWARD_FNS.resolve(task.reward_fn)
    workflow = workflow_class(task, engine, reward_fn)
    workflow.auxiliary_engines = list(auxiliary_engines)
    experiences = workflow.run()
    if not isinstance(experiences, list) or not all(isinstance(e, Experience) for e in experiences):
        raise TypeError(f"workflow {task.workflow} must return a list of Experience, got {type(experiences).__name__}")
    for exp in experiences:  # the task's group, also on experiences built from recorded history
        exp.batch_id, exp.task_id = task.batch_id, task.task_id
    return experiences


def step_metrics(
    experiences: List[Experience], tasks: int, failed: int, retries: int, seconds: float
) -> Dict[str, float]:
    """reward/response-length statistics, the mean of every workflow metric, counts and times (the run's
    wall time, and the time spent in reward functions)."""
    metrics: Dict[str, float] = {
        "tasks": float(tasks),
        "tasks_failed": float(failed),
        "task_retries": float(retries),
        "experiences": float(len(experiences)),
        "time/run_s": seconds,
    }
    series: Dict[str, List[float]] = {
        "reward": [float(e.reward) for e in experiences if e.reward is not None],
        "response_length": [float(e.mask().sum()) for e in experiences],  # model-generated tokens
    }
    reward_seconds = 0.0
    for exp in experiences:
        for key, value in exp.metrics.items():
            if key == REWARD_SECONDS:
                reward_seconds += float(value)
            elif key != "response_length":
                series.setdefault(key, []).append(float(value))
    metrics["time/reward_s"] = reward_seconds  # summed over responses (runners score concurrently)
    for key, values in series.items():
        if values:
            metrics[f"{key}/mean"] = statistics.fmean(values)
    for key in ("reward", "response_length"):
        values = series[key]
        if values:
            metrics[f"{key}/std"] = statistics.pstdev(values)
            metrics[f"{key}/max"] = max(values)
            metrics[f"{key}/min"] = min(values)
    return metrics


def _codec(spec: EngineSpec) -> TextCodec:
    """The tokenizer side of a served model (the tiny model is built first when it is one)."""
    from trinity.model.load import load_tokenizer, stop_token_ids

    path = spec.weights_path()
    tokenizer = load_tokenizer(path, spec.trust_remote_code, spec.model.chat_template)
    return TextCodec(tokenizer, stop_token_ids(path, tokenizer), spec.model.enable_thinking)


def _task_id(raw: Any) -> Any:
    return raw.get("task_id") if isinstance(raw, dict) else getattr(raw, "task_id", "?")


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
