"""The Slurm launcher: the run's tasks as Slurm tasks, supervised like every other launcher.

Inside an allocation (SLURM_JOB_ID set) its one unit is the srun step of every task; outside
one, setup() writes the sbatch script (cluster.slurm.batch) and the unit is the job follower
(cluster.slurm.job), which submits it, exits with the job and scancels it when stopped. Either
way the unit stands for all the plan's tasks (Unit.tasks): supervision follows their progress
files on the shared run directory, ends the run once the finishing tasks are done (parameter
servers and their workers serve until the step or job is ended), and on failure, deadline,
stall or Ctrl-C stops the unit, which ends the step (srun) or cancels the job; cleanup() makes
sure the job has left the queue. Every task finds its role through SlurmClusterResolver;
Horovod ranks meet at Horovod's Gloo rendezvous, served by this process (cluster.slurm.horovod).
Tasks are laid out node by node (cluster.slurm.layout); the record names each task's node as the
task's progress reports it (SLURMD_NODENAME), and a failed job's end as Slurm tells it.
"""
from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional

from cluster.horovod import gloo as horovod_gloo
from cluster.launchers.base import Launcher, TaskCommand, Unit, unit_env
from cluster.plan.spec import ClusterPlan
from cluster.slurm import batch, job, layout, steps
from cluster.slurm import horovod as slurm_horovod
from cluster.supervision import teardown
from tfbench.config import RunConfig
from tfbench.loop import progress
from tfbench.results.rundir import RunDir


def inside_allocation() -> bool:
    return bool(os.environ.get("SLURM_JOB_ID"))


class SlurmLauncher(Launcher):
    name = "slurm"

    def __init__(self, run: RunDir, config: RunConfig, command_for: Optional[TaskCommand] = None):
        super().__init__(run, command_for)
        self.config = config
        self.inside = inside_allocation()
        self.port_base = 0
        self.rendezvous: Optional[horovod_gloo.Rendezvous] = None
        self.exports: Dict[str, str] = {}
        self.notes: List[str] = []
        self.hostfile = ""
        self.task_names: List[str] = []

    def rendezvous_host(self) -> str:
        """The address where the nodes reach this process."""
        return slurm_horovod.rendezvous_address()

    def setup(self, plan: ClusterPlan) -> ClusterPlan:
        self.notes = list(plan.notes)  # what was checked of the nodes' cores (cluster.slurm.nodes)
        self.task_names = [t.name for t in plan.tasks]
        if plan.ranked_tasks:  # ranks meet at Horovod's rendezvous, served from here
            self.rendezvous = horovod_gloo.start_rendezvous(plan)
            self.exports[slurm_horovod.RENDEZVOUS_ENV] = f"{self.rendezvous_host()}:{self.rendezvous.port}"
        if self.inside:
            self.port_base = steps.pick_port_base(self.config, steps.tasks_per_node(self.config, plan))
            self.hostfile = layout.write_hostfile(self.run, layout.of(self.config, plan),
                                                  os.environ.get("SLURM_JOB_NODELIST", ""))
        else:
            with open(self.run.file(batch.SCRIPT), "w", encoding="utf-8") as f:
                f.write(batch.script(self.run, self.config, plan, self.exports))
        return plan

    def units(self, plan: ClusterPlan) -> List[Unit]:
        names = tuple(t.name for t in plan.tasks)
        env = unit_env(self.run, self.name, {})
        env.pop(teardown.RUN_DIR_VARIABLE)  # Slurm ends the job's processes, on every node
        env.update(self.exports)
        if self.inside:
            env.update(steps.environment(self.run, self.port_base), SLURM_HOSTFILE=self.hostfile)
            return [Unit("srun", tuple(steps.tasks_step(self.run, self.config, plan)), env,
                         self.run.task_log("srun"), tasks=names)]
        command = (sys.executable, "-m", "cluster.slurm.job", "--run_dir", self.run.path)
        return [Unit("slurm-job", command, env, self.run.task_log("slurm-job"), tasks=names)]

    def cleanup(self) -> None:
        if self.rendezvous is not None:
            self.rendezvous.stop()
            self.rendezvous = None
        job_id = batch.read_job_id(self.run)
        if not self.inside and job_id and batch.job_state(job_id) and not batch.cancel(job_id):
            raise RuntimeError(f"Slurm job {job_id} is still listed after scancel")

    def explain(self) -> str:
        job_id = os.environ.get("SLURM_JOB_ID") if self.inside else batch.read_job_id(self.run)
        return f": {job.describe(job_id)}" if job_id else ""

    def task_nodes(self) -> Dict[str, str]:
        """{task: the Slurm node it ran on}, as each task's progress reports it."""
        found = {name: (progress.read_progress(self.run.path, name) or {}).get("node") for name in self.task_names}
        return {name: node for name, node in found.items() if node}

    def record(self) -> dict:
        notes = {"slurm_notes": self.notes} if self.notes else {}
        nodes = {"slurm_task_nodes": self.task_nodes()}
        if self.inside:
            return {"launcher": self.name, "slurm_job_id": os.environ.get("SLURM_JOB_ID"), **nodes, **notes}
        job_id = batch.read_job_id(self.run)
        facts = batch.job_facts(job_id) if job_id else {}
        return {"launcher": self.name, "slurm_job_id": job_id, "slurm_job_state": facts.get("state"),
                "slurm_exit_code": facts.get("exit_code"), **nodes, **notes}
