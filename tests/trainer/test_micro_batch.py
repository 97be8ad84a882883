"""The micro-batch plan: every row once, the same count on every rank, pairs kept whole, and rows of
similar length together, so the padded tensors hold little padding and keep to the token budget."""

import pytest

from tests.trainer.conftest import experiences
from trinity.buffer.batch import collate
from trinity.trainer.micro_batch import plan, select


@pytest.fixture(scope="module")
def batch():
    return collate(experiences(64, 60, seed=5, group=8, shared_prompts=True), pad_token_id=0)


def padded_tokens(batch, rows):
    return select(batch, rows)["input_ids"].numel()


def response_lengths(batch, rows):
    return [int(batch["response_mask"][row].sum()) for row in rows]


def check_covers(rows, size, world_size):
    assert len(rows) == world_size
    assert len({len(rank) for rank in rows}) == 1, "ranks run different micro-batch counts"
    flat = [row for rank in rows for micro in rank for row in micro]
    assert sorted(flat) == list(range(size))
    assert len({sum(len(micro) for micro in rank) for rank in rows}) == 1, "ranks hold different row counts"


@pytest.mark.parametrize("world_size", [1, 2, 4])
@pytest.mark.parametrize("budget", [120, 300, 10**6])
def test_budget_micro_batches_fit_and_group_similar_lengths(batch, world_size, budget):
    rows = plan(batch, world_size, micro_size=4, token_budget=budget, dynamic=True, balance=True)
    check_covers(rows, 64, world_size)
    for rank in rows:
        for micro in rank:
            assert padded_tokens(batch, micro) <= budget or len(micro) == 1
        spans = sorted((min(response_lengths(batch, m)), max(response_lengths(batch, m))) for m in rank)
        for (_, upper), (lower, _) in zip(spans, spans[1:], strict=False):
            assert upper <= lower, f"micro batches of one rank overlap in response length: {spans}"


def test_grouping_by_length_pads_less_than_a_mix(batch):
    """Against cutting the same rows into the same number of micro batches in their batch order."""
    [rank] = plan(batch, 1, micro_size=4, token_budget=300, dynamic=True, balance=True)
    assert len(rank) > 2
    sizes = [len(micro) for micro in rank]
    starts = [sum(sizes[:index]) for index in range(len(sizes))]
    in_order = [list(range(start, start + size)) for start, size in zip(starts, sizes, strict=True)]
    grouped = sum(padded_tokens(batch, micro) for micro in rank)
    assert grouped < 0.9 * sum(padded_tokens(batch, micro) for micro in in_order)


def test_a_budget_the_whole_batch_fits_gives_one_micro_batch(batch):
    assert plan(batch, 1, micro_size=4, token_budget=10**6, dynamic=True, balance=True) == [[list(range(64))]]


@pytest.mark.parametrize("world_size", [1, 2])
def test_fixed_micro_batches_hold_micro_size_rows(batch, world_size):
    rows = plan(batch, world_size, micro_size=6, token_budget=1, dynamic=False, balance=False)
    check_covers(rows, 64, world_size)
    per_rank = 64 // world_size
    assert [len(micro) for micro in rows[0]] == [6] * (per_rank // 6) + ([per_rank % 6] if per_rank % 6 else [])


def test_pairs_stay_together(batch):
    rows = plan(batch, 2, micro_size=3, token_budget=150, dynamic=True, balance=True, pair=2)
    check_covers(rows, 64, 2)
    for rank in rows:
        for micro in rank:
            assert len(micro) % 2 == 0 and all(
                micro[i] % 2 == 0 and micro[i + 1] == micro[i] + 1 for i in range(0, len(micro), 2)
            )


def test_ranks_with_fewer_natural_cuts_split_to_the_same_count(batch):
    """Rank 0 gets the short rows, rank 1 the long ones: the budget cuts them differently, yet both run
    as many micro batches (FSDP's collectives pair them up)."""
    rows = plan(batch, 2, micro_size=4, token_budget=200, dynamic=True, balance=False)
    check_covers(rows, 64, 2)
    assert len(rows[0]) == len(rows[1]) > 1
