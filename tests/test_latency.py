"""Latency on emulated links through the user-space delay line, end to end: a parameter-server run
on 10 ms links idles its workers more than the same run without delay, and records the round
trip it measured; the latency report reads both and states the direction."""
import os

import pytest

from tfrun import cluster_record, run_tiny
from tools.report import latency as latency_report
from tools.rundirs.runs import find_runs

PS = ["--strategy=parameter_server", "--num_workers=2", "--ps_placement=separate", "--network=emulated",
      "--link_bandwidth=100mbit", "--num_warmup_steps=1", "--num_steps=3", "--batch_size=256"]


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_a_two_worker_ps_idles_more_at_10_ms_than_at_0(logdir):
    """10 ms each way (tools/sweeps/latency.yaml goes to 200): every cluster start-up RPC pays the
    round trip, so a larger delay buys no more evidence for many seconds more. A batch of 256 gives the
    step compute of its own (4-6 ms): at the tiny model's batch of 4 the workers idled 95-98% of the
    step already at 0 ms, and one slow step left no room for 10 ms to show; at 256 they idle 80% at
    0 ms and 97% at 10 ms (2026-12-06)."""
    _, fast = run_tiny(logdir, "lat0", *PS)
    _, slow = run_tiny(logdir, "lat10", *PS, "--link_latency=10")
    link = cluster_record(slow)["link"]
    assert link["delay_ms"] == 10 and link["rtt_ms"] == pytest.approx(20, rel=0.10)
    assert cluster_record(fast)["link"]["rtt_ms"] < 5
    runs = {r.run_id: r for r in find_runs(logdir)}
    idleness = latency_report.idleness_of(latency_report.points(runs.values()))
    idle_fast, idle_slow = (idleness[runs[name].path] for name in ("lat0", "lat10"))
    assert idle_slow > idle_fast and idle_slow > 0.5
    by_series = latency_report.points(runs.values())
    assert [lat for lat, _ in next(iter(by_series.values()))] == [0.0, 10.0]
    (rises,) = [line for line in latency_report.direction(by_series) if "rises with latency" in line]
    assert "): holds; it rises in 1 of 1 series" in rises


def fake(latency, compute_ms, step_ms, num_ps=1, batch=32):
    """A finished async PS run whose step split records compute_ms of a step_ms global step."""
    from tools.rundirs.runs import Run

    config = {"strategy": "parameter_server", "num_ps": num_ps, "num_workers": 2, "batch_size": batch,
              "link_latency": latency}
    cluster = {"status": "ok", "step_breakdown": {"mean_s": {"compute": compute_ms / 1e3}, "step_mean_s": step_ms / 1e3}}
    return Run(f"/r/{num_ps}-{batch}-{latency}", config, cluster, [])


def test_idleness_takes_the_compute_of_a_batch_from_the_lowest_latency_run_of_its_series():
    """The split's compute is a closure less a pull measured apart: at 200 ms it can read more than
    the batch's own (reads counted as compute) or less (a slow probe), never the least wrong."""
    by_series = latency_report.points([fake(200, 500, 1000), fake(0, 50, 100)])
    assert list(latency_report.idleness_of(by_series).values()) == [pytest.approx(0.5), pytest.approx(0.95)]
    assert latency_report.compute_idleness(fake(200, 500, 1000)) == pytest.approx(0.5)  # the run's own split
    by_series = latency_report.points([fake(0, 50, 100), fake(200, 10, 1000)])
    assert list(latency_report.idleness_of(by_series).values()) == [pytest.approx(0.5), pytest.approx(0.95)]
    by_series = latency_report.points([fake(0, 0, 100), fake(10, 50, 100), fake(200, 10, 1000)])
    assert list(latency_report.idleness_of(by_series).values()) == [pytest.approx(0.5)] * 2 + [pytest.approx(0.95)]


def test_direction_calls_changes_within_two_points_flat():
    runs = [fake(0, 50, 100), fake(200, 50, 101), fake(0, 60, 100, batch=256), fake(200, 60, 300, batch=256),
            fake(0, 70, 100, num_ps=2), fake(200, 70, 146, num_ps=2)]
    lines = latency_report.direction(latency_report.points(runs))
    (rises,) = [line for line in lines if "rises with latency" in line]
    assert "holds mostly; it rises in 2 of 3 series" in rises and "50.0% at 0 ms -> 50.5% at 200 ms" in rises
    (ps,) = [line for line in lines if "more parameter servers" in line]
    assert "does not hold; it is lower at 1 of 2 latencies" in ps  # 50.5% -> 52.1% at 200 ms is not lower
    (batch,) = [line for line in lines if "larger batch" in line]
    assert "does not hold; it is lower at 1 of 2 latencies" in batch  # 50.5% -> 80.0% at 200 ms is higher
