"""The monitors of a run on Slurm nodes without Slurm: each node's monitor follows only the tasks
whose progress names its node (emulated nodes share one machine's processes), and the link
counters of emulated nodes are sampled once, where the switch is, on the run's time axis."""
import os
import time

from cluster.slurm import node_monitor
from tfbench.loop import progress
from tfbench.monitor import link_monitor
from tfbench.results.rundir import RunDir


def test_a_node_follows_only_the_tasks_on_it(tmp_path, monkeypatch):
    run = RunDir(str(tmp_path))
    os.makedirs(run.tasks_dir)
    me = os.getpid()
    monkeypatch.setattr(node_monitor.psutil.Process, "cmdline", lambda self: ["python", run.path])
    monkeypatch.setenv(progress.NODE_ENV, "h1")
    progress.write_progress(run.path, "worker_1", "ready")
    monkeypatch.delenv(progress.NODE_ENV)
    progress.write_progress(run.path, "worker_0", "ready")  # a task that names no node (one-node Slurm)
    assert progress.read_progress(run.path, "worker_1")["node"] == "h1"
    assert node_monitor.local_task_pid(run, "worker_1", "h1") == me
    assert node_monitor.local_task_pid(run, "worker_1", "h0") is None
    assert node_monitor.local_task_pid(run, "worker_0", "h0") == me


class FakeLinks:
    def __init__(self):
        self.samples, self.closed = [], False

    def sample(self, now, step, write_events=True):
        self.samples.append((now, step, write_events))

    def summary(self):
        return {"h0": {"tx_bytes": len(self.samples)}}

    def close(self):
        self.closed = True


def test_link_monitor_samples_from_start_to_stop(tmp_path, monkeypatch):
    links = FakeLinks()
    monkeypatch.setattr(link_monitor.HostLinks, "from_run", classmethod(lambda cls, run: links))
    monitor = link_monitor.LinkMonitor(RunDir(str(tmp_path)), interval_s=0.05)
    monitor.start()
    time.sleep(0.3)
    summary = monitor.stop()
    assert links.samples[0][2] is False and links.samples[-1][2] is False  # first and last: totals only
    assert sum(1 for s in links.samples if s[2]) >= 3 and links.closed
    assert summary == {"host_links": {"h0": {"tx_bytes": len(links.samples)}}} and monitor.stop() is summary
    steps = [s[1] for s in links.samples]
    assert steps == sorted(steps)


def test_link_monitor_without_network_json_is_silent(tmp_path):
    monitor = link_monitor.LinkMonitor(RunDir(str(tmp_path)), interval_s=0.05)
    monitor.start()
    assert monitor.stop() == {}
