"""DAPO's four parts against hand-computed numbers: overlong reward shaping, clip-higher, token-mean loss
over the whole batch, and dynamic sampling (only the groups whose shaped rewards do not vary are dropped)."""

import math

import pytest
import torch

from tests.conftest import problems, validated
from trinity.algorithm.advantage_fn import DAPOAdvantage
from trinity.algorithm.aggregate import aggregate_loss
from trinity.algorithm.policy_loss_fn import PPOPolicyLoss
from trinity.algorithm.reward_shaping import overlong_penalty
from trinity.trainer.actor_loss import micro_weight

# L_max = 20, L_cache = 4: no penalty up to 16 tokens, then -1/4 per token, -1 at 20 and beyond
LENGTHS = [3, 16, 17, 18, 20, 21, 40]
PENALTY = [0.0, 0.0, -0.25, -0.5, -1.0, -1.0, -1.0]


def test_overlong_penalty_below_inside_and_beyond_the_buffer():
    got = overlong_penalty(torch.tensor(LENGTHS), max_length=20, buffer_len=4)
    assert got.tolist() == PENALTY
    scaled = overlong_penalty(torch.tensor(LENGTHS), max_length=20, buffer_len=4, factor=0.5)
    assert scaled.tolist() == [0.5 * p for p in PENALTY]


def test_overlong_shaping_off_and_out_of_range():
    assert overlong_penalty(torch.tensor(LENGTHS), max_length=20, buffer_len=0).tolist() == [0.0] * len(LENGTHS)
    with pytest.raises(ValueError, match="overlong_buffer_len"):
        overlong_penalty(torch.tensor(LENGTHS), max_length=20, buffer_len=20)


def test_clip_higher_lets_positive_ratios_rise_further_than_negative_ones_fall():
    # one token per row; A > 0 rows test the upper bound, A < 0 rows the lower one
    ratio = [1.25, 1.35, 0.75, 0.85]
    adv = [1.0, 1.0, -1.0, -1.0]
    # by hand, L = max(-A*rho, -A*clip(rho, 0.8, 1.28)):
    #   1.25 < 1.28: unclipped -1.25;  1.35 -> -1.28;  0.75 -> max(0.75, 0.8) = 0.8;  0.85 inside: 0.85
    expected = [-1.25, -1.28, 0.8, 0.85]
    logprobs = torch.log(torch.tensor(ratio, dtype=torch.float64))[:, None].requires_grad_(True)
    old = torch.zeros(4, 1, dtype=torch.float64)
    mask = torch.ones(4, 1, dtype=torch.bool)
    advantages = torch.tensor(adv, dtype=torch.float64)[:, None]
    loss, metrics = PPOPolicyLoss(0.2, 0.2, 0.28, 3.0, "token-mean")(logprobs, old, advantages, mask)
    assert loss.item() == pytest.approx(sum(expected) / 4)
    assert metrics["pg_clipfrac"] == pytest.approx(0.5)  # rows 2 and 3 clipped
    loss.backward()  # clipped tokens get no gradient; unclipped ones -A*rho/4
    assert logprobs.grad[:, 0].tolist() == pytest.approx([-1.25 / 4, 0.0, 0.0, 0.85 / 4])
    symmetric, _ = PPOPolicyLoss(0.2, None, None, 3.0, "token-mean")(logprobs, old, advantages, mask)
    assert symmetric.item() == pytest.approx((-1.2 - 1.2 + 0.8 + 0.85) / 4)  # 1.25 is clipped at 1.2 there


def test_token_mean_weighs_every_token_of_the_batch_alike():
    values = torch.tensor([[4.0, 9.0, 9.0], [1.0, 2.0, 3.0]])
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    assert aggregate_loss(values, mask, "token-mean").item() == pytest.approx((4 + 1 + 2 + 3) / 4)
    assert aggregate_loss(values, mask, "seq-mean-token-mean").item() == pytest.approx((4 + 2) / 2)
    # the trainer cuts the batch into micro batches: their weighted token means add up to the batch's
    tokens = int(mask.sum())
    parts = [
        aggregate_loss(values[rows], mask[rows], "token-mean") * micro_weight("token-mean", mask[rows], tokens, 2, 1)
        for rows in (slice(0, 1), slice(1, 2))
    ]
    assert sum(parts).item() == pytest.approx(2.5)


def test_dynamic_sampling_drops_exactly_the_groups_whose_shaped_rewards_do_not_vary():
    # group 0: all 1.0; group 1: 0/1 mixed; group 2: all 0.1 (a rounded std is 1e-8, not 0);
    # group 3: equal rewards but one response runs into the overlong buffer, so the shaped rewards differ
    rewards = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.1, 0.1, 0.1, 0.1, 0.5, 0.5]
    lengths = [5] * 12 + [5, 18]
    groups = [0] * 4 + [1] * 4 + [2] * 4 + [3] * 2
    mask = torch.arange(20)[None, :] < torch.tensor(lengths)[:, None]
    batch = {"rewards": torch.tensor(rewards), "response_mask": mask, "group_ids": torch.tensor(groups)}
    out = DAPOAdvantage(1e-6, 0.0, 4, 1.0, 20)(batch)
    assert out["keep"].tolist() == [False] * 4 + [True] * 4 + [False] * 4 + [True] * 2
    assert out["metrics"]["filtered_count"] == 2.0
    assert out["metrics"]["overlong_frac"] == pytest.approx(1 / 14)
    # group 3 by hand: shaped [0.5, 0.0], mean 0.25, unbiased std sqrt(0.125)
    std = math.sqrt(0.125)
    assert out["advantages"][12, 0].item() == pytest.approx(0.25 / (std + 1e-6))
    assert out["advantages"][13, 0].item() == pytest.approx(-0.25 / (std + 1e-6))
    assert out["advantages"][:4].abs().sum() == 0 and out["advantages"][8:12].abs().sum() == 0


def test_the_dapo_type_selects_its_parts_and_validation_fills_the_lengths(tmp_path):
    config = validated("algorithm=dapo", root=str(tmp_path)).configs[0]
    algorithm = config.algorithm
    assert (algorithm.advantage_fn, algorithm.policy_loss_fn, algorithm.kl_loss_fn) == ("dapo", "ppo", "none")
    loss = algorithm.policy_loss_fn_args
    assert (loss["clip_range_low"], loss["clip_range_high"], loss["loss_agg_mode"]) == (0.2, 0.28, "token-mean")
    args = algorithm.advantage_fn_args
    assert args["std_threshold"] == 0.0
    assert args["max_response_length"] == config.buffer.explorer_input.taskset.rollout_args.max_tokens == 8
    assert args["overlong_buffer_len"] == 8 // 5
    found = problems("algorithm=dapo", "+algorithm.advantage_fn_args.overlong_buffer_len=8")
    assert "algorithm.advantage_fn_args.overlong_buffer_len" in found
