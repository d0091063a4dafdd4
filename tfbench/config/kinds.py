"""Which kind of launch a run is, what that kind means to the rest of tfbench, and the flags it takes.

The one place that reads --launcher and --network together: every other module asks the Kind
(does each task run on this machine? is each host a network namespace of its own? does an engine
start the tasks? does it take --link_bandwidth?) instead of comparing the flags again. What each
kind does (its launcher, dry run, preflight, monitor) is mapped in cluster/launchers/registry.py;
by-hand clusters (python -m cluster.by_hand) and Kubernetes manifests (python -m cluster.k8s) are
kinds whose tasks someone else starts, named by their entry points.
"""
from __future__ import annotations

import dataclasses
import types
from typing import Dict, FrozenSet, Mapping

LINK_FLAGS = frozenset({"link_bandwidth", "link_latency", "link_jitter"})
SLURM_FLAGS = frozenset({"slurm_partition", "slurm_time", "slurm_account", "slurm_nodes"})
FEATURE_FLAGS = frozenset({"straggler", "fault", "horovod_elastic"})  # features some launchers apply
LAUNCH_FLAGS = LINK_FLAGS | SLURM_FLAGS | FEATURE_FLAGS | {"hosts"}  # flags a kind may refuse

# Why a flag is refused by a kind that does not take it (a kind may say more: Kind.refusals).
WHERE = {
    **{flag: "applies to --network=emulated only" for flag in LINK_FLAGS},
    **{flag: "applies to --launcher=slurm only" for flag in SLURM_FLAGS},
    "straggler": "applies to processes tfbench starts on this machine (--launcher=local), not to Slurm's or "
                 "to tasks started by hand",
    "fault": "applies to processes this machine starts: with --launcher=slurm only on emulated nodes "
             "(--network=emulated), never to tasks started by hand",
    "horovod_elastic": "runs with --network=local only: on emulated hosts and on Slurm the ranks are started by "
                       "tfbench or srun, not by horovodrun's elastic driver",
    "hosts": "does not apply here",
}


@dataclasses.dataclass(frozen=True)
class Kind:
    name: str
    where: str  # how a dry run says where the tasks would start
    tasks_here: bool  # every task runs on this machine: its memory and cores are the ones that count
    emulated_hosts: bool  # each host is a network namespace of this machine, joined by shaped links
    engine: str  # who starts the tasks: "tfbench", "slurm", "user" (by hand) or "kubernetes"
    accepts: FrozenSet[str] = frozenset()  # the LAUNCH_FLAGS it takes ("hosts": any other than localhost)
    hosts_here_only: bool = False  # --hosts may name this machine only (the local launcher)
    engine_nodes: bool = False  # an engine places the tasks on nodes of its own, whose cores are theirs
    ranks_in_one_group: bool = False  # Horovod ranks start as one process group (horovodrun)
    max_nodes: int = 0  # nodes it can make (0: no limit of its own)
    # flag -> why this kind refuses it, beyond WHERE
    refusals: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def restarts_tasks(self) -> bool:
        """tfbench itself can start a killed task again (an engine's job step ends with it)."""
        return self.engine == "tfbench"

    def refusal(self, flag: str) -> str:
        """The one line that refuses --flag for this kind ('' when the kind takes it)."""
        if flag in self.accepts:
            return ""
        return f"--{flag} {self.refusals.get(flag) or WHERE[flag]}"


_SLURM_HOSTS = "does not apply to --launcher=slurm: Slurm picks the nodes; use --slurm_nodes"
_BY_HAND = {"horovod_elastic": "needs tfbench's launcher: horovodrun's elastic driver starts the ranks, not a "
                               "user by hand"}

KINDS: Dict[str, Kind] = {k.name: k for k in (
    Kind("local", "as processes of this machine", True, False, "tfbench",
         accepts=FEATURE_FLAGS | {"hosts"}, hosts_here_only=True, ranks_in_one_group=True),
    Kind("emulated", "on emulated hosts (a network namespace each, joined by links)", True, True, "tfbench",
         accepts=LINK_FLAGS | {"straggler", "fault"},
         refusals=types.MappingProxyType({"hosts": "does not apply to --network=emulated: its hosts are network "
                                                   "namespaces of this machine"})),
    Kind("slurm", "as Slurm tasks", False, False, "slurm", accepts=SLURM_FLAGS, engine_nodes=True,
         refusals=types.MappingProxyType({"hosts": _SLURM_HOSTS})),
    Kind("slurm_nodes", "as Slurm tasks on emulated nodes", True, True, "slurm",
         accepts=SLURM_FLAGS | LINK_FLAGS | {"fault"}, engine_nodes=True, max_nodes=10,
         refusals=types.MappingProxyType({"hosts": _SLURM_HOSTS})),
    Kind("by_hand", "on the hosts --hosts names, started by hand", False, False, "user",
         accepts=frozenset({"hosts"}), refusals=types.MappingProxyType(_BY_HAND)),
    Kind("kubernetes", "as pods of a Kubernetes cluster", False, False, "kubernetes", engine_nodes=True,
         refusals=types.MappingProxyType({**_BY_HAND, "hosts": "does not apply to Kubernetes: its scheduler "
                                                               "picks the nodes"})),
)}
assert all(k.accepts <= LAUNCH_FLAGS for k in KINDS.values())


def kind_of(config) -> Kind:
    """The kind --launcher and --network describe (by hand and Kubernetes have entry points of their
    own); `config` is a RunConfig or a run's config.json as a dict (reports, sweeps)."""
    read = config.get if isinstance(config, dict) else lambda name, default: getattr(config, name, default)
    emulated = read("network", "local") == "emulated"
    if read("launcher", "local") == "slurm":
        return KINDS["slurm_nodes" if emulated else "slurm"]
    return KINDS["emulated" if emulated else "local"]
