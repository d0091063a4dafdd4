"""The CLI end to end on the tiny model: the run directory, its records, and TensorBoard events
that tensorboard's own reader reads back with exactly the measured steps (the shared runs
`default` and `forward_soft_gpu` of tests/clusters.py)."""
import json
import os
import subprocess

import pytest

from conftest import ROOT
from tfbench.tensorboard import timeline
from tfrun import cluster_record, scalars, task_records

pytestmark = pytest.mark.slow


def test_default_run_writes_records_events_and_table(clusters):
    default = clusters["default"]
    out, run = default.out, default.run
    for name in ("config.json", "environment.json", "plan.json", "monitor.jsonl"):
        assert os.path.getsize(os.path.join(run, name)) > 0, name
    with open(os.path.join(run, "environment.json")) as f:
        head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True, cwd=ROOT)
        assert json.load(f)["tfbench_commit"].split("+")[0] == head.stdout.strip()  # the checkout that measured
    with open(os.path.join(run, "config.json")) as f:
        config = json.load(f)
    assert config["model"] == "tiny" and config["num_steps"] == 3 and config["num_warmup_steps"] == 2

    (worker,) = task_records(run).values()
    assert (worker["role"], worker["index"], worker["strategy"]) == ("worker", 0, "default")
    assert worker["num_measured_steps"] == 3 and len(worker["step_times_s"]) == 3
    assert worker["examples_per_step"] == worker["images_per_step"] == 4 and worker["global_batch_size"] == 4
    assert all(t > 0 for t in worker["step_times_s"])
    assert worker["stats"]["mean_s"] == pytest.approx(sum(worker["step_times_s"]) / 3)
    assert worker["images_per_sec"] == pytest.approx(4 / worker["stats"]["mean_s"])
    assert worker["placement"]["op_devices"] and worker["placement"]["variable_devices"]
    cluster = cluster_record(run)
    assert cluster["status"] == "ok" and cluster["images"] == 12
    assert cluster["images_per_sec"] == pytest.approx(12 / cluster["window_s"])

    events = scalars(os.path.join(run, "tb", "worker_0"))
    step_ms = events["perf/step_time_ms"]
    # the run's one step axis: milliseconds since the run began, at each step's end
    origin = timeline.origin(run)
    ends = [s + t for s, t in zip(worker["step_start_wall"], worker["step_times_s"])]
    assert [e.step for e in step_ms] == [timeline.step_ms(origin, end) for end in ends]
    assert [e.value for e in step_ms] == pytest.approx([t * 1e3 for t in worker["step_times_s"]], rel=1e-5)
    assert len(events["perf/images_per_sec"]) == 3
    assert {"sys/cpu_percent", "sys/rss_mb", "sys/net_tx_mb_total"} <= set(events)
    hparams_files = [f for f in os.listdir(os.path.join(run, "tb")) if f.endswith(".hparams")]
    assert hparams_files

    assert "cluster" in out and "worker_0" in out and "global batch=4" in out


def test_forward_mode_measures_inference(clusters):
    (worker,) = task_records(clusters["forward_soft_gpu"].run).values()
    assert worker["mode"] == "forward" and worker["num_measured_steps"] == 3


def test_soft_gpu_placement_falls_back_and_says_so(clusters):
    launched = clusters["forward_soft_gpu"]
    out, (worker,) = launched.out, task_records(launched.run).values()
    placed = worker["placement"]
    assert placed["requested_device"] == "gpu" and placed["gpus_visible"] == 0
    assert placed["fallback_to_cpu"] is True
    assert placed["op_devices"] and all("GPU" not in d for d in placed["op_devices"])
    assert "on CPU" in out


def test_hard_gpu_placement_without_gpu_is_refused(logdir):
    from conftest import TINY, run_cli

    proc = run_cli(*TINY, f"--logdir={logdir}", "--device=gpu", "--placement=hard")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs a GPU" in lines[0]
    assert not os.path.exists(logdir) or not os.listdir(logdir)
