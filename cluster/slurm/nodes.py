"""What Slurm's nodes hold: --cores_per_worker of a Slurm run is checked against them, never
against the machine that submits the job (a login node or a laptop has its own, unrelated core
count).

sinfo lists every node's CPUs. When it answers, a run whose tasks cannot fit the largest node
(tasks per node x CPUs per task) is refused with one line before anything is written. When it
does not answer (no Slurm configuration here, as on a machine that only prepares or dry-runs a
job), the request is trusted and Slurm refuses a job no node can hold; the plan's notes (printed
by --dry_run, kept in plan.json and the cluster record) say which of the two happened.

A run on the private Slurm of emulated nodes (--network=emulated) asks no sinfo: that cluster
does not exist yet, and each of its nodes claims exactly the CPUs its tasks ask for.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
from typing import Optional, Tuple

from cluster.plan.spec import ClusterPlan
from cluster.slurm import steps
from tfbench.config import RunConfig
from tfbench.config.errors import ConfigError
from tfbench.config.kinds import kind_of

SINFO_TIMEOUT_S = 10.0


def largest_node_cpus(partition: str = "") -> Tuple[Optional[int], str]:
    """(CPUs of the largest node sinfo lists, '') or (None, why sinfo did not tell)."""
    command = ["sinfo", "--Node", "--noheader", "--format=%c"] + ([f"--partition={partition}"] if partition else [])
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=SINFO_TIMEOUT_S)
    except FileNotFoundError:
        return None, "sinfo is not on PATH"
    except subprocess.TimeoutExpired:
        return None, f"sinfo did not answer within {SINFO_TIMEOUT_S:g} s"
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"]
        return None, f"sinfo failed: {lines[-1].strip()}"
    cpus = [int(v.rstrip("+")) for v in proc.stdout.split() if v.rstrip("+").isdigit()]
    if not cpus:
        return None, "sinfo listed no node" + (f" in partition {partition}" if partition else "")
    return max(cpus), ""


def check_cores(config: RunConfig, plan: ClusterPlan) -> str:
    """The plan's note on cores; ConfigError when sinfo says no node can hold a node's tasks."""
    per_task = steps.cpus_per_task(config)
    per_node = steps.tasks_per_node(config, plan)
    need = per_task * per_node
    asked = f"{per_task} CPU(s) per Slurm task (--cores_per_worker), {per_node} task(s) per node = {need} per node"
    if kind_of(config).emulated_hosts:
        return (f"cores: {asked}; each emulated node claims CPUs={need}, all of them sharing this machine's "
                f"{os.cpu_count()} cores")
    largest, why = largest_node_cpus(config.slurm_partition)
    where = f"partition {config.slurm_partition}" if config.slurm_partition else "the cluster"
    if largest is None:
        return f"cores: {asked}; not checked here ({why}): Slurm refuses the job if no node has them"
    if need > largest:
        raise ConfigError(f"--cores_per_worker={config.cores_per_worker} needs {need} CPUs per node ({per_node} "
                          f"task(s) x {per_task}) and the largest node of {where} has {largest} (sinfo)")
    return f"cores: {asked}; the largest node of {where} has {largest} (sinfo)"


def checked_plan(config: RunConfig) -> ClusterPlan:
    """The run's plan for Slurm (cluster.slurm.steps.plan_for) with its note on cores."""
    plan = steps.plan_for(config)
    return dataclasses.replace(plan, notes=(*plan.notes, check_cores(config, plan)))
