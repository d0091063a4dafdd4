"""The coordinator's side of asynchronous parameter-server training: rounds of N scheduled
closures, the step of the step loop (tfbench.loop.step_loop), and the results fetched back.

Bounded staleness (--ps_staleness_bound, strategies.parameter_server.asynchronous): closures kept in flight, and a
closure that found its worker too far ahead, having made no update, replaced by another.
Nothing here imports TensorFlow until a result is lost with its worker.
"""
from __future__ import annotations

import collections
import time
from typing import List, Optional

from strategies.parameter_server.ops import unpacked
from tfbench.loop.step_loop import StepTiming, Timed

PIPELINE_DEPTH = 2  # closures in flight per worker under a staleness bound


# A worker killed and restarted under the same address: the coordinator's reused gRPC channel asks
# the new server for an output of the old one, and gets this answer (TensorFlow's own
# cluster_coordinator._is_worker_failure treats the same situation's "Unable to find the relevant
# tensor remote_handle" as a worker failure).
REPLACED_SERVER = "Unable to parse request"


def lost_with_worker(error, tf) -> bool:
    """Whether a fetch failed because the closure's worker went away (not a fault of the step)."""
    if isinstance(error, (tf.errors.UnavailableError, tf.errors.CancelledError, tf.errors.AbortedError)):
        return True
    return isinstance(error, tf.errors.InternalError) and REPLACED_SERVER in str(error)


def fetched(value, log=None) -> Optional[dict]:
    """A closure's RemoteValue (its outputs packed by strategies.parameter_server.ops.packed) as
    plain Python numbers; None when its result was lost with its worker (a closure's outputs stay
    on the worker until fetched: a worker killed after the closure finished takes them along,
    though the update was applied), counted in log.lost (a strategies.parameter_server.ops.PsLog)."""
    try:
        result = value.fetch()
    except Exception as e:  # noqa: BLE001 - only TensorFlow's errors of a lost worker are kept
        from tfbench.framework.tf_import import tf

        if log is None or not lost_with_worker(e, tf):
            raise
        log.lost += 1
        return None
    return {k: (bool(v) if k == "fresh" else int(v) if k in ("worker", "read", "applied") else v)
            for k, v in unpacked(result).items()}


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
