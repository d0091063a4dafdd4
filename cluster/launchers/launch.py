"""Entry to the launchers: run(plan, run, config) picks the launcher for --network and hands
it to cluster.launchers.supervise, which starts, watches and tears down every process of the run.

Module layout:
    cluster/launchers/supervise.py shared supervision: readiness, watchdog, deadline, signals, teardown
    cluster/supervision/outcome.py             shared end of a run: monitor summary, cluster record, failure tail
    cluster/launchers/base.py      the Launcher interface (setup / units / wrap / rebind / cleanup / record)
    cluster/launchers/local.py     processes of this machine over loopback; horovodrun for Horovod
    cluster/launchers/emulated.py  one network namespace per host, shaped links, Gloo rendezvous
    cluster/launchers/slurm.py     srun steps inside an allocation, an sbatch job from outside one
    cluster/launchers/slurm_nodes.py  that sbatch job on a private Slurm of emulated nodes
"""
from __future__ import annotations

from typing import Callable, List, Optional, TextIO

from cluster.launchers import registry
from cluster.launchers.base import HOROVOD_GROUP, Launcher, TaskCommand, Unit, default_command  # noqa: F401
from cluster.launchers.local import GroupCommand, LocalLauncher, default_group_command  # noqa: F401
from cluster.launchers.supervise import FAILURE_GRACE_S, KILL_WAIT_S, SERVICE_GRACE_S, Monitor, supervise  # noqa: F401
from cluster.plan.spec import ClusterPlan
from cluster.supervision.outcome import LaunchResult, RecordHook, log_tail  # noqa: F401
from tfbench.config import RunConfig
from tfbench.results.rundir import RunDir


def for_config(config: RunConfig, run: RunDir, *, command_for: Optional[TaskCommand] = None,
               group_command: Optional[GroupCommand] = None) -> Launcher:
    """The launcher --launcher and --network ask for (cluster.launchers.registry)."""
    return registry.make_launcher(config, run, command_for=command_for, group_command=group_command)


def run(plan: ClusterPlan, run: RunDir, config: RunConfig, *,
        command_for: Optional[TaskCommand] = None,
        group_command: Optional[GroupCommand] = None,
        monitor_factory: Optional[Callable[[RunDir, ClusterPlan, RunConfig], Monitor]] = None,
        record_hooks: List[RecordHook] = (),
        out: Optional[TextIO] = None) -> LaunchResult:
    """Runs the plan to completion or failure; no process of the run is left when it returns.

    command_for(spec) gives one task's command (default: python -m tfbench.task); local Horovod
    plans use group_command(plan) instead (default: horovodrun --gloo)."""
    launcher = for_config(config, run, command_for=command_for, group_command=group_command)
    return supervise(launcher, plan, run, config, monitor_factory=monitor_factory,
                     record_hooks=record_hooks, out=out)
