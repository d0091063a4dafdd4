"""Horovod's elastic mode on this machine: horovodrun's elastic driver starts, drops and re-adds
the ranks; tfbench gives it hosts to do that with.

The driver keeps track of hosts, not processes: when a rank fails, its whole host is blacklisted
for a cooldown, and a host's rank is restarted once the host is usable again. With every rank on
one host, losing one rank would lose them all. So each rank gets a host of its own: a loopback
address of the run's private network namespace (127.0.1.1, 127.0.1.2, ...), which horovodrun
treats as local (no ssh) because it is an address of an interface it can see. The discovery
script lists every host all the time: a killed rank's host comes back after the cooldown
(COOLDOWN_S) and the driver starts its rank again, which then joins the others at their next
commit. Task identity follows the host: the rank on the i-th address is worker_i whatever rank
number the driver gives it after a reset.
"""
from __future__ import annotations

import os
import stat
import sys
from typing import List, Optional, Tuple

from cluster.plan.spec import ClusterPlan, TaskSpec

HOSTS_ENV = "TFBENCH_ELASTIC_HOSTS"  # the ranks' hosts, in worker order: how a rank knows its task
COOLDOWN_S = (1, 2)  # horovodrun --blacklist-cooldown-range: a failed rank's host is back after ~2 s
SCRIPT = "discover_hosts.sh"


def hosts(num_workers: int) -> List[str]:
    """One loopback address per rank; worker_i runs on hosts(n)[i]."""
    if num_workers > 254:
        raise ValueError("Horovod elastic gives each rank an address of 127.0.1.0/24: at most 254 ranks")
    return [f"127.0.1.{i + 1}" for i in range(num_workers)]


def describe(num_workers: int) -> str:
    """The dry run's line: where each rank runs and what happens when one dies."""
    places = ", ".join(f"worker_{i} on {a}" for i, a in enumerate(hosts(num_workers)))
    return (f"Horovod elastic: {places} (loopback addresses of the run's private network namespace); a rank that "
            f"dies is dropped, its host is out for {COOLDOWN_S[1]} s, then horovodrun starts it again; ranks are "
            f"renumbered at every reset, tasks keep their host")


def task_of(plan: ClusterPlan, hostname: str, listed: str) -> TaskSpec:
    """The task whose host is `hostname` (HOROVOD_HOSTNAME) among the `listed` hosts (HOSTS_ENV)."""
    names = listed.split(",")
    if hostname not in names:
        raise ValueError(f"HOROVOD_HOSTNAME={hostname!r} is none of the elastic hosts {listed}")
    return plan.task(f"worker_{names.index(hostname)}")


def add_addresses(namespace: str, addresses: List[str]) -> None:
    """Puts the ranks' addresses on the loopback interface of the run's private namespace."""
    from pyroute2 import NetNS

    with NetNS(namespace, flags=0) as ns:
        lo = ns.link_lookup(ifname="lo")[0]
        for address in addresses:
            ns.addr("add", index=lo, address=address, prefixlen=8, scope=254)  # host scope, as ip gives 127/8


def write_discovery_script(directory: str, addresses: List[str]) -> str:
    """The --host-discovery-script: every rank's host with one slot, every time it is asked."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, SCRIPT)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n# Horovod elastic host discovery for this run: one slot per rank's address.\n")
        f.write("".join(f"echo {a}:1\n" for a in addresses))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def command(plan: ClusterPlan, run_path: str, script: str, min_workers: int,
            cooldown: Tuple[int, int] = COOLDOWN_S, horovodrun: Optional[List[str]] = None) -> List[str]:
    """horovodrun (cluster.horovod.horovodrun) in elastic mode starting `python -m tfbench.task --task horovod`
    on every host."""
    from cluster.horovod import horovodrun as launcher

    n = len(plan.workers)
    return [*(horovodrun or launcher.command()), "--gloo", "-np", str(n), "--min-np", str(min_workers or 1),
            "--max-np", str(n),
            "--host-discovery-script", script, "--blacklist-cooldown-range", *map(str, cooldown),
            "--network-interface", "lo",
            sys.executable, "-m", "tfbench.task", "--run_dir", run_path, "--task", "horovod"]
