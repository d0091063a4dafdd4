"""What an embedding table's sparse gradients cost on the wire, per strategy, from the rows a
step's ids touch (the workload's `sparse` facts, counted from the batches themselves).

A model that looks up unique ids moves each touched row once (tfbench.models.dlrm):
- parameter server: each worker pulls its touched rows from their ps (it sends their int64 ids,
  the ps sends the rows) and pushes their gradients back with the ids: 2 x rows x (row bytes + 8);
  the ps hosts together carry every worker's rows;
- tables apart on the ps (the hybrid): the same pull and push, the rows' indices within their
  ranges sent once (int32, with the pull) and the push scattered at them: rows x (2 row bytes + 4);
- all-reduce strategies (MultiWorkerMirrored; Horovod without sparse_as_dense): the gradients are
  all-gathered, each host receiving the rows (values and int64 ids) of the N - 1 others; TensorFlow's
  collectives gather equal shapes only, so MultiWorkerMirrored pads every worker's rows of a table
  to the most any worker touched (its `gather_pads` trait), Horovod's all-gather sends each its own;
- Horovod with --horovod_sparse_as_dense: the tables' gradients are all-reduced dense, whole:
  2 (N - 1) / N x the tables' bytes per host (ring all-reduce).
These are rules, not measurements (the records' `wire_by_rule`); the dense layers' gradients travel
besides, as for any model (tfbench.measure.comm).
"""
from __future__ import annotations

from typing import Dict, Optional

INDEX_BYTES = 8  # an int64 row id (tfbench.perfmodel.sparse.laws states the same for the model)
RANGE_INDEX_BYTES = 4  # a row's int32 index within its range on a ps (the hybrid's tables)


def wire(facts: Dict, traits, sparse_as_dense: bool) -> Optional[Dict]:
    """Bytes the tables' rows move per step, by the rule of the run's strategy; None without tables."""
    per_shard = facts.get("unique_rows_per_shard") or []
    if not per_shard:
        return None
    row, n = facts["row_bytes"], len(per_shard)
    mean_rows = sum(per_shard) / n
    if traits.tables_apart:
        per_worker = mean_rows * (2 * row + RANGE_INDEX_BYTES)
        return {"rule": "tables apart on the ps: each worker pulls the rows its batch touches (their indices sent "
                        "once) and pushes their update to the same indices",
                "per_worker_step_bytes": per_worker, "ps_hosts_bytes_per_global_step": per_worker * n}
    if traits.ps_tasks:
        per_worker = 2 * mean_rows * (row + INDEX_BYTES)
        return {"rule": "parameter server: each worker pulls the rows its batch touches (their ids sent) and pushes "
                        "their gradients with the ids",
                "per_worker_step_bytes": per_worker, "ps_hosts_bytes_per_global_step": per_worker * n}
    if not traits.multi_task:
        return {"rule": "one task: the tables stay in its memory", "per_host_step_bytes": 0.0}
    if sparse_as_dense:
        table_bytes = 4 * sum(facts["rows"]) * facts["embedding_dim"]
        return {"rule": "dense all-reduce of the whole tables (sparse_as_dense)",
                "per_host_step_bytes": 2 * (n - 1) / n * table_bytes}
    if traits.gather_pads and facts.get("padded_rows_per_shard") is not None:
        return {"rule": "all-gather: each host receives the rows of the N - 1 others, each padded to the most any "
                        "worker touched in that table",
                "per_host_step_bytes": (n - 1) * facts["padded_rows_per_shard"] * (row + INDEX_BYTES)}
    received = (n - 1) * mean_rows * (row + INDEX_BYTES)
    return {"rule": "all-gather: each host receives the rows of the N - 1 others", "per_host_step_bytes": received}


def line(facts: Optional[Dict]) -> Optional[str]:
    """The run table's line about the tables' rows: what a step touches and what that moves."""
    if not facts or not facts.get("unique_rows_per_shard"):
        return None
    per_shard = facts["unique_rows_per_shard"]
    text = (f"sparse: {facts['tables']} tables, {facts['lookups_per_step']} lookups per worker step; unique rows "
            f"per step: {', '.join(str(u) for u in per_shard)} per worker, {facts['unique_rows_all_shards']} over "
            f"all {len(per_shard)} together")
    moved = facts.get("wire_by_rule")
    if moved:
        size = moved.get("per_worker_step_bytes", moved.get("per_host_step_bytes", 0.0))
        text += f"; by the rule ({moved['rule']}): {size / 1e6:.3f} MB per " + (
            "worker step" if "per_worker_step_bytes" in moved else "host and step")
    return text
