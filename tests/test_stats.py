"""Statistics on known inputs give known outputs (docs/definitions.md definitions)."""
import math

import pytest

from tfbench.measure import stats
from tfbench.results import records


def test_step_time_stats_known_values():
    s = stats.step_time_stats([1.0, 2.0, 3.0, 4.0, 10.0])
    assert s["count"] == 5
    assert s["mean_s"] == pytest.approx(4.0)
    assert s["median_s"] == pytest.approx(3.0)
    assert s["p90_s"] == pytest.approx(7.6)  # numpy linear interpolation between 4 and 10
    assert s["std_s"] == pytest.approx(math.sqrt(12.5))  # sample std (ddof=1)
    # Student t, 4 degrees of freedom: t(0.975) = 2.776445
    assert s["ci95_s"] == pytest.approx(2.776445 * math.sqrt(12.5) / math.sqrt(5), rel=1e-5)
    # MAD = median(|x - 3|) = median(2, 1, 0, 1, 7) = 1
    assert s["jitter_s"] == pytest.approx(1.4826)


def test_single_step_has_no_spread():
    s = stats.step_time_stats([0.5])
    assert s["std_s"] == 0.0 and math.isnan(s["ci95_s"]) and s["jitter_s"] == 0.0


def test_examples_per_sec_is_examples_over_summed_step_times():
    assert stats.examples_per_sec(32, [0.5, 0.5, 1.0]) == pytest.approx(32 * 3 / 2.0)


def test_scaling_efficiency():
    assert stats.scaling_efficiency(180.0, 2, 100.0) == pytest.approx(0.9)


def _task(role, index, starts, durations, examples_per_step=8):
    return records.task_record(run_id="r", role=role, index=index, examples_per_step=examples_per_step,
                               step_times_s=durations, step_start_wall=starts)


def test_cluster_rate_uses_the_measured_window_not_a_multiple_of_one_rank():
    a = _task("worker", 0, [100.0, 101.0], [1.0, 1.0])  # 100 .. 102
    b = _task("worker", 1, [100.5, 101.5], [1.0, 1.5])  # 100.5 .. 103
    c = records.cluster_record("r", [a, b])
    assert c["images"] == 32
    assert c["window_s"] == pytest.approx(3.0)
    assert c["images_per_sec"] == pytest.approx(32 / 3.0)
    assert c["images_per_sec"] != pytest.approx(2 * a["images_per_sec"])
    # one sample per global step: first rank's start to last rank's end of the same step
    assert c["step_times_s"] == pytest.approx([1.5, 2.0])
    assert c["stats"]["count"] == 2


def test_synchronous_cluster_ci_comes_from_one_sample_per_global_step():
    """Two ranks record the same 10 synchronous steps: the cluster's statistics must not count
    them as 20 independent samples (that made the CI about sqrt(2) too narrow)."""
    durations = [1.0, 1.2, 0.9, 1.1, 1.3, 1.0, 0.8, 1.2, 1.1, 1.0]
    starts, t = [], 0.0
    for d in durations:
        starts.append(t)
        t += d
    a = _task("worker", 0, starts, durations)
    b = _task("worker", 1, starts, durations)  # the same steps, seen from the other rank
    c = records.cluster_record("r", [a, b])
    assert c["stats"]["count"] == 10
    assert c["stats"]["ci95_s"] == pytest.approx(stats.step_time_stats(durations)["ci95_s"])
    pooled = stats.step_time_stats(durations + durations)["ci95_s"]
    assert c["stats"]["ci95_s"] > 1.3 * pooled
    assert "global step" in c["step_definition"]


def test_coordinator_series_is_the_cluster_series_of_a_parameter_server_run():
    w0 = _task("worker", 0, [0.0, 2.0], [0.5, 0.5])
    w1 = _task("worker", 1, [0.1, 2.1], [0.6, 0.6])
    chief = dict(_task("chief", 0, [0.0, 2.0], [1.9, 1.8], examples_per_step=16),
                 counts_toward_cluster=False, cluster_steps=True, step_definition="global step (coordinator)")
    c = records.cluster_record("r", [w0, w1, chief])
    assert c["step_times_s"] == pytest.approx([1.9, 1.8])
    assert c["step_definition"] == "global step (coordinator)"
    assert c["images"] == 32  # the workers' images; the coordinator's view is not counted


def test_ranks_with_different_step_counts_are_refused():
    a = _task("worker", 0, [0.0, 1.0], [1.0, 1.0])
    b = _task("worker", 1, [0.0], [1.0])
    with pytest.raises(ValueError, match="different numbers"):
        records.cluster_record("r", [a, b])


def test_between_run_interval_is_student_t_over_run_means():
    s = stats.between_runs([10.0, 12.0, 14.0])
    assert s["mean"] == pytest.approx(12.0)
    assert s["ci95"] == pytest.approx(4.302653 * 2.0 / math.sqrt(3), rel=1e-5)  # t(0.975, 2 dof)
    assert math.isnan(stats.between_runs([10.0])["ci95"])


def test_coordinator_records_do_not_count_toward_the_cluster():
    a = _task("worker", 0, [0.0], [1.0])
    chief = dict(_task("chief", 0, [0.0], [5.0]), counts_toward_cluster=False)
    c = records.cluster_record("r", [a, chief])
    assert c["images"] == 8 and c["window_s"] == pytest.approx(1.0)


def test_results_file_survives_a_torn_last_line(tmp_path):
    path = str(tmp_path / "results.jsonl")
    records.append(path, {"kind": "task", "x": 1})
    with open(path, "a") as f:
        f.write('{"kind": "task", "x": ')
    assert records.read(path) == [{"kind": "task", "x": 1}]
