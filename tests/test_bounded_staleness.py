"""Bounded staleness (stale-synchronous parallel) and the split of an update's time.

The clock staleness of every update is computed from the version counter alone (never from the
clocks the gate reads), so the runs below check the gate independently: unbounded with a
straggler it grows past the bound; bounded it never exceeds s, and waiting closures are counted."""
import pytest

from clusters import SCENARIOS
from strategies.parameter_server import split as ps_split
from strategies.parameter_server import staleness
from tfrun import run_tiny, task_records


def update(worker, read, applied):
    return {"worker": worker, "read": read, "applied": applied}


def test_clock_staleness_counts_the_other_workers_missing_updates():
    # worker 0 runs ahead: versions 1, 2, 3 are its own, worker 1's first update (read 0) lands at 4
    updates = [update(0, 0, 1), update(0, 1, 2), update(0, 2, 3), update(1, 0, 4), update(1, 4, 5)]
    clocks = staleness.clock_staleness(updates)
    assert clocks[1] == 0  # worker 0's first update: no worker has a first update to miss
    assert clocks[2] == 1 and clocks[3] == 2  # its 2nd and 3rd: worker 1 had none of its first 1, 2
    assert clocks[4] == 0  # worker 1's first: nothing of worker 0's first 0 to miss
    assert clocks[5] == 0  # worker 1's 2nd read version 4: worker 0's first 3 were in


def test_lockstep_updates_have_no_clock_staleness():
    updates = [update(w, 2 * c, 2 * c + 1 + w) for c in range(4) for w in (0, 1)]
    assert set(staleness.clock_staleness(updates).values()) == {0}


def test_time_split_of_one_worker():
    closures = [{"start": 0.0, "computed": 0.008, "end": 0.010}, {"start": 0.02, "computed": 0.028, "end": 0.030}]
    pulls = [{"start": 0.0, "end": 0.002}, {"start": 0.0, "end": 0.003}, {"start": 0.0, "end": 0.001}]
    split = ps_split.split(closures, pulls, window_s=0.05)
    assert split["pull_s"] == pytest.approx(0.002) and split["compute_s"] == pytest.approx(0.006)
    assert split["push_s"] == pytest.approx(0.002) and split["wait_s"] == pytest.approx(0.015)
    assert sum(split["window_share"].values()) == pytest.approx(1.0)
    assert ps_split.split([], pulls, 1.0) == {"updates": 0}


ASYNC = ("--strategy=parameter_server", "--num_workers=2", "--num_steps=12", "--straggler=worker_1:4")


def clock_max(run):
    tasks = task_records(run)
    per_update = [v for w in (0, 1) for v in tasks[f"worker_{w}"]["clock_staleness_per_update"]]
    assert max(per_update) == tasks["chief_0"]["clock_staleness"]["max"]
    return tasks, max(per_update)


@pytest.mark.slow
def test_a_straggler_makes_unbounded_updates_clock_stale(clusters):
    """The shared run `ps_async_straggler_hard` of tests/clusters.py: ASYNC, placed hard for
    test_step_definitions."""
    assert set(ASYNC) <= set(SCENARIOS["ps_async_straggler_hard"].flags)
    run = clusters["ps_async_straggler_hard"].run
    tasks, worst = clock_max(run)
    assert worst > 1, worst  # the fast worker runs ahead of the stopped one
    assert tasks["chief_0"]["bound_waits"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("bound", [0, 1])
def test_the_bound_is_never_exceeded(logdir, bound):
    out, run = run_tiny(logdir, f"ssp_{bound}", *ASYNC, f"--ps_staleness_bound={bound}")
    tasks, worst = clock_max(run)
    assert worst <= bound, worst
    chief = tasks["chief_0"]
    assert chief["ps_staleness_bound"] == bound and chief["bound_waits"] > 0  # the fast worker was held back
    assert chief["updates"] == 24  # 12 rounds of 2 updates, as without a bound
    assert f"bound {bound}, " in out
    for w in (0, 1):
        split = tasks[f"worker_{w}"]["time_split"]
        assert split["updates"] == tasks[f"worker_{w}"]["num_measured_steps"] and split["pull_probes"] >= 1
        assert split["push_s"] > 0 and split["pull_and_compute_s"] > 0
