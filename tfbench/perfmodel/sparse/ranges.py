"""Where the hybrid strategy keeps a table's rows on its K ps: the one statement of its shard rule,
read by the strategy (strategies/hybrid/tables.py) and by the step model (recommender.py).

A table of R rows is split into min(K, R) contiguous row ranges, the first R mod K one row longer
(as tf.nn.embedding_lookup's "div" and TensorFlow's fixed partitioner split them). Range j of
table t lives on ps (t + j) mod K under the rule `rotated`, so that the tables' first ranges (the
hot rows when ids are hot-first) spread over the ps, or on ps j under `aligned`.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

RULES = ("rotated", "aligned")


def sizes(rows: int, num_ps: int) -> List[int]:
    """Rows of each range: min(K, R) ranges, the first R mod K one row longer."""
    k = min(num_ps, rows)
    return [rows // k + (1 if j < rows % k else 0) for j in range(k)]


def ps_of(table: int, shard: int, num_ps: int, rule: str) -> int:
    """The ps that holds range `shard` of table `table`."""
    return (table + shard) % num_ps if rule == "rotated" else shard


def placed(table_rows: Sequence[int], num_ps: int, rule: str) -> List[List[Tuple[int, int, int]]]:
    """Per table, its ranges as (first row, end row, ps)."""
    out = []
    for t, rows in enumerate(table_rows):
        start, ranges = 0, []
        for j, size in enumerate(sizes(rows, num_ps)):
            ranges.append((start, start + size, ps_of(t, j, num_ps, rule)))
            start += size
        out.append(ranges)
    return out
