"""The hybrid's embedding tables on the ps: where each row lives, how a rank reaches the ps, and
the pull and push of a step's rows.

The shard rule (--hybrid_shard_rule) is tfbench.perfmodel.sparse.ranges': a table's K contiguous
row ranges, range j of table t on ps (t + j) mod K (rotated) or on ps j (aligned). Each range is
a resource variable on its ps, created under a name shared by every rank (VarHandleOp's container
and shared_name): one rank writes the initial values, and every rank then reads and updates the
same rows.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Sequence

from tfbench.perfmodel.sparse import ranges

CONTAINER = "tfbench_tables"


class OnPs(NamedTuple):
    """What one ps received in a step's pull: its ranges ((table, range, variable) each), their
    row counts, and each range's int32 indices as split there, which the push scatters at."""

    device: str
    ranges: list
    sizes: object  # on the ps
    indices: list


class Pulled(NamedTuple):
    """A step's pull: per table, its rows (one per unique id), each id's position in them and each
    row's range; per ps, what it received."""

    rows: list
    positions: list
    shards: list
    on_ps: List[OnPs]


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
    def pull(self, ids_per_table: Sequence) -> Pulled:
        """The rows the ids touch. To each ps goes one tensor: the int32 indices of every range it
        holds, then their counts; it splits them into one ResourceGather per range and sends one
        tensor of rows back: one message each way per ps, however many tables and ranges."""
        from tfbench.framework.tf_import import tf

        positions, shards, wheres, slots = [], [], [], {}
        for t, ids in enumerate(ids_per_table):
            unique, position = tf.unique(tf.reshape(tf.cast(ids, tf.int64), [-1]))
            shard, local = self._split(t, unique)
            pieces = self.tables[t].variables
            parts = tf.dynamic_partition(local, shard, len(pieces))
            for j, piece in enumerate(pieces):
                slots.setdefault(piece.device, []).append(((t, j, piece), parts[j]))
            positions.append(position)
            shards.append(shard)
            wheres.append(tf.dynamic_partition(tf.range(tf.size(unique)), shard, len(pieces)))
        fetched = [[None] * len(table.variables) for table in self.tables]
        on_ps = []
        for device, slot in slots.items():
            held, parts = [r for r, _ in slot], [p for _, p in slot]
            sizes = tf.stack([tf.size(part) for part in parts])
            message = tf.concat([*parts, sizes], 0)  # int32: a range holds < 2**31 rows
            with tf.device(device):
                sizes_there = message[-len(parts):]
                there = tf.split(message[:-len(parts)], sizes_there, num=len(parts))
                rows = tf.concat([tf.raw_ops.ResourceGather(resource=piece.handle, indices=part, dtype=piece.dtype)
                                  for (_, _, piece), part in zip(held, there)], 0)
            for (t, j, _), got in zip(held, tf.split(rows, sizes, num=len(parts))):
                fetched[t][j] = got
            on_ps.append(OnPs(device, held, sizes_there, there))
        rows = [tf.dynamic_stitch(where, got) for where, got in zip(wheres, fetched)]
        return Pulled(rows, positions, shards, on_ps)

    def push(self, pulled: Pulled, row_grads: Sequence, learning_rate: float, after) -> list:
        """Each table's SGD step on the rows this rank touched: -lr x gradient, scatter-added on the
        ps that holds each row (ResourceScatterAdd). To each ps goes one tensor of updates, made once
        `after` (a scalar, an exact 0) exists (sent beside the all-reduce, they slowed its ring more
        than they gained); the indices and their counts are the pull's, already there."""
        from tfbench.framework.tf_import import tf

        steps = [tf.dynamic_partition(grad * tf.constant(-learning_rate, grad.dtype), shard, len(table.variables))
                 for table, shard, grad in zip(self.tables, pulled.shards, row_grads)]
        ops = []
        for ps in pulled.on_ps:
            updates = tf.concat([steps[t][j] for t, j, _ in ps.ranges], 0)
            updates += tf.cast(after, updates.dtype)
            with tf.device(ps.device):
                for (_, _, piece), part, step in zip(ps.ranges, ps.indices, tf.split(updates, ps.sizes,
                                                                                     num=len(ps.ranges))):
                    ops.append(tf.raw_ops.ResourceScatterAdd(resource=piece.handle, indices=part, updates=step))
        return ops

    def _split(self, t: int, ids):
        """(range index, row within the range) of each id of table t."""
        from tfbench.framework.tf_import import tf

        starts = tf.constant(self.offsets[t], ids.dtype)
        shard = tf.searchsorted(starts, ids, side="right", out_type=tf.int32) - 1
        return shard, tf.cast(ids - tf.gather(starts, shard), tf.int32)  # a range holds < 2**31 rows

    def feed(self, layers, pulled: Pulled) -> None:
        """Every Embedding layer of the model (in table order) reads its table's pulled rows in the
        step being traced instead of looking them up itself."""
        self.current = dict(enumerate(zip(pulled.rows, pulled.positions)))
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
