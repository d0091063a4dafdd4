"""Statistics on known inputs give known outputs (DESIGN.md definitions)."""
import math

import pytest

from tfbench import records, stats


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


def test_images_per_sec_is_images_over_summed_step_times():
    assert stats.images_per_sec(32, [0.5, 0.5, 1.0]) == pytest.approx(32 * 3 / 2.0)


def test_scaling_efficiency():
    assert stats.scaling_efficiency(180.0, 2, 100.0) == pytest.approx(0.9)


def _task(role, index, starts, durations, images_per_step=8):
    return records.task_record(run_id="r", role=role, index=index, images_per_step=images_per_step,
                               step_times_s=durations, step_start_wall=starts)


def test_cluster_rate_uses_the_measured_window_not_a_multiple_of_one_rank():
    a = _task("worker", 0, [100.0, 101.0], [1.0, 1.0])  # 100 .. 102
    b = _task("worker", 1, [100.5, 101.5], [1.0, 1.5])  # 100.5 .. 103
    c = records.cluster_record("r", [a, b])
    assert c["images"] == 32
    assert c["window_s"] == pytest.approx(3.0)
    assert c["images_per_sec"] == pytest.approx(32 / 3.0)
    assert c["images_per_sec"] != pytest.approx(2 * a["images_per_sec"])
    assert c["stats"]["count"] == 4


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
