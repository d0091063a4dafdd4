"""Precision choice, peak lookup, FLOP arithmetic and start-up phases: the logic, without TensorFlow."""
import json
import time

import pytest

import tfbench.config as config_lib
from conftest import run_cli
from tfbench.config.errors import ConfigError
from tfbench.framework import precision
from tfbench.measure import flops, machine, peaks, startup
from tools.sweep import grid as grid_lib

AVX2_ONLY = {"fma", "avx", "avx2", "f16c"}  # an AVX2 CPU (e.g. AMD Zen 3): no BF16 instructions


def test_bf16_is_refused_on_a_cpu_without_bf16_instructions():
    assert not precision.cpu_has_bf16(AVX2_ONLY)
    assert "needs a CPU with BF16 instructions" in precision.unsupported("bf16", on_gpu=False, flags=AVX2_ONLY)


@pytest.mark.parametrize("flag", ["avx512_bf16", "amx_bf16"])
def test_bf16_runs_on_a_cpu_with_bf16_instructions_and_on_gpus(flag):
    assert precision.cpu_has_bf16(AVX2_ONLY | {flag})
    assert precision.unsupported("bf16", on_gpu=False, flags=AVX2_ONLY | {flag}) is None
    assert precision.unsupported("bf16", on_gpu=True, flags=AVX2_ONLY) is None


def test_fp16_needs_a_gpu_and_unknown_precisions_are_refused():
    assert "fp16 needs --device=gpu" in precision.unsupported("fp16", on_gpu=False,
                                                               flags=AVX2_ONLY | {"avx512_bf16", "avx512_fp16"})
    assert precision.unsupported("fp16", on_gpu=True, flags=set()) is None
    assert "unknown" in precision.unsupported("fp8", on_gpu=True, flags=set())


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n\nflags\t\t: other\n")
    assert precision.cpu_flags(str(cpuinfo)) == {"fpu", "avx2", "avx512_bf16"}
    assert precision.cpu_flags(str(tmp_path / "missing")) == frozenset()


def test_validate_refuses_bf16_through_the_detection_function(tmp_path, monkeypatch):
    base = config_lib.RunConfig(model="tiny", image_size=16, logdir=str(tmp_path))
    monkeypatch.setattr(precision, "cpu_flags", lambda path="/proc/cpuinfo": frozenset(AVX2_ONLY))
    with pytest.raises(ConfigError, match="BF16 instructions"):
        config_lib.validate(base.replace(precision="bf16"))
    monkeypatch.setattr(precision, "cpu_flags", lambda path="/proc/cpuinfo": frozenset(AVX2_ONLY | {"amx_bf16"}))
    assert config_lib.validate(base.replace(precision="bf16")).precision == "bf16"
    with pytest.raises(ConfigError, match="fp16 needs --device=gpu"):
        config_lib.validate(base.replace(precision="fp16"), gpu_count=0)
    assert config_lib.validate(base.replace(precision="fp16", device="gpu"), gpu_count=1).precision == "fp16"


@pytest.mark.parametrize("value,expected", [("fp16", "--precision=fp16 needs --device=gpu"),
                                            ("int8", "--precision='int8' is unknown")])
def test_cli_refuses_precisions_the_device_cannot_run_in_one_line(tmp_path, value, expected):
    result = run_cli(f"--logdir={tmp_path}", "--model=tiny", "--image_size=16", f"--precision={value}", timeout=60)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], result.stderr
    assert not any(tmp_path.iterdir())


def test_precision_is_a_sweep_axis_and_names_its_points(tmp_path):
    grid = grid_lib.Grid.from_dict({"model": "tiny", "image_size": 16, "precision": ["fp32"], "xla": [False, True]})
    points, notes = grid_lib.expand(grid, str(tmp_path))
    assert sorted(p.id for p in points) == ["default-w1-b32-train-soft-cpu-tiny-16px-r0",
                                            "default-w1-b32-train-soft-cpu-tiny-16px-xla-r0"]
    assert notes == []
    on_cpu = grid_lib.Grid.from_dict({"model": "tiny", "image_size": 16, "precision": ["fp32", "fp16"]})
    with pytest.raises(ConfigError, match=r"^sweep value --precision=fp16 selects no point: --precision=fp16 needs "
                                          r"--device=gpu and a GPU"):
        grid_lib.expand(on_cpu, str(tmp_path))  # a precision no point can run is bad input, not a note
    values = dict(points[0].values, precision="bf16", xla=True)
    assert grid_lib.point_id(values, 1) == "default-w1-b32-train-soft-cpu-tiny-16px-bf16-xla-r1"


PEAK = {"status": "measured", "cpu": {
    "fp32": {"cores": 4, "all_cores_flops_per_s": 300e9, "one_core_flops_per_s": 90e9},
    "bf16": {"cores": 4, "all_cores_flops_per_s": 600e9, "one_core_flops_per_s": 160e9}}}


def test_peak_for_a_tasks_cores():
    assert peaks.peak_flops(PEAK, "fp32", 4) == 300e9
    assert peaks.peak_flops(PEAK, "fp32", 1) == 90e9
    assert peaks.peak_flops(PEAK, "fp32", 2) == 180e9
    assert peaks.peak_flops(PEAK, "fp32", 3) == 270e9
    assert peaks.peak_flops(PEAK, "bf16", 1) == 160e9
    assert peaks.peak_flops(PEAK, "fp16", 1) is None  # not measured: not invented
    assert peaks.peak_flops({"status": peaks.UNKNOWN}, "fp32", 1) is None
    assert peaks.peak_flops(None, "fp32", 1) is None
    gpu = dict(PEAK, gpu={"fp16": {"flops_per_s": 100e12}})
    assert peaks.peak_flops(gpu, "fp16", 1, device="gpu") == 100e12


def test_peak_cache_round_trip_and_environment_says_when_unknown(tmp_path, monkeypatch):
    monkeypatch.setenv(peaks.CACHE_ENV, str(tmp_path / "peak.json"))
    from tfbench.measure import environment

    assert peaks.load() is None
    assert environment.collect()["peak"] == {"status": peaks.UNKNOWN}
    peaks.store(PEAK | {"measured_at": "now"})
    peaks.store({"other": 1}, key="another machine")
    assert peaks.load()["cpu"]["fp32"]["one_core_flops_per_s"] == 90e9
    assert environment.collect()["peak"]["status"] == "measured"
    assert set(json.loads((tmp_path / "peak.json").read_text())) == {machine.key(), "another machine"}


COUNTS = {"forward": 4_000_000_000, "train": 12_000_000_000, "params": 25_000_000}


def test_step_flops_and_achieved_fraction():
    assert flops.step_flops(COUNTS, "forward", 8) == 32e9
    assert flops.step_flops(COUNTS, "train", 8) == 96e9 + 50e6  # + SGD: 2 FLOPs per parameter
    out = flops.achieved(COUNTS, "train", 8, examples_per_sec=4.0, peak_flops_per_s=100e9)
    assert out["achieved_flops_per_s"] == pytest.approx((96e9 + 50e6) / 2)
    assert out["fraction_of_peak"] == pytest.approx(0.48025)
    unknown = flops.achieved(COUNTS, "train", 8, examples_per_sec=4.0, peak_flops_per_s=None)
    assert unknown["fraction_of_peak"] is None and "tools.bench.peak" in unknown["peak_note"]


def test_cluster_flops_sum_every_counted_task_over_the_window():
    per_task = dict(flops.achieved(COUNTS, "train", 4, 1.0, 50e9), precision="fp32")
    tasks = [{"flops": per_task, "num_measured_steps": 10}, {"flops": per_task, "num_measured_steps": 10},
             {"flops": per_task, "num_measured_steps": 10, "counts_toward_cluster": False}]
    summary = flops.cluster_summary({"window_s": 40.0}, tasks)
    assert summary["achieved_flops_per_s"] == pytest.approx(2 * 10 * (48e9 + 50e6) / 40.0)
    assert summary["peak_flops_per_s"] == 100e9
    assert "of the 100.0 GFLOP/s GEMM peak" in flops.render(summary, "train")
    assert "GFLOP/image train" in flops.render(summary, "train")
    tokens = dict(flops.achieved(COUNTS, "train", 4, 1.0, 50e9, units_per_example=128, unit="tokens"), precision="fp32")
    assert tokens["train_per_unit"] == COUNTS["train"] / 128 and tokens["train_per_example"] == COUNTS["train"]
    line = flops.render(flops.cluster_summary({"window_s": 40.0}, [{"flops": tokens, "num_measured_steps": 10}]),
                        "train")
    assert f"({COUNTS['train'] / 128 / 1e9:.3g} GFLOP/token train, fp32)" in line
    no_peak = [dict(t, flops=dict(per_task, peak_flops_per_s=None)) for t in tasks[:2]]
    assert "unknown" in flops.render(flops.cluster_summary({"window_s": 40.0}, no_peak), "train")
    assert flops.cluster_summary({"window_s": 1.0}, [{"flops": {"error": "x"}, "num_measured_steps": 1}]) is None


class _Timing:
    def __init__(self, start, duration):
        self.start_wall, self.duration_s = start, duration


class _Reporter:
    def __init__(self):
        self.seen = []

    def step_done(self, i, timing, measured):
        self.seen.append(i)


def test_startup_phases_are_recorded_in_order(monkeypatch):
    monkeypatch.setenv(startup.LAUNCHED_ENV, repr(startup.process_start_time() - 0.25))
    startup.reset()
    startup.mark("tf_imported")
    startup.mark("strategy_ready")
    startup.mark("model_built")
    startup.mark("tf_imported")  # a second mark of a phase is ignored
    reporter = _Reporter()
    startup.watch(reporter, num_warmup_steps=2)
    now = time.time()
    for i in range(4):
        reporter.step_done(i, _Timing(now + i, 0.5), measured=i >= 2)
    assert reporter.seen == [0, 1, 2, 3]  # the reporter still hears every step
    summary = startup.summary()
    marks = summary["marks"]
    assert list(marks) == list(startup.PHASES)
    assert [marks[p] for p in startup.PHASES] == sorted(marks[p] for p in startup.PHASES)
    assert marks["first_step_done"] == now + 0.5 and marks["measuring"] == now + 2
    assert sum(summary["seconds"].values()) == pytest.approx(summary["total_s"])
    json_round_trip = json.loads(json.dumps(summary, sort_keys=True))
    assert summary["seconds"]["process_start"] == pytest.approx(0.25, abs=0.02)  # what the launcher took
    assert startup.render(json_round_trip).split(": ", 1)[1].split(", ")[0].startswith("process_start")
    with pytest.raises(ValueError):
        startup.mark("coffee")
    startup.reset()


def test_horovod_check_build_is_asked_once_then_cached(tmp_path, monkeypatch):
    """`horovodrun --check-build` imports TensorFlow: 10-30 s before every Horovod run's tasks."""
    import os
    import sys

    from tfbench.measure import environment

    if not os.path.exists(os.path.join(os.path.dirname(sys.executable), "horovodrun")):
        pytest.skip("horovodrun is not installed")
    monkeypatch.setenv("HOME", str(tmp_path))
    calls = []
    answer = "Horovod v0.28.1:\n\nAvailable Frameworks:\n    [X] TensorFlow"
    monkeypatch.setattr(environment, "_run_check_build", lambda path: calls.append(path) or answer)
    assert environment.horovod_check_build() == answer
    assert environment.horovod_check_build() == answer
    assert len(calls) == 1
    monkeypatch.setattr(environment, "_run_check_build", lambda path: calls.append(path) or "failed")
    os.remove(tmp_path / ".cache" / "tfbench" / "horovod-check-build.json")
    assert environment.horovod_check_build() == "failed"
    assert environment.horovod_check_build() == "failed" and len(calls) == 3  # failures are not cached


def test_bench_and_peak_entry_points_list_their_flags():
    for module, expected in (("tools.bench", ["--repeats", "--scaling_strategies"]),
                             ("tools.bench.peak", ["--size", "--refresh"])):
        result = run_cli("--help", module=module, timeout=60)
        assert result.returncode == 0, result.stderr
        assert all(e in result.stdout for e in expected), result.stdout
