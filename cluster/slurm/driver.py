"""Inside a Slurm allocation: a run's tasks as srun steps, followed, ended, and merged.

`python -m tfbench --launcher=slurm` calls drive() directly when it runs inside an allocation
(SLURM_JOB_ID is set); otherwise its sbatch script runs `python -m cluster.slurm.driver`.
The tasks' step ends by itself for synchronous strategies; parameter-server workers and ps serve
until stopped, so the step is ended once the chief is done. A failed task (--kill-on-bad-exit),
the deadline, a stall, SIGINT or SIGTERM (scancel) end the steps too; the task records written
so far stay, and the cluster record says what happened, as with the local launcher.
"""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, TextIO

from cluster import merge, progress
from cluster.launcher import LaunchResult, log_tail
from cluster.slurm import node_monitor, steps
from cluster.spec import ClusterPlan
from cluster.status import StatusLine, describe
from tfbench import records
from tfbench.config import RunConfig
from tfbench.rundir import RunDir

POLL_S = 0.5
STEP_GRACE_S = 15.0  # srun -> step gone after SIGTERM (Slurm's KillWait is 30 s by default)
MONITOR_GRACE_S = 10.0


class _Signals:
    """SIGINT / SIGTERM (scancel) become a flag the watch loop acts on."""

    def __init__(self):
        self.name: Optional[str] = None
        self._previous = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._caught)
        return self

    def _caught(self, signum, frame):
        self.name = self.name or signal.Signals(signum).name

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _start(command: List[str], env: Dict[str, str], log: str) -> subprocess.Popen:
    with open(log, "ab") as f:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, env=env)


def _stop(step: Optional[subprocess.Popen], grace: float) -> None:
    """srun forwards SIGTERM to its tasks and cancels the step; SIGKILL only if it hangs."""
    if step is None or step.poll() is not None:
        return
    step.terminate()
    try:
        step.wait(grace)
    except subprocess.TimeoutExpired:
        step.kill()
        step.wait(5)


def _wait_quietly(step: subprocess.Popen, timeout: float) -> None:
    try:
        step.wait(timeout)
    except subprocess.TimeoutExpired:
        pass


class _Watch:
    """Progress of the plan's tasks from their progress files, for status, stall and success."""

    def __init__(self, run: RunDir, plan: ClusterPlan):
        self.run, self.plan = run, plan
        self.finishing = [t.name for t in plan.tasks if t.measures and not t.service]
        self.records: Dict[str, Optional[dict]] = {}
        self.changed_at = time.monotonic()

    def read(self) -> None:
        for task in self.plan.tasks:
            record = progress.read_progress(self.run.path, task.name)
            before = self.records.get(task.name)
            if record is not None and (before is None or (record["phase"], record["step"]) !=
                                       (before["phase"], before["step"])):
                self.changed_at = time.monotonic()
            self.records[task.name] = record

    def done(self) -> bool:
        return all(progress.reached(self.records.get(n), "done") for n in self.finishing)

    def laggard(self) -> str:
        """The task most likely at fault: a finishing task that is not done, else the first task."""
        behind = [n for n in self.finishing if not progress.reached(self.records.get(n), "done")]
        return min(behind, key=lambda n: progress.phase_rank(self.records.get(n))) if behind else self.plan.tasks[0].name

    def parts(self) -> List[str]:
        shown = {t.name: self.records.get(t.name) or ({"phase": "starting"} if t.measures else None)
                 for t in self.plan.tasks}
        return [describe(name, record, None) for name, record in shown.items()]


def drive(run: RunDir, config: RunConfig, plan: ClusterPlan, out: Optional[TextIO] = None) -> LaunchResult:
    out = out or sys.stdout
    status = StatusLine(out)
    nodes = steps.num_nodes(config, plan)
    env = steps.environment(run, steps.pick_port_base(config, -(-len(plan.tasks) // nodes)))
    watch = _Watch(run, plan)
    started = time.monotonic()
    deadline = started + config.deadline if config.deadline > 0 else None
    monitor = tasks = None
    failed_task, reason, log = None, "", None
    with _Signals() as caught:
        try:
            if config.monitor:
                monitor = _start(steps.monitor_step(run, config, plan), env, run.task_log("srun-monitor"))
            tasks = _start(steps.tasks_step(run, config, plan), env, run.task_log("srun-tasks"))
            status.message(f"tfbench: {len(plan.tasks)} tasks on {nodes} Slurm node(s) in job "
                           f"{env.get('SLURM_JOB_ID', '?')}; logs in {run.tasks_dir}")
            while True:
                watch.read()
                code = tasks.poll()
                now = time.monotonic()
                if watch.done():
                    if not any(t.service for t in plan.tasks):
                        _wait_quietly(tasks, STEP_GRACE_S)  # the step ends by itself: let it
                    break
                if caught.name:
                    reason = f"interrupted by {caught.name}"
                elif code is not None:
                    failed_task = watch.laggard()
                    reason = f"the tasks' srun step exited with code {code} before {failed_task} was done"
                    log = run.task_log(failed_task)
                elif deadline is not None and now >= deadline:
                    reason = f"deadline of {config.deadline:g} s reached"
                elif now - watch.changed_at >= config.stall_timeout:
                    failed_task = watch.laggard()
                    reason = f"stall timeout: no step progress for {config.stall_timeout:g} s"
                if reason:
                    break
                status.update(now - started, watch.parts())
                time.sleep(POLL_S)
        finally:
            status.end()
            _stop(tasks, STEP_GRACE_S)
            with open(run.file("tasks/" + steps.DONE_FILE), "w", encoding="utf-8"):
                pass
            if monitor is not None:
                try:
                    monitor.wait(MONITOR_GRACE_S)
                except subprocess.TimeoutExpired:
                    _stop(monitor, 5)
    return _result(run, config, reason, failed_task, log, time.monotonic() - started, status)


def _result(run, config, reason, failed_task, log, elapsed, status) -> LaunchResult:
    resources = {"nodes": node_monitor.read_summaries(run)}
    if not reason:
        try:
            record = merge.merge(run, "slurm", resources)
        except ValueError as e:
            reason = f"every task finished but no results were recorded: {e}"
        else:
            status.message(f"tfbench: all tasks finished in {elapsed:.1f} s")
            return LaunchResult(True, 0, None, f"all tasks finished in {elapsed:.1f} s", record)
    record = {"kind": "cluster", "run_id": run.run_id, "status": "failed", "failed_task": failed_task,
              "reason": reason, "launcher": "slurm", "config": config.to_dict(), "strategy": config.strategy,
              "num_workers": config.num_workers, "num_ps": config.effective_num_ps, "resources": resources}
    records.append(run.results, record)
    status.message(f"tfbench: run failed: {reason}")
    for line in log_tail(log) if log else []:
        status.message(f"    {line}")
    return LaunchResult(False, 1, failed_task, reason, record)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Runs a prepared tfbench run directory's tasks as srun steps.")
    parser.add_argument("--run_dir", required=True)
    args = parser.parse_args(argv)
    run = RunDir(args.run_dir)
    config = RunConfig.from_dict(run.read_json("config.json"))
    result = drive(run, config, ClusterPlan.from_dict(run.read_json("plan.json")))
    if result.ok:
        print(merge.render(run, result.cluster_record), flush=True)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
