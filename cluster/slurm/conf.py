"""The slurm.conf of a private Slurm: what every such cluster needs, and its own nodes.

No cgroup plugins (PID 1 is not systemd): processes are tracked by parent pid
(proctrack/linuxproc) and tasks are not bound (task/none); no accounting. Nodes claim the CPUs
the configuration gives them, not the cores present (SlurmdParameters=config_overrides), so that
more tasks than cores fit on a small machine. Every per-node path uses %n (the node's name), which
slurmd expands in any build, so that several slurmd share one directory tree.
"""
from __future__ import annotations

from typing import List, Sequence


def settings(directory: str, controller: str, ctld_port: int, munge_socket: str) -> List[str]:
    """Lines every private cluster has; `controller` is SlurmctldHost's value, e.g. `vm` or
    `vm(10.200.1.254)`. State, spool, pid and log files all live under `directory`."""
    d = directory
    return [
        "ClusterName=tfbench", f"SlurmctldHost={controller}", f"SlurmctldPort={ctld_port}",
        "SlurmUser=root", "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={munge_socket}",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none", "MpiDefault=none", "SwitchType=switch/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU", "SlurmdParameters=config_overrides",
        "ReturnToService=2", "SchedulerType=sched/backfill", "InactiveLimit=0", "KillWait=5", "MinJobAge=120",
        f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool/slurmd-%n",
        f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd-%n.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd-%n.log",
    ]


def partition(nodes: str) -> str:
    """The one default partition, "bench"; more tasks than CPUs may share a node."""
    return f"PartitionName=bench Nodes={nodes} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"


def write(path: str, lines: Sequence[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
