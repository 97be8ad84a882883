"""Policy losses against per-token formulas evaluated in plain Python, and their gradients.

Gradients are checked against the analytic derivative of each formula (with its stop-gradients), so
an sg() in the wrong place changes the gradient and fails the test even when the loss value agrees.
"""

import math

import pytest
import torch

from tests.algorithm import formulas
from trinity.algorithm.policy_loss_fn import (
    CISPOPolicyLoss,
    DPOLoss,
    GSPOPolicyLoss,
    ImportanceSamplingLoss,
    MixPolicyLoss,
    OPMDPolicyLoss,
    PPOPolicyLoss,
    SAPOPolicyLoss,
    SFTLoss,
    SPPOPolicyLoss,
    TOPRPolicyLoss,
)
from trinity.config.functions import LossAggMode

MODES = [mode.value for mode in LossAggMode]

OLD = [[-1.0, -2.0, -0.5, -1.5], [-0.3, -0.7, -1.1, -2.2], [-0.9, -0.4, -3.0, -0.1]]
# log ratios chosen to land in every branch: inside the band, above/below it, far above (dual clip)
LOG_RATIO = [[0.05, 0.4, -0.4, 2.0], [-0.05, 0.3, -0.6, 0.0], [0.15, -0.15, 1.5, 9.0]]
ADV = [[1.0, 1.0, 1.0, 1.0], [-0.5, -0.5, -0.5, -0.5], [-2.0, 0.7, -2.0, 0.3]]
MASK = [[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 1, 0]]
NEW = formulas.elementwise(lambda o, d: o + d, OLD, LOG_RATIO)


def tensors(new=NEW, old=OLD, adv=ADV, mask=MASK):
    logprobs = torch.tensor(new, dtype=torch.float64, requires_grad=True)
    return (
        logprobs,
        torch.tensor(old, dtype=torch.float64),
        torch.tensor(adv, dtype=torch.float64),
        torch.tensor(mask, dtype=torch.bool),
    )


def check_grad(logprobs, loss, per_token_dloss, mask, mode):
    """autograd gradient == agg weight * d(per-token loss)/d logp."""
    loss.backward()
    weights = formulas.agg_grad_weight(mask, mode)
    formulas.assert_close(logprobs.grad, formulas.elementwise(lambda w, g: w * g, weights, per_token_dloss))


def masked_mean_py(values, mask):
    picked = formulas.tokens(values, mask)
    return sum(picked) / len(picked)


# ---- ppo ------------------------------------------------------------------------------------------


def ppo_token(lr, a, low, high, c):
    """(loss, d loss / d logp, clipped, dual-clipped) for one token."""
    lr = max(min(lr, 20.0), -20.0)
    rho = math.exp(lr)
    l1, l2 = -a * rho, -a * min(max(rho, 1 - low), 1 + high)
    loss, grad = (l1, -a * rho) if l1 >= l2 else (l2, 0.0)
    dual = False
    if a < 0 and loss > -a * c:
        loss, grad, dual = -a * c, 0.0, True
    return loss, grad, l2 > l1, dual


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("low, high", [(0.2, 0.2), (0.1, 0.3)])
def test_ppo(mode, low, high):
    c = 3.0
    parts = formulas.elementwise(lambda lr, a: ppo_token(lr, a, low, high, c), LOG_RATIO, ADV)
    logprobs, old, adv, mask = tensors()
    fn = PPOPolicyLoss(clip_range=0.2, clip_range_low=low, clip_range_high=high, clip_ratio_c=c, loss_agg_mode=mode)
    loss, metrics = fn(logprobs, old, adv, mask)
    expected = formulas.agg(formulas.elementwise(lambda p: p[0], parts), MASK, mode)
    assert loss.item() == pytest.approx(expected, rel=1e-9)
    assert metrics["pg_loss"] == pytest.approx(expected, rel=1e-9)
    assert metrics["pg_clipfrac"] == pytest.approx(masked_mean_py(formulas.elementwise(lambda p: p[2], parts), MASK))
    assert metrics["pg_clipfrac_lower"] == pytest.approx(
        masked_mean_py(formulas.elementwise(lambda p: p[3], parts), MASK)
    )
    assert metrics["ppo_kl"] == pytest.approx(masked_mean_py(formulas.elementwise(lambda d: -d, LOG_RATIO), MASK))
    assert 0 < metrics["pg_clipfrac"] < 1 and metrics["pg_clipfrac_lower"] > 0  # the inputs reach every branch
    check_grad(logprobs, loss, formulas.elementwise(lambda p: p[1], parts), MASK, mode)


def test_ppo_clip_range_is_the_default_for_both_sides():
    logprobs, old, adv, mask = tensors()
    both = PPOPolicyLoss(0.3, None, None, 3.0, "token-mean")(logprobs, old, adv, mask)[0]
    explicit = PPOPolicyLoss(0.9, 0.3, 0.3, 3.0, "token-mean")(logprobs, old, adv, mask)[0]
    assert both.item() == pytest.approx(explicit.item())


def test_ppo_equals_plain_policy_gradient_inside_the_band():
    """With every ratio inside [1-eps, 1+eps] no clip applies: loss = agg(-A rho), gradient -A rho."""
    gen = torch.Generator().manual_seed(0)
    old = torch.randn(4, 6, generator=gen, dtype=torch.float64)
    logprobs = (old + 0.1 * (torch.rand(4, 6, generator=gen, dtype=torch.float64) - 0.5)).requires_grad_()
    adv = torch.randn(4, 6, generator=gen, dtype=torch.float64)
    mask = torch.rand(4, 6, generator=gen) > 0.3
    loss, metrics = PPOPolicyLoss(0.2, None, None, 3.0, "token-mean")(logprobs, old, adv, mask)
    rho = torch.exp(logprobs.detach() - old)
    count = mask.sum().item()
    assert loss.item() == pytest.approx(((-adv * rho) * mask).sum().item() / count)
    assert metrics["pg_clipfrac"] == 0.0 and metrics["pg_clipfrac_lower"] == 0.0
    loss.backward()
    torch.testing.assert_close(logprobs.grad, -adv * rho * mask / count)


def test_log_ratio_is_clamped_at_20():
    logprobs, old, adv, mask = tensors(new=[[30.0]], old=[[0.0]], adv=[[1.0]], mask=[[1]])
    loss, _ = ImportanceSamplingLoss("token-mean")(logprobs, old, adv, mask)
    assert loss.item() == pytest.approx(-math.exp(20.0))
    loss, metrics = PPOPolicyLoss(0.2, None, None, 3.0, "token-mean")(logprobs, old, -adv, mask)
    assert loss.item() == pytest.approx(3.0) and metrics["pg_clipfrac_lower"] == 1.0


# ---- gspo -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["seq-mean-token-mean", "token-mean"])
def test_gspo_clips_the_sequence_ratio(mode):
    low, high = 0.05, 0.1
    logprobs, old, adv, mask = tensors()
    loss, metrics = GSPOPolicyLoss(low, high, mode)(logprobs, old, adv, mask)
    token_loss, token_grad, clipped = [], [], []
    for lr_row, a_row, m_row in zip(LOG_RATIO, ADV, MASK, strict=True):
        picked = [lr for lr, m in zip(lr_row, m_row, strict=True) if m]
        s = math.exp(sum(picked) / len(picked))
        row_loss, row_grad, row_clip = [], [], []
        for a in a_row:
            l1, l2 = -a * s, -a * min(max(s, 1 - low), 1 + high)
            row_loss.append(max(l1, l2))
            row_grad.append(-a * s if l1 >= l2 else 0.0)  # each token's gradient is s * grad logp_t
            row_clip.append(l2 > l1)
        token_loss.append(row_loss)
        token_grad.append(row_grad)
        clipped.append(row_clip)
    assert loss.item() == pytest.approx(formulas.agg(token_loss, MASK, mode), rel=1e-7)  # mean over n + 1e-8
    assert metrics["pg_clipfrac"] == pytest.approx(masked_mean_py(clipped, MASK))
    check_grad(logprobs, loss, token_grad, MASK, mode)


# ---- opmd, sft, importance sampling ------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_opmd(mode):
    tau = 0.5
    logprobs, old, adv, mask = tensors()
    loss, _ = OPMDPolicyLoss(tau, mode)(logprobs, old, adv, mask)
    expected = formulas.agg(formulas.elementwise(lambda a, lp: -a * lp, ADV, NEW), MASK, mode) / (1 + tau)
    assert loss.item() == pytest.approx(expected, rel=1e-9)
    check_grad(logprobs, loss, formulas.elementwise(lambda a: -a / (1 + tau), ADV), MASK, mode)


@pytest.mark.parametrize("mode", MODES)
def test_sft(mode):
    logprobs, old, adv, mask = tensors()
    loss, metrics = SFTLoss(mode)(logprobs, None, None, mask)
    expected = formulas.agg(formulas.elementwise(lambda lp: -lp, NEW), MASK, mode)
    assert loss.item() == pytest.approx(expected, rel=1e-9) and metrics["sft_loss"] == pytest.approx(expected)
    check_grad(logprobs, loss, formulas.elementwise(lambda _: -1.0, NEW), MASK, mode)


def test_importance_sampling():
    logprobs, old, adv, mask = tensors()
    loss, _ = ImportanceSamplingLoss("token-mean")(logprobs, old, adv, mask)
    per_token = formulas.elementwise(lambda a, lr: -a * math.exp(lr), ADV, LOG_RATIO)
    assert loss.item() == pytest.approx(formulas.agg(per_token, MASK, "token-mean"), rel=1e-9)
    check_grad(logprobs, loss, per_token, MASK, "token-mean")  # d(-A rho)/d logp = -A rho


# ---- gated / truncated policy gradients -------------------------------------------------------------


@pytest.mark.parametrize("threshold", [0.0, 0.5])
def test_topr(threshold):
    logprobs, old, adv, mask = tensors()
    loss, _ = TOPRPolicyLoss(threshold, "token-mean")(logprobs, old, adv, mask)
    weight = formulas.elementwise(
        lambda lr, a: min(max(math.exp(lr), 0.0), 1.0) if a <= threshold else 1.0, LOG_RATIO, ADV
    )
    per_token = formulas.elementwise(lambda w, a, lp: -w * a * lp, weight, ADV, NEW)
    assert loss.item() == pytest.approx(formulas.agg(per_token, MASK, "token-mean"), rel=1e-9)
    check_grad(logprobs, loss, formulas.elementwise(lambda w, a: -w * a, weight, ADV), MASK, "token-mean")


@pytest.mark.parametrize("mask_clip", [False, True])
def test_cispo(mask_clip):
    lo, hi, mlo, mhi = 0.5, 0.28, 0.3, 0.2
    logprobs, old, adv, mask = tensors()
    fn = CISPOPolicyLoss(lo, hi, mask_clip, mlo, mhi, "seq-mean-token-mean")
    loss, metrics = fn(logprobs, old, adv, mask)

    def weight(lr, a):
        rho = math.exp(lr)
        w = min(max(rho, 1 - lo), 1 + hi)
        if mask_clip and ((rho > 1 + mhi and a > 0) or (rho < 1 - mlo and a < 0)):
            w = 0.0
        return w

    w = formulas.elementwise(weight, LOG_RATIO, ADV)
    per_token = formulas.elementwise(lambda w_, a, lp: -a * w_ * lp, w, ADV, NEW)
    assert loss.item() == pytest.approx(formulas.agg(per_token, MASK, "seq-mean-token-mean"), rel=1e-9)
    assert ("mask_clipfrac" in metrics) == mask_clip
    check_grad(logprobs, loss, formulas.elementwise(lambda w_, a: -a * w_, w, ADV), MASK, "seq-mean-token-mean")


def test_sppo():
    eps = 0.45  # e^-0.4 = 0.67 lies between 1 - eps and 1/(1 + eps): the window is not symmetric
    logprobs, old, adv, mask = tensors()
    loss, metrics = SPPOPolicyLoss(eps, "token-mean")(logprobs, old, adv, mask)
    inside = formulas.elementwise(lambda lr: 1.0 if 1 / (1 + eps) <= math.exp(lr) <= 1 + eps else 0.0, LOG_RATIO)
    per_token = formulas.elementwise(lambda a, lr, i: -a * lr * i, ADV, LOG_RATIO, inside)
    assert loss.item() == pytest.approx(formulas.agg(per_token, MASK, "token-mean"), rel=1e-9)
    assert metrics["pg_clipfrac"] == pytest.approx(1 - masked_mean_py(inside, MASK))
    check_grad(logprobs, loss, formulas.elementwise(lambda a, i: -a * i, ADV, inside), MASK, "token-mean")


def test_sapo():
    tau_pos, tau_neg = 1.0, 1.5
    logprobs, old, adv, mask = tensors()
    loss, _ = SAPOPolicyLoss(tau_pos, tau_neg, "token-mean")(logprobs, old, adv, mask)

    def gate(lr, a):
        tau = tau_pos if a > 0 else tau_neg
        return formulas.sigmoid(tau * (math.exp(lr) - 1)) * 4 / tau

    f = formulas.elementwise(gate, LOG_RATIO, ADV)
    per_token = formulas.elementwise(lambda a, g, lp: -a * g * lp, ADV, f, NEW)
    assert loss.item() == pytest.approx(formulas.agg(per_token, MASK, "token-mean"), rel=1e-9)
    check_grad(logprobs, loss, formulas.elementwise(lambda a, g: -a * g, ADV, f), MASK, "token-mean")


# ---- mix --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_mix_weights_ppo_on_rollouts_and_sft_on_expert_rows(mode):
    mu = 0.3
    expert = [False, True, False]
    logprobs, old, adv, mask = tensors()
    loss, metrics = MixPolicyLoss(mu, 0.2, mode)(logprobs, old, adv, mask, expert_mask=torch.tensor(expert))
    rows = [i for i, e in enumerate(expert) if not e]
    ppo_part = formulas.agg(
        [[ppo_token(LOG_RATIO[i][t], ADV[i][t], 0.2, 0.2, 3.0)[0] for t in range(4)] for i in rows],
        [MASK[i] for i in rows],
        mode,
    )
    sft_part = formulas.agg([[-v for v in NEW[1]]], [MASK[1]], mode)
    assert loss.item() == pytest.approx((1 - mu) * ppo_part + mu * sft_part, rel=1e-9)
    assert metrics["usual/pg_loss"] == pytest.approx(ppo_part) and metrics["expert/sft_loss"] == pytest.approx(sft_part)
    loss.backward()
    assert (logprobs.grad[1] != 0).tolist() == [bool(m) for m in MASK[1]]


def test_mix_without_expert_rows_is_scaled_ppo():
    logprobs, old, adv, mask = tensors()
    loss, metrics = MixPolicyLoss(0.25, 0.2, "token-mean")(logprobs, old, adv, mask)
    ppo, _ = PPOPolicyLoss(0.2, None, None, 3.0, "token-mean")(logprobs, old, adv, mask)
    assert loss.item() == pytest.approx(0.75 * ppo.item()) and "expert/sft_loss" not in metrics


# ---- dpo --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("beta, smoothing", [(0.1, 0.0), (0.5, 0.2)])
def test_dpo(beta, smoothing):
    new = [[-1.0, -2.0, -0.5], [-3.0, -0.5, -9.0], [-0.2, -0.3, -0.4], [-0.1, -0.1, -0.1]]
    ref = [[-1.5, -2.0, -0.7], [-2.0, -1.0, -0.1], [-0.1, -0.3, -0.9], [-0.3, -0.2, -0.1]]
    mask = [[1, 1, 1], [1, 1, 0], [1, 1, 0], [1, 1, 1]]
    ratios = [sum((n - r) * m for n, r, m in zip(*rows, strict=True)) for rows in zip(new, ref, mask, strict=True)]
    losses, dmargin, correct = [], [], []
    for pair in range(2):
        chosen, rejected = ratios[2 * pair], ratios[2 * pair + 1]
        m = beta * (chosen - rejected)
        losses.append(-(1 - smoothing) * formulas.log_sigmoid(m) - smoothing * formulas.log_sigmoid(-m))
        dmargin.append(-(1 - smoothing) * (1 - formulas.sigmoid(m)) + smoothing * formulas.sigmoid(m))
        correct.append(chosen > rejected)
    logprobs = torch.tensor(new, dtype=torch.float64, requires_grad=True)
    ref_t = torch.tensor(ref, dtype=torch.float64)
    mask_t = torch.tensor(mask, dtype=torch.bool)
    loss, metrics = DPOLoss(beta, smoothing)(logprobs, logprobs.detach(), None, mask_t, ref_logprobs=ref_t)
    assert loss.item() == pytest.approx(sum(losses) / 2, rel=1e-9)
    assert metrics["accuracy"] == pytest.approx(sum(correct) / 2) and 0 < metrics["accuracy"] < 1
    assert metrics["chosen_reward"] == pytest.approx(beta * (ratios[0] + ratios[2]) / 2)
    assert metrics["rejected_reward"] == pytest.approx(beta * (ratios[1] + ratios[3]) / 2)
    loss.backward()
    expected = [[dmargin[i // 2] * beta * (1 if i % 2 == 0 else -1) / 2 * m for m in mask[i]] for i in range(4)]
    formulas.assert_close(logprobs.grad, expected)


def test_dpo_needs_pairs_and_a_reference():
    logprobs, _, _, mask = tensors()
    with pytest.raises(ValueError, match="odd batch of 3"):
        DPOLoss(0.1, 0.0)(logprobs, None, None, mask, ref_logprobs=logprobs.detach())
    with pytest.raises(ValueError, match="ref_logprobs"):
        DPOLoss(0.1, 0.0)(logprobs[:2], None, None, mask[:2])
