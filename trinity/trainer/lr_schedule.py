"""Learning-rate schedules: linear warm-up, then constant or cosine decay to min_lr_ratio * lr."""

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from trinity.config.algorithm import OptimizerConfig


def warmup_steps(optim: OptimizerConfig, total_steps: int) -> int:
    if optim.lr_warmup_steps >= 0:
        return optim.lr_warmup_steps
    return int(optim.lr_warmup_steps_ratio * total_steps)


def lr_factor(step: int, optim: OptimizerConfig, total_steps: int) -> float:
    """Multiplier of the base lr after `step` optimizer steps."""
    warm = warmup_steps(optim, total_steps)
    if step < warm:
        return (step + 1) / warm
    if optim.lr_scheduler_type == "constant":
        return 1.0
    progress = min(1.0, (step - warm) / max(1, total_steps - warm))
    floor = optim.min_lr_ratio
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def make_scheduler(optimizer: Optimizer, optim: OptimizerConfig, total_steps: int) -> LambdaLR:
    return LambdaLR(optimizer, lambda step: lr_factor(step, optim, total_steps))
