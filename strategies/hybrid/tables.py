"""The hybrid's embedding tables on the ps: where each row lives, how a rank reaches the ps, and
the pull and push of a step's rows.

The shard rule (--hybrid_shard_rule) is tfbench.perfmodel.sparse.ranges': a table's K contiguous
row ranges, range j of table t on ps (t + j) mod K (rotated) or on ps j (aligned). Each ps keeps
the ranges it holds (of every table of one width) stacked in one resource variable, created under
a name shared by every rank (VarHandleOp's container and shared_name), so that a step's pull is one
gather there and its push one scatter-add, however many tables: one rank writes the initial values,
and every rank then reads and updates the same rows. The model's table is a ShardedVariable of its
ranges' handles (shape and ps, which the records read), not their storage.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Sequence

from tfbench.perfmodel.sparse import ranges

CONTAINER = "tfbench_tables"


class Stack(NamedTuple):
    """One ps's variable of the ranges of one width it holds, in table order (PsTables.holder
    says where each range starts in it)."""

    device: str
    variable: object


class OnPs(NamedTuple):
    """What one ps's stack (self.stacks[stack]) received in a step's pull: the tables whose rows it
    sent, and the int32 indices (rows of the stack) as they arrived there, which the push scatters at."""

    stack: int
    tables: list
    indices: object  # on the ps


class Pulled(NamedTuple):
    """A pull: per table asked ({table: ...}, in the order asked), its rows (one per unique id),
    each id's position in them and the stack that holds each row; per stack, what its ps received."""

    rows: dict
    positions: dict
    stacks: dict
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
    as a ShardedVariable of its row ranges; any other variable is created as usual, on the rank.
    `stack()`, once the model is built, makes each ps's stacks. `initialise`: this rank writes the
    tables' initial values (one rank does): each range's into its own handle on its ps as the table
    is made, which `stack()` then moves into the stack there and frees, so that no rank holds more
    than one table's values and no ps more than its share twice, briefly."""

    def __init__(self, num_ps: int, rule: str, run_tag: str, initialise: bool):
        self.num_ps, self.rule, self.run_tag, self.initialise = num_ps, rule, run_tag, initialise
        self.tables: list = []  # ShardedVariable of its ranges per table, in creation order
        self.offsets: List[List[int]] = []  # first row of each range, per table
        self.stacks: List[Stack] = []
        self.holder: List[List[tuple]] = []  # per table and range: (its stack's index, its first row there)
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

    def stack(self) -> None:
        """Each ps's stacks: one variable per width of the ranges it holds, in table order. The
        initialising rank moves every range's values into its stack on the ps (nothing crosses a
        link) and frees the range's own variable."""
        from tfbench.framework.tf_import import tf

        layout: Dict[tuple, list] = {}  # (ps, width) -> [(table, range, piece)]
        for t, table in enumerate(self.tables):
            for j, piece in enumerate(table.variables):
                key = (ranges.ps_of(t, j, self.num_ps, self.rule), int(piece.shape[1]))
                layout.setdefault(key, []).append((t, j, piece))
        self.holder = [[None] * len(table.variables) for table in self.tables]
        for (k, dim), held in sorted(layout.items()):
            row = 0
            for t, j, piece in held:
                self.holder[t][j] = (len(self.stacks), row)
                row += int(piece.shape[0])
            name = f"ps_{k}/width_{dim}"
            variable = shared_variable(self.run_tag, name, [row, dim], tf.float32, k)
            if self.initialise:
                with tf.device(ps_device(k)):
                    values = [tf.raw_ops.ReadVariableOp(resource=p.handle, dtype=p.dtype) for _, _, p in held]
                    tf.raw_ops.AssignVariableOp(resource=variable.handle, value=tf.concat(values, 0))
                    for _, _, piece in held:
                        tf.raw_ops.DestroyResourceOp(resource=piece.handle)
            self.stacks.append(Stack(ps_device(k), variable))

    # -- a step's rows ----------------------------------------------------------------------
    def pull(self, ids_per_table: Dict[int, object], sent=None) -> Pulled:
        """The rows the ids ({table: ids}) touch. To each stack's ps goes one tensor, the int32 rows
        of the stack that every table's ids hit; one ResourceGather there sends one tensor of rows
        back: one message each way per ps, however many tables and ranges. With `sent` (an int32
        exact 0), the messages are made at once and leave once it exists."""
        from tfbench.framework.tf_import import tf

        n = len(self.stacks)
        positions, stacks, wheres, slots = {}, {}, {}, {}
        for t, ids in ids_per_table.items():
            unique, position = tf.unique(tf.reshape(tf.cast(ids, tf.int64), [-1]))
            stack, row = self._split(t, unique)
            holding = {h for h, _ in self.holder[t]}
            for s, part in enumerate(tf.dynamic_partition(row, stack, n)):
                if s in holding:
                    slots.setdefault(s, []).append((t, part))
            positions[t], stacks[t] = position, stack
            wheres[t] = tf.dynamic_partition(tf.range(tf.size(unique)), stack, n)
        fetched: Dict[int, Dict[int, object]] = {t: {} for t in ids_per_table}
        on_ps = []
        for s, slot in sorted(slots.items()):
            stack, held, parts = self.stacks[s], [t for t, _ in slot], [p for _, p in slot]
            message = tf.concat(parts, 0)
            if sent is not None:
                message += sent
            with tf.device(stack.device):
                there = tf.identity(message)
                rows = tf.raw_ops.ResourceGather(resource=stack.variable.handle, indices=there,
                                                 dtype=stack.variable.dtype)
            for t, got in zip(held, tf.split(rows, [tf.size(p) for p in parts], num=len(parts))):
                fetched[t][s] = got
            on_ps.append(OnPs(s, held, there))
        rows = {t: tf.dynamic_stitch([wheres[t][s] for s in got], list(got.values())) for t, got in fetched.items()}
        return Pulled(rows, positions, stacks, on_ps)

    def push(self, pulled: Pulled, row_grads: Sequence, learning_rate: float, after) -> list:
        """Each table's SGD step on the rows this rank touched: -lr x gradient, scatter-added on the
        ps that holds each row (ResourceScatterAdd). To each ps goes one tensor of updates, made once
        `after` (a scalar, an exact 0) exists (sent beside the all-reduce, they slowed its ring more
        than they gained); the indices are the pull's, already there."""
        from tfbench.framework.tf_import import tf

        n = len(self.stacks)
        steps = {t: tf.dynamic_partition(grad * tf.constant(-learning_rate, grad.dtype), stack, n)
                 for (t, stack), grad in zip(pulled.stacks.items(), row_grads)}
        ops = []
        for ps in pulled.on_ps:
            stack = self.stacks[ps.stack]
            updates = tf.concat([steps[t][ps.stack] for t in ps.tables], 0)
            updates += tf.cast(after, updates.dtype)
            with tf.device(stack.device):
                ops.append(tf.raw_ops.ResourceScatterAdd(resource=stack.variable.handle, indices=ps.indices,
                                                         updates=updates))
        return ops

    def _split(self, t: int, ids):
        """(stack index, row within the stack) of each id of table t."""
        from tfbench.framework.tf_import import tf

        starts = tf.constant(self.offsets[t], ids.dtype)
        j = tf.searchsorted(starts, ids, side="right", out_type=tf.int32) - 1
        stack = tf.gather(tf.constant([s for s, _ in self.holder[t]], tf.int32), j)
        shift = tf.constant([first - start for (_, first), start in zip(self.holder[t], self.offsets[t])], ids.dtype)
        return stack, tf.cast(ids + tf.gather(shift, j), tf.int32)  # a stack holds < 2**31 rows

    def serve(self, layers) -> None:
        """Every Embedding layer of the model (in table order) reads its rows through the stacks
        instead of its ShardedVariable: in the step being traced, the rows its pull brought (feed);
        in any other graph (held-out evaluation), a pull of its own ids."""
        for t, layer in enumerate(layers):
            layer.call = self._reader(t, layer.output_dim)

    def feed(self, pulled: Pulled) -> None:
        """The pulled rows that the layers read in the step being traced."""
        self.current = {t: (pulled.rows[t], pulled.positions[t]) for t in pulled.rows}

    def _reader(self, t: int, dim: int):
        from tfbench.framework.tf_import import tf

        def call(inputs):
            rows, position = self.current.get(t, (None, None))
            if getattr(rows, "graph", None) is not tf.compat.v1.get_default_graph():
                pulled = self.pull({t: inputs})
                rows, position = pulled.rows[t], pulled.positions[t]
            return tf.reshape(tf.gather(rows, position), [-1, *inputs.shape[1:], dim])

        return call

    def whole(self, t: int):
        """Table t's rows in order, read from the stacks on the ps (numpy)."""
        import numpy as np

        from tfbench.framework.tf_import import tf

        parts = []
        for piece, (s, first) in zip(self.tables[t].variables, self.holder[t]):
            stack = self.stacks[s]
            with tf.device(stack.device):
                parts.append(tf.raw_ops.ResourceGather(resource=stack.variable.handle, dtype=stack.variable.dtype,
                                                       indices=tf.range(first, first + int(piece.shape[0]))).numpy())
        return np.concatenate(parts)
