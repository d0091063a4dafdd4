"""Resource figures cover the measured window, not the whole process (docs/definitions.md)."""
import pytest

from tfbench.measure.window import measured_window, task_window
from tfbench.results import records


def _samples(task, role, times, cpu, tx):
    return [{"time": t, "task": task, "role": role, "cpu_percent": c, "rss_mb": 100.0 + c,
             "net_tx_bytes": b, "net_rx_bytes": b // 2} for t, c, b in zip(times, cpu, tx)]


def test_cpu_and_bytes_are_cut_to_the_window():
    # import and tracing at 400% CPU and 1000 bytes; 100% and 10 bytes/s in the window 10..20
    s = _samples("worker_0", "worker", [5, 10, 15, 20, 25], [400, 400, 100, 100, 300],
                 [1000, 1000, 1050, 1100, 2000])
    w = task_window(s, 10.0, 20.0)
    assert w["cpu_percent_mean"] == pytest.approx(100.0)
    assert w["net_tx_bytes"] == pytest.approx(100.0)
    assert w["net_rx_bytes"] == pytest.approx(50.0)
    # a window between samples: a counter interpolated, CPU weighted by overlap
    w = task_window(s, 12.5, 17.5)
    assert w["net_tx_bytes"] == pytest.approx(1075 - 1025)
    assert w["cpu_percent_mean"] == pytest.approx(100.0)
    # a window outside the samples cannot be guessed
    assert task_window(s, 30.0, 40.0)["net_tx_bytes"] is None


def test_bytes_per_global_step_and_workers_mean():
    s = (_samples("worker_0", "worker", [0, 10], [100, 100], [0, 1000]) +
         _samples("ps_0", "ps", [0, 10], [50, 50], [0, 4000]))
    w = measured_window(s, 0.0, 10.0, steps=4)
    assert w["tasks"]["ps_0"]["net_tx_bytes_per_step"] == pytest.approx(1000.0)
    assert w["workers_mean"]["net_tx_bytes"] == pytest.approx(1000.0)


def test_cluster_record_puts_window_figures_first_and_whole_process_apart():
    task = records.task_record(run_id="r", role="worker", index=0, examples_per_step=8,
                               step_times_s=[5.0, 5.0], step_start_wall=[10.0, 15.0])
    series = _samples("worker_0", "worker", [5, 10, 15, 20, 25], [400, 400, 100, 100, 300],
                      [1000, 1000, 1050, 1100, 2000])
    summary = {"interval_s": 5.0, "tasks": {"worker_0": {
        "role": "worker", "cpu_percent_mean": 260.0, "net_tx_bytes": 2000, "series": series}}}
    c = records.cluster_record("r", [task], extra={"resources": summary})
    r = c["resources"]
    assert r["tasks"]["worker_0"]["cpu_percent_mean"] == pytest.approx(100.0)
    assert r["tasks"]["worker_0"]["net_tx_bytes"] == pytest.approx(100.0)
    assert r["tasks"]["worker_0"]["net_tx_bytes_per_step"] == pytest.approx(50.0)
    assert r["whole_process"]["tasks"]["worker_0"]["cpu_percent_mean"] == 260.0
    assert "series" not in r["whole_process"]["tasks"]["worker_0"]
    assert "measured window" in r["scope"] and "whole process" in r["whole_process"]["scope"]
