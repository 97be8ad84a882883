"""The trainer actor: reads train batches, drives the FSDP ranks, publishes weights, saves checkpoints.

One train step: the sample strategy reads `buffer.train_batch_size` experiences; trainer-side reward
KL penalty and advantages are applied to the whole batch (group advantages need whole groups); the
batch is cut into the same number of micro batches per rank; every rank updates its shard; the step's
metrics go to the monitor. Weights are published every `synchronizer.sync_interval` steps (or when
the explorer asks, in explorer_driven style) and checkpoints are written every `trainer.save_interval`
steps and at the end, together with the trainer meta (step, buffer cursor) that resume restores.
"""

import asyncio
import json
import logging
import os
import time
from typing import Any, Dict, List, Optional, Tuple

import ray

from trinity.buffer.batch import Batch, collate
from trinity.buffer.errors import BufferExhausted
from trinity.config.functions import ADVANTAGE_FN, KL_PENALTY_FN, SAMPLE_STRATEGY
from trinity.config.quota import planned_train_steps as planned_steps_of
from trinity.config.root import Config, Mode, SyncMethod, SyncStyle
from trinity.config.topology import PAIRED_MODES, colocated_device_name, rank_name_prefix
from trinity.config.trainer import ResumeMode
from trinity.in_process import local_handle
from trinity.job_layout import CheckpointError, actor_dir, critic_dir
from trinity.logs import apply_log_level
from trinity.manager import RunningStatus, Synchronizer
from trinity.manager.packing import meta_bytes
from trinity.manager.state_actor import resume_checkpoint, state_actor
from trinity.model.load import load_tokenizer, resolve_model_path
from trinity.monitor import Monitor
from trinity.placement import in_bundle
from trinity.trainer.checkpoint import prune, prune_critic, resume_dir
from trinity.trainer.distributed import free_port, node_address
from trinity.trainer.micro_batch import plan, select
from trinity.trainer.rank_metrics import reduce_rank_metrics

logger = logging.getLogger(__name__)

CONTROLLER_STATE = "trainer_state.json"  # controller-side training state (adaptive KL) in a checkpoint


class Trainer:
    def __init__(self, config: Config, placement: Optional[Tuple[Any, int]] = None):
        """`placement`: (placement group, first bundle) reserved for the ranks, see orchestration.cluster."""
        apply_log_level(config)
        self.placement = placement
        self.config = config
        self.name = config.trainer.name
        self.state = state_actor(config)
        self.synchronizer = Synchronizer.get_actor(config, module_name=self.name)
        path = resolve_model_path(config.model)
        self.tokenizer = load_tokenizer(path, config.model.trust_remote_code, config.model.custom_chat_template)
        algorithm = config.algorithm
        strategy = SAMPLE_STRATEGY.implementation(algorithm.sample_strategy)
        self.strategy = strategy(config, self.tokenizer, **algorithm.sample_strategy_args)
        self.advantage = None
        if algorithm.advantage_fn is not None and algorithm.compute_advantage_in_trainer:
            self.advantage = ADVANTAGE_FN.implementation(algorithm.advantage_fn)(**algorithm.advantage_fn_args)
        self.kl_penalty = None
        if algorithm.kl_penalty_fn != "none":
            self.kl_penalty = KL_PENALTY_FN.implementation(algorithm.kl_penalty_fn)(**algorithm.kl_penalty_fn_args)
        self.monitor = Monitor(config, self.name)
        self.total_steps = planned_train_steps(config, self.strategy)
        self.step = self.last_sync_step = self.last_save_step = 0
        self.workers: List = []
        self.last_metrics: Dict[str, float] = {}

    async def is_alive(self) -> bool:
        return True

    async def progress(self) -> Dict[str, float]:
        """Where training stands: the job's watchdog and progress bar read it."""
        return {"train_step": self.step, "total_steps": self.total_steps}

    async def process_ids(self) -> Dict[str, int]:
        """This actor's and each rank's OS process id (for memory measurements)."""
        pids = await asyncio.gather(*[worker.__ray_call__.remote(lambda _self: os.getpid()) for worker in self.workers])
        return {"trainer": os.getpid(), **{f"rank_{i}": pid for i, pid in enumerate(pids)}}

    async def final_metrics(self) -> Dict[str, float]:
        return {**self.last_metrics, "trainer/step": float(self.step)}

    # ---- start ---------------------------------------------------------------------------------

    async def prepare(self) -> int:
        """Start the ranks, resume from the latest checkpoint, form the nccl group; returns the step."""
        config = self.config
        address, port = node_address(), free_port()
        if config.mode == Mode.colocate:  # the rank joins the engine in the job's one device process, ours
            device = colocated_device_name(config)
            self.workers = [local_handle(device) or ray.get_actor(device, namespace=config.ray_namespace)]
            await self.workers[0].start_rank.remote(config, address, port, self.total_steps)
        else:
            self.workers = self._start_ranks(address, port)
        directory = resume_dir(config.trainer, config.checkpoint_job_dir, config.continue_from_checkpoint)
        if directory is not None:
            contents = [str(c) for c in config.trainer.actor.checkpoint.load_contents]
            steps = await asyncio.gather(*[w.load_checkpoint.remote(str(directory), contents) for w in self.workers])
            meta = await self.state.load_trainer.remote(resume_checkpoint(config))
            self.step = meta.get("latest_iteration", steps[0])
            if meta.get("sample_strategy_state"):
                self.strategy.load_state_dict(meta["sample_strategy_state"])
            self._load_controller_state(directory)
            await self._load_critic(directory.parent / "critic")
            self.last_sync_step = self.last_save_step = self.step
            logger.info("Trainer resumed from %s at step %d.", directory, self.step)
        # what each sync moves: the whole model, or with LoRA the adapter alone
        self.sync_bytes = meta_bytes(await self.workers[0].weights_meta.remote())
        if config.synchronizer.sync_method == SyncMethod.nccl:
            await asyncio.gather(*[w.setup_weight_sender.remote(self.synchronizer) for w in self.workers])
        if self.step > 0:  # a resumed run: explorers must get the trained weights, not the base model
            await self.sync_weight()
        await self.synchronizer.set_trainer_status.remote(RunningStatus.RUNNING)
        return self.step

    def _start_ranks(self, address: str, port: int) -> List[Any]:
        """One FSDP rank actor per trainer device, each on its bundle of the job's reservation. (Imported here:
        torch.distributed's checkpointing takes ~0.8 s, which colocate's controller and the job never need.)"""
        from trinity.trainer.fsdp_worker import FSDPWorker

        config = self.config
        world = config.cluster.trainer_gpu_num
        cuda = config.cluster.device_type == "cuda"
        resources = {"num_gpus": 1, "num_cpus": 1} if cuda else {"num_cpus": config.cluster.cpu_threads_per_device}
        group, first = self.placement or (None, 0)
        return [
            ray.remote(FSDPWorker)
            .options(
                name=f"{rank_name_prefix(config)}_{rank}",
                namespace=config.ray_namespace,
                **resources,
                **in_bundle(group, first + rank),
            )
            .remote(config, rank, world, address, port, self.total_steps)
            for rank in range(world)
        ]

    # ---- the loop ------------------------------------------------------------------------------

    async def train(self) -> str:
        try:
            while self.step < self.total_steps:
                sampled = await self._sample()
                if sampled is None:
                    break
                await self.train_step(*sampled)
        finally:
            await self._finish()
        return self.name

    async def _sample(self):
        """The next batch; while waiting, serve explorer-driven sync requests (a waiting explorer is
        blocked until it gets weights). None when the data has ended."""
        started = time.perf_counter()
        task = asyncio.ensure_future(self.strategy.sample(self.step))
        while True:
            done, _ = await asyncio.wait({task}, timeout=1.0)
            if done:
                break
            if self.config.synchronizer.sync_style == SyncStyle.explorer_driven and await self._need_sync():
                await self.sync_weight()
        try:
            experiences, metrics = task.result()
        except BufferExhausted:
            return None
        metrics["time/wait_for_batch"] = time.perf_counter() - started
        return experiences, metrics

    async def train_step(self, experiences, sample_metrics: Dict[str, float]) -> Dict[str, float]:
        started = time.perf_counter()
        batch = collate(experiences, self.tokenizer.pad_token_id)
        metrics = dict(sample_metrics)
        algorithm, trainer = self.config.algorithm, self.config.trainer
        if algorithm.use_critic:
            batch["values"] = await self._per_token("critic_values", batch, trainer.critic.ppo_micro_batch_size_per_gpu)
        if algorithm.uses_teacher:
            micro_size = trainer.ref.log_prob_micro_batch_size_per_gpu
            batch["teacher_logprobs"] = await self._per_token("teacher_logprobs", batch, micro_size)
        if self.kl_penalty is not None or self.advantage is not None:
            metrics.update(await self._trainer_side_advantages(batch))
        rows = self._plan(batch, trainer.actor.ppo_micro_batch_size_per_gpu, algorithm.rows_per_example)
        critic_rows = self._plan(batch, trainer.critic.ppo_micro_batch_size_per_gpu) if algorithm.use_critic else None
        update_actor = self.step >= trainer.critic_warmup
        tokens, count = int(batch["response_mask"].sum()), batch["input_ids"].shape[0]
        per_rank = await asyncio.gather(
            *[
                worker.train_step.remote(
                    [select(batch, micro) for micro in rows[rank]],
                    tokens,
                    count,
                    [select(batch, micro) for micro in critic_rows[rank]] if critic_rows else None,
                    update_actor,
                )
                for rank, worker in enumerate(self.workers)
            ]
        )
        metrics.update(reduce_rank_metrics(per_rank))
        metrics.update(batch_metrics(batch))
        self.step += 1
        metrics["time/train"] = time.perf_counter() - started
        # logged as soon as the update is done: a sync that fails next may still leave a final checkpoint
        # of this step (a rerun resumes after it), so its metrics must already be on disk
        self.monitor.log(metrics, self.step)
        timings = {}
        if not self.config.synchronizer.sync_style == SyncStyle.explorer_driven and await self._need_sync():
            timings["time/sync"] = await self.sync_weight()
            timings["sync/bytes"] = float(self.sync_bytes)
        if self._need_save():
            timings["time/save"] = await self.save_checkpoint(final=self.step >= self.total_steps)
        if timings:
            self.monitor.log(timings, self.step)
            metrics.update(timings)
        self.last_metrics = metrics
        return metrics

    async def _trainer_side_advantages(self, batch: Batch) -> Dict[str, float]:
        """Reward KL penalty (needs reference logprobs of the whole batch), then the advantage function."""
        metrics: Dict[str, float] = {}
        if self.kl_penalty is not None:
            micro_size = self.config.trainer.ref.log_prob_micro_batch_size_per_gpu
            batch["ref_logprobs"] = await self._per_token("reference_logprobs", batch, micro_size)
            rewards, penalty_metrics = self.kl_penalty.apply(
                batch["token_level_rewards"], batch["old_logprobs"], batch["ref_logprobs"], batch["response_mask"]
            )
            batch["token_level_rewards"] = rewards
            self.kl_penalty.update(current_kl=penalty_metrics["kl"], n_steps=batch["input_ids"].shape[0])
            metrics.update({f"reward_kl/{key}": value for key, value in penalty_metrics.items()})
        if self.advantage is not None:
            out = self.advantage(batch)
            batch["advantages"], batch["returns"] = out["advantages"], out["returns"]
            metrics.update({f"advantage/{key}": value for key, value in out.get("metrics", {}).items()})
        return metrics

    def _plan(self, batch: Batch, micro_size: int, pair: int = 1):
        trainer = self.config.trainer
        return plan(
            batch,
            len(self.workers),
            micro_size,
            trainer.actor.ppo_max_token_len_per_gpu,
            trainer.use_dynamic_bsz,
            trainer.balance_batch,
            pair,
        )

    async def _per_token(self, method: str, batch: Batch, micro_size: int):
        """[B, R] per-response-token values of the whole batch from a no-grad rank forward (`method`:
        reference_logprobs, teacher_logprobs or critic_values), gathered back into batch row order."""
        import torch

        rows = plan(batch, len(self.workers), micro_size, 10**9, False, False)
        results = await asyncio.gather(
            *[
                getattr(worker, method).remote([select(batch, micro) for micro in rank_rows])
                for worker, rank_rows in zip(self.workers, rows, strict=True)
            ]
        )
        gathered = torch.zeros_like(batch["response_mask"], dtype=torch.float32)
        for rank_rows, rank_results in zip(rows, results, strict=True):
            for micro, values in zip(rank_rows, rank_results, strict=True):
                gathered[micro, : values.shape[1]] = values
        return gathered

    # ---- sync and save -------------------------------------------------------------------------

    async def _need_sync(self) -> bool:
        sync = self.config.synchronizer
        if self.config.mode not in PAIRED_MODES:  # no explorer runs beside this trainer; it reads checkpoints
            return False
        if sync.sync_style == SyncStyle.explorer_driven:
            if self.last_sync_step == self.step:
                if sync.sync_method != SyncMethod.nccl:
                    await self.synchronizer.notify_no_new_model_state_dict.remote()
                return False
            return await self.synchronizer.explorer_requires_sync.remote()
        return self.last_sync_step != self.step and self.step % sync.sync_interval == 0

    async def sync_weight(self) -> float:
        started = time.perf_counter()
        await asyncio.gather(*[w.publish_weights.remote(self.synchronizer, self.step) for w in self.workers])
        self.last_sync_step = self.step
        return time.perf_counter() - started

    def _need_save(self) -> bool:
        interval = self.config.trainer.save_interval
        return interval > 0 and self.step % interval == 0 and self.step != self.last_save_step

    async def save_checkpoint(self, final: bool = False) -> float:
        started = time.perf_counter()
        trainer = self.config.trainer
        contents = [str(c) for c in trainer.actor.checkpoint.save_contents]
        if not (trainer.save_hf_checkpoint == "always" or (final and trainer.save_hf_checkpoint == "last")):
            contents = [part for part in contents if part not in ("hf_model", "hf_merged_model")]
        job_dir = self.config.checkpoint_job_dir
        directory = actor_dir(job_dir, self.step)
        directory.mkdir(parents=True, exist_ok=True)
        await asyncio.gather(*[w.save_checkpoint.remote(str(directory), self.step, contents) for w in self.workers])
        if self.config.algorithm.use_critic:
            critic_contents = [str(c) for c in trainer.critic.checkpoint.save_contents]
            critic = str(critic_dir(job_dir, self.step))
            await asyncio.gather(*[w.save_critic.remote(critic, self.step, critic_contents) for w in self.workers])
        (directory / CONTROLLER_STATE).write_text(json.dumps(self._controller_state()))
        await self.state.commit_checkpoint.remote(self.step, self.strategy.state_dict(), self.step)
        removed = prune(job_dir, trainer.max_actor_ckpt_to_keep)
        if removed:
            logger.info("Pruned checkpoints of steps %s.", removed)
        removed = prune_critic(job_dir, trainer.max_critic_ckpt_to_keep)
        if removed:
            logger.info("Pruned critic checkpoints of steps %s.", removed)
        self.last_save_step = self.step
        return time.perf_counter() - started

    async def _load_critic(self, directory) -> None:
        if not self.config.algorithm.use_critic:
            return
        if not (directory / "dcp").is_dir():
            saved = {str(c) for c in self.config.trainer.critic.checkpoint.save_contents} & {"model", "optimizer"}
            if saved and self.config.trainer.resume_mode == ResumeMode.auto:  # this job wrote it: missing = damaged
                raise CheckpointError(f"{directory} is missing: the checkpoint has an actor but no critic")
            logger.warning("No critic checkpoint at %s: the critic starts from model.critic_model_path.", directory)
            return
        contents = [str(c) for c in self.config.trainer.critic.checkpoint.load_contents]
        await asyncio.gather(*[w.load_critic.remote(str(directory), contents) for w in self.workers])

    def _controller_state(self) -> dict:
        return {"kl_penalty": self.kl_penalty.state_dict() if self.kl_penalty is not None else None}

    def _load_controller_state(self, directory) -> None:
        path = directory / CONTROLLER_STATE
        if self.kl_penalty is not None and path.exists():
            self.kl_penalty.load_state_dict(json.loads(path.read_text())["kl_penalty"])

    async def _finish(self) -> None:
        try:
            if self.workers and self.step > self.last_save_step:
                await self.save_checkpoint(final=True)
            if self.workers and self.step > self.last_sync_step and self.config.mode in PAIRED_MODES:
                await self.sync_weight()
        finally:
            await self.synchronizer.set_trainer_status.remote(RunningStatus.STOPPED)
            self.monitor.close()

    async def shutdown(self) -> None:
        await asyncio.gather(*[w.shutdown.remote() for w in self.workers])
        if self.config.mode != Mode.colocate:  # colocate's rank is the job's device process, this one's host
            for worker in self.workers:
                ray.kill(worker)
        self.workers = []


def planned_train_steps(config: Config, strategy) -> int:
    """Train steps the run will take: buffer.total_steps, or what the data yields over total_epochs."""
    buffer, algorithm = config.buffer, config.algorithm
    if algorithm.trains_from_dataset:
        rows_per_step = buffer.train_batch_size // algorithm.rows_per_example
        if buffer.total_steps:
            return buffer.total_steps
        return max(1, len(strategy.reader.dataset) * buffer.total_epochs // rows_per_step)
    if buffer.total_steps:
        return planned_steps_of(config, buffer.total_steps)
    from trinity.buffer.taskset import train_taskset_reader  # HF datasets: only when the data sets the length

    explore_steps = len(train_taskset_reader(config)) * buffer.total_epochs // buffer.batch_size
    return planned_steps_of(config, explore_steps)


def batch_metrics(batch: Batch) -> Dict[str, float]:
    """What the batch itself says: reward and response-length statistics."""
    lengths = batch["response_mask"].sum(dim=1).float()
    metrics = {"batch/response_length_mean": float(lengths.mean()), "batch/size": float(len(lengths))}
    if "rewards" in batch:
        rewards = batch["rewards"].float()
        metrics["batch/reward_mean"] = float(rewards.mean())
        metrics["batch/reward_std"] = float(rewards.std()) if len(rewards) > 1 else 0.0
    return metrics
