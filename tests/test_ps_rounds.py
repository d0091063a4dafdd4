"""The asynchronous parameter-server rounds (strategies.parameter_server.rounds) driven by the one step loop
with a fake coordinator: a phase's closures are scheduled once its first step's hooks ran, each
round ends a step, the warm-up is drained before the measured window starts, and under a
staleness bound closures that found their worker too far ahead are replaced and counted, and
updates beyond the last round are kept apart; with records kept on the workers, rounds are the
updates in the order they ended, read a chunk at a time, and records that never came are counted
lost. No TensorFlow."""
import time

from strategies.parameter_server.ops import PsLog
from strategies.parameter_server.rounds import PIPELINE_DEPTH, READ_EVERY, BoundedRounds, KeptRounds, Rounds
from tfbench.config import RunConfig
from tfbench.loop.step_loop import StepLoop


class Value:
    def __init__(self, result):
        self.result = result

    def fetch(self):
        return self.result


class Coordinator:
    """Schedules closures whose results come from `outcome(k)` (k: the k-th scheduled); writes
    down what it was asked, beside the hooks' calls."""

    def __init__(self, seen, num_workers, outcome=None):
        self.seen, self.n, self.scheduled = seen, num_workers, 0
        self.outcome = outcome or (lambda k: {"fresh": True})

    def schedule(self, fn, args):
        k, self.scheduled = self.scheduled, self.scheduled + 1
        self.seen.append(("schedule", k))
        result = {"worker": k % self.n, "start": float(k), "end": k + 0.5, "read": 0, "applied": k + 1,
                  **self.outcome(k)}
        names = sorted(result)  # packed as a closure returns it (strategies.parameter_server.ops.packed)
        return Value({",".join(names): [float(result[n]) for n in names]})

    def join(self):
        self.seen.append(("join",))


class Hooks:
    def __init__(self, seen):
        self.seen = seen

    def before(self, i):
        self.seen.append(("before", i))

    def after(self, i):
        self.seen.append(("after", i))


def drive(kind, outcome=None, warmup=2, steps=3, n=2):
    seen, log = [], PsLog()
    coordinator = Coordinator(seen, n, outcome)
    holder = {}

    def measuring():
        holder["rounds"].drain()
        seen.append(("measuring",))

    loop = StepLoop(RunConfig(num_warmup_steps=warmup, num_steps=steps), hooks=Hooks(seen), on_measure_start=measuring)
    rounds = holder["rounds"] = kind(coordinator, n, "iterator", "step", log, loop)
    loop.run(rounds)
    rounds.drain()
    return loop, log, seen, coordinator


def test_unbounded_rounds_queue_a_phase_after_its_first_hooks_and_drain_it_before_measuring():
    loop, log, seen, coordinator = drive(Rounds)
    assert seen[0] == ("before", 0) and seen[1:5] == [("schedule", k) for k in range(4)]  # 2 warm-up rounds of 2
    at = seen.index(("measuring",))
    assert seen[at - 1] == ("join",) and seen[at + 1] == ("before", 2)
    assert seen[at + 2:at + 8] == [("schedule", k) for k in range(4, 10)]  # the 3 measured rounds, queued at once
    assert seen[-1] == ("join",) and coordinator.scheduled == 10
    assert [len(r) for r in loop.kept()] == [2, 2, 2] and [len(r) for r in loop.kept(False)] == [2, 2]
    assert [[c["round"] for c in r] for r in loop.kept()] == [[2, 2], [3, 3], [4, 4]]
    assert log.shards_used == [[0, 1]] * 5
    starts = [t.start_wall for t in loop.timings]
    assert starts == sorted(starts) and all(t.duration_s >= 0 for t in loop.timings)
    for earlier, later in zip(loop.timings, loop.timings[1:]):  # a round runs from the previous one's end
        assert abs(later.start_wall - (earlier.start_wall + earlier.duration_s)) < 0.05


def test_a_bound_replaces_closures_that_made_no_update_and_keeps_late_updates_apart():
    waiting = {1, 6, 7}  # these closures found their worker too far ahead
    loop, log, seen, coordinator = drive(BoundedRounds, lambda k: {"fresh": k not in waiting})
    assert seen[1:1 + PIPELINE_DEPTH * 2] == [("schedule", k) for k in range(PIPELINE_DEPTH * 2)]
    assert all(len(r) == 2 for r in loop.kept() + loop.kept(False))
    kept = [c for r in loop.kept(False) + loop.kept() for c in r]
    assert not any(c["fresh"] is False for c in kept) and len(kept) == 10
    scheduled_fresh = coordinator.scheduled - len(waiting & set(range(coordinator.scheduled)))
    assert log.bound_waits == len(waiting & set(range(coordinator.scheduled)))
    assert scheduled_fresh == len(kept) + len(log.late_updates)  # every update is in a round or late
    assert seen.count(("join",)) == 2 and seen[seen.index(("measuring",)) - 1] == ("join",)


def test_a_bound_of_lockstep_workers_schedules_no_more_than_it_needs():
    loop, log, seen, coordinator = drive(BoundedRounds, warmup=1, steps=2, n=3)
    assert log.bound_waits == 0 and log.late_updates == []
    assert coordinator.scheduled == 9 and [len(r) for r in loop.kept()] == [3, 3]


class KeptCoordinator(Coordinator):
    """Closures whose records are written into `book` (as strategies.parameter_server.book does on
    each worker) instead of returned; only the held ones (a chunk's last) are asked for."""

    def __init__(self, seen, num_workers, book, lost=()):
        super().__init__(seen, num_workers)
        self.book, self.lost, self.held = book, set(lost), []
        self.t0 = time.time() + 10  # the workers' clock: after the phase was scheduled

    def schedule(self, fn, args):
        k, self.scheduled = self.scheduled, self.scheduled + 1
        self.seen.append(("schedule", k))
        if k not in self.lost:  # worker 1 runs late: its closure k ends when worker 0's k + 1 does
            end = self.t0 + k + (1.5 if k % self.n else 0.5)
            self.book.written.append({"worker": float(k % self.n), "start": self.t0 + k, "end": end, "read": 0.0,
                                      "applied": k + 1.0, "fresh": 1.0})
        value = Value(self.t0 + k + 0.5)
        self.held.append(value)
        return value

    def done(self):
        return True


class Book:
    def __init__(self):
        self.written, self.reads = [], 0

    def read(self):
        from strategies.parameter_server.book import Reading

        self.reads += 1
        new, self.written = self.written, []
        return Reading(records=new)


def drive_kept(warmup=2, steps=3, n=2, lost=()):
    seen, log, book = [], PsLog(), Book()
    coordinator = KeptCoordinator(seen, n, book, lost)
    holder = {}

    def measuring():
        holder["rounds"].drain()
        seen.append(("measuring",))

    loop = StepLoop(RunConfig(num_warmup_steps=warmup, num_steps=steps), hooks=Hooks(seen), on_measure_start=measuring)
    rounds = holder["rounds"] = KeptRounds(coordinator, n, "iterator", "step", log, loop, book)
    loop.run(rounds)
    rounds.drain()
    return loop, log, seen, coordinator, book


def test_kept_rounds_are_the_updates_in_the_order_they_ended():
    loop, log, seen, coordinator, book = drive_kept(warmup=2, steps=40)
    assert coordinator.scheduled == 84 and log.lost == 0
    assert [len(r) for r in loop.kept()] == [2] * 40 and [len(r) for r in loop.kept(False)] == [2, 2]
    assert [c["round"] for c in loop.kept()[0]] == [2, 2]
    ends = [c["end"] for r in loop.kept(False) + loop.kept() for c in r]
    assert ends == sorted(ends)  # rounds follow the ends, not the order closures were scheduled
    assert [c["worker"] for c in loop.kept()[0]] == [0, 1] and loop.kept()[1][0]["start"] == coordinator.t0 + 6
    for r, round_ in enumerate(loop.kept()):  # each round ends with its last update
        assert loop.timings[r].start_wall + loop.timings[r].duration_s == round_[-1]["end"]
    for earlier, later in zip(loop.timings, loop.timings[1:]):
        assert later.start_wall == earlier.start_wall + earlier.duration_s and later.duration_s > 0
    assert book.reads <= 2 + 40 // READ_EVERY + 2  # read once a chunk, not once a round


def test_kept_rounds_count_the_records_lost_with_a_worker_and_keep_the_rest():
    loop, log, seen, coordinator, book = drive_kept(warmup=1, steps=4, lost={3, 6})
    assert log.lost == 2
    assert [len(r) for r in loop.kept()] == [2, 2, 2, 0]  # 8 updates, 6 of them seen
    assert all(t.duration_s > 0 for t in loop.timings)


def test_the_rounds_are_chosen_by_what_the_run_needs_between_them():
    from strategies.parameter_server.rounds import kind_for
    from tfbench.loop.benchmark import StepHooks

    assert kind_for(RunConfig(ps_staleness_bound=1), StepHooks()) is BoundedRounds
    assert kind_for(RunConfig(), StepHooks(Hooks([]))) is Rounds  # a hook acts at its step: results held
    assert kind_for(RunConfig(), StepHooks()) is KeptRounds
