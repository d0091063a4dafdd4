"""Staleness of parameter-server updates, measured with a version counter on the ps: asynchronous
workers apply gradients computed on parameters that others have updated since (staleness > 0
occurs); synchronous ones never do (0 for every gradient). The runs are the shared `ps_async` and
`ps_sync` of tests/clusters.py."""
import os

import pytest

from strategies.parameter_server import staleness
from tfrun import cluster_record, scalars, task_records


def test_summary_per_worker_and_overall():
    stats = staleness.by_worker([(0, 0), (0, 2), (1, 1), (1, 1), (0, 0)])
    assert stats["all"] == {"updates": 5, "max": 2, "mean": 0.8, "histogram": {"0": 2, "1": 2, "2": 1}}
    assert stats["worker_0"]["max"] == 2 and stats["worker_1"]["histogram"] == {"1": 2}
    assert staleness.summary([]) == {"updates": 0}


@pytest.mark.slow
def test_async_updates_are_stale_and_logged_per_update(clusters):
    launched = clusters["ps_async"]
    run, updates = launched.run, 2 * launched.steps  # rounds of 2 updates
    assert launched.steps >= 15 and not launched.config["ps_sync"]
    tasks = task_records(run)
    stats = tasks["chief_0"]["staleness"]
    assert stats["all"]["updates"] == updates
    assert stats["all"]["max"] >= 1, stats  # two workers interleave: some update lands on newer weights
    assert min(int(k) for k in stats["all"]["histogram"]) >= 0
    chief = tasks["chief_0"]  # updates per second over the coordinator's measured rounds
    assert chief["updates"] == updates
    # no hook between rounds: every record was kept on its worker and read back, none lost
    assert chief["closure_records"].startswith("kept on the workers") and chief["closure_results_lost"] == 0
    assert sum(chief["closures_per_worker"].values()) == updates
    assert chief["updates_per_sec_of_rounds"] == pytest.approx(updates / sum(chief["step_times_s"]), rel=1e-6)
    cluster = cluster_record(run)  # the cluster's: over the window of images/sec
    assert cluster["updates_per_sec"] == pytest.approx(updates / cluster["window_s"], rel=1e-6)
    for index in (0, 1):
        worker = tasks[f"worker_{index}"]
        assert len(worker["staleness_per_update"]) == worker["num_measured_steps"]
        events = scalars(os.path.join(run, "tb", f"worker_{index}"))
        assert [e.value for e in events["perf/staleness"]] == worker["staleness_per_update"]


@pytest.mark.slow
def test_sync_updates_are_never_stale(clusters):
    launched = clusters["ps_sync"]
    out, steps = launched.out, launched.steps
    stats = task_records(launched.run)["chief_0"]["staleness"]
    assert stats["all"] == {"updates": 2 * steps, "max": 0, "mean": 0.0, "histogram": {"0": 2 * steps}}
    assert "staleness (updates the ps applied" in out and "max 0" in out
    # one update per step
    assert f"updates: {steps} parameter-server updates applied in the same measured window = {steps} / " in out
