"""Plain-Python versions of the reference formulas, written from trinity_manager.md section 5.

Tests compare the torch implementations against these; nothing here imports trinity.algorithm.
Inputs are nested lists (rows of per-token values) and masks of 0/1 or bools.
"""

import math

EPS = 1e-8


def tokens(values, mask):
    return [v for row, mrow in zip(values, mask, strict=True) for v, m in zip(row, mrow, strict=True) if m]


def agg(values, mask, mode, normalizer=None):
    if mode == "token-mean":
        picked = tokens(values, mask)
        return sum(picked) / (len(picked) + EPS)
    rows = [[v for v, m in zip(row, mrow, strict=True) if m] for row, mrow in zip(values, mask, strict=True)]
    if mode == "seq-mean-token-sum":
        return sum(sum(r) for r in rows) / len(rows)
    if mode == "seq-mean-token-mean":
        return sum(sum(r) / (len(r) + EPS) for r in rows) / len(rows)
    if mode == "seq-mean-token-sum-norm":
        return sum(tokens(values, mask)) / (len(values[0]) if normalizer is None else normalizer)
    raise AssertionError(mode)


def agg_grad_weight(mask, mode):
    """d agg / d value for each token (agg is linear in the values)."""
    out = []
    count = sum(1 for row in mask for m in row if m)
    for mrow in mask:
        n = sum(1 for m in mrow if m)
        row = []
        for m in mrow:
            if not m:
                row.append(0.0)
            elif mode == "token-mean":
                row.append(1 / (count + EPS))
            elif mode == "seq-mean-token-sum":
                row.append(1 / len(mask))
            elif mode == "seq-mean-token-mean":
                row.append(1 / ((n + EPS) * len(mask)))
            else:
                row.append(1 / len(mrow))
        out.append(row)
    return out


def whiten(values, mask):
    picked = tokens(values, mask)
    mean = sum(picked) / len(picked)
    var = sum((v - mean) ** 2 for v in picked) / (len(picked) - 1)
    scale = 1 / math.sqrt(var + EPS)
    return [
        [(v - mean) * scale if m else 0.0 for v, m in zip(row, mrow, strict=True)]
        for row, mrow in zip(values, mask, strict=True)
    ]


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def log_sigmoid(x):
    return -math.log1p(math.exp(-x)) if x > 0 else x - math.log1p(math.exp(x))


def elementwise(fn, *nested):
    return [[fn(*cells) for cells in zip(*rows, strict=True)] for rows in zip(*nested, strict=True)]


def assert_close(actual, expected, atol=1e-5, rtol=1e-5):
    """A tensor against nested lists of expected values."""
    import torch

    torch.testing.assert_close(
        actual.detach().double(), torch.tensor(expected, dtype=torch.float64), atol=atol, rtol=rtol
    )
