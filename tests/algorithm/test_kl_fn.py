"""KL estimators as loss and as reward penalty, and the adaptive coefficient controller."""

import math

import pytest
import torch

from tests.algorithm import formulas
from trinity.algorithm.kl_fn import K1, K2, K3, AbsKL, LowVarKL, NoKL
from trinity.config.functions import KL_LOSS_FN, KL_PENALTY_FN, LossAggMode

LOGP = [[-1.0, -0.2, -3.0, -0.5], [-0.7, -2.5, -0.1, -4.0]]
REF = [[-1.3, -0.2, -1.0, -9.0], [-0.4, -2.0, -0.6, -0.3]]
MASK = [[1, 1, 1, 0], [1, 1, 0, 0]]

ESTIMATORS = {
    "k1": lambda lp, ref: lp - ref,
    "k2": lambda lp, ref: 0.5 * (lp - ref) ** 2,
    "k3": lambda lp, ref: math.exp(ref - lp) - 1 - (ref - lp),
    "low_var_kl": lambda lp, ref: min(
        max(math.exp(max(min(ref - lp, 20), -20)) - 1 - max(min(ref - lp, 20), -20), -10), 10
    ),
    "abs": lambda lp, ref: abs(lp - ref),
    "none": lambda lp, ref: 0.0,
}
DERIVATIVES = {  # d kl / d logp
    "k1": lambda lp, ref: 1.0,
    "k2": lambda lp, ref: lp - ref,
    "k3": lambda lp, ref: 1 - math.exp(ref - lp),
    "abs": lambda lp, ref: float((lp > ref) - (lp < ref)),  # the subgradient 0 where they agree
}


def loss_tensors():
    return torch.tensor(LOGP, dtype=torch.float64, requires_grad=True), torch.tensor(REF, dtype=torch.float64)


def test_each_estimator_class_backs_both_registries():
    for name in ESTIMATORS:
        assert KL_LOSS_FN.implementation(name) is KL_PENALTY_FN.implementation(name)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_token_kl(name):
    fn = KL_LOSS_FN.implementation(name)(kl_coef=0.1)
    logp, ref = loss_tensors()
    formulas.assert_close(fn.token_kl(logp, ref), formulas.elementwise(ESTIMATORS[name], LOGP, REF))


def test_low_var_kl_clamps_ratio_and_value():
    logp = torch.tensor([[0.0, 0.0, 0.0]])
    ref = torch.tensor([[25.0, -30.0, 1.0]])
    got = LowVarKL(kl_coef=1.0).token_kl(logp, ref)
    assert got[0].tolist() == pytest.approx([10.0, 10.0, math.e - 2], rel=1e-5)
    assert K3(kl_coef=1.0).token_kl(logp, ref)[0, 1].item() == pytest.approx(29.0, rel=1e-5)


@pytest.mark.parametrize("mode", [mode.value for mode in LossAggMode])
@pytest.mark.parametrize("name", sorted(DERIVATIVES))
def test_kl_loss_value_and_gradient(name, mode):
    logp, ref = loss_tensors()
    mask = torch.tensor(MASK, dtype=torch.bool)
    loss, metrics = KL_LOSS_FN.implementation(name)(kl_coef=0.05)(logp, ref, mask, mode)
    kl = formulas.agg(formulas.elementwise(ESTIMATORS[name], LOGP, REF), MASK, mode)
    assert loss.item() == pytest.approx(0.05 * kl, rel=1e-9)
    assert metrics == {"kl_loss": pytest.approx(kl, rel=1e-9), "kl_coef": 0.05}
    loss.backward()
    weights = formulas.agg_grad_weight(MASK, mode)
    expected = formulas.elementwise(lambda w, lp, r: 0.05 * w * DERIVATIVES[name](lp, r), weights, LOGP, REF)
    formulas.assert_close(logp.grad, expected)


def test_no_kl_is_zero_and_leaves_rewards_alone():
    logp, ref = loss_tensors()
    mask = torch.tensor(MASK, dtype=torch.bool)
    loss, metrics = NoKL(kl_coef=0.5)(logp, ref, mask, "token-mean")
    assert loss.item() == 0.0 and metrics == {}
    rewards = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 0.0]])
    out, metrics = NoKL(kl_coef=0.5, adaptive=True, target_kl=None, horizon=None).apply(rewards, logp, ref, mask)
    assert torch.equal(out, rewards) and metrics == {}


@pytest.mark.parametrize("cls, name", [(K1, "k1"), (K2, "k2"), (K3, "k3"), (AbsKL, "abs")])
def test_penalty_subtracts_coef_times_kl_on_trained_tokens(cls, name):
    rewards = [[0.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 0.0]]
    fn = cls(kl_coef=0.2, adaptive=False, target_kl=0.1, horizon=100)
    out, metrics = fn.apply(
        torch.tensor(rewards, dtype=torch.float64),
        torch.tensor(LOGP, dtype=torch.float64),
        torch.tensor(REF, dtype=torch.float64),
        torch.tensor(MASK, dtype=torch.bool),
    )
    kl = formulas.elementwise(lambda lp, r, m: ESTIMATORS[name](lp, r) * m, LOGP, REF, MASK)
    formulas.assert_close(out, formulas.elementwise(lambda rew, k: rew - 0.2 * k, rewards, kl))
    row_means = [sum(row) / sum(mrow) for row, mrow in zip(kl, MASK, strict=True)]
    assert metrics == {"kl": pytest.approx(sum(row_means) / 2, rel=1e-6), "kl_coef": 0.2}


def adaptive_reference(coef, target, horizon, updates):
    for current, n in updates:
        error = min(max(current / target - 1, -0.2), 0.2)
        coef *= 1 + error * n / horizon
    return coef


UPDATES = [(0.3, 8), (0.05, 8), (0.1, 4), (0.11, 16), (5.0, 8)]  # above, below, on target, near, far above


def test_adaptive_controller_follows_its_formula():
    fn = K2(kl_coef=0.01, adaptive=True, target_kl=0.1, horizon=50)
    for i, (current, n) in enumerate(UPDATES):
        fn.update(current, n)
        assert fn.kl_coef == pytest.approx(adaptive_reference(0.01, 0.1, 50, UPDATES[: i + 1]), rel=1e-12)
    assert fn.kl_coef != 0.01
    fixed = K2(kl_coef=0.01, adaptive=False, target_kl=0.1, horizon=50)
    for current, n in UPDATES:
        fixed.update(current, n)
    assert fixed.kl_coef == 0.01


def test_adaptive_state_resumes_exactly():
    straight = K3(kl_coef=0.02, adaptive=True, target_kl=0.2, horizon=30)
    first = K3(kl_coef=0.02, adaptive=True, target_kl=0.2, horizon=30)
    for current, n in UPDATES[:2]:
        straight.update(current, n)
        first.update(current, n)
    resumed = K3(kl_coef=0.02, adaptive=True, target_kl=0.2, horizon=30)
    resumed.load_state_dict(first.state_dict())
    for current, n in UPDATES[2:]:
        straight.update(current, n)
        resumed.update(current, n)
    assert resumed.kl_coef == straight.kl_coef
    assert resumed.state_dict() == {"kl_coef": straight.kl_coef}


def test_penalty_uses_the_current_coefficient():
    fn = K1(kl_coef=0.1, adaptive=True, target_kl=0.1, horizon=10)
    fn.update(1.0, 10)  # error clipped to 0.2: coef 0.1 -> 0.12
    rewards = torch.zeros(1, 2)
    out, metrics = fn.apply(rewards, torch.tensor([[0.0, -1.0]]), torch.tensor([[-1.0, -1.0]]), torch.ones(1, 2) > 0)
    assert metrics["kl_coef"] == pytest.approx(0.12)
    assert out[0].tolist() == pytest.approx([-0.12, 0.0])


def test_adaptive_needs_target_and_horizon():
    with pytest.raises(ValueError, match="target_kl and horizon"):
        K2(kl_coef=0.1, adaptive=True, target_kl=None, horizon=10)
