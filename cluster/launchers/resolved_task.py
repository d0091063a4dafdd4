"""Tasks that learn their role at start-up from their environment instead of by name in plan.json.

Under Slurm every task runs the same command and SlurmClusterResolver says, from the SLURM_*
variables of its step, which job and index it is; under Kubernetes the TFJob operator (or the
indexed Job's entry, cluster.k8s.index) sets TF_CONFIG and TFConfigClusterResolver reads it.
Either way the resolver's cluster spec and task become the TaskSpec's TF_CONFIG, and the rest
of the task entry runs exactly as for a locally launched task (tfbench.task calls resolve()).
Horovod ranks (`--task horovod`) learn their rank from horovodrun's environment, or under the
elastic driver the host it gave them; under Slurm a rank is the Slurm rank (after any ps).
"""
from __future__ import annotations

import dataclasses
import os
import socket
from typing import Callable, Dict

from cluster.horovod import elastic as horovod_elastic
from cluster.plan import cores as cores_lib
from cluster.plan.spec import ClusterPlan, TaskSpec


def _slurm_resolver(plan: ClusterPlan):
    from cluster.slurm.resolver import resolver

    return resolver(plan)


def _tf_config_resolver(plan: ClusterPlan):
    from tfbench.framework.tf_import import tf

    return tf.distribute.cluster_resolver.TFConfigClusterResolver()


def _from_slurm(plan: ClusterPlan) -> TaskSpec:
    only_ranks = plan.ranked_tasks and not plan.traits.tf_roles  # no TF cluster to resolve
    resolved = None if only_ranks else from_resolver(plan, _slurm_resolver(plan), task_cpus())
    if plan.ranked_tasks and (resolved is None or resolved.horovod_rank >= 0):  # a rank: the Slurm rank's
        from cluster.slurm.horovod import rank_task

        return rank_task(plan, task_cpus(), resolved)
    return resolved


def _from_tf_config(plan: ClusterPlan) -> TaskSpec:
    return from_resolver(plan, _tf_config_resolver(plan), task_cpus())


def _from_horovod(plan: ClusterPlan) -> TaskSpec:
    """A rank horovodrun started: its host under the elastic driver (the task follows the rank's
    host), else its rank."""
    if os.environ.get(horovod_elastic.HOSTS_ENV):
        return horovod_elastic.task_of(plan, os.environ.get("HOROVOD_HOSTNAME", ""),
                                       os.environ[horovod_elastic.HOSTS_ENV])
    rank = int(os.environ.get("HOROVOD_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "-1")))
    return plan.horovod_rank(rank)


# `python -m tfbench.task --task ENTRY`: the task's role comes from what ENTRY names at start-up.
ENTRIES: Dict[str, Callable[[ClusterPlan], TaskSpec]] = {
    "slurm": _from_slurm, "tf_config": _from_tf_config, "horovod": _from_horovod}


def task_cpus() -> int:
    """Cores the engine gave this task: Slurm's --cpus-per-task, else the affinity mask."""
    return int(os.environ.get("SLURM_CPUS_PER_TASK") or len(os.sched_getaffinity(0)))


def from_resolver(plan: ClusterPlan, resolver, cpus: int) -> TaskSpec:
    """The plan's task of the resolver's job and index, at the resolver's address and TF_CONFIG.

    The plan was made for hosts the engine chooses, so its tasks carry no cores and only the
    thread counts the user asked for; threads otherwise follow the cores the engine gave the
    task, with at least 2 inter-op threads for servers (see cluster.plan.topology)."""
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
    return ENTRIES[entry](plan)
