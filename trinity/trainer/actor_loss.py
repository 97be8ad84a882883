"""The actor's loss on one micro batch: policy loss + KL loss - entropy bonus, from the selected functions.

Each part is aggregated over the micro batch with the policy loss's `loss_agg_mode`; `micro_weight`
rescales it so that summing the micro-batch losses of all ranks (FSDP averages gradients over ranks)
gives exactly the loss of the whole train batch.
"""

from typing import Dict, Tuple

import torch

from trinity.buffer.batch import Batch
from trinity.config.algorithm import AlgorithmConfig
from trinity.config.functions import ENTROPY_LOSS_FN, KL_LOSS_FN, POLICY_LOSS_FN

SEQUENCE_MODES = ("seq-mean-token-sum", "seq-mean-token-mean")


def micro_weight(mode: str, micro_mask: torch.Tensor, global_tokens: int, global_rows: int, world_size: int) -> float:
    """Share of the global loss one micro batch carries, times world_size (undoing FSDP's gradient mean)."""
    if mode in SEQUENCE_MODES or mode == "dpo":
        share = micro_mask.shape[0] / global_rows
    elif mode == "seq-mean-token-sum-norm":
        share = 1.0  # a plain sum over sequences (with a fixed normaliser): micro batches add up
    else:
        share = int(micro_mask.sum()) / max(global_tokens, 1)
    return share * world_size


class ActorLoss:
    def __init__(self, algorithm: AlgorithmConfig):
        self.policy = POLICY_LOSS_FN.implementation(algorithm.policy_loss_fn)(**algorithm.policy_loss_fn_args)
        self.kl = KL_LOSS_FN.implementation(algorithm.kl_loss_fn)(**algorithm.kl_loss_fn_args)
        self.entropy = ENTROPY_LOSS_FN.implementation(algorithm.entropy_loss_fn)(**algorithm.entropy_loss_fn_args)
        self.uses_kl = algorithm.kl_loss_fn != "none"
        self.is_dpo = algorithm.policy_loss_fn == "dpo"
        self.agg_mode = "dpo" if self.is_dpo else algorithm.policy_loss_fn_args.get("loss_agg_mode", "token-mean")
        self.term_agg_mode = algorithm.policy_loss_fn_args.get("loss_agg_mode", "token-mean")

    def __call__(self, logprobs: torch.Tensor, entropy: torch.Tensor, micro: Batch) -> Tuple[torch.Tensor, Dict]:
        mask = micro["response_mask"]
        zeros = torch.zeros_like(logprobs)
        extra = {}
        if "ref_logprobs" in micro:
            extra["ref_logprobs"] = micro["ref_logprobs"]
        if micro["expert_mask"].any():
            extra["expert_mask"] = micro["expert_mask"]
        loss, metrics = self.policy(
            logprobs,
            micro.get("old_logprobs", logprobs.detach()),
            micro.get("advantages", zeros),
            mask,
            **extra,
        )
        metrics = {f"actor/{key}": value for key, value in metrics.items()}
        if self.uses_kl and not self.is_dpo:
            kl_loss, kl_metrics = self.kl(logprobs, micro["ref_logprobs"], mask, self.term_agg_mode)
            loss = loss + kl_loss
            metrics.update({f"actor/{key}": value for key, value in kl_metrics.items()})
        entropy_loss, entropy_metrics = self.entropy(
            entropy, mask, self.term_agg_mode, expert_mask=micro["expert_mask"]
        )
        loss = loss - entropy_loss
        metrics.update({f"actor/{key}": value for key, value in entropy_metrics.items()})
        metrics["actor/loss"] = float(loss.detach())
        return loss, metrics
