"""Tasks that learn their role at start-up from a cluster resolver instead of from plan.json.

Under Slurm every task runs the same command and SlurmClusterResolver says, from the SLURM_*
variables of its step, which job and index it is; under Kubernetes the TFJob operator (or the
indexed Job's entry, cluster.k8s_index) sets TF_CONFIG and TFConfigClusterResolver reads it.
Either way the resolver's cluster spec and task become the TaskSpec's TF_CONFIG, and the rest
of the task entry runs exactly as for a locally launched task (tfbench.task calls resolve()).
"""
from __future__ import annotations

import dataclasses
import os
import socket
from typing import Callable, Dict

from cluster import cores as cores_lib
from cluster.spec import ClusterPlan, TaskSpec


def _slurm_resolver(plan: ClusterPlan):
    from cluster.slurm.resolver import resolver

    return resolver(plan)


def _tf_config_resolver(plan: ClusterPlan):
    from tfbench.framework.tf_import import tf

    return tf.distribute.cluster_resolver.TFConfigClusterResolver()


RESOLVERS: Dict[str, Callable] = {"slurm": _slurm_resolver, "tf_config": _tf_config_resolver}


def task_cpus() -> int:
    """Cores the engine gave this task: Slurm's --cpus-per-task, else the affinity mask."""
    return int(os.environ.get("SLURM_CPUS_PER_TASK") or len(os.sched_getaffinity(0)))


def from_resolver(plan: ClusterPlan, resolver, cpus: int) -> TaskSpec:
    """The plan's task of the resolver's job and index, at the resolver's address and TF_CONFIG.

    The plan was made for hosts the engine chooses, so its tasks carry no cores and only the
    thread counts the user asked for; threads otherwise follow the cores the engine gave the
    task, with at least 2 inter-op threads for servers (see cluster.topology)."""
    cluster = resolver.cluster_spec().as_dict()
    role, index = resolver.task_type, int(resolver.task_id)
    planned = plan.task(f"{role}_{index}")
    host, _, port = cluster[role][index].rpartition(":")
    intra, inter = cores_lib.thread_counts(range(max(1, cpus)), planned.intra_threads, planned.inter_threads)
    if planned.service:
        inter = max(inter, 2)
    return dataclasses.replace(planned, host=host or socket.gethostname(), port=int(port), cores=(),
                               intra_threads=intra, inter_threads=inter,
                               tf_config={"cluster": cluster, "task": {"type": role, "index": index}})


def resolve(plan: ClusterPlan, entry: str) -> TaskSpec:
    if entry == "slurm" and plan.strategy == "horovod":  # ranks, not a TensorFlow cluster
        from cluster.slurm.horovod import rank_task

        return rank_task(plan, task_cpus())
    return from_resolver(plan, RESOLVERS[entry](plan), task_cpus())
