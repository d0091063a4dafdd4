"""Emulated compute (--compute=emulated): a worker's forward and backward pass replaced by a wait
that uses no CPU, inside the traced step, so that the strategy's protocol runs for real while the
computation it waits for takes its measured time (DieCast's time dilation, Gupta et al., NSDI
2008, applied to the compute alone).

One emulated step, in order, on the worker's device:

1. the pulls: every trainable variable read where a real forward pass reads it (a parameter
   server's variables cross the link; a replica's are local) and one element of each read taken
   on the worker, beside its batch, so that the whole tensor reaches it; an embedding table's
   rows are looked up as the model looks them up (the batch's unique ids);
2. the wait: `compute_ms` of tf.data's sleep transformation (tf.raw_ops.SleepDataset) on a
   one-element dataset made of what the pulls and the batch gave and of the dense gradients,
   taken whole (DatasetToSingleElement): the step's critical path sleeps, the cores stay free;
3. the gradients: for each variable, through the same tape (Horovod's all-reducing one too) and
   loss scaling as a real step, a custom gradient: a dense variable's is a constant of its shape
   and dtype, made once when the step's kernels are made (before any step is timed) and handed
   out by the wait, so that nothing downstream sees a constant (grappler folded Horovod's
   all-reduce of a constant gradient away: 0.16 of 150 MB crossed the link); a table's is one row
   per unique id of the batch, made after the wait, so its gradient is the IndexedSlices of a
   real step.

What follows (the all-reduce, the push, the ps's accumulation and apply, the optimizer's update,
the synchronisation) is the strategy's own code, unchanged: tfbench.loop.steps.shaped calls this
module in place of the model. The values are not the model's: nothing learns (validation refuses
convergence runs).
"""
from __future__ import annotations

import weakref
from typing import List, Sequence

from tfbench.framework.tf_import import tf
from tfbench.models.dlrm import sparse_rows
from tfbench.models.tables import embedding_tables, table_parts

GRADIENT = 2.0 ** -10  # every element of an emulated gradient: small, exact in fp16, never zero


def wait(token, milliseconds: float, payload: Sequence = ()) -> List:
    """[token, *payload] after a sleep of `milliseconds` on the step's critical path: a one-element
    dataset of them slept over and taken once (Take 1: the look for a second element does not
    sleep again), whole (DatasetToSingleElement: a kernel that blocks its thread, not a core). The
    payload's tensors come out as they went in (no copy), released by the wait."""
    components = [token, *payload]
    spec = dict(output_types=[c.dtype for c in components], output_shapes=[c.shape for c in components])
    dataset = tf.raw_ops.TensorDataset(components=components, output_shapes=spec["output_shapes"])
    dataset = tf.raw_ops.SleepDataset(input_dataset=dataset, sleep_microseconds=tf.constant(
        int(round(milliseconds * 1e3)), tf.int64), **spec)
    dataset = tf.raw_ops.TakeDataset(input_dataset=dataset, count=tf.constant(1, tf.int64), **spec)
    return tf.raw_ops.DatasetToSingleElement(dataset=dataset, **spec)


# The wait of a task's first replica, per traced step (its graph). A task of several replicas
# (MirroredStrategy's local devices) computes them at once; their waits, each blocking the thread
# that runs its device's part of the step, ran one after the other (50 + 50 ms for two,
# measured; an iterator per wait, whose kernel does not block, costs 7-20 ms more per step).
# So the replicas share one wait: the step waits the compute of one replica, as their parallel
# compute takes.
_FIRST_REPLICA_WAIT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _task_wait(token, milliseconds: float, payload: Sequence, shared: bool) -> List:
    if not shared:
        return wait(token, milliseconds, payload)
    graph = tf.compat.v1.get_default_graph()
    if graph not in _FIRST_REPLICA_WAIT:
        _FIRST_REPLICA_WAIT[graph] = wait(token, milliseconds, payload)
    return _FIRST_REPLICA_WAIT[graph]


def _released(value, gradient):
    """`value` seen by the tape as a scalar whose gradient is `gradient(value)` (called when the
    tape differentiates, once the wait has been traced)."""

    @tf.custom_gradient
    def touch(x):
        def backward(upstream):
            with tf.control_dependencies([upstream]):
                return tf.identity(gradient(x))

        return tf.cast(tf.reshape(x, [-1])[0], tf.float32), backward

    return touch(value)


def loss(config, model, features):
    """The emulated step's value (a float32 scalar: the wait's output) with every trainable
    variable of `model` read as a real step reads it; inside a GradientTape, each variable's
    gradient comes after the wait (module docstring). A forward step is the same without the tape."""
    batch = tf.nest.flatten(features)[0]
    waited: List = []  # the wait's outputs: [token, each dense gradient in variable order]
    touched, dense = [], []
    # The reads themselves stay outside the batch's colocation: a resource op runs where its
    # variable lives, and one inside the batch's group made the placer move parts of the group
    # (the splats, the reads' consumers) next to a ps. A parameter server's emulated step then
    # carried 1.4-1.6x the bytes of its real one on its links, and ran 44% slower than it (dlrm_criteo,
    # 2 workers, 2 ps, 100 Mbit/s). Only what consumes the reads sits beside the batch.
    # A table (whole, mirrored, or the ShardedVariable whose shards a parameter server holds): the
    # rows the model looks up, the batch's unique ids, read as the model reads them (never whole),
    # so that the table's (each shard's) gradient is the IndexedSlices of a real step.
    for table, ids in zip(embedding_tables(model), config.workload.table_ids(features)):
        rows = sparse_rows(table, tf.unique(tf.reshape(tf.cast(ids, tf.int64), [-1]))[0])
        with tf.compat.v1.colocate_with(batch):  # on the worker, beside its batch: the rows cross to it
            touched.append(_released(rows, _rows_after(waited)))
    tables = table_parts(model)
    for variable in model.trainable_variables:
        if id(variable) in tables:
            continue
        k = len(dense)
        value = tf.convert_to_tensor(variable)
        with tf.compat.v1.colocate_with(batch):  # the read crosses to the worker
            if config.mode == "train":
                dense.append(tf.constant(GRADIENT, variable.dtype, variable.shape))  # a splat, made once
            touched.append(_released(value, lambda _, k=k: waited[1 + k]))
    with tf.compat.v1.colocate_with(batch):
        token = tf.add_n(touched) + tf.cast(tf.reshape(batch, [-1])[0], tf.float32)
        waited += _task_wait(token, config.compute_ms, dense, shared=config.effective_num_local_devices > 1)
        return tf.stop_gradient(waited[0]) + tf.add_n(touched) * 0.0


def _rows_after(waited: List):
    """A table's gradient: a row for each row looked up (the batch's unique ids), made after the wait."""

    def gradient(rows):
        with tf.control_dependencies([waited[0]]):
            return tf.fill(tf.shape(rows), tf.constant(GRADIENT, rows.dtype))

    return gradient


def pulled_gradients(config, features, dense_variables: Sequence, rows: Sequence):
    """A step whose strategy pulls a table's rows itself before the forward pass (the hybrid's
    ranks): (value, the dense gradients, one gradient row per pulled row), after a wait of
    `compute_ms` that starts once the rows and the batch are in hand. The dense gradients are
    splats of each variable's shape made once and handed out by the wait, as in `loss`; a row's
    is made after the wait."""
    batch = tf.nest.flatten(features)[0]
    token = tf.cast(tf.reshape(batch, [-1])[0], tf.float32)
    for r in rows:  # the wait starts once every pulled row is here (a value of each: nothing folds it away)
        token += tf.cast(tf.reduce_sum(tf.reshape(r, [-1])[:1]), tf.float32)
    dense = [tf.constant(GRADIENT, v.dtype, v.shape) for v in dense_variables]
    waited = wait(token, config.compute_ms, dense)
    with tf.control_dependencies([waited[0]]):
        row_grads = [tf.fill(tf.shape(r), tf.constant(GRADIENT, r.dtype)) for r in rows]
    return waited[0], list(waited[1:]), row_grads
