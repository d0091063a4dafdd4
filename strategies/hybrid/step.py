"""The hybrid's traced step and the marks (tf.timestamp, host clock) that split it.

train, in this order on every rank:
  t0 start | wait: a Horovod all-reduce of one value, done once every rank has started this step,
  so every rank's last pushes have landed and no pull misses a row of the last global step |
  t_ready | pull: the batch's rows from the ps | t_pull | compute: forward and backward | t1
  | all-reduce: the dense gradients summed over the ranks (Horovod), which also waits for the
  slowest rank's gradients, so every rank has pulled | t2 | push: the rows' SGD step scatter-added
  on the ps | t3 | apply: the dense update.
The tables thus get exactly one update per global step, every rank's rows summed, as the
synchronous parameter server's. forward: t0 | pull | t_pull | the forward pass | t1.

Why the wait comes first: the pull's requests (the rows asked of each ps, made beside the wait)
leave every rank as the wait ends, all at once. A ps on a rank's host sends the rows that other
ranks asked for over that host's link, and a request sent once such rows have begun to flow waits
behind them in the link's queue: with the wait at the end of the step, 2 ranks on 25 Mbit/s links
sent their requests up to 5 ms apart, and in 2 steps of 3 one rank's request reached the other ps
20-46 ms late, its pull taking 75-78 ms where the other's took 40.

The order is carried by data, not by control dependencies: Horovod's ops are registered as not
stateful, and TensorFlow's graph optimiser (Grappler) drops a control edge into a Horovod op and
folds an all-reduce of a constant away. `gate(x)` is an exact zero computed from x that the
optimiser cannot fold, added to what must wait for x.
"""
from __future__ import annotations

import dataclasses
from typing import List

# The parts of a train step, in order, between its marks (and the host's end of the step).
PARTS = ("wait", "pull", "compute", "allreduce", "push", "apply")
MARKS = 6  # t0, t_ready, t_pull, t1, t2, t3


def gate(x, dtype):
    """0 of `dtype`, computed from x: whatever adds it waits for x (|x| summed is never < 0)."""
    from tfbench.framework.tf_import import tf

    return tf.cast(tf.reduce_sum(tf.abs(tf.cast(x, tf.float64))) < 0.0, dtype)


def after(tensors, tf):
    """tf.timestamp() once every tensor of `tensors` exists."""
    with tf.control_dependencies(list(tensors)):
        return tf.timestamp()


@dataclasses.dataclass(frozen=True)
class HybridMarks:
    """What a step keeps (strategies.base.Marks' fields, and its own marks): when its batch was
    in hand, when every local gradient existed, and t0..t4 and the host's end (seconds)."""

    batch: float
    computed: float
    marks: tuple
    end: float

    def split_s(self) -> dict:
        """Seconds of each part (PARTS); forward steps have pull and compute only (and the host's
        end as apply)."""
        points = [*self.marks, self.end]
        return {part: max(0.0, b - a) for part, a, b in zip(PARTS, points, points[1:])}


def make(adapter, tables, dense_variables: List, table_layers: List):
    """The traced step of one rank: step(batch) -> (value, marks, done), `done` the wait's output
    (zeros without one), which the host fetches."""
    from tfbench.framework.tf_import import tf
    from tfbench.loop import emulated, steps

    config, hvd, model, optimizer = adapter.config, adapter.hvd, adapter.model, adapter.optimizer
    workload, device = config.workload, adapter.device
    global_batch = config.batch_size * hvd.size()
    train = config.mode == "train"
    has_tables = bool(table_layers)

    @tf.function
    def step(batch):
        features, labels = batch
        with tf.device(device):
            t0 = tf.timestamp()
            pulled, rows, done, t_ready = None, [], tf.zeros([1], tf.float64), t0
            if has_tables:
                ids = [x + gate(t0, x.dtype) for x in workload.table_ids(features)]  # the pulls start after t0
                sent = None
                if train:  # the wait; the pull's requests, made meanwhile, leave once it is done
                    done = hvd.allreduce(tf.reshape(t0, [1]), op=hvd.Sum, name="rows_pushed")
                    t_ready, sent = after([done], tf), gate(done, tf.int32)
                pulled = tables.pull(dict(enumerate(ids)), sent)
                tables.feed(pulled)
                rows = list(pulled.rows.values())
            t_pull = after(rows, tf) if rows else t0
            if not train:
                value = (emulated.pulled_gradients(config, features, [], rows)[0] if config.emulated_compute
                         else steps.forward(model, features))
                t1 = after([value], tf)
                return value, tf.stack([t0, t0, t_pull, t1, t1, t1]), done
            if config.emulated_compute:  # a wait once the rows are here, then gradients of their shapes
                loss, dense_grads, row_grads = emulated.pulled_gradients(config, features, dense_variables, rows)
            else:
                with tf.GradientTape() as tape:
                    for r in rows:
                        tape.watch(r)
                    loss = steps.scaled_loss(model, features, labels, global_batch, loss=workload.per_example_loss)
                grads = tape.gradient(loss, list(dense_variables) + rows)
                dense_grads = grads[:len(dense_variables)]
                row_grads = [tf.convert_to_tensor(g) for g in grads[len(dense_variables):]]  # one row per unique id
            t1 = after(dense_grads + row_grads, tf)
            reduced = hvd.grouped_allreduce(dense_grads, op=hvd.Sum)  # the loss is already over the global batch
            t2 = after(reduced, tf)
            t3 = t2
            if has_tables:  # the step returns once its pushes have landed (t3 is an output)
                pushes = tables.push(pulled, row_grads, config.learning_rate,
                                     gate(reduced[-1], tf.float64) + gate(t2, tf.float64))
                t3 = after(pushes, tf)
            optimizer.apply_gradients(zip(reduced, dense_variables))
            return loss, tf.stack([t0, t_ready, t_pull, t1, t2, t3]), done

    return step
