"""The GEMM peak behind "fraction of peak" cannot be lowered by other work unnoticed: a busy
machine is refused before measuring, a peak measured while other processes took the cores is
not stored, and every place that divides by the peak prints its age and conditions; a fraction
above 1 says the peak is wrong. (The measurement itself: tests/test_performance_tf.py.)"""
import json
import time

import pytest
from absl import flags
from absl.testing import flagsaver

from tfbench.config import RunConfig
from tfbench.measure import flops, peaks

NOW = time.time()
STAMP = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - 4 * 86400))
ENTRY = {"status": "measured", "measured_at": STAMP, "method": "tf.matmul chain",
         "conditions": {"load_average_1m_before": 0.08, "other_cpu_cores": 0.03, "cores": 2},
         "cpu": {"fp32": {"cores": 2, "all_cores_flops_per_s": 200e9, "one_core_flops_per_s": 100e9}}}


def test_busy_is_a_share_of_the_cores():
    assert peaks.busy_reason(1.94, None, 2) == "1-minute load average 1.94 on 2 cores, more than 0.5"
    assert "other processes used 0.90 of 2 cores" in peaks.busy_reason(0.1, 0.9, 2)
    assert peaks.busy_reason(0.1, 0.03, 2) is None


def test_the_peak_says_its_age_and_conditions_where_it_is_used():
    text = peaks.describe(ENTRY, at=NOW)
    assert text.startswith(f"GEMM peak measured {STAMP[:10]} ") and "(4.0 days before this run)" in text
    assert "1-minute load average 0.08 before, other processes using 0.03 of 2 cores meanwhile" in text
    old = dict(ENTRY, conditions=None, load_average_1m_after=1.94)
    assert "conditions not recorded (1-minute load average 1.94 just after" in peaks.describe(old, at=NOW)


def test_the_run_table_prints_the_peak_and_flags_a_fraction_above_one(monkeypatch):
    counts = {"forward": 10 ** 9, "train": 3 * 10 ** 9, "params": 1000}
    config = RunConfig(model="tiny", image_size=8, num_classes=2)
    monkeypatch.setattr(flops, "per_example", lambda *a, **k: counts)  # no TensorFlow count in this test
    task = {"num_measured_steps": 10, "examples_per_step": 32,
            "flops": flops.task_fields(config, 32, [0.1] * 10, 1, ENTRY)}
    assert task["flops"]["peak_measured"]["conditions"]["other_cpu_cores"] == 0.03
    summary = flops.cluster_summary({"window_s": 1.0, "window_start": NOW, "examples": 320}, [task])
    line = flops.render(summary, "train")
    assert "= 9.60 of the 100.0 GFLOP/s GEMM peak of the tasks' cores, above 1: the peak is too low" in line
    assert "\nGEMM peak measured " in line and "(4.0 days before this run)" in line


@pytest.fixture
def peak_tool(tmp_path, monkeypatch):
    from tools.bench import peak

    monkeypatch.setenv(peaks.CACHE_ENV, str(tmp_path / "peak.json"))
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    return peak


def test_a_busy_machine_is_refused_before_measuring(peak_tool, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(peak_tool.os, "getloadavg", lambda: (1.94, 1.5, 1.2))
    monkeypatch.setattr(peak_tool, "measure", lambda: pytest.fail("measured on a busy machine"))
    with flagsaver.flagsaver(refresh=True, force=False), pytest.raises(SystemExit) as stop:
        peak_tool.main([])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tools.bench.peak: error: the machine is busy (1-minute load average 1.94")
    assert not (tmp_path / "peak.json").exists()


def test_a_peak_measured_under_other_load_is_not_stored_unless_forced(peak_tool, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(peak_tool.os, "getloadavg", lambda: (0.05, 0.1, 0.1))
    monkeypatch.setattr(peak_tool.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(peak_tool, "native_bf16", lambda: False)
    loaded = dict(ENTRY, measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  native_bf16=False, conditions=dict(ENTRY["conditions"], other_cpu_cores=1.2))
    monkeypatch.setattr(peak_tool, "measure", lambda: json.loads(json.dumps(loaded)))
    with flagsaver.flagsaver(refresh=True, force=False):
        assert peak_tool.main([]) == 1
    assert "not stored: the machine was busy (other processes used 1.20 of 2 cores" in capsys.readouterr().err
    assert not (tmp_path / "peak.json").exists()
    with flagsaver.flagsaver(refresh=True, force=True):
        assert peak_tool.main([]) == 0
    stored = peaks.load()
    assert stored["conditions"]["forced"] and "other processes used 1.20" in stored["conditions"]["busy"]
    assert "stored with --force" in peaks.describe(stored)
