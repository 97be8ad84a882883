"""aggregate_loss and the masked helpers against plain-Python sums over the unpadded tokens."""

import pytest
import torch

from tests.algorithm import formulas
from trinity.algorithm.aggregate import LOSS_AGG_MODES, aggregate_loss, masked_mean, masked_whiten

VALUES = [[1.0, 2.0, 3.0, 4.0], [5.0, -1.0, 9.0, 9.0], [0.5, 7.0, 7.0, 7.0]]
MASK = [[1, 1, 1, 0], [1, 0, 1, 0], [1, 0, 0, 0]]  # padding, an interior hole, a one-token row


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_each_mode_matches_its_formula(mode):
    got = aggregate_loss(torch.tensor(VALUES), torch.tensor(MASK, dtype=torch.bool), mode)
    assert got.item() == pytest.approx(formulas.agg(VALUES, MASK, mode), rel=1e-6)


def test_hand_values():
    values, mask = torch.tensor(VALUES), torch.tensor(MASK, dtype=torch.bool)
    assert aggregate_loss(values, mask, "token-mean").item() == pytest.approx(20.5 / 6)
    assert aggregate_loss(values, mask, "seq-mean-token-sum").item() == pytest.approx((6 + 14 + 0.5) / 3)
    assert aggregate_loss(values, mask, "seq-mean-token-mean").item() == pytest.approx((2 + 7 + 0.5) / 3)
    assert aggregate_loss(values, mask, "seq-mean-token-sum-norm").item() == pytest.approx(20.5 / 4)
    assert aggregate_loss(values, mask, "seq-mean-token-sum-norm", normalizer=10).item() == pytest.approx(2.05)


def test_empty_rows_and_masks_give_zero_not_nan():
    values = torch.tensor([[3.0, 4.0], [5.0, 6.0]])
    mask = torch.tensor([[True, True], [False, False]])
    assert aggregate_loss(values, mask, "seq-mean-token-mean").item() == pytest.approx(3.5 / 2)
    assert aggregate_loss(values, torch.zeros_like(mask), "token-mean").item() == 0.0


def test_unknown_mode_names_the_choices():
    with pytest.raises(ValueError, match="token-mean"):
        aggregate_loss(torch.ones(1, 1), torch.ones(1, 1, dtype=torch.bool), "token-sum")


def test_masked_mean_per_row_and_whiten():
    values, mask = torch.tensor(VALUES), torch.tensor(MASK, dtype=torch.bool)
    assert masked_mean(values, mask, dim=-1).tolist() == pytest.approx([2.0, 7.0, 0.5])
    white = masked_whiten(values, mask) * mask
    formulas.assert_close(white, formulas.whiten(VALUES, MASK))
    assert masked_whiten(torch.tensor([[2.0, 9.0]]), torch.tensor([[True, False]]))[0, 0].item() == 0.0
