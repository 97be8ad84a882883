"""One trainer rank: its FSDP2 shard of the actor (and reference) model, the optimizer, the updates.

Ranks run as Ray actors in one torch.distributed group (gloo on CPU, nccl on CUDA). The controller
(`trinity.trainer.trainer`) plans the micro batches; every rank runs the same number of them, so the
FSDP collectives line up. Checkpoints are torch.distributed.checkpoint shards plus per-rank extras
(scheduler, RNG), and an HF export that `AutoModelForCausalLM.from_pretrained` loads.
"""

import random
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, fully_shard

from trinity.buffer.batch import Batch
from trinity.config.algorithm import DataSchema
from trinity.config.root import Config
from trinity.logs import apply_log_level, exit_quietly_on_sigterm
from trinity.manager.checkpoint_shards import dim0_shard, write_shard
from trinity.manager.published_weights import TensorMeta
from trinity.manager.weight_sync import NcclSender, publish_checkpoint_shard, publish_memory, state_dict_meta
from trinity.model.load import load_causal_lm, load_tokenizer, resolve_model_path
from trinity.model.lora import adapter_names, add_adapter, merged_model
from trinity.model.tied import tied_aliases, without_aliases
from trinity.trainer.actor_loss import ActorLoss, micro_weight
from trinity.trainer.critic import Critic
from trinity.trainer.distributed import init_group
from trinity.trainer.lr_schedule import make_scheduler
from trinity.trainer.optim import build_optimizer, clip_gradients
from trinity.trainer.shared_prompt import response_logits, shares_prompts
from trinity.trainer.token_stats import token_logprobs
from trinity.trainer.train_state import extra_state_path, load_extra_state, load_sharded, save_sharded

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class FSDPWorker:
    def __init__(
        self, config: Config, rank: int, world_size: int, master_address: str, master_port: int, total_steps: int
    ):
        apply_log_level(config)
        exit_quietly_on_sigterm()
        self.config, self.rank, self.world_size = config, rank, world_size
        trainer = config.trainer
        if config.cluster.device_type == "cpu":
            torch.set_num_threads(config.cluster.cpu_threads_per_device)
        self.owns_group = not dist.is_initialized()  # colocate with vllm: the engine's group, left to it
        self.device = init_group(
            rank, world_size, master_address, master_port, config.cluster.device_type, config.synchronizer.sync_timeout
        )
        self.mesh = self._mesh()
        self.prompt_sharing: Dict[torch.nn.Module, bool] = {}  # per model: run each distinct prompt once
        self.lora = config.model.lora_configs[0] if config.model.lora_configs else None
        self.model = self._build(trainable=True)
        self.tied = tied_aliases(self.model)  # weights leave this rank under one name per tensor
        # with LoRA only the adapter leaves this rank (syncs, checkpoint shards); the base never changes
        self.published = adapter_names(self.model, self.lora) if self.lora else None
        # with LoRA the reference is the same model with its adapter switched off: no second copy of the base
        uses_reference = config.algorithm.uses_reference()
        self.ref = self._build(trainable=False) if uses_reference and self.lora is None else None
        self.teacher = (
            self._build(trainable=False, path=teacher_path(config)) if config.algorithm.uses_teacher else None
        )
        self.optimizer = build_optimizer(self.model.parameters(), config.algorithm.optimizer)
        self.scheduler = make_scheduler(
            self.optimizer, config.algorithm.optimizer, max(1, total_steps * trainer.ppo_epochs)
        )
        self.critic = Critic(config, self._shard, self.device, total_steps) if config.algorithm.use_critic else None
        self.loss = ActorLoss(config.algorithm)
        self.temperature = training_temperature(config)
        self.sender: Optional[NcclSender] = None  # rank 0's end of the nccl weight-sync group

    # ---- building ----------------------------------------------------------------------------

    def _mesh(self):
        shard = self.config.trainer.fsdp_config.fsdp_size
        device = self.config.cluster.device_type
        if shard <= 0 or shard >= self.world_size:
            return init_device_mesh(device, (self.world_size,))
        return init_device_mesh(device, (self.world_size // shard, shard), mesh_dim_names=("replicate", "shard"))

    def _build(self, trainable: bool, path: Optional[str] = None) -> torch.nn.Module:
        trainer = self.config.trainer
        path = path or resolve_model_path(self.config.model)
        model = load_causal_lm(path, "float32", "cpu", self.config.model.trust_remote_code)
        if trainable and trainer.enable_gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if trainable and self.lora is not None:
            model = add_adapter(model, self.lora, trainable=True)  # the base frozen, the adapter trainable
        else:
            model.requires_grad_(trainable)
        model.train(trainable)
        model = self._shard(model)
        self.prompt_sharing[model] = _prompts_repeat(self.config) and shares_prompts(model)
        return model

    def _shard(self, model: torch.nn.Module) -> torch.nn.Module:
        """FSDP2-wrap each decoder layer and the whole model with the trainer's settings; on the device.

        A lone rank with no mixed precision or offload to apply keeps the plain module: it has nothing
        to shard, and FSDP2's hooks and DTensor optimizer ops cost ~15% of a small model's update.
        Checkpoints are interchangeable either way (DCP keys tensors by name)."""
        trainer = self.config.trainer
        options = {"mesh": self.mesh, "reshard_after_forward": _reshard(trainer)}
        precision = _mixed_precision(self.config)
        if precision is not None:
            options["mp_policy"] = precision
        offload = _offload(trainer) and self.config.cluster.device_type == "cuda"
        if offload:
            options["offload_policy"] = CPUOffloadPolicy()
        if self.world_size == 1 and precision is None and not offload:
            return model.to(self.device)
        layers = list(_decoder_layers(model))
        for layer in layers:
            fully_shard(layer, **options)
        fully_shard(model, **options)
        if getattr(trainer.fsdp_config, "forward_prefetch", False):
            for current, following in zip(layers, layers[1:], strict=False):
                current.set_modules_to_forward_prefetch([following])
        if self.config.cluster.device_type == "cuda" and not _offload(trainer):
            model.to(self.device)
        return model

    # ---- forward -----------------------------------------------------------------------------

    def _forward(self, model: torch.nn.Module, micro: Batch, with_entropy: bool):
        """Per-token logprobs (and entropy) of the response tokens under logits / temperature."""
        inputs = {key: micro[key].to(self.device) for key in ("input_ids", "attention_mask", "position_ids")}
        ids, response_len = inputs["input_ids"], micro["response_mask"].shape[1]
        logits = response_logits(model, inputs, response_len, self.prompt_sharing[model]).float() / self.temperature
        actor = self.config.trainer.actor
        return token_logprobs(
            logits,
            ids[:, ids.shape[1] - response_len :],
            with_entropy,
            actor.entropy_from_logits_with_chunking,
            actor.entropy_checkpointing,
        )

    @torch.no_grad()
    def reference_logprobs(self, micro_batches: List[Batch]) -> List[torch.Tensor]:
        model = self.ref if self.ref is not None else self.model
        switched_off = self.model.disable_adapter() if self.ref is None else nullcontext()
        with switched_off:
            return [self._forward(model, micro, with_entropy=False)[0].cpu() for micro in micro_batches]

    @torch.no_grad()
    def teacher_logprobs(self, micro_batches: List[Batch]) -> List[torch.Tensor]:
        return [self._forward(self.teacher, micro, with_entropy=False)[0].cpu() for micro in micro_batches]

    # ---- one train step ----------------------------------------------------------------------

    def critic_values(self, micro_batches: List[Batch]) -> List[torch.Tensor]:
        return self.critic.values(micro_batches)

    def train_step(
        self,
        micro_batches: List[Batch],
        global_tokens: int,
        global_rows: int,
        critic_micro_batches: Optional[List[Batch]] = None,
        update_actor: bool = True,
    ) -> Dict[str, float]:
        """The critic's update (when there is one), then ppo_epochs actor optimizer steps over this rank's
        micro batches (skipped during critic warm-up); returns rank-local metrics."""
        metrics = {}
        if self.critic is not None:
            mode = self.loss.term_agg_mode  # the policy loss's aggregation, never "dpo" (no critic there)
            metrics.update(self.critic.update(critic_micro_batches, mode, global_tokens, global_rows))
        if update_actor:
            metrics.update(self._actor_update(micro_batches, global_tokens, global_rows))
        return metrics

    def _actor_update(self, micro_batches: List[Batch], global_tokens: int, global_rows: int) -> Dict[str, float]:
        started = time.perf_counter()
        if self.config.algorithm.uses_reference():
            for micro, ref in zip(micro_batches, self.reference_logprobs(micro_batches), strict=False):
                micro["ref_logprobs"] = ref
        totals: Dict[str, float] = {}
        for _ in range(self.config.trainer.ppo_epochs):
            self.optimizer.zero_grad(set_to_none=True)
            for micro in micro_batches:
                micro = {key: value.to(self.device) for key, value in micro.items()}
                logprobs, entropy = self._forward(self.model, micro, with_entropy=True)
                loss, metrics = self.loss(logprobs, entropy, micro)
                weight = micro_weight(
                    self.loss.agg_mode, micro["response_mask"], global_tokens, global_rows, self.world_size
                )
                (loss * weight).backward()
                for key, value in metrics.items():
                    totals[key] = totals.get(key, 0.0) + value * weight / self.world_size
            grad_norm = clip_gradients(self.model, self.config.trainer.grad_clip)
            if torch.isfinite(grad_norm):
                self.optimizer.step()
            totals["actor/grad_norm"] = totals.get("actor/grad_norm", 0.0) + float(grad_norm)
            totals["actor/skipped_steps"] = totals.get("actor/skipped_steps", 0.0) + float(
                not torch.isfinite(grad_norm)
            )
            self.scheduler.step()
        epochs = self.config.trainer.ppo_epochs
        metrics = {key: value / epochs for key, value in totals.items()}
        metrics["actor/skipped_steps"] *= epochs
        metrics["actor/lr"] = self.scheduler.get_last_lr()[0]
        tokens = sum(int(m["attention_mask"].sum()) for m in micro_batches)
        metrics["perf/tokens_per_second"] = tokens * epochs / (time.perf_counter() - started)
        return metrics

    # ---- weights out -------------------------------------------------------------------------

    def full_state_dict(self) -> Optional[Dict[str, torch.Tensor]]:
        """Gathered CPU weights on rank 0 (None on the others); every rank must call it. A lone rank's plain CPU
        model holds them already: its own state dict (the same views, ~20x faster than gathering them)."""
        if self.device.type == "cpu" and not isinstance(self.model, FSDPModule):
            return self._outgoing(self.model.state_dict())
        options = StateDictOptions(full_state_dict=True, cpu_offload=True, ignore_frozen_params=self.lora is not None)
        state = get_model_state_dict(self.model, options=options)
        return self._outgoing(state) if self.rank == 0 else None

    def weights_meta(self) -> List[TensorMeta]:
        """(name, dtype, shape) of every entry of `full_state_dict()`, without gathering: a sharded model's
        DTensors carry their global shapes, so announcing a version costs nothing on any device."""
        return state_dict_meta(self._outgoing(self.model.state_dict()))

    def _weight_shards(self) -> Dict[str, tuple]:
        return {name: dim0_shard(value.detach()) for name, value in self._outgoing(self.model.state_dict()).items()}

    def _outgoing(self, state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """What of a state dict leaves this rank: each tensor under one name; with LoRA the adapter alone."""
        if self.published is not None:
            return {name: value for name, value in state.items() if name in self.published}
        return without_aliases(state, self.tied)

    def setup_weight_sender(self, synchronizer) -> None:
        """nccl sync, rank 0: form the broadcast group with the explorers (blocks until they joined)."""
        if self.rank == 0:
            self.sender = NcclSender(synchronizer, self.weights_meta(), self.device)
            self.sender.setup()

    def publish_weights(self, synchronizer, step: int) -> Optional[int]:
        """Hand the weights of `step` to the explorers with the configured sync method; every rank calls.

        checkpoint: each rank writes its own dim-0 shards; memory and nccl: rank 0 gathers the full
        state dict and puts it in the object store or broadcasts it. Returns the version published
        (None where this rank published nothing, or the explorers have stopped)."""
        method = self.config.synchronizer.sync_method
        if method == "checkpoint":
            return publish_checkpoint_shard(
                synchronizer, self.config.checkpoint_job_dir, step, self.rank, self.world_size, self._weight_shards()
            )
        state = self.full_state_dict()
        if self.rank != 0:
            return None
        if method == "memory":
            publish_memory(synchronizer, state, step)
            return step
        return self.sender.publish(state, step)

    # ---- checkpoints -------------------------------------------------------------------------

    def save_checkpoint(self, directory: str, step: int, contents: List[str]) -> None:
        """DCP shards (model, optimizer), per-rank extras, the HF export, and — with the model — its weight
        shards in the sync format, so explore/bench explorers and the Synchronizer can load any checkpoint."""
        path = Path(directory)
        if "model" in contents:
            write_shard(path, self.rank, self.world_size, self._weight_shards())
        save_sharded(path, self.model, self.optimizer, contents, adapter_only=self.lora is not None)
        if "extra" in contents:
            extra = {"step": step, "scheduler": self.scheduler.state_dict(), "rng": _rng_state()}
            torch.save(extra, extra_state_path(path, self.rank, self.world_size))
        exports = [part for part in ("hf_model", "hf_merged_model") if part in contents]
        full = self.full_state_dict() if exports else None
        if self.rank == 0 and exports:
            model = self.config.model
            base = resolve_model_path(model)
            tokenizer = load_tokenizer(base, model.trust_remote_code, model.custom_chat_template)
            if "hf_model" in exports:  # with LoRA a PEFT adapter directory (save_pretrained of the wrapped model)
                self.model.save_pretrained(path / "huggingface", state_dict=full, safe_serialization=True)
                tokenizer.save_pretrained(path / "huggingface")
            if "hf_merged_model" in exports:
                merged_model(base, self.lora, full).save_pretrained(path / "huggingface_merged")
                tokenizer.save_pretrained(path / "huggingface_merged")
        dist.barrier()

    def load_checkpoint(self, directory: str, contents: List[str]) -> int:
        """Restore what `contents` names from `directory`; returns the step stored in it."""
        path = Path(directory)
        load_sharded(path, self.model, self.optimizer, contents, adapter_only=self.lora is not None)
        step = -1
        if "extra" in contents:
            extra = load_extra_state(path, self.rank, self.world_size)
            self.scheduler.load_state_dict(extra["scheduler"])
            _set_rng_state(extra["rng"])
            step = extra["step"]
        dist.barrier()
        return step

    def save_critic(self, directory: str, step: int, contents: List[str]) -> None:
        self.critic.save(Path(directory), self.rank, self.world_size, step, contents)
        dist.barrier()

    def load_critic(self, directory: str, contents: List[str]) -> None:
        self.critic.load(Path(directory), self.rank, self.world_size, contents)
        dist.barrier()

    def shutdown(self) -> None:
        if self.sender is not None:
            self.sender.close()
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()


def training_temperature(config: Config) -> float:
    """Logprobs are taken at the temperature the explorer sampled with (1 for dataset training)."""
    if config.algorithm.schema != "experience":
        return 1.0
    return config.buffer.explorer_input.taskset.rollout_args.temperature or 1.0


def teacher_path(config: Config) -> str:
    """The distillation teacher: the first auxiliary model (validation makes sure there is one)."""
    return config.explorer.auxiliary_models[0].model_path


def _decoder_layers(model: torch.nn.Module):
    """The transformer blocks, each its own FSDP unit (HF causal LMs keep them at model.layers; a PEFT-wrapped
    one under its base model)."""
    if hasattr(model, "get_base_model"):
        model = model.get_base_model()
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    return list(layers) if layers is not None else []


def _prompts_repeat(config: Config) -> bool:
    """Whether batches hold several rows per prompt: a group of rollouts per task, or DPO's pairs."""
    algorithm = config.algorithm
    if algorithm.schema == DataSchema.dpo:
        return True
    return algorithm.schema == DataSchema.experience and algorithm.repeat_times > 1


def _reshard(trainer) -> bool:
    return getattr(trainer.fsdp_config, "reshard_after_forward", True)


def _offload(trainer) -> bool:
    fsdp = trainer.fsdp_config
    return bool(
        getattr(fsdp, "offload_policy", False)
        or getattr(fsdp, "param_offload", False)
        or getattr(fsdp, "optimizer_offload", False)
    )


def _mixed_precision(config: Config) -> Optional[MixedPrecisionPolicy]:
    dtype = config.trainer.mixed_precision
    if dtype == "auto":
        cuda = config.cluster.device_type == "cuda"
        dtype = "bfloat16" if cuda and torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float32"
    if dtype == "float32":
        return None
    return MixedPrecisionPolicy(param_dtype=DTYPES[dtype], reduce_dtype=torch.float32)


def _rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
