"""A synchronous global step's sparse gradients of one embedding-table shard, held on its ps with
no state per row of the table: what TensorFlow 1's SparseConditionalAccumulator did for
SyncReplicasOptimizer (its ops remain in TF 2.21 but take reference-typed handles, which the
ClusterCoordinator's functions cannot pass), as variables.

Each worker owns one slot per shard: the rows its gradient touched there (their ids and values)
and how many. A worker's closure overwrites its slot whole (ids and values scattered into its
first k places, then k), so a closure run again after a lost result writes the same slot again
instead of adding twice. The apply, on the ps, reads the N counts, gathers the filled places only,
sums the rows two workers share (tf.unique, unsorted_segment_sum), scatters the update into those
rows of the shard and sets the counts to 0: it costs the rows the step touched, never the shard.

A slot holds at most `capacity` rows per worker: the ids one worker's batch looks up in the table
(tfbench.models.tables.ids_per_example), or the shard's rows when that bound is unknown.
"""
from __future__ import annotations


class RowSlots:
    """The slots of one table shard (`piece`), on the ps that holds it."""

    def __init__(self, strategy, piece, num_workers: int, capacity: int):
        from tfbench.framework.tf_import import tf

        self.piece, self.num_workers = piece, num_workers
        self.capacity = max(1, min(int(capacity), int(piece.shape[0])))
        width = list(piece.shape[1:])
        with strategy.extended.colocate_vars_with(piece):
            self.ids = tf.Variable(tf.zeros([num_workers, self.capacity], tf.int64), trainable=False,
                                   name="slot_row_ids")
            self.values = tf.Variable(tf.zeros([num_workers, self.capacity, *width], piece.dtype), trainable=False,
                                      name="slot_row_values")
            self.counts = tf.Variable(tf.zeros([num_workers], tf.int64), trainable=False, name="slot_row_counts")

    @property
    def variables(self) -> list:
        return [self.ids, self.values, self.counts]

    def put(self, worker, ids, values) -> list:
        """Ops (on the ps) that write a worker's rows of this shard into its slot: ids [k], values [k, ...]."""
        from tfbench.framework.tf_import import tf

        with tf.device(self.piece.device):
            k = tf.size(ids, out_type=tf.int64)
            places = tf.stack([tf.fill([k], worker), tf.range(k, dtype=tf.int64)], axis=1)
            wrote = [self.ids.scatter_nd_update(places, ids), self.values.scatter_nd_update(places, values)]
            with tf.control_dependencies(wrote):
                return [self.counts.scatter_nd_update([[worker]], [k])]

    def apply(self, learning_rate: float) -> None:
        """On the ps: the shard's touched rows -= learning_rate x their summed gradients; the slots emptied."""
        from tfbench.framework.tf_import import tf

        counts = self.counts.read_value()
        workers = tf.repeat(tf.range(self.num_workers, dtype=tf.int64), counts)
        places = tf.stack([workers, tf.ragged.range(counts).flat_values], axis=1)
        ids, values = self.ids.gather_nd(places), self.values.gather_nd(places)
        rows, which = tf.unique(ids)
        summed = tf.math.unsorted_segment_sum(values, which, tf.size(rows))
        tf.raw_ops.ResourceScatterSub(resource=self.piece.handle, indices=rows,
                                      updates=summed * tf.cast(learning_rate, summed.dtype))
        self.counts.assign(tf.zeros_like(counts), read_value=False)


def rows_in(gradient, offset: int, rows: int):
    """(ids relative to the shard, values) of a sparse gradient's rows inside [offset, offset + rows)."""
    from tfbench.framework.tf_import import tf

    inside = tf.logical_and(gradient.indices >= offset, gradient.indices < offset + rows)
    return (tf.cast(tf.boolean_mask(gradient.indices, inside), tf.int64) - offset,
            tf.boolean_mask(gradient.values, inside))
