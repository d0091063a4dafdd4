"""Sparse embedding traffic: how many rows a step touches, and what those rows cost each strategy
on the wire. Closed forms only (numpy); tfbench.workloads.recommender draws the ids these laws
describe, and the measured counts of a run (its records' `sparse` facts) are checked against them.

Values of one table are drawn from Zipf(alpha) over R values: p_i = (i + 1)^-alpha / H, i = 0..R-1,
each value's row the value itself (hot_first) or a fixed permutation of it (hashed), which moves the
rows but not how many a step touches. For n independent draws (a batch of B examples with h ids each: n = B h):

  E[unique rows] = sum_i 1 - (1 - p_i)^n                                   (expected_unique)

and the rows of a contiguous range [lo, hi) of values (a parameter server's shard of a hot_first
table) likewise summed over that range. With the ids of N workers drawn independently, a synchronous global step
touches E[unique] at n = N B h rows (their union). Wire bytes per step (row = 4 D bytes of fp32
values, 8 bytes per int64 row id):

  all-gather (MultiWorkerMirrored, Horovod):  (N - 1) u (row + 8) received per host
  parameter server, per worker:              2 u (row + 8)      (pull: ids out, rows in; push: rows and ids)
  tables apart on the ps (hybrid), per worker: u (2 row + 4)  (int32 indices within a range, sent once)
  parameter server, per ps host:             sum over workers of the rows of its shards x 2 (row + 8)
  dense fallback (Horovod sparse_as_dense):  2 (N - 1) / N x the tables' bytes per host

where u is one worker's unique rows. All-gather grows with N per host; a parameter server's
traffic per worker stays u, and its ps hosts share N u (hot_first ids: the busiest one holds the
hottest rows; hashed ids: each shard's rows in proportion to its size).
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

INDEX_BYTES = 8  # an int64 row id
RANGE_INDEX_BYTES = 4  # a row's int32 index within its range on a ps (the hybrid's tables)


@functools.lru_cache(maxsize=64)
def zipf_probabilities(rows: int, alpha: float) -> np.ndarray:
    """p_i of rows 0..rows-1 under Zipf(alpha) (alpha = 0: uniform)."""
    weights = np.arange(1, rows + 1, dtype=np.float64) ** -float(alpha)
    return weights / weights.sum()


@functools.lru_cache(maxsize=4096)
def expected_unique(rows: int, alpha: float, draws: float, lo: int = 0, hi: int = -1) -> float:
    """E[distinct rows among `draws` ids] of one table, over rows [lo, hi) (default: all)."""
    p = zipf_probabilities(rows, alpha)[lo:(rows if hi < 0 else hi)]
    return float(-np.expm1(draws * np.log1p(-np.minimum(p, 1 - 1e-16))).sum())


def expected_unique_tables(table_rows: Sequence[int], alpha: float, draws: float) -> float:
    """E[distinct rows] summed over tables, `draws` ids in each."""
    return sum(expected_unique(r, alpha, draws) for r in table_rows)


def allgather_bytes(workers: int, unique_rows: float, row_bytes: float) -> float:
    """Bytes each host receives when N workers all-gather their touched rows (values and ids)."""
    return (workers - 1) * unique_rows * (row_bytes + INDEX_BYTES)
