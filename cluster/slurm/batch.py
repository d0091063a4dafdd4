"""Outside an allocation: the sbatch script of a run, submitted, followed, and cancelled if need be.

The script asks for the run's topology (nodes, tasks, cores per task; optional partition,
time limit and account) and runs cluster.slurm.driver, which starts the tasks as srun steps.
The run directory must be on a filesystem every node sees at the same path: tasks, monitors
and the driver all write into it. While the job is queued or running, the follower shows the
tasks' progress from their progress files; Ctrl-C, SIGTERM or the deadline cancel the job
(scancel) and wait until Slurm has ended it, keeping every record written so far.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from typing import Optional, TextIO

from cluster.launcher import LaunchResult, log_tail
from cluster.slurm import steps
from cluster.slurm.driver import POLL_S, _Signals, _Watch
from cluster.spec import ClusterPlan
from cluster.status import StatusLine
from tfbench import records
from tfbench.config import RunConfig
from tfbench.rundir import RunDir

SCRIPT = "slurm.sbatch"
DEADLINE_MARGIN_S = 30.0  # the driver enforces --deadline itself; the follower cancels after this margin
CANCEL_WAIT_S = 60.0


def script(run: RunDir, config: RunConfig, plan: ClusterPlan) -> str:
    """The sbatch script: resources as #SBATCH lines, then the driver."""
    options = [f"--job-name=tfbench-{run.run_id}"[:64], f"--nodes={steps.num_nodes(config, plan)}",
               f"--ntasks={len(plan.tasks)}", f"--cpus-per-task={steps.cpus_per_task(config)}",
               f"--output={run.tasks_dir}/slurm-%j.out", f"--chdir={steps.PROJECT_ROOT}"]
    for flag, value in (("partition", config.slurm_partition), ("time", config.slurm_time),
                        ("account", config.slurm_account)):
        if value:
            options.append(f"--{flag}={value}")
    lines = ["#!/bin/bash", *(f"#SBATCH {o}" for o in options),
             "# Written by tfbench. The run directory must be on a filesystem all nodes share.",
             f"export PYTHONPATH={shlex.quote(steps.PROJECT_ROOT)}${{PYTHONPATH:+:$PYTHONPATH}}",
             f"exec {shlex.quote(sys.executable)} -m cluster.slurm.driver --run_dir {shlex.quote(run.path)}"]
    return "\n".join(lines) + "\n"


def submit(path: str) -> str:
    """sbatch the script; returns the job id (raises RuntimeError with sbatch's message)."""
    proc = subprocess.run(["sbatch", "--parsable", path], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"sbatch failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip().split(";")[0]


def job_state(job_id: str) -> str:
    """PENDING, RUNNING, COMPLETING ... while Slurm lists the job; '' once it has left the queue."""
    proc = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def final_state(job_id: str) -> str:
    """COMPLETED, FAILED, CANCELLED, TIMEOUT ... as long as slurmctld remembers the job."""
    proc = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True)
    for field in proc.stdout.split():
        if field.startswith("JobState="):
            return field.split("=", 1)[1]
    return "ended"


def cancel(job_id: str, timeout: float = CANCEL_WAIT_S) -> bool:
    """scancel and wait until the job has left the queue; False if it is still there."""
    subprocess.run(["scancel", job_id], capture_output=True)
    end = time.monotonic() + timeout
    while job_state(job_id) and time.monotonic() < end:
        time.sleep(POLL_S)
    return not job_state(job_id)


def _last_cluster_record(run: RunDir) -> Optional[dict]:
    found = [r for r in records.read(run.results) if r.get("kind") == "cluster"]
    return found[-1] if found else None


def submit_and_follow(run: RunDir, config: RunConfig, plan: ClusterPlan, out: Optional[TextIO] = None) -> LaunchResult:
    out = out or sys.stdout
    status = StatusLine(out)
    path = run.file(SCRIPT)
    with open(path, "w", encoding="utf-8") as f:
        f.write(script(run, config, plan))
    try:
        job_id = submit(path)
    except RuntimeError as e:
        return _failed(run, config, None, str(e), None, status)
    status.message(f"tfbench: submitted Slurm job {job_id} ({path}); Ctrl-C cancels it")
    watch = _Watch(run, plan)
    started = time.monotonic()
    deadline = started + config.deadline + DEADLINE_MARGIN_S if config.deadline > 0 else None
    reason = ""
    with _Signals() as caught:
        while True:
            state = job_state(job_id)
            if not state:
                break
            if caught.name:
                reason = f"interrupted by {caught.name}"
            elif deadline is not None and time.monotonic() >= deadline:
                reason = f"deadline of {config.deadline:g} s reached"
            if reason:
                status.message(f"tfbench: {reason}: cancelling Slurm job {job_id}")
                if not cancel(job_id):
                    status.message(f"tfbench: warning: Slurm job {job_id} is still listed after scancel")
                break
            watch.read()
            status.update(time.monotonic() - started, [f"job {job_id} {state.lower()}", *watch.parts()])
            time.sleep(POLL_S)
    status.end()
    record = _last_cluster_record(run)
    if record is not None and record.get("status") == "ok" and not reason:
        status.message(f"tfbench: Slurm job {job_id} finished in {time.monotonic() - started:.1f} s")
        return LaunchResult(True, 0, None, "ok", record)
    ended = final_state(job_id)
    why = reason or (record or {}).get("reason") or f"Slurm job {job_id} ended {ended} without results"
    why = f"{why} (Slurm job {job_id}: {ended})"
    output = run.file(os.path.join("tasks", f"slurm-{job_id}.out"))
    if record is not None and record.get("status") == "failed":  # the driver said what went wrong
        status.message(f"tfbench: run failed: {why}")
        return LaunchResult(False, 1, record.get("failed_task"), why, record)
    return _failed(run, config, None, why, output, status)


def _failed(run, config, failed_task, reason, log, status) -> LaunchResult:
    record = {"kind": "cluster", "run_id": run.run_id, "status": "failed", "failed_task": failed_task,
              "reason": reason, "launcher": "slurm", "config": config.to_dict(), "strategy": config.strategy,
              "num_workers": config.num_workers, "num_ps": config.effective_num_ps, "resources": {}}
    records.append(run.results, record)
    status.message(f"tfbench: run failed: {reason}")
    for line in log_tail(log) if log and os.path.exists(log) else []:
        status.message(f"    {line}")
    return LaunchResult(False, 1, failed_task, reason, record)


def launch(run_dir: RunDir, config: RunConfig, plan: ClusterPlan, out: Optional[TextIO] = None) -> LaunchResult:
    """--launcher=slurm: srun steps inside an allocation, else an sbatch job followed from here."""
    if os.environ.get("SLURM_JOB_ID"):
        from cluster.slurm.driver import drive

        return drive(run_dir, config, plan, out)
    return submit_and_follow(run_dir, config, plan, out)
