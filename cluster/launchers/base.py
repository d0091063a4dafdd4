"""The launcher interface: how a plan's processes are placed, while cluster.launchers.supervise watches them.

A launcher turns a ClusterPlan into Units (one process each) and owns whatever the run needs
around them (namespaces and links, a rendezvous server, a batch allocation). cluster.launchers.supervise
calls, in this order:

    plan = launcher.setup(plan)             once, before anything starts; may rewrite the plan
    plan = launcher.free_ports(plan)        before each attempt: ports something else holds
    units = launcher.units(plan)            the processes of one attempt, started and watched
    plan = launcher.rebind(plan, names)     after tasks failed to bind their ports (a retry)
    launcher.explain()                      when a group unit failed: the engine's account
    launcher.cleanup()                      once at the end, whatever happened
    launcher.record()                       facts merged into the cluster record

Subclasses override what differs (LocalLauncher: ports on this machine and horovodrun;
EmulatedLauncher: a network namespace per host and Horovod ranks over a Gloo rendezvous).
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from cluster.plan.spec import ClusterPlan, TaskSpec
from cluster.supervision import teardown
from tfbench.results.rundir import RunDir

HOROVOD_GROUP = "horovodrun"
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TaskCommand = Callable[[TaskSpec], List[str]]


@dataclasses.dataclass(frozen=True)
class Unit:
    """One process the launcher starts: a task, or horovodrun standing for all Horovod ranks."""

    name: str
    command: Tuple[str, ...]
    env: Dict[str, str]
    log: str
    cores: Tuple[int, ...] = ()
    service: bool = False
    port_task: Optional[TaskSpec] = None  # the task whose port this process binds (retry on failure)
    # The plan's tasks this one process stands for (a Slurm step or job); they report progress
    # under their own names, and the unit counts as finished once its finishing tasks are done.
    tasks: Tuple[str, ...] = ()


def default_command(run: RunDir) -> TaskCommand:
    return lambda spec: [sys.executable, "-m", "tfbench.task", "--run_dir", run.path, "--task", spec.name]


def unit_env(run: RunDir, name: str, task_env: Dict[str, str], task: Optional[str] = None) -> Dict[str, str]:
    """The launcher's environment plus the task's; logs unbuffered so that a killed task's last
    lines are in its log, this checkout importable whatever the working directory, and temporary
    files in the run's scratch directory (cluster.supervision.scratch), which supervise() removes
    however the task ended."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PROJECT_ROOT, env.get("PYTHONPATH")) if p)
    env.update(task_env)
    env[teardown.RUN_DIR_VARIABLE] = run.path
    env["TMPDIR"] = run.scratch  # a host without this directory falls back to /tmp (Python's tempfile)
    env["TFBENCH_TASK"] = task or name
    return env


class Launcher:
    """Starts every task of the plan as a process of this machine; see the module docstring."""

    name = "local"

    def __init__(self, run: RunDir, command_for: Optional[TaskCommand] = None):
        self.run = run
        self.command_for = command_for or default_command(run)

    def setup(self, plan: ClusterPlan) -> ClusterPlan:
        return plan

    def free_ports(self, plan: ClusterPlan, message: Callable[[str], None]) -> ClusterPlan:
        return plan

    def rebind(self, plan: ClusterPlan, names: Sequence[str]) -> ClusterPlan:
        return plan

    def wrap(self, command: List[str], spec: TaskSpec) -> List[str]:
        """The command that runs `command` where `spec` lives (here: as it is)."""
        return command

    def task_unit(self, spec: TaskSpec, extra_env: Optional[Dict[str, str]] = None) -> Unit:
        env = unit_env(self.run, spec.name, {**spec.full_env(), **(extra_env or {})})
        return Unit(spec.name, tuple(self.wrap(self.command_for(spec), spec)), env,
                    self.run.task_log(spec.name), spec.cores, spec.service, self.port_task(spec))

    def port_task(self, spec: TaskSpec) -> Optional[TaskSpec]:
        return None

    def units(self, plan: ClusterPlan) -> List[Unit]:
        return [self.task_unit(spec) for spec in plan.tasks]

    def cleanup(self) -> None:
        pass

    def explain(self) -> str:
        """What the engine says about a failed group of tasks (e.g. how a Slurm job ended), or ''."""
        return ""

    def record(self) -> dict:
        return {"network": self.name}
