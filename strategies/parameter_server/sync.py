"""Synchronous parameter-server training, done where a parameter server does it: on the ps.

One global step = exactly one gradient from every worker, summed into accumulators that live
next to their variables on the ps tasks, then one SGD update applied on the ps. Like
SyncReplicasOptimizer, nothing of size |w| travels through a worker except the worker's own
pull of the weights and push of its gradient:

- each worker's scheduled closure computes its gradient and `assign_add`s it into the
  accumulators (the op runs on the ps where the accumulator lives);
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
from tfbench.loop import steps
from tfbench.models.tables import table_parts

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


def add_rows(gradient, pieces, accumulators, touched) -> list:
    """A sparse gradient (IndexedSlices) added row by row into the accumulators of the variable's
    shards, each row marked touched: only the rows cross the link to their ps."""
    from tfbench.framework.tf_import import tf

    ops, offset = [], 0
    for piece, acc, mark in zip(pieces, accumulators, touched):
        rows = int(piece.shape[0])
        inside = tf.logical_and(gradient.indices >= offset, gradient.indices < offset + rows)
        index = tf.cast(tf.boolean_mask(gradient.indices, inside) - offset, tf.int64)
        ops.append(tf.raw_ops.ResourceScatterAdd(resource=acc.handle, indices=index,
                                                 updates=tf.boolean_mask(gradient.values, inside)))
        ops.append(tf.raw_ops.ResourceScatterUpdate(resource=mark.handle, indices=index,
                                                    updates=tf.ones_like(index, tf.bool)))
        offset += rows
    return ops


def apply_rows(piece, acc, mark, learning_rate: float) -> None:
    """The update of a table's shard on its ps: its touched rows only, then their accumulator and marks cleared."""
    from tfbench.framework.tf_import import tf

    index = tf.where(mark.read_value())[:, 0]
    gradient = tf.gather(acc.read_value(), index)
    tf.raw_ops.ResourceScatterSub(resource=piece.handle, indices=index,
                                  updates=gradient * tf.cast(learning_rate, gradient.dtype))
    tf.raw_ops.ResourceScatterUpdate(resource=acc.handle, indices=index, updates=tf.zeros_like(gradient))
    tf.raw_ops.ResourceScatterUpdate(resource=mark.handle, indices=index, updates=tf.zeros_like(index, tf.bool))


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
        tables = table_parts(model)  # their gradients are IndexedSlices
        with strategy.scope():
            self.accumulators, self.touched = [], []
            for variable, pieces in zip(model.trainable_variables, self.pieces):
                accs, marks = [], []
                for piece in pieces:
                    with strategy.extended.colocate_vars_with(piece):
                        accs.append(tf.Variable(tf.zeros(piece.shape, piece.dtype), trainable=False,
                                                name="grad_accumulator"))
                        if id(variable) in tables:  # which rows a global step touched
                            marks.append(tf.Variable(tf.zeros([piece.shape[0]], tf.bool), trainable=False,
                                                     name="touched_rows"))
                self.accumulators.append(accs)
                self.touched.append(marks)
            with strategy.extended.colocate_vars_with(self.pieces[0][0]):
                # the global step each worker last contributed to; only worker w writes entry w
                self.last_step = tf.Variable(tf.fill([num_workers], tf.constant(-1, tf.int64)),
                                             trainable=False, name="last_contribution")
        self.flat_accumulators = [a for accs in self.accumulators for a in accs]
        self.log = log  # a strategies.parameter_server.ops.PsLog: closure results lost with their worker
        self.worker_step = self._worker_step()
        self.apply = self._apply()

    def _worker_step(self):
        from tfbench.framework.tf_import import tf

        model, optimizer, config, strategy = self.model, self.optimizer, self.config, self.strategy
        global_batch = config.batch_size * self.num_workers
        accumulators, pieces, last_step, touched = self.accumulators, self.pieces, self.last_step, self.touched
        device, iterations = self.device, self.optimizer.iterations  # the global step: the version

        def contribute(images, labels, worker, step):
            with tf.device(device):  # the worker's own device: the call's job/task fill the rest
                # compute ends (computed), the push into the accumulators begins
                loss, computed, grads = steps.shaped(config, model, optimizer, images, labels, global_batch,
                                                     apply=False)
            adds = []
            for accs, var_pieces, g, marks in zip(accumulators, pieces, grads, touched):
                if isinstance(g, tf.IndexedSlices) and marks:
                    adds += add_rows(g, var_pieces, accs, marks)
                    continue
                for acc, piece in zip(accs, split_like(g, var_pieces)):
                    adds.append(acc.assign_add(piece, read_value=False))
            with tf.control_dependencies(adds):
                mark = last_step.scatter_nd_update([[worker]], [step])
            with tf.control_dependencies([mark]):
                return settled(loss, [a for accs in accumulators for a in accs]), computed

        def replica_fn(images, labels, worker, step):
            read = iterations.read_value()  # the version of strategies.parameter_server.staleness, before the weights
            with tf.control_dependencies([read]):
                fresh = tf.not_equal(tf.gather(last_step.read_value(), worker), step)
                loss, computed = tf.cond(fresh, lambda: contribute(images, labels, worker, step),
                                         lambda: (tf.constant(0.0, tf.float32), tf.timestamp()))
            return loss, computed, fresh, read

        @tf.function(jit_compile=config.xla or None)
        def worker_step(iterator, step):
            start = tf.timestamp()
            with tf.control_dependencies([start]):
                images, labels, worker = next(iterator)
            got = in_hand((images, labels, worker))
            with tf.control_dependencies([got]):  # the closure's reads from the ps count from the batch on
                loss, computed, fresh, read = on_this_worker(
                    strategy.run(replica_fn, args=(images, labels, tf.cast(worker, tf.int64), step)))
            with tf.control_dependencies([loss, computed, fresh, read]):
                end = tf.timestamp()
            return packed({"loss": loss, "start": start, "input": got, "computed": computed, "end": end,
                           "worker": worker, "fresh": fresh, "read": read})

        return worker_step

    def _apply(self):
        from tfbench.framework.tf_import import tf

        learning_rate = float(self.config.learning_rate)
        pairs = [(piece, acc, marks[i] if marks else None)
                 for var_pieces, accs, marks in zip(self.pieces, self.accumulators, self.touched)
                 for i, (piece, acc) in enumerate(zip(var_pieces, accs))]
        iterations = self.optimizer.iterations

        @tf.function
        def apply_on_ps():
            for piece, acc, mark in pairs:
                with tf.device(acc.device):  # the ps holding both: nothing of size |w| leaves it
                    if mark is not None:
                        apply_rows(piece, acc, mark, learning_rate)
                        continue
                    gradient = acc.read_value()
                    piece.assign_sub(gradient * tf.cast(learning_rate, gradient.dtype), read_value=False)
                    acc.assign(tf.zeros_like(gradient), read_value=False)
            with tf.device(iterations.device):
                count = iterations.assign_add(1)
            return settled(count, [p for p, _, _ in pairs] + [a for _, a, _ in pairs])

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

