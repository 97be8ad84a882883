"""Advantage functions against the reference formulas, recomputed here with plain Python loops."""

import math
import statistics

import pytest
import torch

from tests.algorithm import formulas
from trinity.algorithm.advantage_fn import (
    AsymREAdvantage,
    GAEAdvantage,
    GRPOAdvantage,
    OnPolicyDistillAdvantage,
    OPMDAdvantage,
    RAFTFilter,
    ReinforceAdvantage,
    ReinforcePlusPlusAdvantage,
    RemaxAdvantage,
    RLOOAdvantage,
    StepWiseGRPOAdvantage,
)
from trinity.buffer.batch import collate
from trinity.buffer.experience import Experience

EPS = 1e-6

# (task, reward, response length): task "a" has 3 distinct rewards, "b" a tie (zero variance),
# "c" a single response; tasks interleave so grouping cannot rely on row order.
ROWS = [("a", 1.0, 3), ("b", 0.5, 2), ("a", 0.0, 1), ("c", 2.0, 2), ("a", 0.5, 3), ("b", 0.5, 3)]


def make_batch(rows=ROWS, **extra_per_row):
    exps = []
    for i, (task, reward, length) in enumerate(rows):
        exps.append(
            Experience(
                tokens=[1, 2] + [3 + j for j in range(length)],
                prompt_length=2,
                logprobs=[-0.1 * (j + 1) for j in range(length)],
                reward=reward,
                batch_id="0",
                task_id=task,
                run_id=i,
                **{key: values[i] for key, values in extra_per_row.items()},
            )
        )
    return collate(exps, pad_token_id=0)


def groups_of(rows):
    out = {}
    for task, reward, _ in rows:
        out.setdefault(task, []).append(reward)
    return out


def per_token(batch, per_row):
    """Expected [B, R] lists: the row's value on its trained tokens, 0 elsewhere."""
    mask = batch["response_mask"].tolist()
    return [[per_row[i] if m else 0.0 for m in mrow] for i, mrow in enumerate(mask)]


def grpo_expected(rows, norm=True, batch_level=False):
    groups = groups_of(rows)
    all_std = statistics.stdev([r for _, r, _ in rows])
    out = []
    for task, reward, _ in rows:
        group = groups[task]
        if len(group) == 1:
            mean, std = 0.0, 1.0
        else:
            mean = statistics.mean(group)
            std = all_std if batch_level else statistics.stdev(group)
        out.append((reward - mean) / (std + EPS) if norm else reward - mean)
    return out


@pytest.mark.parametrize("norm, level", [(True, "group"), (False, "group"), (True, "batch")])
def test_grpo(norm, level):
    batch = make_batch()
    out = GRPOAdvantage(epsilon=EPS, norm_adv_by_std_in_grpo=norm, std_threshold=None, std_cal_level=level)(batch)
    expected = grpo_expected(ROWS, norm=norm, batch_level=level == "batch")
    formulas.assert_close(out["advantages"], per_token(batch, expected))
    formulas.assert_close(out["returns"], per_token(batch, expected))
    assert "keep" not in out
    # the zero-variance group "b" and the lone response "c" by hand
    assert out["advantages"][1].tolist() == [0.0, 0.0, 0.0]
    assert out["advantages"][3, 0].item() == pytest.approx(2.0 / (1 + EPS) if norm else 2.0)


def test_grpo_std_threshold_drops_flat_and_lone_groups():
    batch = make_batch()
    out = GRPOAdvantage(epsilon=EPS, norm_adv_by_std_in_grpo=True, std_threshold=0.0, std_cal_level="group")(batch)
    assert out["keep"].tolist() == [True, False, True, False, True, False]
    assert out["metrics"]["filtered_count"] == 2.0
    expected = [a if keep else 0.0 for a, keep in zip(grpo_expected(ROWS), out["keep"].tolist(), strict=True)]
    formulas.assert_close(out["advantages"], per_token(batch, expected))
    loose = GRPOAdvantage(epsilon=EPS, norm_adv_by_std_in_grpo=True, std_threshold=0.6, std_cal_level="group")
    assert not loose(batch)["keep"].any()  # group "a" has std 0.5 <= 0.6


def test_rloo_is_reward_minus_mean_of_the_others():
    batch = make_batch()
    groups = groups_of(ROWS)
    expected = []
    for i, (task, reward, _) in enumerate(ROWS):
        others = [r for j, (t, r, _) in enumerate(ROWS) if t == task and j != i]
        expected.append(reward - sum(others) / len(others) if others else reward)
    assert len(groups["c"]) == 1 and expected[3] == 2.0 and expected[1] == 0.0
    formulas.assert_close(RLOOAdvantage()(batch)["advantages"], per_token(batch, expected))


def test_reinforce_is_the_raw_reward():
    batch = make_batch()
    out = ReinforceAdvantage()(batch)
    formulas.assert_close(out["advantages"], per_token(batch, [r for _, r, _ in ROWS]))


@pytest.mark.parametrize("tau", [0.5, 1.0, 3.0])
def test_opmd_baselines(tau):
    batch = make_batch()
    groups = groups_of(ROWS)
    mean_exp, lae_exp = [], []
    for task, reward, _ in ROWS:
        group = groups[task]
        if len(group) == 1:
            mean_b = lae_b = 0.0
        else:
            mean_b = sum(group) / len(group)
            lae_b = tau * (math.log(sum(math.exp(r / tau) for r in group)) - math.log(len(group)))
        mean_exp.append(reward - mean_b)
        lae_exp.append(reward - lae_b)
    formulas.assert_close(OPMDAdvantage("mean", tau)(batch)["advantages"], per_token(batch, mean_exp))
    logavgexp = OPMDAdvantage("logavgexp", tau)(batch)["advantages"]
    formulas.assert_close(logavgexp, per_token(batch, lae_exp))
    assert logavgexp[1].abs().max().item() < 1e-6  # ties: logavgexp of equal rewards is the reward


def test_opmd_logavgexp_is_stable_for_large_rewards():
    rows = [("a", 500.0, 1), ("a", 499.0, 1)]
    out = OPMDAdvantage("logavgexp", 0.01)(make_batch(rows))["advantages"]
    b = 499.0 + 0.01 * (math.log(1 + math.exp(100.0)) - math.log(2))
    assert out[:, 0].tolist() == pytest.approx([500.0 - b, 499.0 - b], abs=1e-3)


def test_asymre_shifts_the_group_mean():
    batch = make_batch()
    groups = groups_of(ROWS)
    expected = []
    for task, reward, _ in ROWS:
        group = groups[task]
        expected.append(reward if len(group) == 1 else reward - (sum(group) / len(group) - 0.1))
    formulas.assert_close(AsymREAdvantage(baseline_shift=-0.1)(batch)["advantages"], per_token(batch, expected))


@pytest.mark.parametrize("threshold", [0.5, 1.5])
def test_raft_keeps_each_group_s_best_at_or_above_the_threshold(threshold):
    batch = make_batch()
    out = RAFTFilter(reward_threshold=threshold)(batch)
    groups = groups_of(ROWS)
    keep = [reward == max(groups[task]) and reward >= threshold for task, reward, _ in ROWS]
    assert out["keep"].tolist() == keep  # 0.5: a's 1.0, b's tied 0.5s, c's lone 2.0; 1.5: c's 2.0 alone
    formulas.assert_close(out["advantages"], per_token(batch, [float(k) for k in keep]))
    assert out["metrics"]["filtered_count"] == len(groups) - len(
        {task for (task, _, _), k in zip(ROWS, keep, strict=True) if k}
    )
    assert out["metrics"]["kept_share"] == pytest.approx(sum(keep) / len(ROWS))
    assert out["metrics"]["reward_threshold"] == threshold


def test_on_policy_distill():
    teacher = [[-0.5 * (j + 1) for j in range(length)] for _, _, length in ROWS]
    batch = make_batch(teacher_logprobs=teacher)
    old = batch["old_logprobs"].tolist()
    padded = batch["teacher_logprobs"].tolist()
    mask = batch["response_mask"].tolist()
    expected = [
        [2.0 * (t - o) if m else 0.0 for t, o, m in zip(*rows, strict=True)]
        for rows in zip(padded, old, mask, strict=True)
    ]
    out = OnPolicyDistillAdvantage(kl_coef=2.0)(batch)
    formulas.assert_close(out["advantages"], expected)
    trained = [(o - t) for rows in zip(padded, old, mask, strict=True) for t, o, m in zip(*rows, strict=True) if m]
    assert out["metrics"]["reverse_kl"] == pytest.approx(sum(trained) / len(trained))


# ---- token-level (trainer-side) functions on hand-made [B, R] batches ---------------------------

MASK = [[1, 1, 0, 1, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]  # an interior hole, a full row, one token
REWARDS = [[0.0, 0.0, 0.0, 1.0, 0.0], [0.2, 0.0, 0.0, 0.0, -1.0], [0.7, 0.0, 0.0, 0.0, 0.0]]
VALUES = [[0.3, 0.1, 99.0, 0.5, 99.0], [0.2, 0.4, -0.3, 0.0, 0.6], [0.9, 99.0, 99.0, 99.0, 99.0]]


def token_batch(**extra):
    return {
        "response_mask": torch.tensor(MASK, dtype=torch.bool),
        "token_level_rewards": torch.tensor(REWARDS),
        **extra,
    }


@pytest.mark.parametrize("gamma, lam", [(1.0, 1.0), (0.9, 0.8), (0.5, 0.0)])
def test_gae_over_trained_tokens(gamma, lam):
    raw_adv, returns = [], []
    for rew_row, val_row, mrow in zip(REWARDS, VALUES, MASK, strict=True):
        idx = [t for t, m in enumerate(mrow) if m]
        r = [rew_row[t] for t in idx]
        v = [val_row[t] for t in idx] + [0.0]  # the value after the last trained token is 0
        delta = [r[k] + gamma * v[k + 1] - v[k] for k in range(len(idx))]
        adv = [sum((gamma * lam) ** j * delta[k + j] for j in range(len(idx) - k)) for k in range(len(idx))]
        row_adv, row_ret = [0.0] * len(mrow), [0.0] * len(mrow)
        for k, t in enumerate(idx):
            row_adv[t], row_ret[t] = adv[k], adv[k] + v[k]
        raw_adv.append(row_adv)
        returns.append(row_ret)
    out = GAEAdvantage(gamma, lam)(token_batch(values=torch.tensor(VALUES)))
    formulas.assert_close(out["returns"], returns)
    formulas.assert_close(out["advantages"], formulas.whiten(raw_adv, MASK))


def test_gae_carries_no_gradient_from_the_critic():
    values = torch.tensor(VALUES, requires_grad=True)
    out = GAEAdvantage(1.0, 1.0)(token_batch(values=values))
    assert not out["advantages"].requires_grad and not out["returns"].requires_grad


@pytest.mark.parametrize("gamma", [1.0, 0.7])
def test_reinforce_plus_plus(gamma):
    width = len(MASK[0])
    returns = [[sum(gamma**k * row[t + k] for k in range(width - t)) for t in range(width)] for row in REWARDS]
    returns = [[g if m else 0.0 for g, m in zip(*rows, strict=True)] for rows in zip(returns, MASK, strict=True)]
    out = ReinforcePlusPlusAdvantage(gamma)(token_batch())
    formulas.assert_close(out["returns"], returns)
    formulas.assert_close(out["advantages"], formulas.whiten(returns, MASK))


def test_remax_subtracts_the_greedy_reward():
    baselines = [0.5, -0.2, 1.0]
    expected_ret, expected_adv = [], []
    for row, mrow, b in zip(REWARDS, MASK, baselines, strict=True):
        ret = [sum(row[k] * mrow[k] for k in range(t, len(row))) * mrow[t] for t in range(len(row))]
        expected_ret.append(ret)
        expected_adv.append([(g - b) * m for g, m in zip(ret, mrow, strict=True)])
    out = RemaxAdvantage()(token_batch(reward_baselines=torch.tensor(baselines)))
    formulas.assert_close(out["returns"], expected_ret)
    formulas.assert_close(out["advantages"], expected_adv)


def test_scores_come_from_token_rewards_when_present():
    """A KL penalty applied to the token rewards changes the group scores the advantage sees."""
    batch = make_batch([("a", 1.0, 2), ("a", 0.0, 2)])
    batch["token_level_rewards"] = batch["token_level_rewards"] - 0.25
    out = ReinforceAdvantage()(batch)
    assert out["advantages"][:, 0].tolist() == pytest.approx([0.5, -0.5])
    del batch["token_level_rewards"]
    assert ReinforceAdvantage()(batch)["advantages"][:, 0].tolist() == pytest.approx([1.0, 0.0])


# ---- step-wise GRPO: rows are steps of multi-step runs ------------------------------------------

# (task, run, step, reward): only each run's last step counts; earlier-step rewards must be ignored.
STEPS = [
    ("t0", 0, 0, 9.0),
    ("t0", 0, 1, 9.0),
    ("t0", 0, 2, 1.0),
    ("t0", 1, 0, 0.0),
    ("t1", 0, 1, 3.0),
    ("t0", 2, 1, 0.5),
    ("t0", 2, 0, 9.0),
    ("t1", 0, 0, 9.0),
]


def step_batch():
    exps = [
        Experience(tokens=[1, 2, 3], prompt_length=1, reward=r, batch_id="0", task_id=t, run_id=run, step=step)
        for t, run, step, r in STEPS
    ]
    return collate(exps, pad_token_id=0)


def step_wise_expected(step_norm):
    last = {}
    for t, run, step, r in STEPS:
        if (t, run) not in last or step > last[(t, run)][0]:
            last[(t, run)] = (step, r)
    lengths = {key: sum(1 for t, run, _, _ in STEPS if (t, run) == key) for key in last}
    expected = []
    for t, run, _, _ in STEPS:
        group = [r for (task, _), (_, r) in last.items() if task == t]
        mean, std = (statistics.mean(group), statistics.stdev(group)) if len(group) > 1 else (0.0, 1.0)
        score = (last[(t, run)][1] - mean) / (std + EPS)
        expected.append(score / lengths[(t, run)] if step_norm else score)
    return expected


@pytest.mark.parametrize("step_norm", [False, True])
def test_step_wise_grpo(step_norm):
    batch = step_batch()
    out = StepWiseGRPOAdvantage(epsilon=EPS, enable_step_norm=step_norm, std_threshold=None)(batch)
    formulas.assert_close(out["advantages"], per_token(batch, step_wise_expected(step_norm)))
    if not step_norm:  # run 0 of t0 ends with reward 1.0 in a group {1.0, 0.0, 0.5}: mean 0.5, std 0.5
        assert out["advantages"][0, 0].item() == pytest.approx(0.5 / (0.5 + EPS))


def test_step_wise_grpo_skips_lone_groups():
    batch = step_batch()
    out = StepWiseGRPOAdvantage(epsilon=EPS, enable_step_norm=False, std_threshold=0.0)(batch)
    assert out["keep"].tolist() == [t == "t0" for t, _, _, _ in STEPS]
    assert out["metrics"]["skipped_group_ratio"] == 0.5
    assert out["advantages"][4].abs().sum().item() == 0.0


def test_step_wise_grpo_rejects_a_run_with_two_last_steps():
    batch = step_batch()
    batch["step_ids"] = torch.zeros_like(batch["step_ids"])
    with pytest.raises(ValueError, match="last step"):
        StepWiseGRPOAdvantage(epsilon=EPS, enable_step_norm=False, std_threshold=None)(batch)
