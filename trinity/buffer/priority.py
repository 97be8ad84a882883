"""Replay priority functions, keyed by `ReplayBufferConfig.priority_fn`; arguments are PRIORITY_FN_ARGS dataclasses.

Each maps (model_version, use_count) to (priority, keep). It is applied on every insertion, the first one
(use_count 0) and each reuse, so `keep=False` is how an experience retires.
"""

import random
from dataclasses import asdict
from typing import Any, Callable, Dict, Optional, Tuple

from trinity.config.buffer import PRIORITY_FN_ARGS, PriorityFn

PriorityFunction = Callable[[int, int], Tuple[float, bool]]


def linear_decay(decay: float) -> PriorityFunction:
    def priority(model_version: int, use_count: int) -> Tuple[float, bool]:
        return model_version - decay * use_count, True

    return priority


def decay_limit_randomization(
    decay: float, use_count_limit: int, sigma: float, rng: Optional[random.Random] = None
) -> PriorityFunction:
    rng = rng or random.Random()

    def priority(model_version: int, use_count: int) -> Tuple[float, bool]:
        noise = rng.gauss(0.0, sigma) if sigma > 0 else 0.0
        keep = use_count_limit <= 0 or use_count < use_count_limit
        return model_version - decay * use_count + noise, keep

    return priority


FACTORIES = {PriorityFn.linear_decay: linear_decay, PriorityFn.decay_limit_randomization: decay_limit_randomization}


def make_priority_fn(name: str, args: Dict[str, Any]) -> PriorityFunction:
    """Missing arguments take the defaults declared in the config schema; unknown ones are an error."""
    choice = PriorityFn(str(name))
    schema = PRIORITY_FN_ARGS[choice]
    values = asdict(schema(**dict(args)))
    return FACTORIES[choice](**values)
