"""Optimizer construction and gradient clipping shared by the actor and the critic."""

from typing import Iterable

import torch

from trinity.config.algorithm import OptimizerConfig


def build_optimizer(params: Iterable[torch.nn.Parameter], optim: OptimizerConfig) -> torch.optim.Optimizer:
    params = [p for p in params if p.requires_grad]
    if optim.optimizer_type == "sgd":
        return torch.optim.SGD(params, lr=optim.lr, weight_decay=optim.weight_decay)
    # On CPU, torch's default AdamW loops over the parameters op by op (foreach is its default on CUDA only); the
    # fused kernel updates each parameter in one op: the tiny model's step 2.84 -> 0.51 ms, same values to ~1e-8.
    fused = True if params and all(p.device.type == "cpu" for p in params) else None
    return torch.optim.AdamW(
        params, lr=optim.lr, betas=tuple(optim.betas), weight_decay=optim.weight_decay, fused=fused
    )


def clip_gradients(model: torch.nn.Module, max_norm: float) -> torch.Tensor:
    """Clip to `max_norm` (0: no clipping) and return the full (unsharded) gradient norm."""
    params = [p for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm > 0 else float("inf"))
    return norm.full_tensor() if hasattr(norm, "full_tensor") else norm
