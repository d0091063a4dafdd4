"""Synchronous parameter-server training, done where a parameter server does it: on the ps.

One global step = exactly one gradient from every worker, gathered next to its variables on the ps
tasks, then one SGD update applied on the ps. Like SyncReplicasOptimizer, nothing of size |w|
travels through a worker except the worker's own pull of the weights and push of its gradient:

- each worker's scheduled closure computes its gradient and adds it on the ps: a dense variable's
  into an accumulator beside it (`assign_add`), an embedding table's rows into that worker's slot
  of each table shard (strategies.parameter_server.row_slots: ids and values, no state per row of
  the table), so that the update of a table costs the rows the step touched;
- a guard on the ps (`last_step[worker] == step`) makes a closure that lands on a worker that
  already contributed to this step add nothing; the coordinator checks after every step that
  all N workers contributed and schedules again for the missing ones, or fails loudly;
- the update is a tf.function the coordinator calls itself, with every op under the device of
  the ps that holds the variable: the coordinator only dispatches it and fetches a scalar.

The update is SGD without momentum (w -= lr * g), exactly tfbench's optimizer (steps.optimizer),
which the aggregation test checks against a single-device Keras step.
"""
from __future__ import annotations

import dataclasses
import time
from typing import List

from strategies.parameter_server.ops import in_hand, on_this_worker, packed, settled
from strategies.parameter_server.row_slots import RowSlots, rows_in
from tfbench.loop import steps
from tfbench.models.tables import ids_per_example, table_parts

# Scheduling rounds a global step may take before a missing worker is an error, unless the
# step is still young (a worker restarted after a fault needs seconds to serve again).
MAX_RESCHEDULES = 20
WAIT_BETWEEN_ROUNDS_S = 0.05  # a round that brought no gradient: pause before scheduling again


class MissingGradient(RuntimeError):
    """A global step could not get a gradient from every worker."""


@dataclasses.dataclass
class GlobalStep:
    """What the coordinator saw of one synchronous global step."""

    start_wall: float
    duration_s: float
    closures: List[dict]  # the contributing closures (strategies.parameter_server.rounds.fetched), with "staleness"
    skipped: int  # closures that landed on a worker that had already contributed
    apply_s: float  # the update on the ps, as the coordinator saw it


def parts(variable) -> list:
    """The pieces a variable is stored as: shards of a ShardedVariable, else itself."""
    return list(getattr(variable, "variables", None) or [variable])


def split_like(gradient, pieces):
    """A whole-variable gradient cut like the variable's shards (along the first axis)."""
    from tfbench.framework.tf_import import tf

    if len(pieces) == 1:
        return [gradient]
    return tf.split(tf.convert_to_tensor(gradient), [int(p.shape[0]) for p in pieces], axis=0)


class SyncOnPs:
    """Accumulators, the contribution guard and the two functions of a synchronous global step."""

    def __init__(self, strategy, coordinator, model, optimizer, config, num_workers: int, device: str, log):
        from tfbench.framework.tf_import import tf

        self.strategy, self.coordinator, self.config, self.device = strategy, coordinator, config, device
        self.model, self.optimizer, self.num_workers = model, optimizer, num_workers
        self.pieces = [parts(v) for v in model.trainable_variables]
        tables, lookups = table_parts(model), ids_per_example(model)  # a table's gradient: IndexedSlices
        with strategy.scope():
            # per variable: a dense accumulator per piece, or (a table) the row slots of each shard
            self.accumulators, self.slots = [], []
            for variable, pieces in zip(model.trainable_variables, self.pieces):
                accs, slots = [], []
                for piece in pieces:
                    if id(variable) in tables:
                        per_example = lookups.get(id(variable)) or lookups.get(id(piece))
                        capacity = config.batch_size * per_example if per_example else int(piece.shape[0])
                        slots.append(RowSlots(strategy, piece, num_workers, capacity))
                        continue
                    with strategy.extended.colocate_vars_with(piece):
                        accs.append(tf.Variable(tf.zeros(piece.shape, piece.dtype), trainable=False,
                                                name="grad_accumulator"))
                self.accumulators.append(accs)
                self.slots.append(slots)
            with strategy.extended.colocate_vars_with(self.pieces[0][0]):
                # the global step each worker last contributed to; only worker w writes entry w
                self.last_step = tf.Variable(tf.fill([num_workers], tf.constant(-1, tf.int64)),
                                             trainable=False, name="last_contribution")
        self.flat_accumulators = [a for accs in self.accumulators for a in accs] + [
            v for slots in self.slots for slot in slots for v in slot.variables]
        self.log = log  # a strategies.parameter_server.ops.PsLog: closure results lost with their worker
        self.worker_step = self._worker_step()
        self.apply = self._apply()

    def _worker_step(self):
        from tfbench.framework.tf_import import tf

        model, optimizer, config, strategy = self.model, self.optimizer, self.config, self.strategy
        global_batch = config.batch_size * self.num_workers
        accumulators, pieces, last_step, slots = self.accumulators, self.pieces, self.last_step, self.slots
        written = self.flat_accumulators
        device, iterations = self.device, self.optimizer.iterations  # the global step: the version

        def contribute(images, labels, worker, step):
            with tf.device(device):  # the worker's own device: the call's job/task fill the rest
                # compute ends (computed), the push into the accumulators begins
                loss, computed, grads = steps.shaped(config, model, optimizer, images, labels, global_batch,
                                                     apply=False)
            adds = []
            for accs, var_pieces, g, table_slots in zip(accumulators, pieces, grads, slots):
                if table_slots:  # a table: its rows into this worker's slot of each shard
                    offset = 0
                    if not isinstance(g, tf.IndexedSlices):
                        raise TypeError(f"synchronous ps: the embedding table {table_slots[0].piece.name} got a "
                                        f"dense gradient; its slots hold the rows of sparse (IndexedSlices) ones")
                    for slot in table_slots:
                        adds += slot.put(worker, *rows_in(g, offset, int(slot.piece.shape[0])))
                        offset += int(slot.piece.shape[0])
                    continue
                for acc, piece in zip(accs, split_like(g, var_pieces)):
                    adds.append(acc.assign_add(piece, read_value=False))
            with tf.control_dependencies(adds):
                mark = last_step.scatter_nd_update([[worker]], [step])
            with tf.control_dependencies([mark]):
                return settled(loss, written), computed

        def replica_fn(images, labels, worker, step):
            with tf.control_dependencies([in_hand((images, labels))]):
                return contribute(images, labels, worker, step)

        def with_batch(iterator, worker, step):
            """A fresh closure: the worker's next batch, its gradient pushed."""
            images, labels, _ = next(iterator)
            got = in_hand((images, labels))
            with tf.control_dependencies([got]):  # the closure's reads from the ps count from the batch on
                loss, computed = on_this_worker(strategy.run(replica_fn, args=(images, labels, worker, step)))
            return loss, got, computed

        @tf.function(jit_compile=config.xla or None)
        def worker_step(iterator, step):
            """One closure: read the version (strategies.parameter_server.staleness) and whether this worker
            already gave this global step its gradient; only a fresh closure takes a batch, so that every
            worker's k-th batch is the one of global step k."""
            start = tf.timestamp()
            worker = tf.cast(tf.distribute.coordinator.experimental_get_current_worker_index(), tf.int64)
            with tf.control_dependencies([start]):
                read = iterations.read_value()  # before the weights
            with tf.control_dependencies([read]):
                fresh = tf.not_equal(tf.gather(last_step.read_value(), worker), step)
            loss, got, computed = tf.cond(fresh, lambda: with_batch(iterator, worker, step),
                                          lambda: (tf.constant(0.0, tf.float32), tf.timestamp(), tf.timestamp()))
            with tf.control_dependencies([loss, computed]):
                end = tf.timestamp()
            return packed({"loss": loss, "start": start, "input": got, "computed": computed, "end": end,
                           "worker": worker, "fresh": fresh, "read": read})

        return worker_step

    def _apply(self):
        from tfbench.framework.tf_import import tf

        learning_rate = float(self.config.learning_rate)
        dense = [(piece, acc) for var_pieces, accs in zip(self.pieces, self.accumulators)
                 for piece, acc in zip(var_pieces, accs)]
        slots = [slot for table_slots in self.slots for slot in table_slots]
        iterations = self.optimizer.iterations

        @tf.function
        def apply_on_ps():
            for piece, acc in dense:
                with tf.device(acc.device):  # the ps holding both: nothing of size |w| leaves it
                    gradient = acc.read_value()
                    piece.assign_sub(gradient * tf.cast(learning_rate, gradient.dtype), read_value=False)
                    acc.assign(tf.zeros_like(gradient), read_value=False)
            for slot in slots:
                with tf.device(slot.piece.device):  # the touched rows of the shard, on its ps
                    slot.apply(learning_rate)
            with tf.device(iterations.device):
                count = iterations.assign_add(1)
            return settled(count, [p for p, _ in dense] + [a for _, a in dense] + [s.piece for s in slots]
                           + [v for s in slots for v in s.variables])

        return apply_on_ps

    def run_step(self, iterator, step: int) -> GlobalStep:
        """One global step, timed from scheduling the gradients to the update applied on the ps."""
        from strategies.parameter_server.rounds import fetched
        from tfbench.framework.tf_import import tf

        n, schedule = self.num_workers, self.coordinator.schedule
        step_tensor = tf.constant(step, tf.int64)
        start_wall, t0 = time.time(), time.perf_counter()
        contributed, closures, skipped, rounds = set(), [], 0, 0
        while len(contributed) < n:
            if rounds > MAX_RESCHEDULES and time.perf_counter() - t0 > self.config.stall_timeout:
                missing = sorted(set(range(n)) - contributed)
                raise MissingGradient(f"synchronous ps: worker(s) {missing} contributed no gradient to "
                                      f"global step {step} after {rounds} scheduling rounds and "
                                      f"{self.config.stall_timeout:g} s (--stall_timeout)")
            before = len(contributed)
            values = [schedule(self.worker_step, args=(iterator, step_tensor))
                      for _ in range(n - len(contributed))]
            self.coordinator.join()
            for value in values:
                closure = fetched(value, self.log)  # None: lost with its worker, which is asked again
                if closure is None:
                    continue
                if closure["fresh"]:
                    closures.append(closure)
                else:  # the guard found this worker's gradient in the step already (e.g. its result was lost)
                    skipped += 1
                contributed.add(closure["worker"])
            if rounds and len(contributed) == before:
                time.sleep(WAIT_BETWEEN_ROUNDS_S)
            rounds += 1
        if len({c["worker"] for c in closures}) != len(closures):  # one gradient per worker, no more
            raise MissingGradient(f"synchronous ps: global step {step} got gradients from workers "
                                  f"{sorted(c['worker'] for c in closures)}, expected each of 0..{n - 1} once")
        a0 = time.perf_counter()
        version = int(self.apply().numpy())  # the global step this update made
        t1 = time.perf_counter()
        for c in closures:  # staleness: 0 when the update is the global step the gradient was read for
            c["applied"] = version
            c["staleness"] = version - 1 - c["read"]
        return GlobalStep(start_wall, t1 - t0, closures, skipped, t1 - a0)

