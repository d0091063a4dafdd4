"""What a hybrid rank's record adds: where its tables live and the rows each ps serves, the split
of its measured steps, the dense all-reduce's bytes and bandwidth, and the row and collective ops
of its traced step (what the step really does, for tests and readers)."""
from __future__ import annotations

import collections
import dataclasses
import statistics
from typing import Dict, List, Optional

from strategies import placement
from strategies.hybrid.step import PARTS
from strategies.measurement import absent, flat
from strategies.parameter_server import variables as ps_placement
from tfbench.config import knobs
from tfbench.measure import comm

NO_TABLES = "none: the model has no embedding tables, so the hybrid is an all-reduce of every gradient (Horovod)"
SPLIT_DEFINITION = ("each measured step of this rank, from tf.timestamp marks inside it and the host's end: pull "
                    "(the batch's rows gathered on the ps), compute (forward and backward), allreduce (the dense "
                    "gradients summed by Horovod, waiting for the slowest rank included), push (the rows' SGD step "
                    "scatter-added on the ps), wait (until every rank has pushed), apply (the dense update and the "
                    "result to the host)")
STEP_OPS = ("ResourceGather", "ResourceScatterAdd")  # the row ops; Horovod's collectives are counted too


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
    step_ops: Optional[Dict] = absent()  # op type -> device -> count, in the traced step


def row_skew(rows: Optional[Dict]) -> Optional[float]:
    """ps_row_skew: the rows the busiest ps serves per global step over the mean of every ps
    (ps holding no table count as serving none)."""
    if not rows:
        return None
    per_ps = [entry["rows_per_global_step"] for entry in rows.values()]
    mean = sum(per_ps) / len(per_ps)
    return max(per_ps) / mean if mean else None


def step_ops(concrete_function) -> Dict[str, Dict[str, int]]:
    """Row ops and Horovod collectives of the traced step (nested graphs included), by requested
    device: what the step reads, updates and reduces, and where."""
    counts: Dict[str, Dict[str, int]] = collections.defaultdict(lambda: collections.defaultdict(int))
    graphs = [concrete_function.graph]
    while graphs:
        graph = graphs.pop()
        for op in graph.get_operations():
            if op.type in STEP_OPS or op.type.startswith("Horovod"):
                counts[op.type][placement.short_device(op.device)] += 1
        graphs += [f.graph for f in getattr(graph, "_functions", {}).values() if hasattr(f, "graph")]
    return {kind: dict(devices) for kind, devices in sorted(counts.items())}


def fields(adapter, measured: List) -> list:
    """The record's HybridFields from the adapter and its measured steps' marks."""
    config, n = adapter.config, adapter.hvd.size()
    out = HybridFields(knobs.knobs_of(config), adapter.num_ps)
    tables = adapter.table_variables()
    if tables:
        out.ps_shards = ps_placement.bytes_per_ps(tables)
        out.ps_rows = ps_placement.rows_per_ps(adapter.model, config, n) or None
        out.ps_row_skew = row_skew(out.ps_rows)
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
    if adapter.step_function is not None:
        out.step_ops = step_ops(adapter.step_function())
    return [out]
