"""A straggler made on purpose: the launcher runs one task 1/FACTOR of the time by stopping and
continuing its process group, which costs its peers no CPU; in synchronous training its peers
then wait for it (their idleness grows), and the task is never left stopped."""
import subprocess
import sys
import time

import psutil
import pytest

from cluster.faults.straggler import OnceReady, Straggler
from tfrun import cluster_record, task_records

BUSY = [sys.executable, "-c", "while True: pass"]


def test_a_straggler_runs_a_fraction_of_the_time_and_is_left_running():
    proc = subprocess.Popen(BUSY, start_new_session=True)
    try:
        process = psutil.Process(proc.pid)
        time.sleep(0.2)
        before, t0 = sum(process.cpu_times()[:2]), time.monotonic()
        straggler = Straggler(proc.pid, slowdown=4.0).start()
        time.sleep(1.5)
        share = (sum(process.cpu_times()[:2]) - before) / (time.monotonic() - t0)
        straggler.stop()
        assert 0.05 < share < 0.5, share  # about 1/4 of a core; unslowed it would be ~1
        time.sleep(0.1)
        assert process.status() != psutil.STATUS_STOPPED
    finally:
        proc.kill()
        proc.wait()


def test_stopping_after_the_process_ended_is_harmless():
    """A straggler whose process group is gone ends its duty cycle on its own and stops quietly."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait()
    straggler = Straggler(proc.pid, slowdown=2.0).start()
    time.sleep(0.1)
    assert not straggler._thread.is_alive()  # noqa: SLF001 - its first signal found no process group
    straggler.stop()  # raises nothing
    assert not straggler._thread.is_alive()  # noqa: SLF001


class _Config:
    straggler_slowdown = 4.0


def test_a_task_is_slowed_once_it_reports_ready_and_a_ps_from_its_start():
    proc = subprocess.Popen(BUSY, start_new_session=True)
    try:
        worker = OnceReady("worker_1", proc.pid, _Config(), progress_tasks=["worker_0", "worker_1"])
        worker.poll(False)
        assert worker.running is None  # still starting: TensorFlow's import runs at full speed
        worker.poll(True)
        started = worker.running
        assert started is not None and started.slowdown == 4.0
        worker.poll(True)
        assert worker.running is started  # one duty cycle, however often it is polled
        worker.stop()
        ps = OnceReady("ps_0", proc.pid, _Config(), progress_tasks=["worker_0", "worker_1"])
        assert ps.running is not None  # reports no progress: slowed from its start
        ps.stop()
        time.sleep(0.1)
        assert psutil.Process(proc.pid).status() != psutil.STATUS_STOPPED
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_sync_peers_wait_for_a_straggler(clusters):
    """The shared run `ps_sync_straggler_hard` of tests/clusters.py (its hard placement is for
    test_step_definitions)."""
    run = clusters["ps_sync_straggler_hard"].run
    assert clusters["ps_sync_straggler_hard"].config["straggler"] == "worker_1:4"
    tasks = task_records(run)
    slow, fast = tasks["worker_1"], tasks["worker_0"]
    assert slow["stats"]["mean_s"] > 2 * fast["stats"]["mean_s"], (slow["stats"], fast["stats"])
    assert 0 <= slow["idleness"] < fast["idleness"] <= 1, (slow["idleness"], fast["idleness"])
    assert cluster_record(run)["straggler"]["task"] == "worker_1"
