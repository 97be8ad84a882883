"""The PPO critic on one trainer rank: a value model, its optimizer, its updates and checkpoints.

The value model is the transformer of `model.critic_model_path` (its LM head dropped) with a linear
head giving one value per position. Values are read at the same positions as the actor's logprobs:
the value of response token t is the estimate made from the context before t. The critic is sharded
with FSDP2 on the trainer's mesh and lives in the same rank processes as the actor, so one rank runs
both updates in one collective group. Checkpoints go to `global_step_N/critic/`, beside the actor.
"""

from pathlib import Path
from typing import Callable, Dict, List

import torch

from trinity.algorithm.value_loss import value_loss
from trinity.buffer.batch import Batch
from trinity.config.algorithm import OptimizerConfig
from trinity.config.root import Config
from trinity.model.load import load_causal_lm
from trinity.trainer.actor_loss import micro_weight
from trinity.trainer.lr_schedule import make_scheduler
from trinity.trainer.optim import build_optimizer, clip_gradients
from trinity.trainer.token_stats import at_response_positions
from trinity.trainer.train_state import extra_state_path, load_extra_state, load_sharded, save_sharded

HEAD_INIT_STD = 0.02
HEAD_INIT_SEED = 0  # every rank (and every run) must start from the same head: FSDP does not broadcast it


class ValueModel(torch.nn.Module):
    """A causal LM's transformer with a scalar head: input ids -> one value per position."""

    def __init__(self, backbone: torch.nn.Module, hidden_size: int):
        super().__init__()
        self.model = backbone  # named like the LM's transformer so decoder layers are found the same way
        self.value_head = torch.nn.Linear(hidden_size, 1)
        generator = torch.Generator().manual_seed(HEAD_INIT_SEED)
        with torch.no_grad():
            self.value_head.weight.copy_(torch.randn(self.value_head.weight.shape, generator=generator) * HEAD_INIT_STD)
        torch.nn.init.zeros_(self.value_head.bias)

    def forward(self, input_ids, attention_mask, position_ids) -> torch.Tensor:
        hidden = self.model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
        ).last_hidden_state
        return self.value_head(hidden).squeeze(-1)


def load_value_model(config: Config) -> ValueModel:
    model = config.model
    lm = load_causal_lm(model.critic_model_path or model.model_path, "float32", "cpu", model.trust_remote_code)
    return ValueModel(lm.model, lm.config.hidden_size)


def critic_optimizer_config(config: Config) -> OptimizerConfig:
    """The critic's schedule in the actor optimizer's terms (same optimizer family, its own lr)."""
    critic, actor = config.trainer.critic.optim, config.algorithm.optimizer
    return OptimizerConfig(
        lr=critic.lr,
        lr_warmup_steps=-1,
        lr_warmup_steps_ratio=critic.lr_warmup_steps_ratio,
        lr_scheduler_type=critic.lr_scheduler_type,
        min_lr_ratio=actor.min_lr_ratio,
        optimizer_type=actor.optimizer_type,
        betas=list(actor.betas),
        weight_decay=actor.weight_decay,
    )


class Critic:
    def __init__(self, config: Config, shard: Callable[[torch.nn.Module], torch.nn.Module], device, total_steps: int):
        """`shard` wraps a module with the rank's FSDP2 settings (see FSDPWorker)."""
        self.config, self.device = config, device
        self.model = shard(load_value_model(config))
        self.model.train()
        optim = critic_optimizer_config(config)
        self.optimizer = build_optimizer(self.model.parameters(), optim)
        self.scheduler = make_scheduler(self.optimizer, optim, max(1, total_steps * config.trainer.ppo_epochs))

    def _forward(self, micro: Batch) -> torch.Tensor:
        ids = micro["input_ids"].to(self.device)
        values = self.model(ids, micro["attention_mask"].to(self.device), micro["position_ids"].to(self.device))
        return at_response_positions(values.float(), micro["response_mask"].shape[1])

    @torch.no_grad()
    def values(self, micro_batches: List[Batch]) -> List[torch.Tensor]:
        """[rows, response] values of each micro batch, zero outside the response mask."""
        return [(self._forward(m) * m["response_mask"].to(self.device)).cpu() for m in micro_batches]

    def update(self, micro_batches: List[Batch], agg_mode: str, global_tokens: int, global_rows: int) -> Dict:
        """ppo_epochs steps of the clipped value loss towards `returns`, each micro batch weighted by its
        share of the global loss as for the actor (see micro_weight). Returns rank-local metrics."""
        trainer = self.config.trainer
        totals: Dict[str, float] = {}
        world = torch.distributed.get_world_size()
        for _ in range(trainer.ppo_epochs):
            self.optimizer.zero_grad(set_to_none=True)
            for micro in micro_batches:
                micro = {key: value.to(self.device) for key, value in micro.items()}
                values = self._forward(micro)
                loss, metrics = value_loss(
                    values,
                    micro["values"],
                    micro["returns"],
                    micro["response_mask"],
                    trainer.critic.cliprange_value,
                    agg_mode,
                )
                weight = micro_weight(agg_mode, micro["response_mask"], global_tokens, global_rows, world)
                (loss * weight).backward()
                for key, value in metrics.items():
                    totals[f"critic/{key}"] = totals.get(f"critic/{key}", 0.0) + value * weight / world
            norm = clip_gradients(self.model, trainer.critic.grad_clip)
            if torch.isfinite(norm):
                self.optimizer.step()
            totals["critic/grad_norm"] = totals.get("critic/grad_norm", 0.0) + float(norm)
            self.scheduler.step()
        metrics = {key: value / trainer.ppo_epochs for key, value in totals.items()}
        metrics["critic/lr"] = self.scheduler.get_last_lr()[0]
        return metrics

    # ---- checkpoints -------------------------------------------------------------------------

    def save(self, directory: Path, rank: int, world_size: int, step: int, contents: List[str]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        save_sharded(directory, self.model, self.optimizer, contents)
        if "extra" in contents:
            torch.save(
                {"step": step, "scheduler": self.scheduler.state_dict()}, extra_state_path(directory, rank, world_size)
            )

    def load(self, directory: Path, rank: int, world_size: int, contents: List[str]) -> None:
        load_sharded(directory, self.model, self.optimizer, contents)
        if "extra" in contents:
            extra = load_extra_state(directory, rank, world_size)
            self.scheduler.load_state_dict(extra["scheduler"])
