"""Supervision of a unit that stands for several tasks (a Slurm step or job), driven with
tests/fake_task.py: a group with servers in it ends the run once its finishing tasks are done
(the servers are stopped at teardown), and a group that fails names the task that was not done."""
import io
import os
import sys
import textwrap

import pytest

from cluster.launchers import launch as launcher
from cluster.launchers.base import Launcher, Unit, unit_env
from cluster.plan.topology import make_plan
from conftest import processes_mentioning
from tfbench.config import RunConfig
from tfbench.results import records, rundir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_TASK = os.path.join(ROOT, "tests", "fake_task.py")
pytestmark = pytest.mark.timeout(60)

# Starts every named task as a fake task and exits with the first non-zero exit code, as an
# srun step with --kill-on-bad-exit would (which, like srun, takes a moment to stop the others).
GROUP = textwrap.dedent("""
    import os, subprocess, sys, time

    fake, names = sys.argv[1], sys.argv[2:]
    procs = [subprocess.Popen([sys.executable, fake], env=dict(os.environ, TFBENCH_TASK=n)) for n in names]
    while True:
        codes = [p.poll() for p in procs]
        bad = [c for c in codes if c not in (None, 0)]
        if bad or all(c == 0 for c in codes):
            time.sleep(0.5 if bad else 0)
            for p in procs:
                if p.poll() is None:
                    p.kill()
            sys.exit(bad[0] if bad else 0)
        time.sleep(0.1)
""")


class GroupLauncher(Launcher):
    name = "group"

    def __init__(self, run, env):
        super().__init__(run)
        self.env = env

    def units(self, plan):
        names = tuple(t.name for t in plan.tasks)
        env = unit_env(self.run, "group", self.env)
        return [Unit("group", (sys.executable, "-c", GROUP, FAKE_TASK, *names), env, self.run.task_log("group"),
                     tasks=names)]


def run_group(tmp_path, env, **config):
    config = RunConfig(logdir=str(tmp_path / "runs"), run_id="g", num_warmup_steps=1, num_steps=3,
                       stall_timeout=30, monitor=False, **config)
    plan = make_plan(config, cores=(0,))
    run = rundir.create(config.logdir, config.run_id)
    result = launcher.supervise(GroupLauncher(run, env), plan, run, config, out=io.StringIO())
    assert not processes_mentioning(run.path)
    return result, run


def test_group_with_servers_ends_when_the_chief_is_done(tmp_path):
    env = {"FAKE_MODE": "serve", "FAKE_MODE_chief_0": "normal"}
    result, run = run_group(tmp_path, env, strategy="parameter_server", num_workers=2, num_ps=1)
    assert result.ok, result.reason
    tasks = [r for r in records.read(run.results) if r["kind"] == "task"]
    assert [(r["role"], r["index"]) for r in tasks] == [("chief", 0)]
    assert result.cluster_record["status"] == "ok"


def test_group_without_servers_ends_by_itself(tmp_path):
    result, run = run_group(tmp_path, {"FAKE_MODE": "normal"}, strategy="multi_worker_mirrored", num_workers=2)
    assert result.ok and result.cluster_record["num_tasks"] == 2


def test_failed_group_names_the_task_that_was_not_done(tmp_path):
    env = {"FAKE_MODE": "normal", "FAKE_MODE_worker_1": "crash", "FAKE_CRASH_STEP": "1"}
    result, run = run_group(tmp_path, env, strategy="multi_worker_mirrored", num_workers=2)
    assert not result.ok and result.failed_task == "worker_1"
    assert "group exited with code" in result.reason and "before worker_1 was done" in result.reason
    (cluster,) = [r for r in records.read(run.results) if r["kind"] == "cluster"]
    assert cluster["status"] == "failed" and cluster["failed_task"] == "worker_1"
