"""Combining the metrics of the trainer ranks into the metrics of the step.

Loss-part metrics come back from each rank already weighted by the share of the batch it holds, so
they add up; grad norm and lr are global (equal on every rank); throughput adds up.
"""

from typing import Dict, List

GLOBAL_KEYS = ("actor/grad_norm", "actor/lr", "actor/skipped_steps")


def reduce_rank_metrics(per_rank: List[Dict[str, float]]) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for key in per_rank[0]:
        if key in GLOBAL_KEYS:
            out[key] = per_rank[0][key]
        else:
            out[key] = sum(metrics.get(key, 0.0) for metrics in per_rank)
    return out
