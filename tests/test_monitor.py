"""System monitor over plain busy-looping processes, and run-level HParams (no TensorFlow)."""
import glob
import json
import logging
import os
import subprocess
import sys
import threading
import time

import psutil
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import metadata as hparams_metadata

from cluster.plan.topology import make_plan
from tfbench.config import RunConfig
from tfbench.monitor import Monitor, NullMonitor, monitor_factory
from tfbench.monitor.gpu import GpuSampler
from tfbench.results import rundir
from tfbench.tensorboard.hparams import write_hparams

SYS_TAGS = {"sys/cpu_percent", "sys/cpu_percent_normalized", "sys/rss_mb", "sys/peak_rss_mb",
            "sys/threads", "sys/net_tx_kbps", "sys/net_rx_kbps", "sys/net_tx_mb_total",
            "sys/net_rx_mb_total"}
INTERVAL = 0.2


def busy(seconds: float, children: int = 0) -> subprocess.Popen:
    """A process that spins for `seconds`, optionally with busy children of its own."""
    code = ("import subprocess, sys, time\n"
            f"kids = [subprocess.Popen([sys.executable, '-c', 'import time\\nend = time.time() + {seconds}\\n"
            f"while time.time() < end: pass']) for _ in range({children})]\n"
            f"end = time.time() + {seconds}\n"
            "while time.time() < end: pass\n"
            "for k in kids: k.wait()\n")
    return subprocess.Popen([sys.executable, "-c", code])


def idle() -> subprocess.Popen:
    """A process that only waits (the fixture kills it)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def scalars(run, name):
    paths = glob.glob(os.path.join(run.task_tb(name), "events.out.tfevents.*"))
    assert paths, f"no event file in tb/{name}"
    acc = EventAccumulator(run.task_tb(name))
    acc.Reload()
    return acc


def monitor_threads():
    return [t for t in threading.enumerate() if t.name == "tfbench-monitor"]


@pytest.fixture(autouse=True)
def no_monitor_warnings(caplog):
    """Sampling errors are logged, not raised: a test passes only if none were logged."""
    yield
    warnings = [r.getMessage() for r in caplog.get_records("call")
                if r.name.startswith("tfbench.monitor") and r.levelno >= logging.WARNING]
    assert not warnings


@pytest.fixture
def setup(tmp_path):
    def make(**overrides):
        config = RunConfig(logdir=str(tmp_path), monitor_interval=INTERVAL, **overrides)
        run = rundir.create(str(tmp_path), f"run{len(os.listdir(tmp_path))}")
        return run, make_plan(config), config
    procs = []
    yield make, procs
    for p in procs:
        p.kill()
        p.wait(timeout=10)


def test_monitor_samples_busy_workers(setup):
    make, procs = setup
    run, plan, config = make(strategy="multi_worker_mirrored", num_workers=2)
    steady = busy(3.0, children=1)
    procs.append(steady)
    monitor = Monitor(run, plan, config)
    monitor.add("worker_0", steady.pid)
    monitor.start()
    short = busy(1.0)
    procs.append(short)
    monitor.add("worker_1", short.pid)  # tasks may also arrive after start()
    short.wait(timeout=10)  # worker_1 exits (and is reaped) mid-monitoring
    time.sleep(5 * INTERVAL)
    began = time.monotonic()
    summary = monitor.stop()
    assert time.monotonic() - began < 2.0
    steady.kill()  # frees the cores for reading the results back
    assert monitor.stop() is summary
    assert not monitor_threads()

    for name in ("worker_0", "worker_1", "workers_mean"):
        acc = scalars(run, name)
        assert SYS_TAGS <= set(acc.Tags()["scalars"]), name
        assert max(e.value for e in acc.Scalars("sys/cpu_percent")) > 10, name
        assert all(e.value > 0 for e in acc.Scalars("sys/rss_mb")), name
    host = scalars(run, "host").Tags()["scalars"]
    assert {"host/cpu_percent", "host/mem_used_mb"} <= set(host)
    with open(run.file("monitor.jsonl")) as f:  # interfaces that carried no traffic have no series
        carried = {name for rec in map(json.loads, f) if rec["role"] == "host"
                   for name, nic in rec["net"].items() if nic["tx_bytes"] or nic["rx_bytes"]}
    assert {t.split("_")[1] for t in host if t.startswith("host/net_")} <= carried

    w0 = scalars(run, "worker_0")
    assert max(e.value for e in w0.Scalars("sys/threads")) >= 2  # the child counts as the task's
    steps = [e.step for e in w0.Scalars("sys/cpu_percent")]
    assert steps == sorted(steps) and len(steps) >= 5
    assert len(scalars(run, "worker_1").Scalars("sys/cpu_percent")) < len(steps)

    with open(run.file("monitor.jsonl"), encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    tasks = {line["task"] for line in lines}
    assert tasks == {"worker_0", "worker_1", "host"}
    w0_lines = [line for line in lines if line["task"] == "worker_0"]
    for key in ("time", "role", "index", "cpu_percent", "cpu_percent_normalized", "rss_mb",
                "peak_rss_mb", "threads", "net_tx_bytes", "net_rx_bytes", "net_tx_kbps", "net_rx_kbps"):
        assert key in w0_lines[0], key
    assert w0_lines[0]["role"] == "worker" and w0_lines[0]["index"] == 0
    cores = len(plan.task("worker_0").cores) or os.cpu_count()
    assert w0_lines[-1]["cpu_percent_normalized"] == pytest.approx(w0_lines[-1]["cpu_percent"] / cores)

    assert set(summary["tasks"]) == {"worker_0", "worker_1"}
    for name, task in summary["tasks"].items():
        assert task["samples"] > 0 and task["cpu_percent_mean"] > 0 and task["rss_mb_peak"] > 0, name
        assert task["net_tx_bytes"] is not None and task["net_rx_bytes"] is not None
    assert summary["workers_mean"]["tasks"] == 2
    assert summary["host"]["samples"] == summary["samples"] > 0
    json.dumps(summary)


class FakeNet:
    """Every watched pid sends 1000 and receives 500 more bytes per sample."""

    def __init__(self):
        self.counts = {}

    def sample(self, pids):
        for pid in pids:
            tx, rx = self.counts.get(pid, (0, 0))
            self.counts[pid] = (tx + 1000, rx + 500)
        return {pid: self.counts[pid] for pid in pids}

    def close(self):
        pass


def test_roles_stay_apart_and_traffic_survives_restart(setup):
    make, procs = setup
    run, plan, config = make(strategy="parameter_server", num_workers=1)
    others = {name: idle() for name in ("chief_0", "ps_0")}
    procs += others.values()
    monitor = Monitor(run, plan, config, net_source_factory=FakeNet, gpu_factory=lambda: None)
    for name, proc in others.items():
        monitor.add(name, proc.pid)
    monitor.start()
    first = busy(1.0)
    procs.append(first)
    monitor.add("worker_0", first.pid)
    first.wait(timeout=10)
    time.sleep(2 * INTERVAL)
    restarted_at = time.time()
    second = idle()
    procs.append(second)
    monitor.add("worker_0", second.pid)  # the launcher restarted the task
    time.sleep(4 * INTERVAL)
    summary = monitor.stop()

    worker = summary["tasks"]["worker_0"]
    assert worker["pids"] == [first.pid, second.pid]
    with open(run.file("monitor.jsonl"), encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if '"worker_0"' in line]
    totals = [line["net_tx_bytes"] for line in lines]
    assert totals == sorted(totals)
    before = max(line["net_tx_bytes"] for line in lines if line["time"] < restarted_at)
    assert worker["net_tx_bytes"] > before > 0

    assert {"chief_0", "ps_0", "worker_0", "workers_mean", "host"} <= set(os.listdir(run.tb_dir))
    mean = scalars(run, "workers_mean").Scalars("sys/net_tx_mb_total")
    own = scalars(run, "worker_0").Scalars("sys/net_tx_mb_total")
    assert [e.value for e in mean] == pytest.approx([e.value for e in own])  # only workers averaged
    assert summary["workers_mean"]["tasks"] == 1
    assert summary["workers_mean"]["net_tx_bytes"] == worker["net_tx_bytes"]
    assert summary["tasks"]["ps_0"]["role"] == "ps"


def test_stop_without_start_and_vanished_processes(setup):
    make, _ = setup
    run, plan, config = make()
    monitor = Monitor(run, plan, config)
    monitor.add("worker_0", 2 ** 22 + 12345)  # no such process
    assert monitor.stop()["tasks"]["worker_0"]["samples"] == 0

    zombie = subprocess.Popen([sys.executable, "-c", "pass"])  # exits, not reaped until the end
    monitor = Monitor(run, plan, config)
    monitor.add("worker_0", 2 ** 22 + 12345)
    monitor.add("worker_1", zombie.pid)
    monitor.start()
    end = time.monotonic() + 10
    while psutil.Process(zombie.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < end:
        time.sleep(0.02)
    time.sleep(3 * INTERVAL)
    summary = monitor.stop()
    zombie.wait(timeout=10)
    assert summary["samples"] >= 2 and summary["tasks"]["worker_0"]["samples"] == 0
    assert summary["tasks"]["worker_1"]["samples"] < summary["samples"]
    assert not monitor_threads()


def test_task_outside_the_plan_is_normalized_by_the_machine(setup):
    """E.g. horovodrun, which stands for all ranks and has no cores of its own."""
    make, procs = setup
    run, plan, config = make()
    proc = idle()
    procs.append(proc)
    monitor = Monitor(run, plan, config, net_source_factory=lambda: None)
    monitor.add("horovodrun", proc.pid)
    monitor.start()
    time.sleep(3 * INTERVAL)
    summary = monitor.stop()
    with open(run.file("monitor.jsonl"), encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if '"horovodrun"' in line]
    assert lines and lines[0]["role"] == "horovodrun"
    for line in lines:
        assert line["cpu_percent_normalized"] == pytest.approx(line["cpu_percent"] / psutil.cpu_count())
        assert line["net_tx_bytes"] is None
    assert summary["tasks"]["horovodrun"]["net_tx_bytes"] is None
    assert summary["workers_mean"] == {"tasks": 0, "samples": None, "cpu_percent_mean": None,
                                       "cpu_percent_normalized_mean": None, "rss_mb_peak": None,
                                       "net_tx_bytes": None, "net_rx_bytes": None}


def test_nomonitor_gives_null_monitor(setup):
    make, _ = setup
    run, plan, config = make(monitor=False)
    monitor = monitor_factory(run, plan, config)
    assert isinstance(monitor, NullMonitor)
    monitor.add("worker_0", os.getpid())
    monitor.start()
    assert monitor.stop() == {}


def test_no_gpu_means_no_gpu_tags(setup):
    assert GpuSampler.create() is None  # no NVML library or no GPU on this machine
    make, procs = setup
    run, plan, config = make()
    proc = idle()
    procs.append(proc)
    monitor = Monitor(run, plan, config)
    monitor.add("worker_0", proc.pid)
    monitor.start()
    time.sleep(2 * INTERVAL)
    monitor.stop()
    assert not [t for t in scalars(run, "worker_0").Tags()["scalars"] if "gpu" in t]
    assert not [t for t in scalars(run, "host").Tags()["scalars"] if "gpu" in t]


class FakeNvml:
    """The few pynvml calls the sampler makes, for one GPU held by `pid`."""

    def __init__(self, pid):
        self.pid = pid

    def nvmlDeviceGetUtilizationRates(self, handle):
        return type("U", (), {"gpu": 42})()

    def nvmlDeviceGetMemoryInfo(self, handle):
        return type("M", (), {"used": 3 * 2 ** 20})()

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [type("P", (), {"pid": self.pid, "usedGpuMemory": 2 * 2 ** 20})()]

    def nvmlShutdown(self):
        pass


def test_gpu_series_when_nvml_reports(setup):
    make, procs = setup
    run, plan, config = make()
    proc = idle()
    procs.append(proc)
    monitor = Monitor(run, plan, config, gpu_factory=lambda: GpuSampler(FakeNvml(proc.pid), ["gpu0"]))
    monitor.add("worker_0", proc.pid)
    monitor.start()
    time.sleep(2 * INTERVAL)
    summary = monitor.stop()
    assert scalars(run, "worker_0").Scalars("sys/gpu_mem_mb")[0].value == pytest.approx(2.0)
    host = scalars(run, "host")
    assert host.Scalars("host/gpu0_util_percent")[0].value == pytest.approx(42.0)
    assert summary["host"]["gpu_util_percent_mean"] == {"0": pytest.approx(42.0)}


def _cluster_record():
    return {"kind": "cluster", "status": "ok", "images_per_sec": 123.5, "window_start": 1000.0,
            "window_end": 1010.0, "stats": {"mean_s": 0.25}}


def _hparams_run(run):
    acc = EventAccumulator(run.tb_dir)
    acc.Reload()
    content = acc.PluginTagToContent(hparams_metadata.PLUGIN_NAME)
    return acc, content


@pytest.mark.parametrize("record", [_cluster_record(), None, {"status": "failed"}])
def test_write_hparams_reads_back(setup, record):
    make, _ = setup
    run, _, config = make(strategy="parameter_server", num_workers=2, ps_sync=True)
    write_hparams(run, config, record)
    acc, content = _hparams_run(run)
    start = hparams_metadata.parse_session_start_info_plugin_data(
        content[hparams_metadata.SESSION_START_INFO_TAG])
    hp = start.hparams
    assert hp["strategy"].string_value == "parameter_server"
    assert hp["num_workers"].number_value == 2 and hp["num_ps"].number_value == 1
    assert hp["ps_sync"].bool_value is True
    for name in ("batch_size", "placement", "device", "mode", "model", "image_size"):
        assert name in hp, name
    end = hparams_metadata.parse_session_end_info_plugin_data(content[hparams_metadata.SESSION_END_INFO_TAG])
    metrics = set(acc.Tags()["scalars"])
    if record is not None and record.get("status") == "ok":
        assert acc.Scalars("hparams/cluster_images_per_sec")[0].value == pytest.approx(123.5)
        assert acc.Scalars("hparams/mean_step_time_ms")[0].value == pytest.approx(250.0)
        assert end.status == api_pb2.STATUS_SUCCESS
    else:
        assert not metrics
        assert end.status == api_pb2.STATUS_FAILURE
