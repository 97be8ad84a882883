"""The explorer actor: task batches -> workflows on the engines -> experiences in the buffer, with weight syncs.

One explore step reads `buffer.batch_size` tasks, runs them (`repeat_times` responses each), computes
explorer-side advantages when the algorithm does (GRPO-style group advantages, which may drop groups),
reads more tasks while dropped rollouts leave the trainer's batch short (top-up reads, bounded by
`explorer.max_extra_explore_steps`, see trinity.explorer.top_up), writes the step's experiences, logs
the step, evaluates every `explorer.eval_interval` steps and syncs weights when its sync style says so
(reference §2.6: after `sync_offset` steps, every `sync_interval`). Progress (step, taskset cursor and
experiences written, model version) goes to `<explorer name>_meta.json` after every step. Exploring ends
with the taskset or `buffer.total_steps`, or once the trainer beside it has finished: a finished trainer
reads no more rows, and is done, not frozen, so nothing waits for it.
"""

import asyncio
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import ray

from trinity.atomic_file import atomic_write_text
from trinity.buffer.batch import collate
from trinity.buffer.errors import BufferExhausted
from trinity.buffer.experience import Experience
from trinity.buffer.factory import make_writer
from trinity.buffer.taskset import eval_taskset_readers, train_taskset_reader
from trinity.config.buffer import StorageType
from trinity.config.functions import ADVANTAGE_FN
from trinity.config.quota import Quota
from trinity.config.root import Config, Mode, SyncMethod, SyncStyle
from trinity.config.topology import PAIRED_MODES, colocated_device_name, served_auxiliaries
from trinity.explorer.engine_actor import create_engines
from trinity.explorer.engine_links import in_process_engine
from trinity.explorer.runner import TaskFailure, TaskRunner
from trinity.explorer.top_up import StepTally, every_task_failed, still_short
from trinity.in_process import local_handle
from trinity.job_layout import completed_steps
from trinity.logs import apply_log_level
from trinity.manager import RunningStatus, Synchronizer
from trinity.manager.state_actor import resume_checkpoint, state_actor
from trinity.manager.weight_sync import nccl_handshake, pull_weights
from trinity.monitor import Monitor

logger = logging.getLogger(__name__)


class TrainerFinished(Exception):
    """The trainer finished while a step waited to write its rows: the step is dropped and exploring ends."""


class Explorer:
    def __init__(
        self, config: Config, placement: Optional[Tuple[Any, int]] = None, train_table: Optional[List[Any]] = None
    ):
        """`placement`: (placement group, first bundle) reserved for the engines, see orchestration.cluster.
        `train_table`: [the reference to the job's read of the train taskset (`read_train_table`)], in a list
        so that Ray hands it over unresolved; a read that failed is done again here, raising its own error."""
        apply_log_level(config)
        self.config = config
        self.name = config.explorer.name
        self.state = state_actor(config)
        meta = ray.get(self.state.load_explorer.remote())
        self.step = meta.get("latest_iteration", 0)
        resume = resume_checkpoint(config)  # the trainer's resume point, so that both continue from one step
        trainer_meta = ray.get(self.state.load_trainer.remote(resume)) if config.mode in PAIRED_MODES else {}
        self.resumed = bool(trainer_meta.get("latest_iteration"))
        self.synchronizer = Synchronizer.get_actor(config, module_name=self.name)
        if config.mode == Mode.colocate:  # the job's one device process is the engine (and the trainer's rank)
            device = colocated_device_name(config)
            self.engines = [local_handle(device) or ray.get_actor(device, namespace=config.ray_namespace)]
            rollout = [in_process_engine(device) or self.engines[0]]  # built in the device: tasks call it directly
        else:
            self.engines = rollout = create_engines(
                config, name_prefix=f"{self.name}_engine", namespace=config.ray_namespace, placement=placement
            )
        self.auxiliary_engines = self._auxiliary_engines(placement)
        self.runner = TaskRunner.from_config(config, rollout, self.auxiliary_engines)
        self.quota = Quota.of(config)
        self.taskset = train_taskset_reader(
            config,
            1 + config.explorer.max_extra_explore_steps,
            _read_ahead(train_table, config.synchronizer.sync_timeout),
        )
        self.written = self._resume_taskset(meta, trainer_meta)
        self.writer = make_writer(config.buffer.trainer_input.experience_buffer, config.ray_namespace)
        self.writer.acquire()
        if "experiences_written" in (meta.get("taskset_states") or [{}])[0]:  # rows after the last committed
            # step belong to a step that is explored again
            dropped = self.writer.keep_first(self.written)
            if dropped:
                logger.warning(
                    "dropped %d experiences of explore step %d, written before the last run stopped "
                    "and not committed: the step is explored again",
                    dropped,
                    self.step + 1,
                )
        algorithm = config.algorithm
        self.advantage = None
        if algorithm.advantage_fn is not None and not algorithm.compute_advantage_in_trainer:
            self.advantage = ADVANTAGE_FN.implementation(algorithm.advantage_fn)(**algorithm.advantage_fn_args)
        self.monitor = Monitor(config, self.name)
        self.version = 0  # the engines start from the base model; prepare() pulls a newer one on resume
        self._loading_s = 0.0  # seconds this sync spent loading weights into the engines (time/weight_load)
        self.last_metrics: Dict[str, float] = {}
        self._committing = None  # the StateManager's answer to a progress commit not awaited yet (`_save_state`)

    def _resume_taskset(self, meta: dict, trainer_meta: dict) -> int:
        """Put the taskset cursor where this run continues; returns the rows already in the trainer's stream."""
        config, written = self.config, None
        if self.resumed and config.buffer.trainer_input.experience_buffer.storage_type == StorageType.queue:
            # the queue's experiences died with the last run: explore again from the trainer's checkpoint,
            # whose stream restarts empty at the batches it has trained
            state = trainer_meta["sample_strategy_state"]
            self.step = state.get("explore_step", trainer_meta["latest_iteration"])
            index = state.get("taskset_index")
            self.taskset.load_state_dict(
                {"current_index": self.step * config.buffer.batch_size if index is None else index}
            )
            written = trainer_meta["latest_iteration"] * self.quota.per_train_step
        elif meta.get("taskset_states"):
            self.taskset.load_state_dict(meta["taskset_states"][0])
            written = meta["taskset_states"][0].get("experiences_written")
        return self.quota.start(self.step, written)

    def _auxiliary_engines(self, placement) -> List[List[Any]]:
        """Engine actors of each served auxiliary model (judges and the like), in their placement
        bundles after the rollout engines. They keep their own weights: syncs never reach them."""
        config = self.config
        group, bundle = placement or (None, 0)
        bundle += config.explorer.rollout_model.engine_num
        served = []
        for index in served_auxiliaries(config):
            served.append(
                create_engines(
                    config,
                    name_prefix=f"{self.name}_aux{index}_engine",
                    namespace=config.ray_namespace,
                    model_index=index + 1,
                    placement=(group, bundle) if group is not None else None,
                )
            )
            bundle += config.explorer.auxiliary_models[index].engine_num
        return served

    async def is_alive(self) -> bool:
        return True

    async def progress(self) -> Dict[str, float]:
        """Where exploration stands: the job's watchdog and progress bar read it."""
        return {
            "explore_step": self.step,
            "model_version": self.version,
            "reward": self.last_metrics.get("rollout/reward/mean", float("nan")),
        }

    async def process_ids(self) -> Dict[str, int]:
        """This actor's and each engine's OS process id (for memory measurements)."""
        pids = await asyncio.gather(*[engine.__ray_call__.remote(lambda _self: os.getpid()) for engine in self.engines])
        return {"explorer": os.getpid(), **{f"engine_{i}": pid for i, pid in enumerate(pids)}}

    async def final_metrics(self) -> Dict[str, float]:
        return {**self.last_metrics, "explorer/step": float(self.step), "explorer/model_version": float(self.version)}

    async def prepare(self) -> int:
        """Load the newest published weights (resume), evaluate the starting model, report RUNNING."""
        if self.resumed:  # the trainer publishes its checkpointed weights once; take them before exploring
            await self.sync_weight()
        elif self.config.synchronizer.sync_method != SyncMethod.nccl:
            await self._pull(wait=False)
        if self.config.explorer.eval_on_startup and self.step == 0:
            await self.evaluate()
        await self.synchronizer.set_explorer_status.remote(RunningStatus.RUNNING, None, self.name)
        return self.step

    async def explore(self) -> str:
        """Explore until the taskset is exhausted; returns the explorer's name."""
        try:
            while await self.explore_step():
                if self.step % self.config.explorer.eval_interval == 0:
                    await self.evaluate()
                if self._need_sync():
                    await self.sync_weight()
        finally:
            await self._finish()
        return self.name

    async def explore_step(self) -> bool:
        """One step, topped up until the trainer's batch is full; False when there are no tasks left or the
        trainer has finished (it reads no more experiences)."""
        if self.config.buffer.total_steps is not None and self.step >= self.config.buffer.total_steps:
            return False
        if await self._trainer_finished():
            return False
        before = self.taskset.state_dict()
        try:
            tasks = self.taskset.read()
        except BufferExhausted:
            return False
        started = time.perf_counter()
        self.step += 1
        try:
            tally = await self._explore_until_due(tasks)
            rollout_s = time.perf_counter() - started
            index = self.taskset.state_dict()["current_index"]
            for exp in tally.kept:  # a queue resume restarts the taskset right after the newest step trained
                exp.info["taskset_index"] = index
            written = time.perf_counter()
            if tally.kept:
                await self._write(tally.kept)
        except TrainerFinished:
            self._undo_step(before)
            return False
        except BaseException:
            self._undo_step(before)
            raise
        self.written += len(tally.kept)
        metrics = tally.metrics()
        metrics.update(
            {
                "rollout/model_version": float(self.version),
                "time/rollout": rollout_s,
                "time/write": time.perf_counter() - written,
            }
        )
        self.monitor.log(metrics, self.step)
        self.last_metrics.update(metrics)
        await self._save_state()
        return True

    def _undo_step(self, before: dict) -> None:
        """The step never happened: the saved progress stays before it, so a rerun explores it again (rows it
        wrote are past `experiences_written` and dropped then)."""
        self.step -= 1
        self.taskset.load_state_dict(before)

    async def _trainer_finished(self) -> bool:
        """Whether the trainer beside this explorer has finished: it reads no more experiences, so exploring
        on would make rows nobody trains on, and waiting for room in a full queue would never end."""
        if self.config.mode not in PAIRED_MODES or not await self.synchronizer.trainer_finished.remote():
            return False
        logger.info("The trainer has finished: explorer %r stops after explore step %d.", self.name, self.step)
        return True

    async def _explore_until_due(self, tasks: List[Any]) -> StepTally:
        """Run `tasks`, then more tasks while the rows written leave the trainer's batch short (top_up)."""
        tally, due = StepTally(), self.quota.due(self.step)
        limit = self.config.explorer.max_extra_explore_steps
        while True:
            result = await asyncio.to_thread(self.runner.run, tasks, str(self.step))
            self._log_failures(result.failures)
            kept, advantage_metrics = self._advantages(result.experiences)
            tally.add(result, len(tasks), kept, advantage_metrics)
            if tally.nothing_but_failures():
                raise every_task_failed(self.name, self.step, tally)
            missing = due - self.written - len(tally.kept)
            if missing <= 0:
                return tally
            if tally.reads > limit:
                rule = self.advantage.filter_rule() if self.advantage is not None else ""
                why = tally.causes(rule, self.config.algorithm.repeat_times)
                raise still_short(self.name, self.step, missing, tally, limit, why)
            try:
                tasks = self.taskset.read()
            except BufferExhausted:
                logger.warning(
                    "The taskset ran out while explore step %d was %d experiences short.", self.step, missing
                )
                return tally
            logger.info(
                "Explore step %d is %d experiences short: reading %d more tasks.", self.step, missing, len(tasks)
            )

    def _log_failures(self, failures: List[TaskFailure]) -> None:
        for failure in failures:
            logger.warning(
                "step %d: task %s failed after %d attempts: %s",
                self.step,
                failure.task_id,
                failure.attempts,
                failure.error,
            )

    def _advantages(self, experiences: List[Experience]):
        """(experiences kept, with their advantages; the advantage function's metrics)."""
        if self.advantage is None or not experiences:
            return experiences, {}
        batch = collate(experiences, pad_token_id=0)
        out = self.advantage(batch)
        keep = [True] * len(experiences) if out.get("keep") is None else out["keep"].tolist()
        advantages, returns = out["advantages"], out["returns"]
        kept = []
        for row, (exp, kept_row) in enumerate(zip(experiences, keep, strict=True)):
            if kept_row:
                length = exp.response_length
                exp.advantages, exp.returns = advantages[row, :length].clone(), returns[row, :length].clone()
                kept.append(exp)
        return kept, dict(out.get("metrics", {}))

    async def evaluate(self) -> Dict[str, float]:
        metrics: Dict[str, float] = {}
        started = time.perf_counter()
        for reader in eval_taskset_readers(self.config):
            tasks = [task for batch in reader for task in batch]
            result = await asyncio.to_thread(self.runner.run, tasks, f"eval/{reader.name}/{self.step}")
            metrics.update({f"eval/{reader.name}/{key}": value for key, value in result.metrics.items()})
        if metrics:
            metrics["time/eval"] = time.perf_counter() - started
            self.monitor.log(metrics, self.step)
            self.last_metrics.update(metrics)
        return metrics

    async def benchmark(self) -> Dict[int, Dict[str, float]]:
        """Bench mode: evaluate every complete checkpoint (or only the latest) on the eval tasksets.

        Writes `<job_dir>/bench_results.json` (step -> metrics) and returns the same table."""
        steps = completed_steps(self.config.checkpoint_job_dir)
        if self.config.explorer.bench_on_latest_checkpoint:
            steps = steps[-1:]
        if self.config.explorer.eval_on_startup and not self.config.explorer.bench_on_latest_checkpoint:
            steps = [0, *steps]
        table: Dict[int, Dict[str, float]] = {}
        for step in steps:
            if step > 0:
                await self.synchronizer.set_model_state_dict_with_step_num.remote(step)
                await self._pull(wait=False)
            self.step = step
            table[step] = await self.evaluate()
        atomic_write_text(Path(self.config.checkpoint_job_dir) / "bench_results.json", json.dumps(table, indent=2))
        return table

    # ---- weights ----------------------------------------------------------------------------

    def _need_sync(self) -> bool:
        sync = self.config.synchronizer
        if self.step <= sync.sync_offset or (self.step - sync.sync_offset) % sync.sync_interval:
            return False
        return True

    async def sync_weight(self) -> int:
        started = time.perf_counter()
        self._loading_s = 0.0
        sync = self.config.synchronizer
        if sync.sync_method == SyncMethod.nccl:
            if (
                sync.sync_style == SyncStyle.trainer_driven
                and not await self.synchronizer.trainer_requires_sync.remote()
            ):
                return self.version
            await self._receive_broadcast()
        else:
            await self._pull(wait=sync.sync_style != SyncStyle.trainer_driven)
        metrics = {"time/sync": time.perf_counter() - started, "sync/model_version": float(self.version)}
        if self._loading_s:
            metrics["time/weight_load"] = self._loading_s
        self.monitor.log(metrics, self.step)
        await self._save_state(wait=False)
        return self.version

    async def _receive_broadcast(self) -> None:
        """nccl: meet the trainer's broadcast and load it into every engine (None: the trainer has stopped)."""
        version = await asyncio.to_thread(nccl_handshake, self.synchronizer, self.name)
        if version is not None:
            started = time.perf_counter()
            await asyncio.gather(*[engine.receive_weights.remote(version) for engine in self.engines])
            self._loading_s += time.perf_counter() - started
            self.version = version

    async def _write(self, experiences: List[Experience]) -> None:
        """Write a step's rows. A full queue blocks until the trainer reads a batch. While blocked: in
        trainer_driven nccl style the trainer may be waiting in a broadcast for this explorer first, so join
        it, or both would wait until synchronizer.sync_timeout; and a trainer that has finished reads no more,
        so give up (TrainerFinished; the queue wakes the pending write when this explorer releases it)."""
        sync = self.config.synchronizer
        joins_broadcasts = sync.sync_style == SyncStyle.trainer_driven and sync.sync_method == SyncMethod.nccl
        write = asyncio.ensure_future(self.writer.write_async(experiences))
        while not (await asyncio.wait({write}, timeout=1.0))[0]:
            if await self._trainer_finished():
                write.cancel()
                raise TrainerFinished
            if joins_broadcasts and await self.synchronizer.trainer_requires_sync.remote():
                await self._receive_broadcast()
        await write

    async def _pull(self, wait: bool) -> None:
        if self.config.mode == Mode.explore:  # no trainer beside us: take the newest checkpoint on disk
            try:
                await self.synchronizer.set_model_state_dict_with_step_num.remote(None)
            except FileNotFoundError:
                return
            wait = False
        self.version = await pull_weights(self.synchronizer, self.version, self._load_published, self.name, wait)

    async def _load_published(self, published: Any, version: int) -> None:
        """Every engine reads the published weights itself (zero-copy from the store or the shard files)."""
        started = time.perf_counter()
        await asyncio.gather(*[engine.load_published.remote(published, version) for engine in self.engines])
        self._loading_s += time.perf_counter() - started

    async def setup_weight_sync_group(self, spec: Any) -> None:
        """Called by the Synchronizer when the trainer forms the nccl group: every engine joins as a rank."""
        await asyncio.gather(*[engine.join_weight_group.remote(spec, i) for i, engine in enumerate(self.engines)])

    # ---- end ----------------------------------------------------------------------------------

    async def _save_state(self, wait: bool = True) -> None:
        """Commit this moment's progress: taken now, and the StateManager runs one caller's commits in order.
        With `wait=False` it lands while the explorer goes on (the new version after a sync, off the next
        step's start); the next save waits for it first, so a failed commit still stops the run."""
        previous, taskset = self._committing, {**self.taskset.state_dict(), "experiences_written": self.written}
        self._committing = self.state.commit_explorer.remote(self.step, [taskset], self.version)
        if previous is not None:
            await previous
        if wait:
            committing, self._committing = self._committing, None
            await committing

    async def _finish(self) -> None:
        await self._save_state()
        try:
            await self.synchronizer.set_explorer_status.remote(RunningStatus.STOPPED, None, self.name)
        finally:  # off this loop: colocate's device serves its queue on it
            await asyncio.to_thread(self.writer.release)
            self.writer.close()
            self.monitor.close()

    async def shutdown(self) -> None:
        import ray

        owned = self.engines if self.config.mode != Mode.colocate else []  # colocate: the job's device
        for engine in [*owned, *(e for model in self.auxiliary_engines for e in model)]:
            ray.kill(engine)


def _read_ahead(train_table: Optional[List[Any]], timeout: float) -> Any:
    """The table the job read for this explorer; None when it read none, or its read failed or did not
    finish within `timeout` (synchronizer.sync_timeout): the explorer then reads the taskset itself."""
    if not train_table or train_table[0] is None:
        return None
    try:
        return ray.get(train_table[0], timeout=timeout)
    except ray.exceptions.RayError:
        return None
