"""Entropy bonus variants and the PPO critic's clipped value loss."""

import pytest
import torch

from tests.algorithm import formulas
from trinity.algorithm import value_loss
from trinity.algorithm.entropy_loss_fn import EntropyBonus, MixEntropyBonus, NoEntropyBonus
from trinity.config.functions import LossAggMode

MODES = [mode.value for mode in LossAggMode]
ENTROPY = [[1.2, 0.4, 2.0, 9.0], [0.1, 0.3, 0.5, 0.7], [3.0, 1.0, 9.0, 9.0]]
MASK = [[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]]
EXPERT = [False, True, False]


@pytest.mark.parametrize("mode", MODES)
def test_default_bonus_and_its_gradient(mode):
    entropy = torch.tensor(ENTROPY, dtype=torch.float64, requires_grad=True)
    bonus, metrics = EntropyBonus(entropy_coef=0.01)(entropy, torch.tensor(MASK) > 0, mode)
    value = formulas.agg(ENTROPY, MASK, mode)
    assert bonus.item() == pytest.approx(0.01 * value, rel=1e-9)
    assert metrics == {"entropy_loss": pytest.approx(value, rel=1e-9), "entropy_coef": 0.01}
    bonus.backward()
    formulas.assert_close(entropy.grad, formulas.elementwise(lambda w: 0.01 * w, formulas.agg_grad_weight(MASK, mode)))


@pytest.mark.parametrize("mode", MODES)
def test_mix_bonus_counts_only_rollout_rows(mode):
    entropy = torch.tensor(ENTROPY, dtype=torch.float64)
    mask = torch.tensor(MASK) > 0
    bonus, _ = MixEntropyBonus(entropy_coef=0.1)(entropy, mask, mode, expert_mask=torch.tensor(EXPERT))
    rows = [i for i, e in enumerate(EXPERT) if not e]
    expected = formulas.agg([ENTROPY[i] for i in rows], [MASK[i] for i in rows], mode)
    assert bonus.item() == pytest.approx(0.1 * expected, rel=1e-9)
    everyone, _ = MixEntropyBonus(entropy_coef=0.1)(entropy, mask, mode, expert_mask=None)
    assert everyone.item() == pytest.approx(0.1 * formulas.agg(ENTROPY, MASK, mode), rel=1e-9)
    all_expert, _ = MixEntropyBonus(entropy_coef=0.1)(entropy, mask, mode, expert_mask=torch.ones(3, dtype=torch.bool))
    assert all_expert.item() == 0.0


def test_no_bonus():
    bonus, metrics = NoEntropyBonus(entropy_coef=0.5)(torch.tensor(ENTROPY), torch.tensor(MASK) > 0, "token-mean")
    assert bonus.item() == 0.0 and metrics == {}


VALUES = [[0.5, 1.5, -0.2, 7.0], [2.0, 0.0, 0.9, 0.1]]
OLD = [[0.4, 0.2, -0.1, 0.0], [1.0, 0.3, 0.9, 0.1]]
RETURNS = [[1.0, 1.2, 0.5, 0.0], [0.0, 0.2, 1.0, -2.0]]
VMASK = [[1, 1, 1, 0], [1, 1, 1, 1]]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("clip", [0.2, 0.5])
def test_clipped_value_loss(mode, clip):
    per_token, grads, clipped = [], [], []
    for v_row, o_row, g_row in zip(VALUES, OLD, RETURNS, strict=True):
        row, grow, crow = [], [], []
        for v, o, g in zip(v_row, o_row, g_row, strict=True):
            vc = o + min(max(v - o, -clip), clip)
            plain, clipped_sq = (v - g) ** 2, (vc - g) ** 2
            row.append(0.5 * max(plain, clipped_sq))
            # the clipped branch only depends on V inside the band
            inside = abs(v - o) < clip
            grow.append((v - g) if plain >= clipped_sq else ((vc - g) if inside else 0.0))
            crow.append(clipped_sq > plain)
        per_token.append(row)
        grads.append(grow)
        clipped.append(crow)
    values = torch.tensor(VALUES, dtype=torch.float64, requires_grad=True)
    loss, metrics = value_loss(
        values,
        torch.tensor(OLD, dtype=torch.float64),
        torch.tensor(RETURNS, dtype=torch.float64),
        torch.tensor(VMASK) > 0,
        clip,
        mode,
    )
    assert loss.item() == pytest.approx(formulas.agg(per_token, VMASK, mode), rel=1e-9)
    picked = formulas.tokens(clipped, VMASK)
    assert metrics["vf_clipfrac"] == pytest.approx(sum(picked) / len(picked)) and 0 < metrics["vf_clipfrac"] < 1
    loss.backward()
    formulas.assert_close(
        values.grad, formulas.elementwise(lambda w, g: w * g, formulas.agg_grad_weight(VMASK, mode), grads)
    )
