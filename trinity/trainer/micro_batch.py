"""Splitting one train batch into per-rank micro batches, planned once in the controller.

FSDP runs collectives in every forward and backward, so every rank must run the same number of
micro batches: the plan gives each rank the same count, balancing tokens when asked. DPO rows come
in (chosen, rejected) pairs, which are never split.
"""

from typing import List

import torch

from trinity.buffer.batch import Batch


def row_lengths(batch: Batch) -> torch.Tensor:
    return batch["attention_mask"].sum(dim=1)


def plan(
    batch: Batch, world_size: int, micro_size: int, token_budget: int, dynamic: bool, balance: bool, pair: int = 1
) -> List[List[List[int]]]:
    """rows[rank][micro] -> row indices. Ranks get equal row counts (the batch size is validated to
    split evenly); within a rank rows are cut into micro batches of `micro_size` rows, or, when
    `dynamic`, of at most `token_budget` tokens, with the same micro-batch count on every rank."""
    size = batch["input_ids"].shape[0]
    units = [list(range(start, start + pair)) for start in range(0, size, pair)]
    lengths = row_lengths(batch)
    unit_tokens = [int(lengths[u].sum()) for u in units]
    per_rank = len(units) // world_size
    order = sorted(range(len(units)), key=lambda i: -unit_tokens[i]) if balance else list(range(len(units)))
    ranks: List[List[int]] = [[] for _ in range(world_size)]
    loads = [0] * world_size
    for unit in order:  # greedy: the next-longest unit goes to the least loaded rank with room
        open_ranks = [r for r in range(world_size) if len(ranks[r]) < per_rank]
        target = min(open_ranks, key=lambda r: loads[r]) if balance else open_ranks[0]
        ranks[target].append(unit)
        loads[target] += unit_tokens[unit]
    if dynamic:
        count = max(_count_by_budget([unit_tokens[u] for u in rank_units], token_budget) for rank_units in ranks)
    else:
        count = max(1, -(-per_rank * pair // micro_size))
    return [_split(rank_units, unit_tokens, count, units) for rank_units in ranks]


def _count_by_budget(tokens: List[int], budget: int) -> int:
    count, current = 1, 0
    for value in tokens:
        if current and current + value > budget:
            count, current = count + 1, 0
        current += value
    return count


def _split(rank_units: List[int], unit_tokens: List[int], count: int, units: List[List[int]]) -> List[List[int]]:
    """`count` micro batches with roughly equal tokens (every micro batch gets at least one unit)."""
    count = min(count, len(rank_units))
    bins: List[List[int]] = [[] for _ in range(count)]
    loads = [0] * count
    for unit in sorted(rank_units, key=lambda u: -unit_tokens[u]):
        target = min(range(count), key=lambda b: (loads[b], len(bins[b])))
        bins[target].append(unit)
        loads[target] += unit_tokens[unit]
    return [[row for unit in sorted(b) for row in units[unit]] for b in bins]


def select(batch: Batch, rows: List[int]) -> Batch:
    """The sub-batch of `rows`, trimmed to the longest prompt and response it holds."""
    index = torch.tensor(rows, dtype=torch.long)
    sub = {key: value[index] for key, value in batch.items()}
    response_len = batch["response_mask"].shape[1]
    prompt_len = batch["input_ids"].shape[1] - response_len
    attention = sub["attention_mask"]
    keep_prompt = int(attention[:, :prompt_len].sum(dim=1).max())
    keep_response = int(attention[:, prompt_len:].sum(dim=1).max())
    for key, value in sub.items():
        if value.dim() == 2 and value.shape[1] == prompt_len + response_len:
            sub[key] = value[:, prompt_len - keep_prompt : prompt_len + keep_response]
        elif value.dim() == 2 and value.shape[1] == response_len:
            sub[key] = value[:, :keep_response]
    return sub
