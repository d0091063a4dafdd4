"""Every launcher kind (tfbench.config.kinds) mapped to what it does, in one place: its plan, the
checks of this machine before anything starts, its dry run, where its monitor samples, its
launcher (which also tears the run down) and the record hooks of its run.

Adding a launcher: a Kind in tfbench/config/kinds.py, a Launcher in cluster/launchers/<name>.py, and
one Behaviour line here. Nothing else branches on --launcher or --network (tests check it).
"""
from __future__ import annotations

import dataclasses
import importlib
import os
from typing import Callable, Dict, List, Optional

from cluster.launchers import preflight
from cluster.plan.spec import ClusterPlan
from tfbench.config import RunConfig
from tfbench.config.errors import ConfigError
from tfbench.config.kinds import KINDS, kind_of


@dataclasses.dataclass(frozen=True)
class Behaviour:
    launcher: str  # "module:Class" of its cluster.launchers.base.Launcher; "" when tfbench starts nothing
    dry_run: str  # the function of cluster.launchers.dry_run that prints what it would do
    checks: Callable[[RunConfig, bool], List[str]]  # of this machine, before anything starts; warnings
    monitor: str  # "private" (this machine, in the run's private namespace when it has one),
    #               "links" (per host link: tasks on emulated hosts), "nodes" (one per Slurm node), ""


def _no_checks(config: RunConfig, dry_run: bool) -> List[str]:
    return []


def _emulated_checks(config: RunConfig, dry_run: bool) -> List[str]:
    preflight.check_namespaces(config)
    return []


def _slurm_checks(config: RunConfig, dry_run: bool) -> List[str]:
    """Slurm's commands, from outside an allocation; a dry run only warns (the script can be read
    before logging in to the cluster)."""
    if os.environ.get("SLURM_JOB_ID"):
        return []
    try:
        preflight.check_slurm()
    except ConfigError as e:
        if not dry_run:
            raise
        return [f"the run itself would be refused here: {e}"]
    return []


def _slurm_nodes_checks(config: RunConfig, dry_run: bool) -> List[str]:
    preflight.check_node_slurm()
    preflight.check_namespaces(config)
    return []


BEHAVIOURS: Dict[str, Behaviour] = {
    "local": Behaviour("cluster.launchers.local:LocalLauncher", "local_lines", _no_checks, "private"),
    "emulated": Behaviour("cluster.launchers.emulated:EmulatedLauncher", "emulated_lines", _emulated_checks, "links"),
    "slurm": Behaviour("cluster.launchers.slurm:SlurmLauncher", "slurm_lines", _slurm_checks, "nodes"),
    "slurm_nodes": Behaviour("cluster.launchers.slurm_nodes:NodeSlurmLauncher", "slurm_nodes_lines",
                             _slurm_nodes_checks, "nodes"),
    "by_hand": Behaviour("", "", _no_checks, ""),  # python -m cluster.by_hand prints the commands
    "kubernetes": Behaviour("", "", _no_checks, ""),  # python -m cluster.k8s writes the manifests
}
assert set(BEHAVIOURS) == set(KINDS), "every kind in tfbench.config.kinds needs its behaviour here"


def behaviour(config: RunConfig) -> Behaviour:
    return BEHAVIOURS[kind_of(config).name]


def plan(config: RunConfig) -> ClusterPlan:
    """The run's plan; on Slurm also checked against the nodes' cores (ConfigError, one line)."""
    if kind_of(config).engine == "slurm":
        from cluster.slurm.nodes import checked_plan

        return checked_plan(config)
    from cluster.plan.topology import make_plan

    return make_plan(config)


def check_machine(config: RunConfig, dry_run: bool = False) -> List[str]:
    """Everything this machine must have for the run (ConfigError), and warnings for a dry run."""
    if config.traits.launcher_ranks:  # they meet at Horovod's rendezvous
        preflight.check_horovod()
    if config.horovod_elastic:
        preflight.check_elastic_root()
    return behaviour(config).checks(config, dry_run)


def make_launcher(config: RunConfig, run, *, command_for=None, group_command=None):
    """The Launcher of the run's kind (cluster.launchers.base)."""
    module, cls = behaviour(config).launcher.split(":")
    options = {"group_command": group_command} if group_command else {}  # local runs' horovodrun stand-in
    return getattr(importlib.import_module(module), cls)(run, config, command_for=command_for, **options)


def dry_run(config: RunConfig, plan_: ClusterPlan, run) -> str:
    """What `python -m tfbench --dry_run` prints: where the tasks would start, the strategy's
    knobs, the plan's warnings, then what the kind's launcher would do (cluster.launchers.dry_run)."""
    from cluster.launchers import dry_run as lines_of
    from tfbench.config import knobs

    lines = [f"tfbench: dry run: {len(plan_.tasks)} task(s) of {plan_.strategy} would start {kind_of(config).where}; "
             f"run directory {run.path} (not created)"]
    if knobs.knobs_for(config.strategy):
        lines.append(f"knobs: {knobs.describe(config)}")
    lines += [f"tfbench: warning: {w}" for w in plan_.warnings]
    lines += [f"note: {n}" for n in plan_.notes]
    return "\n".join(lines + getattr(lines_of, behaviour(config).dry_run)(config, plan_, run))


def monitor_factory(config: RunConfig) -> Optional[Callable]:
    """(run, plan, config) -> the run's monitor, sampling where the kind's tasks are; None without --monitor."""
    if not config.monitor:
        return None
    where = behaviour(config).monitor
    if where == "nodes":
        from cluster.launchers.slurm import inside_allocation
        from cluster.slurm.node_monitor import NodeMonitors

        return lambda run, plan_, config_: NodeMonitors(run, plan_, config_, start_step=inside_allocation())
    if where == "links":
        from tfbench.monitor import Monitor

        return lambda run, plan_, config_: Monitor(run, plan_, config_, tasks_in_namespaces=True)
    return _private_monitor


def _private_monitor(run, plan_, config):
    """The monitor of a local run; in its private network namespace, the sockets are read in there."""
    from cluster.net import private_net
    from tfbench.monitor import Monitor

    name = private_net.namespace_of(run)
    if name is None:
        return Monitor(run, plan_, config)
    return Monitor(run, plan_, config, net_source_factory=lambda: private_net.net_source(name), host_interfaces=False)


def record_hooks(config: RunConfig) -> list:
    """Extra fields of the cluster record: per-host link traffic where hosts are emulated."""
    if not (kind_of(config).emulated_hosts and config.monitor):
        return []
    from tfbench.monitor import host_links

    def link_traffic(run, record):
        return {"link_traffic": host_links.window_traffic(run, record["window_start"], record["window_end"],
                                                          config.num_steps)}

    return [link_traffic]

