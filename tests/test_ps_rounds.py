"""The asynchronous parameter-server rounds (strategies.parameter_server.rounds) driven by the one step loop
with a fake coordinator: a phase's closures are scheduled once its first step's hooks ran, each
round ends a step, the warm-up is drained before the measured window starts, and under a
staleness bound closures that found their worker too far ahead are replaced and counted, and
updates beyond the last round are kept apart. No TensorFlow."""
from strategies.parameter_server.ops import PsLog
from strategies.parameter_server.rounds import PIPELINE_DEPTH, BoundedRounds, Rounds
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
