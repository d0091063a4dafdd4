"""The hybrid's embedding tables on the ps: where each row lives, how a rank reaches the ps, and
the pull and push of a step's rows.

The shard rule (--hybrid_shard_rule) is tfbench.perfmodel.sparse.ranges': a table's K contiguous
row ranges, range j of table t on ps (t + j) mod K (rotated) or on ps j (aligned). Each range is
a resource variable on its ps, created under a name shared by every rank (VarHandleOp's container
and shared_name): one rank writes the initial values, and every rank then reads and updates the
same rows.
"""
from __future__ import annotations

from typing import Dict, List, Sequence

from tfbench.perfmodel.sparse import ranges

CONTAINER = "tfbench_tables"


def ps_device(k: int) -> str:
    return f"/job:ps/replica:0/task:{k}/device:CPU:0"


def connect(cluster_spec: Dict[str, list], rank: int, num_ranks: int, barrier) -> str:
    """Joins this rank to a TensorFlow cluster of the ps tasks plus a job of its own ("rank<r>",
    at its TF_CONFIG address); returns its own device prefix. A job shared by several clients
    hangs them, and first connections to a ps that overlap crash it (TensorFlow 2.21's
    EagerServiceImpl::CreateContext), so the ranks connect one after the other: `barrier(name)`
    is a collective of every rank."""
    from tfbench.framework.tf_import import tf

    job = f"rank{rank}"
    cluster = tf.train.ClusterSpec({"ps": cluster_spec["ps"], job: [cluster_spec["worker"][rank]]})
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, task_type=job, task_id=0,
                                                                    rpc_layer="grpc")
    for turn in range(num_ranks):
        if turn == rank:
            tf.config.experimental_connect_to_cluster(resolver, job_name=job, task_index=0,
                                                      make_master_device_default=False)
        barrier(f"connected_{turn}")
    return f"/job:{job}/replica:0/task:0"


def shared_variable(run_tag: str, name: str, shape, dtype, k: int):
    """A handle to the variable `name` on ps task k: the same resource in every rank that asks.
    It has no deleter: the variable belongs to the ps and outlives any one rank's handle."""
    from tfbench.framework.tf_import import resource_variable_ops, tf

    with tf.device(ps_device(k)):
        handle = tf.raw_ops.VarHandleOp(dtype=dtype, shape=shape, container=CONTAINER,
                                        shared_name=f"{run_tag}/{name}")
    return resource_variable_ops.BaseResourceVariable(
        trainable=True, shape=shape, dtype=dtype, handle=handle, name=name, unique_id=f"{run_tag}/{name}",
        handle_name=name, in_graph_mode=False)


class PsTables:
    """A variable creator (tf.variable_creator_scope) that puts every Embedding's table on the ps
    as a ShardedVariable of shared row ranges; any other variable is created as usual, on the
    rank. `initialise`: this rank writes the tables' initial values (one rank does)."""

    def __init__(self, num_ps: int, rule: str, run_tag: str, initialise: bool):
        self.num_ps, self.rule, self.run_tag, self.initialise = num_ps, rule, run_tag, initialise
        self.tables: list = []  # ShardedVariable per table, in creation order
        self.offsets: List[List[int]] = []  # first row of each range, per table
        self.current: Dict[int, tuple] = {}  # table -> (rows, position) of the step being traced

    def __call__(self, next_creator, **kwargs):
        from tfbench.framework.tf_import import sharded_variable, tf

        if kwargs.get("name") != "embeddings":
            return next_creator(**kwargs)
        t = len(self.tables)
        shape = tf.TensorShape(kwargs["shape"])
        rows, dim = int(shape[0]), int(shape[1])
        init = kwargs["initial_value"]
        value = (init() if callable(init) else tf.convert_to_tensor(init)) if self.initialise else None
        pieces, offsets, offset = [], [], 0
        for j, size in enumerate(ranges.sizes(rows, self.num_ps)):
            k = ranges.ps_of(t, j, self.num_ps, self.rule)
            piece = shared_variable(self.run_tag, f"table_{t}/shard_{j}", [size, dim], tf.float32, k)
            if value is not None:
                with tf.device(ps_device(k)):
                    tf.raw_ops.AssignVariableOp(resource=piece.handle, value=value[offset:offset + size])
            pieces.append(piece)
            offsets.append(offset)
            offset += size
        table = sharded_variable.ShardedVariable(pieces, name=f"table_{t}")
        self.tables.append(table)
        self.offsets.append(offsets)
        return table

    # -- a step's rows ----------------------------------------------------------------------
    def pull(self, ids_per_table: Sequence) -> List[tuple]:
        """(unique ids, their rows, each id's position in them) per table: the rows the ids touch,
        read with one ResourceGather per range on the ps that holds it, stitched back in order."""
        from tfbench.framework.tf_import import tf

        out = []
        for t, ids in enumerate(ids_per_table):
            unique, position = tf.unique(tf.reshape(tf.cast(ids, tf.int64), [-1]))
            shard, local = self._split(t, unique)
            pieces = self.tables[t].variables
            parts = tf.dynamic_partition(local, shard, len(pieces))
            where = tf.dynamic_partition(tf.range(tf.size(unique)), shard, len(pieces))
            fetched = []
            for piece, part in zip(pieces, parts):
                with tf.device(piece.device):
                    fetched.append(tf.raw_ops.ResourceGather(resource=piece.handle, indices=part, dtype=piece.dtype))
            out.append((unique, tf.dynamic_stitch(where, fetched), position))
        return out

    def push(self, unique_per_table: Sequence, row_grads: Sequence, learning_rate: float, after) -> list:
        """Each table's SGD step on the rows this rank touched: -lr x gradient, scatter-added on the
        ps that holds each row (ResourceScatterAdd), once `after` (a tensor) exists."""
        from tfbench.framework.tf_import import tf

        ops = []
        for t, (unique, grad) in enumerate(zip(unique_per_table, row_grads)):
            unique = unique + tf.cast(after, unique.dtype)  # `after` is an exact 0 that orders the push
            shard, local = self._split(t, unique)
            pieces = self.tables[t].variables
            rows = tf.dynamic_partition(local, shard, len(pieces))
            steps = tf.dynamic_partition(grad * tf.constant(-learning_rate, grad.dtype), shard, len(pieces))
            for piece, part, step in zip(pieces, rows, steps):
                with tf.device(piece.device):
                    ops.append(tf.raw_ops.ResourceScatterAdd(resource=piece.handle, indices=part, updates=step))
        return ops

    def _split(self, t: int, ids):
        """(range index, row within the range) of each id of table t."""
        from tfbench.framework.tf_import import tf

        starts = tf.constant(self.offsets[t], ids.dtype)
        shard = tf.searchsorted(starts, ids, side="right", out_type=tf.int32) - 1
        return shard, ids - tf.gather(starts, shard)

    def feed(self, layers, pulled: Sequence[tuple]) -> None:
        """Every Embedding layer of the model (in table order) reads its table's pulled rows in the
        step being traced instead of looking them up itself."""
        self.current = {t: (rows, position) for t, (_, rows, position) in enumerate(pulled)}
        for t, layer in enumerate(layers):
            layer.call = self._reader(t, layer.output_dim)

    def _reader(self, t: int, dim: int):
        from tfbench.framework.tf_import import tf

        def call(inputs):
            rows, position = self.current[t]
            return tf.reshape(tf.gather(rows, position), [-1, *inputs.shape[1:], dim])

        return call

    def whole(self, t: int):
        """Table t's rows in order, read from the ps (numpy)."""
        import numpy as np

        return np.concatenate([piece.numpy() for piece in self.tables[t].variables])
