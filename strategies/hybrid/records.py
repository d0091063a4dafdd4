"""What a hybrid rank's record adds: where its tables live and the rows each ps serves, the split
of its measured steps and the dense all-reduce's bytes and bandwidth (what its traced step does
with the tables is every synchronous record's `step_graph`, strategies.step_graph)."""
from __future__ import annotations

import dataclasses
import statistics
from typing import Dict, List, Optional

from strategies.hybrid.step import PARTS
from strategies.measurement import absent, flat
from strategies.parameter_server import variables as ps_placement
from tfbench.config import knobs
from tfbench.measure import comm

NO_TABLES = "none: the model has no embedding tables, so the hybrid is an all-reduce of every gradient (Horovod)"
SPLIT_DEFINITION = ("each measured step of this rank, from tf.timestamp marks inside it and the host's end: wait "
                    "(until every rank has started the step, so every rank's last pushes have landed), pull (the "
                    "batch's rows gathered on the ps, every rank's requests sent as the wait ends), compute (forward "
                    "and backward), allreduce (the dense gradients summed by Horovod, waiting for the slowest rank "
                    "included), push (the rows' SGD step scatter-added on the ps), apply (the dense update and the "
                    "result to the host)")


@dataclasses.dataclass
class HybridFields:
    """The hybrid rank's own part of its record."""

    knobs: Dict = flat()
    num_ps: int = 0
    tables: str = "on the ps: row ranges per --hybrid_shard_rule, rows pulled and pushed by each rank"
    table_consistency: str = ("one update per global step: every rank's rows pushed before any rank pulls the next "
                              "step's (synchronous, as the synchronous parameter server)")
    ps_shards: Optional[Dict] = absent()  # bytes and ranges per ps
    ps_rows: Optional[Dict] = absent()  # the rows each ps serves per step
    ps_row_skew: Optional[float] = absent()  # the busiest ps's rows per global step over the mean
    hybrid_split_ms: Optional[Dict] = absent()  # mean ms per part of the measured steps
    hybrid_split_definition: str = SPLIT_DEFINITION
    allreduce_plan: Optional[Dict] = absent()  # the dense gradients' all-reduce (Horovod's fusion)
    allreduce_busbw_gbit_s: Optional[float] = absent()  # over the mean allreduce part


def fields(adapter, measured: List) -> list:
    """The record's HybridFields from the adapter and its measured steps' marks."""
    config, n = adapter.config, adapter.hvd.size()
    out = HybridFields(knobs.knobs_of(config), adapter.num_ps)
    tables = adapter.table_variables()
    if tables:
        out.ps_shards = ps_placement.bytes_per_ps(tables)
        out.ps_rows = ps_placement.rows_per_ps(adapter.model, config, n) or None
        out.ps_row_skew = ps_placement.row_skew(out.ps_rows) if out.ps_rows else None
    else:
        out.tables = NO_TABLES
    if measured:
        splits = [m.split_s() for m in measured]
        out.hybrid_split_ms = {part: 1e3 * statistics.fmean(s[part] for s in splits) for part in PARTS}
    if config.mode == "train":
        sizes = [int(v.shape.num_elements()) * v.dtype.size for v in adapter.dense]
        out.allreduce_plan = comm.plan_horovod(sizes, -1)
        seconds = out.hybrid_split_ms["allreduce"] / 1e3 if out.hybrid_split_ms else 0.0
        if seconds > 0 and n > 1:  # busbw as nccl-tests defines it: W / t x 2(N-1)/N
            out.allreduce_busbw_gbit_s = sum(sizes) / seconds * 2 * (n - 1) / n * 8 / 1e9
    return [out]
