"""Latency on emulated links through the user-space delay line, end to end: a parameter-server run
on 100 ms links idles its workers more than the same run without delay, and records the round
trip it measured; the latency report reads both and states the direction."""
import os

import pytest

from tfrun import cluster_record, run_tiny
from tools import latency_report
from tools.runs import find_runs

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]
PS = ["--strategy=parameter_server", "--num_workers=2", "--ps_placement=separate", "--network=emulated",
      "--link_bandwidth=100mbit", "--num_warmup_steps=1", "--num_steps=3"]


def test_a_two_worker_ps_idles_more_at_100_ms_than_at_0(logdir):
    _, fast = run_tiny(logdir, "lat0", *PS)
    _, slow = run_tiny(logdir, "lat100", *PS, "--link_latency=100")
    link = cluster_record(slow)["link"]
    assert link["delay_ms"] == 100 and link["rtt_ms"] == pytest.approx(200, rel=0.10)
    assert cluster_record(fast)["link"]["rtt_ms"] < 5
    runs = {r.run_id: r for r in find_runs(logdir)}
    idle_fast, idle_slow = (latency_report.compute_idleness(runs[name]) for name in ("lat0", "lat100"))
    assert idle_slow > idle_fast and idle_slow > 0.5
    by_series = latency_report.points(runs.values())
    assert [lat for lat, _ in next(iter(by_series.values()))] == [0.0, 100.0]
    assert "Idleness rises with latency: holds" in "\n".join(latency_report.direction(by_series))
