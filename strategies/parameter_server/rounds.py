"""The coordinator's side of asynchronous parameter-server training: rounds of N scheduled
closures, the step of the step loop (tfbench.loop.step_loop), and the results fetched back.

Three kinds, chosen once (`kind_for`):
- KeptRounds (unbounded, no hook between rounds): each closure writes its record on its own worker
  (strategies.parameter_server.book) and the coordinator holds no result but one per chunk of
  READ_EVERY rounds, so that ClusterCoordinator dispatches a worker's next closure without first
  copying the last one's result; it waits on that one closure, then reads every worker's records.
- Rounds (unbounded, with hooks: evaluation, checkpoints, a profile): every closure's result held
  and fetched in order, so that the coordinator is at round i when a hook acts at step i.
- BoundedRounds (--ps_staleness_bound, strategies.parameter_server.asynchronous): closures kept in
  flight, and a closure that found its worker too far ahead, having made no update, replaced by
  another (the coordinator must see each result to know).
A round is N updates: held, the i-th N closures scheduled, ending once every closure scheduled up
to it has; kept, the i-th N to end, ending with the last of them.
Nothing here imports TensorFlow until a result is lost with its worker or a phase is scheduled
with kept records.
"""
from __future__ import annotations

import collections
import time
from typing import List, Optional

from strategies.parameter_server.ops import lost_with_worker, unpacked
from tfbench.loop.step_loop import StepTiming, Timed

PIPELINE_DEPTH = 2  # closures in flight per worker under a staleness bound
READ_EVERY = 64  # KeptRounds: rounds per wait on the coordinator and read of the workers' records (each read
# runs ops on every worker and the coordinator's Python, beside the closures on shared cores)
POLL_S = 0.002  # KeptRounds: between reads while a chunk's last closures end on other workers
GIVE_UP_S = 5.0  # KeptRounds, after a worker restarted: a record missing this long went with it


def fetched(value, log=None) -> Optional[dict]:
    """A closure's RemoteValue (its outputs packed by strategies.parameter_server.ops.packed) as
    plain Python numbers; None when its result was lost with its worker (a closure's outputs stay
    on the worker until fetched: a worker killed after the closure finished takes them along,
    though the update was applied), counted in log.lost (a strategies.parameter_server.ops.PsLog)."""
    try:
        result = value.fetch()
    except Exception as e:  # noqa: BLE001 - only TensorFlow's errors of a lost worker are kept
        if log is None or not lost_with_worker(e):
            raise
        log.lost += 1
        return None
    return as_record(unpacked(result))


def as_record(values: dict) -> dict:
    """A closure's record as plain Python: flags as bools, counters as ints."""
    return {k: (bool(v) if k == "fresh" else int(v) if k in ("worker", "read", "applied") else v)
            for k, v in values.items()}


def kind_for(config, hooks) -> type:
    """Which rounds the asynchronous loop runs (module docstring)."""
    if config.ps_staleness_bound >= 0:
        return BoundedRounds
    return Rounds if hooks is not None and hooks.hooks else KeptRounds


class Rounds:
    """The step of the asynchronous loop (tfbench.loop.step_loop): a round of N closures that
    complete asynchronously, the round's end being where a step ends. Closures are scheduled a
    phase (warm-up, then the measured steps) ahead, so each round is timed by the coordinator
    from the previous round's completion (a phase's first: from its scheduling) to its own;
    drain() ends a phase. `step(i)` returns Timed(timing, the round's closure results)."""

    RECORDS = ("held: each closure's result fetched by the coordinator, in order (a hook acts between rounds); "
               "a round is the next N closures scheduled and ends when the coordinator has fetched them")

    def __init__(self, coordinator, num_workers: int, iterator, step, log, loop, book=None):
        self.coordinator, self.n, self.iterator, self.step, self.log = coordinator, num_workers, iterator, step, log
        self.book = book  # KeptRounds: the workers' records (strategies.parameter_server.book)
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

    RECORDS = ("held: each closure's result fetched by the coordinator, to replace those that made no update; "
               "a round is the next N updates fetched and ends when the coordinator has them")

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


class KeptRounds(Rounds):
    """Unbounded, each closure's record written on its worker (strategies.parameter_server.book):
    the phase is queued at once and only the last closure of each chunk of READ_EVERY rounds is
    held, to wait on. Rounds are counted in updates as they end: round i of a phase holds its
    updates ranked i*N..(i+1)*N-1 by their end (tf.timestamp on the workers) and ends at the last
    of them; the phase's first round starts when the phase was scheduled. Once a read of the
    records holds (i+1)*N of the phase, those are final: a closure not yet read had not ended then.
    A record that never comes (its worker restarted before it was read) is counted in log.lost at
    the phase's end."""

    RECORDS = (f"kept on the workers (per-worker variables, strategies.parameter_server.book), read every "
               f"{READ_EVERY} rounds; a round is the next N updates to end and ends with the last of them "
               f"(tf.timestamp on its worker)")
    SHORTEST_S = 1e-6  # a round whose last update ended with the previous round's (one microsecond apart at most)

    def begin(self, first: int, last: int) -> None:
        self.first, self.total = first, (last - first) * self.n
        self.markers, self.pending, self.ready = {}, [], {}
        self.found, self.taken, self.prev_end, self.troubled = 0, 0, self.start_wall, False
        for j in range(self.total):
            value = self.coordinator.schedule(self.step, args=(self.iterator,))
            if (j + 1) % (self.n * READ_EVERY) == 0 or j == self.total - 1:
                self.markers[first + j // self.n] = value  # a chunk's last closure

    def __call__(self, i: int) -> Timed:
        if not self.active:
            self.active = True
            self.start_wall = time.time()
            self.begin(i, self.first_measured if i < self.first_measured else self.last)
        if i not in self.ready:
            self.collect(min(r for r in self.markers if r >= i))
        timing, closures = self.ready.pop(i)
        self.log.round_done(i, closures)
        return Timed(timing, closures)

    def collect(self, upto: int) -> None:
        """Waits for the chunk's last closure (round `upto`), reads the workers' records until the
        phase's first (upto + 1) * N updates are in (or the rest went with a restarted worker),
        and makes the rounds up to `upto` ready."""
        try:
            self.markers.pop(upto).fetch()
        except Exception as e:  # noqa: BLE001 - a worker lost with its records: found missing below
            if not lost_with_worker(e):
                raise
            self.troubled = True
        need = (upto - self.first + 1) * self.n
        waiting_since = time.monotonic()
        while True:
            count = self.found
            finished = self.coordinator.done()  # raises a closure's error; True: every closure has ended
            self.read()
            if self.found >= need or finished:
                break  # finished short: the rest went with a restarted worker
            if self.found > count:
                waiting_since = time.monotonic()
            elif self.troubled and time.monotonic() - waiting_since > GIVE_UP_S:
                break
            time.sleep(POLL_S)
        self.pending.sort(key=lambda c: c["end"])
        for r in range(self.taken // self.n + self.first, upto + 1):
            closures, self.pending = self.pending[:self.n], self.pending[self.n:]
            end = closures[-1]["end"] if closures else time.time()  # none: every one went with its worker
            duration = max(end - self.prev_end, self.SHORTEST_S)
            self.ready[r] = (StepTiming(self.prev_end, duration), closures)
            self.prev_end += duration
        self.taken = need

    def read(self) -> None:
        reading = self.book.read()
        self.troubled = self.troubled or bool(reading.unanswered or reading.restarted or reading.overwritten)
        self.pending += [as_record(values) for values in reading.records]
        self.found += len(reading.records)

    def drain(self) -> None:
        """Every closure of the phase done; the records that never came are counted lost."""
        if self.active:
            self.coordinator.join()
            self.read()
            self.log.lost += max(0, self.total - self.found)
        super().drain()
