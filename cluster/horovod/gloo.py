"""Horovod ranks without horovodrun: Horovod's own Gloo rendezvous, ranks started by a launcher.

horovodrun starts remote ranks over ssh. Launchers that place processes themselves (network
namespaces, Slurm tasks) instead start the rendezvous server horovodrun uses
(horovod.runner.http.http_server.RendezvousServer, initialised with the same host-alloc plan as
horovod/runner/gloo_run.py) and give every rank the environment gloo_run would:

    rendezvous = start_rendezvous(plan)          # in the process/namespace the ranks can reach
    env = rank_env(plan, rank, addr, rendezvous.port, iface="eth0")
    ...
    rendezvous.stop()

The host names of plan.horovod_hosts ("host:slots,...") are the ranks' HOROVOD_HOSTNAME, so
ranks on one host share a local scope exactly as under horovodrun.
"""
from __future__ import annotations

import dataclasses
import socket
from typing import Dict, List, Union

import psutil

from cluster.plan.spec import ClusterPlan


def host_alloc_plan(plan: ClusterPlan) -> list:
    """Horovod's SlotInfo per rank, in rank order, as horovodrun -np N -H hosts would assign."""
    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts

    return get_host_assignments(parse_hosts(plan.horovod_hosts), len(plan.workers))


@dataclasses.dataclass
class Rendezvous:
    """A running rendezvous server; port is where ranks find it (every address of its host)."""

    server: object
    port: int

    def stop(self) -> None:
        self.server.stop()


def start_rendezvous(plan: ClusterPlan) -> Rendezvous:
    """Starts Horovod's rendezvous server for the plan's ranks in this thread's network namespace."""
    from horovod.runner.http.http_server import RendezvousServer

    server = RendezvousServer(verbose=0)
    port = server.start()
    server.init(host_alloc_plan(plan))
    return Rendezvous(server, port)


def iface_towards(address: str) -> str:
    """The network interface this node uses to reach `address` (for HOROVOD_GLOO_IFACE)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((address, 9))  # UDP connect sends nothing: it only picks the route
        local = s.getsockname()[0]
    for name, addrs in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == local for a in addrs):
            return name
    return "lo" if local.startswith("127.") else ""


def rank_env(plan: ClusterPlan, rank: int, rendezvous_addr: str, rendezvous_port: Union[int, str],
             iface: str) -> Dict[str, str]:
    """The environment gloo_run gives rank `rank`: rendezvous, controller and slot variables
    (the port may be a name: a dry run shows the variables before the server has one)."""
    slot = host_alloc_plan(plan)[rank]
    return {
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": rendezvous_addr,
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(rendezvous_port),
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_IFACE": iface,
        "HOROVOD_HOSTNAME": str(slot.hostname),
        "HOROVOD_RANK": str(slot.rank),
        "HOROVOD_SIZE": str(slot.size),
        "HOROVOD_LOCAL_RANK": str(slot.local_rank),
        "HOROVOD_LOCAL_SIZE": str(slot.local_size),
        "HOROVOD_CROSS_RANK": str(slot.cross_rank),
        "HOROVOD_CROSS_SIZE": str(slot.cross_size),
    }


def rank_envs(plan: ClusterPlan, rendezvous_addr: str, rendezvous_port: Union[int, str],
              iface: str) -> List[Dict[str, str]]:
    return [rank_env(plan, r, rendezvous_addr, rendezvous_port, iface) for r in range(len(plan.workers))]
