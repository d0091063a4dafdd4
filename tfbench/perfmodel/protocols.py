"""The model's own terms for tfbench's strategies: the one place that translates a strategy's name
into what the model computes.

The model knows four protocols: a parameter server (PS: updates on ps shards, synchronous or not),
a ring all-reduce (RINGS: the strategies that run one), a binomial tree (TREE: no tfbench
strategy runs it; predict and the published curves use it) and, for embedding tables, an
all-gather of the rows a step touches (ALL_GATHER). Its equations and parameters are keyed by
these terms (dense.prediction.STRATEGIES, fitting.params' keys); a run of tfbench's strategy
enters the model through `of_run` and `tables_kind`, and a strategy with no term here (one task,
or a strategy the model has no equation for) is not predicted. tests/test_perfmodel.py checks the
terms against tfbench's strategy traits, so that a renamed or new strategy cannot drift silently.
"""
from __future__ import annotations

from typing import Optional

PS = "parameter_server"
RINGS = ("multi_worker_mirrored", "horovod")
TREE = "tree"
ALL_GATHER = "all-gather"
STRATEGIES = (PS,) + RINGS + (TREE,)  # what the model's predictions take as --strategy
PREDICTED = (PS,) + RINGS  # tfbench's strategies whose runs the model is fitted on
ONE_TASK = ("default", "mirrored")  # tfbench's one-task strategies: a run of them is one worker


def of_run(strategy: str) -> Optional[str]:
    """The model's term for a run of tfbench's `strategy`, or None when the model has none."""
    return strategy if strategy in PREDICTED else None


def tables_kind(strategy: str) -> str:
    """How a run of `strategy` moves its embedding tables' rows in the sparse model: pulled from
    and pushed to ps shards (PS), or all-gathered among the workers (ALL_GATHER)."""
    return PS if strategy == PS else ALL_GATHER
