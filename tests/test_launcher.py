"""The local launcher, driven with tests/fake_task.py instead of TensorFlow tasks.

Every run test also checks that no process of the run is left and that results.jsonl is intact.
"""
import dataclasses
import io
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from cluster.launchers import launch as launcher
from cluster.plan.spec import ClusterPlan
from cluster.plan.topology import make_plan
from cluster.supervision.status import StatusLine
from conftest import processes_mentioning
from tfbench.config import RunConfig
from tfbench.loop import progress
from tfbench.results import records, rundir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_TASK = os.path.join(ROOT, "tests", "fake_task.py")
pytestmark = pytest.mark.timeout(60)


def fake_command(spec):
    return [sys.executable, FAKE_TASK]


def fake_horovodrun(plan):
    return [sys.executable, FAKE_TASK, "--group", str(len(plan.workers))]


class FakeMonitor:
    def __init__(self, run, plan, config):
        self.added, self.started, self.stopped = [], False, False

    def add(self, name, pid):
        self.added.append((name, pid))

    def start(self):
        self.started = True

    def stop(self):
        self.stopped = True
        return {"samples": 3}


def with_env(plan: ClusterPlan, envs: dict) -> ClusterPlan:
    tasks = tuple(dataclasses.replace(t, env={**t.env, **envs.get(t.name, {})}) for t in plan.tasks)
    return dataclasses.replace(plan, tasks=tasks)


def setup_run(tmp_path, envs=None, strategy="multi_worker_mirrored", **config):
    config = RunConfig(**{"strategy": strategy, "num_workers": 2, "logdir": str(tmp_path), "stall_timeout": 20.0,
                          **config})
    plan = with_env(make_plan(config), envs or {})
    run = rundir.create(str(tmp_path), "run")
    run.write_json("plan.json", plan.to_dict())
    run.write_json("config.json", config.to_dict())
    return plan, run, config


def launch(plan, run, config, **kwargs):
    out = io.StringIO()
    kwargs.setdefault("command_for", fake_command)
    result = launcher.run(plan, run, config, out=out, **kwargs)
    return result, out.getvalue()


def assert_clean(run):
    assert processes_mentioning(run.path) == []
    with open(run.results, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    assert len(records.read(run.results)) == len(lines)
    return records.read(run.results)


def log_of(run, name):
    with open(run.task_log(name), encoding="utf-8") as f:
        return f.read()


def test_success_records_and_cluster_rate(tmp_path):
    plan, run, config = setup_run(tmp_path)
    plan = dataclasses.replace(plan, warnings=("2 compute tasks share 1 cores",))
    monitors = []

    def monitor_factory(*args):
        monitors.append(FakeMonitor(*args))
        return monitors[-1]

    handler = signal.getsignal(signal.SIGINT)
    result, out = launch(plan, run, config, monitor_factory=monitor_factory)
    assert (result.ok, result.exit_code, result.failed_task) == (True, 0, None), out
    assert signal.getsignal(signal.SIGINT) is handler
    assert out.splitlines()[0] == "tfbench: warning: 2 compute tasks share 1 cores"
    assert monitors[0].started and monitors[0].stopped
    assert {name for name, _ in monitors[0].added} == {"worker_0", "worker_1"}
    results = assert_clean(run)
    tasks = [r for r in results if r["kind"] == "task"]
    clusters = [r for r in results if r["kind"] == "cluster"]
    assert len(tasks) == 2 and len(clusters) == 1 and clusters[0] == result.cluster_record
    record = clusters[0]
    window = max(r["window_end"] for r in tasks) - min(r["window_start"] for r in tasks)
    assert record["images_per_sec"] == pytest.approx(2 * 8 * 5 / window)
    assert record["status"] == "ok" and record["strategy"] == "multi_worker_mirrored"
    assert (record["num_workers"], record["num_ps"]) == (2, 0)
    assert record["config"] == config.to_dict() and record["resources"] == {"samples": 3}
    for r in tasks:
        spec = plan.task(f"{r['role']}_{r['index']}")
        assert not spec.cores or r["affinity"] == list(spec.cores)
    assert "ready after" in out and "worker_0" in out


def test_killed_task_stops_the_rest(tmp_path):
    envs = {"worker_1": {"FAKE_MODE": "crash"},
            "worker_0": {"FAKE_STEPS": "1000", "FAKE_IGNORE_TERM": "1"}}
    plan, run, config = setup_run(tmp_path, envs)
    result, out = launch(plan, run, config)
    returned = time.time()
    assert (result.ok, result.exit_code, result.failed_task) == (False, 1, "worker_1")
    assert result.reason == "worker_1 exited with code -9 (SIGKILL)"
    crashed = os.path.getmtime(run.task_log("worker_1"))
    assert returned - crashed < 10
    assert "killing itself at step 2" in out and "last" in out
    results = assert_clean(run)
    assert results[-1] == result.cluster_record
    assert results[-1]["status"] == "failed" and results[-1]["failed_task"] == "worker_1"


def test_a_crashed_tasks_failure_shows_the_crashing_threads_stack(tmp_path):
    plan, run, config = setup_run(tmp_path, {"worker_1": {"FAKE_MODE": "segfault"}})
    result, out = launch(plan, run, config)
    assert (result.ok, result.failed_task, result.reason) == (False, "worker_1", "worker_1 exited with code -11 (SIGSEGV)")
    shown = out[out.index("lines of"):]
    assert "Fatal Python error: Segmentation fault" in shown and "Current thread" in shown
    assert "segfault_beside_a_sleeping_thread" in shown  # the crashing thread's frames
    assert "threading.py" not in shown  # not the sleeping thread's, which faulthandler prints first
    assert assert_clean(run)[-1]["failed_task"] == "worker_1"


def test_hung_task_hits_stall_timeout(tmp_path):
    plan, run, config = setup_run(tmp_path, {"worker_1": {"FAKE_MODE": "hang"}}, stall_timeout=2.0)
    result, out = launch(plan, run, config)
    assert not result.ok and result.failed_task == "worker_1"
    assert result.reason.startswith("stall timeout: no step progress for 2 s")
    assert "hanging in warm-up" in out
    assert assert_clean(run)[-1]["reason"] == result.reason


def test_deadline_ends_the_run(tmp_path):
    plan, run, config = setup_run(tmp_path, {"worker_0": {"FAKE_STEPS": "1000"}, "worker_1": {"FAKE_STEPS": "1000"}},
                                  deadline=1.5)
    started = time.monotonic()
    result, out = launch(plan, run, config)
    assert (result.ok, result.failed_task, result.reason) == (False, None, "deadline of 1.5 s reached")
    assert time.monotonic() - started < 1.5 + launcher.FAILURE_GRACE_S + launcher.KILL_WAIT_S
    assert assert_clean(run)[-1]["status"] == "failed"


DRIVER = textwrap.dedent("""
    import json, signal, sys

    sys.path.insert(0, sys.argv[2])
    from cluster.launchers import launch as launcher
    from cluster.plan.spec import ClusterPlan
    from tfbench.config import RunConfig
    from tfbench.results.rundir import RunDir

    run = RunDir(sys.argv[1])
    before = signal.getsignal(signal.SIGINT)  # Python's default handler, or SIG_IGN when started in the background
    result = launcher.run(ClusterPlan.from_dict(run.read_json("plan.json")),
                          run, RunConfig.from_dict(run.read_json("config.json")),
                          command_for=lambda spec: [sys.executable, sys.argv[3]])
    restored = signal.getsignal(signal.SIGINT) is before
    print("RESULT " + json.dumps({"reason": result.reason, "exit_code": result.exit_code,
                                  "restored": restored}))
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_launcher_tears_down(tmp_path, sig):
    envs = {"worker_0": {"FAKE_MODE": "serve"}, "worker_1": {"FAKE_MODE": "serve"}}
    plan, run, config = setup_run(tmp_path, envs)
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, run.path, ROOT, FAKE_TASK],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 20
        while not all(progress.reached(progress.read_progress(run.path, t.name), "ready") for t in plan.tasks):
            assert time.monotonic() < deadline and driver.poll() is None, "tasks never got ready"
            time.sleep(0.1)
        driver.send_signal(sig)
        output, _ = driver.communicate(timeout=15)
    finally:
        driver.kill()
    result = json.loads(output.split("RESULT ", 1)[1])
    assert result == {"reason": f"interrupted by {sig.name}", "exit_code": 1, "restored": True}
    assert driver.returncode == 0
    assert assert_clean(run)[-1]["reason"] == f"interrupted by {sig.name}"
    assert "stopped by SIGTERM" in log_of(run, "worker_0")


def test_taken_port_is_replaced_before_start(tmp_path):
    plan, run, config = setup_run(tmp_path)
    clashing = plan.task("worker_0").port
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", clashing))
        blocker.listen()
        result, out = launch(plan, run, config)
    assert result.ok, out
    new_plan = ClusterPlan.from_dict(run.read_json("plan.json"))
    new_port = new_plan.task("worker_0").port
    assert new_port != clashing
    assert new_plan.task("worker_1").tf_config["cluster"]["worker"][0] == f"localhost:{new_port}"
    assert f"port {clashing} of worker_0 is taken" in out and "restarting" not in out
    assert len([r for r in assert_clean(run) if r["kind"] == "task"]) == 2


def test_bind_failure_restarts_with_a_new_port(tmp_path):
    plan, run, config = setup_run(tmp_path, {"worker_0": {"FAKE_MODE": "bind_fail"}})
    monitors = []

    def factory(*args):
        monitors.append(FakeMonitor(*args))
        return monitors[-1]

    result, out = launch(plan, run, config, monitor_factory=factory)
    assert result.ok, out
    assert "restarting all tasks" in out and "attempt 2 of 3" in out
    assert ClusterPlan.from_dict(run.read_json("plan.json")).task("worker_0").port != plan.task("worker_0").port
    assert log_of(run, "worker_0").count("Address already in use") == 1
    pids = [pid for name, pid in monitors[0].added if name == "worker_0"]
    assert len(set(pids)) == 2
    task_records = [r for r in assert_clean(run) if r["kind"] == "task"]
    assert {r["pid"] for r in task_records if r["index"] == 0} == {pids[-1]}
    assert result.cluster_record["num_tasks"] == 2


def test_bind_failure_gives_up_after_three_attempts(tmp_path):
    plan, run, config = setup_run(tmp_path, {"worker_0": {"FAKE_MODE": "bind_fail_always"}})
    result, out = launch(plan, run, config)
    assert not result.ok and result.failed_task == "worker_0"
    assert result.reason == "worker_0 exited with code 1 (3 attempts)"
    assert log_of(run, "worker_0").count("Address already in use") == 3
    assert "Address already in use" in out
    assert assert_clean(run)[-1]["status"] == "failed"


SERVE = {"FAKE_MODE": "serve"}


def test_service_tasks_are_stopped_after_success(tmp_path):
    envs = {"worker_0": SERVE, "worker_1": SERVE, "ps_0": SERVE}
    plan, run, config = setup_run(tmp_path, envs, strategy="parameter_server")
    result, out = launch(plan, run, config)
    assert result.ok, out
    for name in ("worker_0", "worker_1", "ps_0"):
        assert "stopped by SIGTERM" in log_of(run, name)
    assert result.cluster_record["num_ps"] == 1 and result.cluster_record["num_tasks"] == 1
    assert_clean(run)


def test_service_task_exiting_early_fails_the_run(tmp_path):
    envs = {"worker_0": SERVE, "worker_1": SERVE, "ps_0": {"FAKE_MODE": "exit_early"},
            "chief_0": {"FAKE_STEPS": "1000"}}
    plan, run, config = setup_run(tmp_path, envs, strategy="parameter_server")
    result, out = launch(plan, run, config)
    assert not result.ok and result.failed_task == "ps_0"
    assert result.reason.startswith("ps_0 exited before the run finished")
    assert_clean(run)


def test_horovod_group_reports_every_rank(tmp_path):
    plan, run, config = setup_run(tmp_path, strategy="horovod")
    result, out = launch(plan, run, config, group_command=fake_horovodrun, monitor_factory=FakeMonitor)
    assert result.ok, out
    assert result.cluster_record["num_tasks"] == 2
    assert "started rank 1" in log_of(run, "horovodrun")
    assert "worker_1" in out
    assert_clean(run)


def test_horovod_ranks_in_other_sessions_are_killed(tmp_path):
    envs = {"worker_1": {"FAKE_MODE_worker_1": "hang"}}
    plan, run, config = setup_run(tmp_path, envs, strategy="horovod", stall_timeout=2.0)
    result, out = launch(plan, run, config, group_command=fake_horovodrun)
    assert not result.ok and result.failed_task == "worker_1"
    assert result.reason.startswith("stall timeout")
    assert "hanging in warm-up" in out
    assert_clean(run)


def test_default_commands_run_the_task_module(tmp_path):
    plan, run, config = setup_run(tmp_path, strategy="horovod")
    group = launcher.default_group_command(run)(plan)
    assert group[:8] == [sys.executable, "-m", "cluster.horovod.horovodrun", "--gloo", "-np", "2", "-H", "localhost:2"]
    assert group[-4:] == ["--run_dir", run.path, "--task", "horovod"]
    task = launcher.default_command(run)(plan.task("worker_1"))
    assert task == [sys.executable, "-m", "tfbench.task", "--run_dir", run.path, "--task", "worker_1"]


def test_progress_round_trip(tmp_path):
    run = rundir.create(str(tmp_path), "run")
    assert progress.read_progress(run.path, "worker_0") is None
    progress.write_progress(run.path, "worker_0", "measure", 4, 10)
    record = progress.read_progress(run.path, "worker_0")
    assert (record["phase"], record["step"], record["total"], record["pid"]) == ("measure", 4, 10, os.getpid())
    assert os.listdir(run.tasks_dir) == ["worker_0.progress"] == [os.path.basename(progress.path(run.path, "worker_0"))]
    with pytest.raises(ValueError):
        progress.write_progress(run.path, "worker_0", "finished")
    progress.clear(run.path, "worker_0")
    assert progress.read_progress(run.path, "worker_0") is None


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_status_line_rewrites_one_line_on_a_terminal():
    out = FakeTTY()
    status = StatusLine(out)
    status.update(12, ["worker_0 measure 4/10", "ps_0 running"])
    status.update(13, ["worker_0 done"])
    status.message("tfbench: done")
    text = out.getvalue()
    assert text.startswith("\r[  12s] worker_0 measure 4/10 | ps_0 running\r[  13s] worker_0 done")
    assert text.endswith("\ntfbench: done\n") and text.count("\n") == 2


def test_status_line_in_ci_prints_changes_at_most_every_5_s():
    now = [0.0]
    out = io.StringIO()
    status = StatusLine(out, clock=lambda: now[0])
    for t, text in [(0, "a"), (1, "b"), (2, "b"), (5, "b"), (6, "b"), (11, "c")]:
        now[0] = t
        status.update(t, [text])
    assert out.getvalue().splitlines() == ["[   0s] a", "[   5s] b", "[  11s] c"]


def test_run_from_another_thread_leaves_signal_handling_alone(tmp_path):
    plan, run, config = setup_run(tmp_path, {"worker_0": {"FAKE_MODE": "exit_early"},
                                             "worker_1": {"FAKE_MODE": "exit_early"}})
    results = []
    thread = threading.Thread(target=lambda: results.append(launch(plan, run, config)))
    thread.start()
    thread.join(timeout=30)
    result, out = results[0]
    assert not result.ok and result.reason.startswith("every task exited 0 but no results were recorded"), out
    assert assert_clean(run)[-1]["status"] == "failed"


def test_temporary_files_of_tasks_killed_outright_go_with_the_run(tmp_path):
    """A task that SIGTERM cannot end (a parameter server's TensorFlow runtime) is SIGKILLed and never
    removes its temporary files; they are in the run's scratch directory, which goes with the run."""
    envs = {"worker_0": SERVE, "worker_1": SERVE, "ps_0": {**SERVE, "FAKE_IGNORE_TERM": "1"}}
    plan, run, config = setup_run(tmp_path, envs, strategy="parameter_server", num_ps=1)
    plan = with_env(plan, {t.name: {"FAKE_TEMP_FILE": "1"} for t in plan.tasks})
    result, out = launch(plan, run, config)
    assert result.ok, out
    assert_clean(run)
    made = [line.rsplit(" ", 1)[1] for t in plan.tasks
            for line in log_of(run, t.name).splitlines() if "temporary file" in line]
    assert len(made) == len(plan.tasks) == 4 and all(os.path.dirname(path) == run.scratch for path in made), made
    assert not os.path.exists(run.scratch)
