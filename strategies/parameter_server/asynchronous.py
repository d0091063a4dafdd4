"""Asynchronous parameter-server training: the scheduled update (its rounds: strategies.parameter_server.rounds).

Each scheduled closure is one update of whichever worker runs it: read the version counter
(strategies.parameter_server.staleness), pull the weights, compute the gradients, push the update, then count it.
As in TensorFlow's parameter-server tutorial, the counter and the weights are read as the closure
starts, beside its batch: nothing waits for the batch but the ops that use it (the rows' lookups,
the compute). Under a staleness bound the clocks, then the counter, then the weights are read
once the batch is in hand, in that order. The count waits for the optimizer's own count of the
update (the legacy optimizers increment their `iterations` once every write of the update is
done; ops.counted), on the same ps: one local op more than the tutorial's step. Ordering the
reads after the batch and the counter, and the count after a shape mark of every variable part,
made the recommender's updates 1.28× slower on 2 shared cores (README: the parameter-server peer).
Its record carries four worker-side timestamps (start, batch in hand, gradients computed, update
applied) so that an update's time splits into input, pull + compute and push. The closure returns
it, or, given a book (strategies.parameter_server.book), writes it on its worker and returns only its
end (strategies.parameter_server.rounds.KeptRounds).

Bounded staleness (--ps_staleness_bound=s, stale-synchronous parallel): a clock per worker on the
ps counts its applied updates. A closure starts its update only if its worker's clock is at most
s ahead of the slowest worker's; otherwise it returns at once without an update (fresh=False)
and the coordinator schedules another closure in its place: a blocked worker polls by running
such empty closures, which the record counts. s=0 keeps workers in lockstep (every update at
clock c reads every worker's first c updates); unbounded (-1) is plain asynchronous training.
"""
from __future__ import annotations

from strategies.parameter_server.ops import counted, in_hand, on_this_worker, packed, reads_beside_batch
from tfbench.loop import steps


RECORD = ("loss", "start", "input", "computed", "end", "worker", "fresh", "read", "applied")


def worker_step(adapter, book=None):
    """The scheduled function: (iterator) -> the update's worker-side facts (packed); with a book,
    its end, the facts written in the book."""
    from tfbench.framework.tf_import import tf

    config, model, optimizer, strategy = adapter.config, adapter.model, adapter.optimizer, adapter.strategy
    variables, device, bound = model.trainable_variables, adapter.device, config.ps_staleness_bound
    # the version counter and the clocks live beside the optimizer's count of its updates: the
    # count after it is an op on the same ps, not a message from another
    with strategy.scope(), strategy.extended.colocate_vars_with(optimizer.iterations):
        version = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="update_version")
        clocks = tf.Variable(tf.zeros([adapter.num_workers], tf.int64), trainable=False,
                             name="worker_clocks") if bound >= 0 else None

    def update(images, labels, worker):
        read = version.read_value()
        # unbounded: as the closure starts, beside the weights' reads; under a bound, before them:
        # staleness.clock_staleness takes every update counted by the version read to be in the weights
        with tf.control_dependencies([] if reads_beside_batch(False, bound) else [read]), tf.device(device):
            loss, computed, grads = steps.shaped(config, model, optimizer, images, labels, config.batch_size,
                                                 apply=False)
            applying = optimizer.apply_gradients(zip(grads, variables))
        with tf.control_dependencies(counted(applying, variables)):
            applied = version.assign_add(1)
        if clocks is not None:  # the clock after the version: staleness.clock_staleness relies on it
            with tf.control_dependencies([applied]):
                tick = clocks.scatter_nd_add([[worker]], [tf.constant(1, tf.int64)])
            with tf.control_dependencies([tick]):
                applied = tf.identity(applied)
        return loss, computed, read, applied

    def idle():
        none = tf.constant(-1, tf.int64)
        return tf.constant(0.0, tf.float32), tf.timestamp(), none, none

    def replica_fn(images, labels, worker):
        if config.mode == "forward":
            with tf.device(device):  # the worker's own device: the call's job/task fill the rest
                value, computed, _ = steps.shaped(config, model, optimizer, images, labels, config.batch_size)
            none = tf.constant(-1, tf.int64)
            return value, computed, none, none
        return update(images, labels, worker)

    def run(images, labels, worker):
        return on_this_worker(strategy.run(replica_fn, args=(images, labels, worker)))

    def facts(iterator):
        start = tf.timestamp()
        with tf.control_dependencies([start]):
            images, labels, shard = next(iterator)
        got = in_hand((images, labels, shard))
        worker = tf.cast(shard, tf.int64)
        if clocks is None:
            fresh = tf.constant(True)
            loss, computed, read, applied = run(images, labels, worker)
        else:  # the gate stays outside strategy.run: the optimizer's merge_call must not sit in a cond
            with tf.control_dependencies([got]):  # the clocks, then the weights, from the batch on
                now = clocks.read_value()
                fresh = tf.gather(now, worker) - tf.reduce_min(now) <= bound
                loss, computed, read, applied = tf.cond(fresh, lambda: run(images, labels, worker), idle)
        with tf.control_dependencies([loss, computed, read, applied, fresh]):
            end = tf.timestamp()
        return {"loss": loss, "start": start, "input": got, "computed": computed, "end": end,
                "worker": shard, "fresh": fresh, "read": read, "applied": applied}

    @tf.function(jit_compile=config.xla or None)
    def step(iterator):
        record = facts(iterator)
        if book is None:
            return packed(record)
        ((key, vector),) = packed(record).items()
        with tf.control_dependencies([book.write(key, vector)]):
            return tf.identity(record["end"])

    return step


def pull_step(adapter):
    """A closure that only pulls onto its worker what an update pulls: every dense weight, and the
    rows its batch looks up in each embedding table (unique ids, as the model looks them up): the
    pull measured on its own.

    The reductions are colocated with the worker's input (the batch it just read), so every
    weight crosses the link from its ps. Under the replica's partial device ("/device:CPU:0",
    which every task of the cluster matches) the placer put them beside the variables on the ps,
    and only scalars travelled: the pull looked free."""
    from tfbench.framework.tf_import import tf
    from tfbench.models.tables import dense_variables, embedding_tables

    parts = [p for v in dense_variables(adapter.model) for p in (getattr(v, "variables", None) or [v])]
    tables, workload = embedding_tables(adapter.model), adapter.config.workload

    @tf.function
    def step(iterator):
        features, _, shard = next(iterator)
        start = in_hand(shard)  # the pull alone, never the wait for the batch
        with tf.control_dependencies([start]):
            values = [p.read_value() for p in parts]  # each on its ps
            values += [tf.nn.embedding_lookup(table, tf.unique(tf.reshape(tf.cast(ids, tf.int64), [-1]))[0])
                       for table, ids in zip(tables, workload.table_ids(features))]  # the rows, from their shards
        with tf.compat.v1.colocate_with(shard):
            total = tf.add_n([tf.reduce_sum(tf.cast(v, tf.float32)) for v in values])
        with tf.control_dependencies([total]):
            end = tf.timestamp()
        # `total` is an output: a value only waited on by control edges is pruned by grappler,
        # and the reads with it
        return packed({"start": start, "end": end, "worker": shard, "total": total})

    return step
