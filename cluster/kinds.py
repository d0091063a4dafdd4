"""Which kind of launch a run is, and what that kind means to the rest of tfbench.

The one place that reads --launcher and --network together: every other module asks the Kind
(does each task run on this machine? is each host a network namespace of its own? does an engine
start the tasks?) instead of comparing the flags again. What each kind does (its launcher, dry
run, preflight, monitor) is mapped in cluster/launchers/registry.py; by-hand clusters
(python -m cluster.by_hand) and Kubernetes manifests (python -m cluster.k8s) are kinds whose tasks
someone else starts.
"""
from __future__ import annotations

import dataclasses
from typing import Dict


@dataclasses.dataclass(frozen=True)
class Kind:
    name: str
    where: str  # how a dry run says where the tasks would start
    tasks_here: bool  # every task runs on this machine: its memory and cores are the ones that count
    emulated_hosts: bool  # each host is a network namespace of this machine, joined by shaped links
    engine: str  # who starts the tasks: "tfbench", "slurm", "user" (by hand) or "kubernetes"

    @property
    def restarts_tasks(self) -> bool:
        """tfbench itself can start a killed task again (an engine's job step ends with it)."""
        return self.engine == "tfbench"


KINDS: Dict[str, Kind] = {k.name: k for k in (
    Kind("local", "as processes of this machine", True, False, "tfbench"),
    Kind("emulated", "on emulated hosts (a network namespace each, joined by links)", True, True, "tfbench"),
    Kind("slurm", "as Slurm tasks", False, False, "slurm"),
    Kind("slurm_nodes", "as Slurm tasks on emulated nodes", True, True, "slurm"),
    Kind("by_hand", "on the hosts --hosts names, started by hand", False, False, "user"),
    Kind("kubernetes", "as pods of a Kubernetes cluster", False, False, "kubernetes"),
)}


def kind_of(config) -> Kind:
    """The kind --launcher and --network describe (by hand and Kubernetes have entry points of their own)."""
    emulated = getattr(config, "network", "local") == "emulated"
    if config.launcher == "slurm":
        return KINDS["slurm_nodes" if emulated else "slurm"]
    return KINDS["emulated" if emulated else "local"]
