"""Horovod ranks as Slurm tasks, over Horovod's own Gloo rendezvous (no horovodrun, no ssh).

The launcher starts the rendezvous server (cluster.horovod.gloo) where tfbench runs and passes
its address to the tasks (TFBENCH_HOROVOD_RENDEZVOUS=addr:port). Ranks are laid out node by node
(cluster.slurm.layout), so the host-alloc plan the server is given, node<n>:k per node that runs
ranks, is known before Slurm picks the nodes; each rank checks that its Slurm
node and local index match its slot, then takes the environment horovodrun's gloo_run would
give it: rank, sizes, local and cross ranks, the rendezvous, and the interface that reaches it.
Ranks that also join a TF cluster holding ps tasks (the hybrid) are Slurm's last ranks: the
resolver hands its first ranks to the ps, and each rank keeps the TF_CONFIG it gives the worker.
"""
from __future__ import annotations

import dataclasses
import os
import socket

from cluster.horovod import gloo as horovod_gloo
from cluster.plan import cores as cores_lib
from cluster.plan.spec import ClusterPlan, TaskSpec
from cluster.slurm.resolver import node_addresses
from tfbench.config.errors import ConfigError

RENDEZVOUS_ENV = "TFBENCH_HOROVOD_RENDEZVOUS"


def rendezvous_address() -> str:
    """An address of this host the compute nodes can reach (its name's address)."""
    return socket.gethostbyname(socket.gethostname())


def rank_task(plan: ClusterPlan, cpus: int, resolved=None) -> TaskSpec:
    """This Slurm task's Horovod rank, with the rank environment set in os.environ. The ranks are
    the last Slurm ranks (cluster.slurm.layout: any ps come first); `resolved`, the task as
    SlurmClusterResolver gives it, carries TF_CONFIG for ranks that also join a TF cluster."""
    procid, node, local = (int(os.environ[k]) for k in ("SLURM_PROCID", "SLURM_NODEID", "SLURM_LOCALID"))
    others = len(plan.tasks) - len(plan.ranked_tasks)
    rank = procid - others
    slot = horovod_gloo.host_alloc_plan(plan)[rank]
    ranks_before_on_node = local - max(0, others - (procid - local))  # the node's other tasks come first
    if (slot.hostname, slot.local_rank) != (f"node{node}", ranks_before_on_node):
        raise ConfigError(f"Slurm placed rank {rank} as task {local} of node {node}, but the Horovod plan "
                          f"({plan.horovod_hosts}) expects it as local rank {slot.local_rank} of {slot.hostname}")
    address, _, port = os.environ[RENDEZVOUS_ENV].rpartition(":")
    os.environ.update(horovod_gloo.rank_env(plan, rank, address, int(port), horovod_gloo.iface_towards(address)))
    if resolved is not None:
        if resolved.horovod_rank != rank:
            raise ConfigError(f"Slurm rank {procid} is {resolved.name} to the cluster resolver but Horovod rank {rank}")
        return resolved
    planned = plan.horovod_rank(rank)
    intra, inter = cores_lib.thread_counts(range(max(1, cpus)), planned.intra_threads, planned.inter_threads)
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    host = node_addresses([node]).get(node, node)  # where Slurm reaches the node (resolver.py)
    return dataclasses.replace(planned, host=host, cores=(), intra_threads=intra, inter_threads=inter)
