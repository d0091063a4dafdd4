"""Where a parameter-server run's variables live: the partitioner that splits them (--ps_partitioner),
the placer that puts them on the ps (--ps_placer), and what each ps ended up holding."""
from __future__ import annotations

import contextlib
import re
from typing import Dict

from strategies import placement


def variable_partitioner(config, num_ps: int):
    """--ps_partitioner (tfbench.config.knobs): none places whole variables round-robin over the
    ps; min_size splits a variable along its first axis into shards of at least
    --ps_min_shard_bytes, at most one per ps; fixed splits every variable into one shard per ps."""
    from tfbench.framework.tf_import import tf

    partitioners = tf.distribute.experimental.partitioners
    if num_ps < 2 or config.ps_partitioner == "none":
        return None
    if config.ps_partitioner == "fixed":
        return partitioners.FixedShardsPartitioner(num_shards=num_ps)
    return partitioners.MinSizePartitioner(min_shard_bytes=config.ps_min_shard_bytes, max_shards=num_ps)


@contextlib.contextmanager
def greedy(strategy, num_ps: int):
    """--ps_placer=greedy: every variable starts on the ps holding the fewest bytes so far (its
    shards, if the partitioner splits it, go round from there), as tf_cnn_benchmarks balanced its
    ps. TensorFlow places variables round-robin by a counter and offers no other placer, so the
    counter is set before each creation; the bytes come from where each piece really landed."""
    from tfbench.framework.tf_import import tf

    extended = strategy.extended
    loads = [0] * num_ps

    def creator(next_creator, **kwargs):
        extended._variable_count = loads.index(min(loads))  # noqa: SLF001 - the only seam TF has
        variable = next_creator(**kwargs)
        for component in getattr(variable, "variables", None) or [variable]:
            task = re.search(r"/task:(\d+)", component.device or "")
            if task:
                loads[int(task.group(1))] += int(component.shape.num_elements()) * component.dtype.size
        return variable

    with tf.variable_creator_scope(creator):
        yield


def bytes_per_ps(variables) -> Dict[str, dict]:
    """What each ps holds of `variables` (shards of a partitioned variable counted where they
    live): bytes and variable shards per ps task, from the live variables' devices."""
    held: Dict[str, dict] = {}
    for v in variables:
        for component in getattr(v, "variables", None) or [v]:
            device = placement.short_device(component.device)
            entry = held.setdefault(device, {"bytes": 0, "shards": 0})
            entry["bytes"] += int(component.shape.num_elements()) * component.dtype.size
            entry["shards"] += 1
    return dict(sorted(held.items()))


def rows_per_ps(model, config, shards: int) -> Dict[str, dict]:
    """What each ps serves of the embedding tables per step: the rows the batches of `shards`
    workers touch in the table shards it holds (each worker's rows counted: every worker pulls and
    pushes its own), from the workload's ids (the mean over its first steps, as its `sparse` facts
    count them) and the live shards' devices and row ranges."""
    from tfbench.models.tables import embedding_tables

    steps = [config.workload.touched_rows(config, k) for k in range(config.workload.fact_steps)]
    if not steps or not steps[0]:
        return {}
    served: Dict[str, dict] = {}
    for t, table in enumerate(embedding_tables(model)):
        offset = 0
        for piece in getattr(table, "variables", None) or [table]:
            rows = int(piece.shape[0])
            entry = served.setdefault(placement.short_device(piece.device), {"rows_per_worker_step": 0.0,
                                                                             "rows_per_global_step": 0.0})
            for touched in steps:
                counts = [int(((ids >= offset) & (ids < offset + rows)).sum()) for ids in
                          (touched[s][t] for s in range(min(shards, len(touched))))]
                entry["rows_per_worker_step"] += sum(counts) / max(1, len(counts)) / len(steps)
                entry["rows_per_global_step"] += sum(counts) / len(steps)
            offset += rows
    return dict(sorted(served.items()))


def row_skew(served: Dict[str, dict]) -> float:
    """ps_row_skew: the rows the busiest ps serves per global step over the mean of every ps."""
    counts = [entry["rows_per_global_step"] for entry in served.values()]
    mean = sum(counts) / len(counts) if counts else 0.0
    return max(counts) / mean if mean else float("nan")
