"""The metric tags a job's summary, its tables and its pictures read from the job's records."""

import re

REWARD = "rollout/reward/mean"
TOKENS_PER_S = "perf/tokens_per_second"
REVERSE_KL = "advantage/reverse_kl"  # on-policy distillation: the student's per-token distance to its teacher
# eval/<taskset>/<metric>/mean: the held-out scores (higher is better); lengths are not scores
EVAL_SCORE = re.compile(r"^eval/[^/]+/(?P<metric>.+)/mean$")
NOT_SCORES = ("response_length",)


def is_eval_score(tag: str) -> bool:
    match = EVAL_SCORE.match(tag)
    return match is not None and match.group("metric") not in NOT_SCORES
