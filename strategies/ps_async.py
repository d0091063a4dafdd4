"""Asynchronous parameter-server training: the scheduled update and the coordinator's loops.

Each scheduled closure is one update of whichever worker runs it: read the version counter
(strategies.staleness), pull the weights, compute the gradients, push the update, then count it.
Its outputs carry three worker-side timestamps (start, gradients computed, update applied) so
that an update's time splits into pull + compute and push.

Bounded staleness (--ps_staleness_bound=s, stale-synchronous parallel): a clock per worker on the
ps counts its applied updates. A closure starts its update only if its worker's clock is at most
s ahead of the slowest worker's; otherwise it returns at once without an update (fresh=False)
and the coordinator schedules another closure in its place: a blocked worker polls by running
such empty closures, which the record counts. s=0 keeps workers in lockstep (every update at
clock c reads every worker's first c updates); unbounded (-1) is plain asynchronous training.
"""
from __future__ import annotations

import collections
import time
from typing import List, Optional

from strategies.ps_ops import on_this_worker, settled
from tfbench.loop import steps
from tfbench.loop.step_loop import StepTiming, Timed

PIPELINE_DEPTH = 2  # closures in flight per worker under a staleness bound


def worker_step(adapter):
    """The scheduled function: (iterator) -> dict of the update's worker-side facts."""
    from tfbench.framework.tf_import import tf

    config, model, optimizer, strategy = adapter.config, adapter.model, adapter.optimizer, adapter.strategy
    variables, device, bound = model.trainable_variables, adapter.device, config.ps_staleness_bound
    # the version counter and the clocks live on the ps of the first variable: their ops join
    # that ps' part of the step rather than calling another ps
    with strategy.scope(), strategy.extended.colocate_vars_with(variables[0]):
        version = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="update_version")
        clocks = tf.Variable(tf.zeros([adapter.num_workers], tf.int64), trainable=False,
                             name="worker_clocks") if bound >= 0 else None

    def update(images, labels, worker):
        read = version.read_value()
        with tf.control_dependencies([read]), tf.device(device):  # the counter before the weights
            loss, computed = steps.train_marked(model, optimizer, images, labels, config.batch_size)
        loss = settled(loss, variables)  # outside the partial device: outputs name one device
        with tf.control_dependencies([loss]):
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
                value = tf.identity(steps.forward(model, images))
            with tf.control_dependencies([value]):
                computed = tf.timestamp()
            none = tf.constant(-1, tf.int64)
            return value, computed, none, none
        return update(images, labels, worker)

    def run(images, labels, worker):
        return on_this_worker(strategy.run(replica_fn, args=(images, labels, worker)))

    @tf.function(jit_compile=config.xla or None)
    def step(iterator):
        start = tf.timestamp()
        with tf.control_dependencies([start]):  # variable reads from the ps count too
            images, labels, shard = next(iterator)
            worker = tf.cast(shard, tf.int64)
            if clocks is None:
                fresh = tf.constant(True)
                loss, computed, read, applied = run(images, labels, worker)
            else:  # the gate stays outside strategy.run: the optimizer's merge_call must not sit in a cond
                now = clocks.read_value()
                fresh = tf.gather(now, worker) - tf.reduce_min(now) <= bound
                loss, computed, read, applied = tf.cond(fresh, lambda: run(images, labels, worker), idle)
        with tf.control_dependencies([loss, computed, read, applied, fresh]):
            end = tf.timestamp()
        return {"loss": loss, "start": start, "computed": computed, "end": end, "worker": shard,
                "fresh": fresh, "read": read, "applied": applied}

    return step


def pull_step(adapter):
    """A closure that only pulls every weight onto its worker: the pull measured on its own.

    The reductions are colocated with the worker's input (the batch it just read), so every
    weight crosses the link from its ps. Under the replica's partial device ("/device:CPU:0",
    which every task of the cluster matches) the placer put them beside the variables on the ps,
    and only scalars travelled: the pull looked free."""
    from tfbench.framework.tf_import import tf

    parts = [p for v in adapter.model.trainable_variables for p in (getattr(v, "variables", None) or [v])]

    @tf.function
    def step(iterator):
        start = tf.timestamp()
        with tf.control_dependencies([start]):
            _, _, shard = next(iterator)
        values = [p.read_value() for p in parts]  # each on its ps
        with tf.compat.v1.colocate_with(shard):
            total = tf.add_n([tf.reduce_sum(tf.cast(v, tf.float32)) for v in values])
        with tf.control_dependencies([total]):
            end = tf.timestamp()
        # `total` is an output: a value only waited on by control edges is pruned by grappler,
        # and the reads with it
        return {"start": start, "end": end, "worker": shard, "total": total}

    return step


def fetched(value, log=None) -> Optional[dict]:
    """A closure's RemoteValue as plain Python numbers; None when its result was lost with its
    worker (a closure's outputs stay on the worker until fetched: a worker killed after the
    closure finished takes them along, though the update was applied), counted in log.lost
    (a strategies.ps_ops.PsLog)."""
    from tfbench.framework.tf_import import tf

    try:
        result = value.fetch()
    except (tf.errors.UnavailableError, tf.errors.CancelledError, tf.errors.AbortedError):
        if log is None:
            raise
        log.lost += 1
        return None
    return {k: (bool(v) if k == "fresh" else int(v) if k in ("worker", "read", "applied") else float(v))
            for k, v in result.items()}


class Rounds:
    """The step of the asynchronous loop (tfbench.loop.step_loop): a round of N closures that
    complete asynchronously, the round's end being where a step ends. Closures are scheduled a
    phase (warm-up, then the measured steps) ahead, so each round is timed by the coordinator
    from the previous round's completion (a phase's first: from its scheduling) to its own;
    drain() ends a phase. `step(i)` returns Timed(timing, the round's closure results)."""

    def __init__(self, coordinator, num_workers: int, iterator, step, log, loop):
        self.coordinator, self.n, self.iterator, self.step, self.log = coordinator, num_workers, iterator, step, log
        self.first_measured, self.last = loop.first_measured, loop.last_step
        self.active = False

    def schedule(self):
        return self.coordinator.schedule(self.step, args=(self.iterator,))

    def __call__(self, i: int) -> Timed:
        if not self.active:  # the phase's first round: the clock starts before anything is queued
            self.active = True
            self.start_wall, self.t0 = time.time(), time.perf_counter()
            self.begin(i, self.first_measured if i < self.first_measured else self.last)
        results = self.round(i)
        now_wall, t1 = time.time(), time.perf_counter()
        timing = StepTiming(self.start_wall, t1 - self.t0)
        self.start_wall, self.t0 = now_wall, t1
        self.log.round_done(i, results)
        return Timed(timing, results)

    def begin(self, first: int, last: int) -> None:
        """Unbounded: rounds first..last-1 of N closures, all queued at once so that no worker
        waits for another."""
        self.queued = collections.deque([self.schedule() for _ in range(self.n)] for _ in range(first, last))

    def round(self, i: int) -> List[dict]:
        return [r for r in (fetched(v, self.log) for v in self.queued.popleft()) if r is not None]

    def drain(self) -> None:
        """The phase is over: every closure scheduled in it is done."""
        self.active = False
        self.coordinator.join()


class BoundedRounds(Rounds):
    """Under a staleness bound: closures kept in flight (PIPELINE_DEPTH per worker), one more
    scheduled for each one fetched until the phase's rounds hold N updates each; closures that
    found their worker too far ahead made no update and are counted in log.bound_waits. A
    result lost with a killed worker is replaced by another closure though its update may have
    landed; an update beyond the phase's last round that this brings is kept in
    log.late_updates (it happened) but belongs to no round."""

    def begin(self, first: int, last: int) -> None:
        self.target, self.kept = (last - first) * self.n, 0
        self.pending = collections.deque(self.schedule() for _ in range(min(PIPELINE_DEPTH * self.n, self.target)))

    def round(self, i: int) -> List[dict]:
        this_round = []
        while len(this_round) < self.n:
            result = fetched(self.pending.popleft(), self.log)
            if result is None:  # lost with its worker: its update may have landed; another takes its place
                self.pending.append(self.schedule())
                continue
            if not result["fresh"]:
                self.log.bound_waits += 1
                self.pending.append(self.schedule())
                continue
            this_round.append(result)
            self.kept += 1
            if self.kept + len(self.pending) < self.target:
                self.pending.append(self.schedule())
        return this_round

    def drain(self) -> None:
        """Closures still in flight after the phase's last round: waits counted, updates kept late."""
        while self.active and self.pending:
            result = fetched(self.pending.popleft(), self.log)
            if result is None:
                continue
            if not result["fresh"]:
                self.log.bound_waits += 1
                continue
            self.log.late_updates.append(result)
        super().drain()
