"""Splitting one train batch into per-rank micro batches, planned once in the controller.

FSDP runs collectives in every forward and backward, so every rank must run the same number of
micro batches: the plan gives each rank the same count, balancing tokens across ranks when asked.
Within a rank, rows are taken in order of length and cut into consecutive micro batches, so rows of
similar length share one and little of each padded tensor is padding (GRPO's responses range from a
token or two to the length limit). DPO rows come in (chosen, rejected) pairs, which are never split.
"""

from typing import List, Sequence

import torch

from trinity.buffer.batch import Batch


def plan(
    batch: Batch, world_size: int, micro_size: int, token_budget: int, dynamic: bool, balance: bool, pair: int = 1
) -> List[List[List[int]]]:
    """rows[rank][micro] -> row indices. Ranks get equal row counts (the batch size is validated to
    split evenly); within a rank, rows sorted by length are cut into micro batches of `micro_size` rows,
    or, when `dynamic`, of at most `token_budget` tokens as the padded tensor holds them (rows x the
    widest prompt plus the longest response; a lone unit wider than the budget runs alone), with the same
    micro-batch count on every rank."""
    size = batch["input_ids"].shape[0]
    units = [list(range(start, start + pair)) for start in range(0, size, pair)]
    widths = _Widths(batch, units)
    unit_tokens = widths.tokens
    per_rank = len(units) // world_size
    order = sorted(range(len(units)), key=lambda i: -unit_tokens[i]) if balance else list(range(len(units)))
    ranks: List[List[int]] = [[] for _ in range(world_size)]
    loads = [0] * world_size
    for unit in order:  # greedy: the next-longest unit goes to the least loaded rank with room
        open_ranks = [r for r in range(world_size) if len(ranks[r]) < per_rank]
        target = min(open_ranks, key=lambda r: loads[r]) if balance else open_ranks[0]
        ranks[target].append(unit)
        loads[target] += unit_tokens[unit]
    chunked = []
    for rank_units in ranks:
        by_length = sorted(rank_units, key=lambda u: (widths.response[u], widths.prompt[u], u))
        if dynamic:
            chunked.append(_by_budget(by_length, widths, token_budget))
        else:
            step = max(1, micro_size // pair)
            chunked.append([by_length[start : start + step] for start in range(0, len(by_length), step)])
    count = max(len(chunks) for chunks in chunked)
    return [
        [[row for unit in sorted(chunk) for row in units[unit]] for chunk in _split_to(chunks, count, widths)]
        for chunks in chunked
    ]


class _Widths:
    """Each unit's prompt and response token counts: a micro batch is as wide as its widest of each; a
    unit's tokens (all its rows') weigh it when ranks are balanced."""

    def __init__(self, batch: Batch, units: List[List[int]]):
        response_len = batch["response_mask"].shape[1]
        attention = batch["attention_mask"]
        prompt = attention[:, : attention.shape[1] - response_len].sum(dim=1).tolist()
        response = attention[:, attention.shape[1] - response_len :].sum(dim=1).tolist()
        self.rows = [len(u) for u in units]
        self.prompt = [max(prompt[row] for row in u) for u in units]
        self.response = [max(response[row] for row in u) for u in units]
        self.tokens = [sum(prompt[row] + response[row] for row in u) for u in units]

    def padded(self, chunk: Sequence[int]) -> int:
        """Tokens of the padded tensor that `select` makes of these units."""
        rows = sum(self.rows[u] for u in chunk)
        return rows * (max(self.prompt[u] for u in chunk) + max(self.response[u] for u in chunk))


def _by_budget(by_length: List[int], widths: _Widths, budget: int) -> List[List[int]]:
    """Consecutive runs of the length-sorted units, each as long as its padded tensor fits `budget`."""
    chunks: List[List[int]] = []
    rows = prompt = response = 0  # the open chunk's rows and widths
    for unit in by_length:
        grown = (rows + widths.rows[unit], max(prompt, widths.prompt[unit]), max(response, widths.response[unit]))
        if chunks and grown[0] * (grown[1] + grown[2]) <= budget:
            chunks[-1].append(unit)
            rows, prompt, response = grown
        else:
            chunks.append([unit])
            rows, prompt, response = widths.rows[unit], widths.prompt[unit], widths.response[unit]
    return chunks


def _split_to(chunks: List[List[int]], count: int, widths: _Widths) -> List[List[int]]:
    """`chunks` cut further until there are `count` (the other ranks' count): the widest splits in half."""
    chunks = [list(chunk) for chunk in chunks]
    while len(chunks) < count:
        index = max((i for i, c in enumerate(chunks) if len(c) > 1), key=lambda i: widths.padded(chunks[i]))
        chunk = chunks.pop(index)
        chunks[index:index] = [chunk[: len(chunk) // 2], chunk[len(chunk) // 2 :]]
    return chunks


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
