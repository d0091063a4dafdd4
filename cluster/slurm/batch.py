"""The sbatch script of a run, and the Slurm commands around a job (state, end state, cancel).

The script asks for the run's topology (nodes, tasks per node, cores per task; optional partition,
time limit and account; never requeued: a job on a failed node ends instead of rerunning from
the start), starts one system monitor per node as a step of its own, then every task in one
step laid out node by node (cluster.slurm.layout). The run directory must be on a filesystem all
nodes share, at the same path.
"""
from __future__ import annotations

import shlex
import subprocess
import time
from typing import Dict, Optional

from cluster.plan.spec import ClusterPlan
from cluster.slurm import layout, query, steps
from tfbench.config import RunConfig
from tfbench.results.rundir import RunDir

SCRIPT = "slurm.sbatch"
JOB_ID_FILE = "tasks/slurm.jobid"
POLL_S = 0.5
CANCEL_WAIT_S = 90.0  # Slurm's KillWait is 30 s by default


def script(run: RunDir, config: RunConfig, plan: ClusterPlan, exports: Optional[Dict[str, str]] = None) -> str:
    placed = layout.of(config, plan)
    options = [f"--job-name=tfbench-{run.run_id}"[:64], f"--nodes={placed.num_nodes}",
               f"--ntasks-per-node={placed.tasks_per_node}", f"--cpus-per-task={steps.cpus_per_task(config)}",
               "--no-requeue", f"--output={run.tasks_dir}/slurm-%j.out", f"--chdir={steps.PROJECT_ROOT}"]
    for flag, value in (("partition", config.slurm_partition), ("time", config.slurm_time),
                        ("account", config.slurm_account)):
        if value:
            options.append(f"--{flag}={value}")
    quote = lambda command: " ".join(shlex.quote(part) for part in command)  # noqa: E731
    done = shlex.quote(run.file(f"tasks/{steps.DONE_FILE}"))
    lines = ["#!/bin/bash", *(f"#SBATCH {o}" for o in options),
             "# Written by tfbench. The run directory must be on a filesystem all nodes share.",
             f"export PYTHONPATH={shlex.quote(steps.PROJECT_ROOT)}${{PYTHONPATH:+:$PYTHONPATH}}",
             "export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}",
             f"export TMPDIR={shlex.quote(run.scratch)}  # the run's scratch directory; /tmp where it is missing",
             f"export {steps.PORT_BASE_ENV}={steps.pick_port_base(config, steps.tasks_per_node(config, plan))}",
             *(f"export {key}={shlex.quote(value)}" for key, value in sorted((exports or {}).items())),
             f"rm -f {done}  # left by an earlier attempt of this run"]
    if config.monitor:
        lines.append(f"{quote(steps.monitor_step(run, config, plan))} > {shlex.quote(run.task_log('srun-monitor'))} 2>&1 &")
    lines += [*layout.hostfile_lines(run, placed), f"{quote(steps.tasks_step(run, config, plan))}", "status=$?",
              f"touch {done}  # node monitors write their summaries and stop", "wait", "exit $status"]
    return "\n".join(lines) + "\n"


def submit(path: str) -> str:
    """sbatch the script; returns the job id (RuntimeError with sbatch's message)."""
    proc = subprocess.run(["sbatch", "--parsable", path], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"sbatch failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip().split(";")[0]


def job_state(job_id: str) -> str:
    """PENDING, RUNNING, COMPLETING ... while Slurm lists the job; '' once it has left the queue."""
    proc = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def job_facts(job_id: str) -> dict:
    """The job's end state and exit code ("status:signal") as slurmctld remembers them (MinJobAge,
    300 s by default); state "unknown" once it has forgotten the job."""
    facts = query.job(job_id)
    return {"state": facts.get("state") or "unknown", "exit_code": facts.get("exit_code", "")}


def exit_status(job_id: str) -> int:
    """The job's exit status (ExitCode=status:signal), 1 when unknown or ended by a signal."""
    status, _, sig = job_facts(job_id)["exit_code"].partition(":")
    return int(status) if status.isdigit() and sig in ("", "0") else 1


def cancel(job_id: str, timeout: float = CANCEL_WAIT_S) -> bool:
    """scancel and wait until the job has left the queue; False if it is still listed."""
    subprocess.run(["scancel", job_id], capture_output=True)
    end = time.monotonic() + timeout
    while job_state(job_id) and time.monotonic() < end:
        time.sleep(POLL_S)
    return not job_state(job_id)


def read_job_id(run: RunDir) -> Optional[str]:
    try:
        with open(run.file(JOB_ID_FILE), encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None
