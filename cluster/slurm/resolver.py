"""SlurmClusterResolver for tfbench's tasks, including on CPU-only nodes.

As shipped, SlurmClusterResolver needs GPUs to place tasks: without gpus_per_node it runs
`nvidia-smi` (missing on CPU nodes), and with gpus_per_node=0 it rejects the configuration
(tensorflow#56894); it also only lists as many tasks per node as it can give GPUs to. tfbench
passes one pseudo-GPU per task (so every task is listed), never lets it set
CUDA_VISIBLE_DEVICES (Slurm's own --gpus does that), and reports the node's real accelerator
count. Jobs follow the plan: chief, ps and worker for parameter servers, workers otherwise; the
resolver assigns Slurm ranks to them in sorted job order (chief, ps, worker).

The resolver builds addresses from the step's node names (`h1:8888`). A node's name need not
resolve: Slurm reaches it at its NodeAddr, which slurm.conf may set apart from the name (as the
private clusters of emulated hosts do, cluster.slurm.node_cluster). Each name is therefore
replaced by the NodeAddr sinfo gives (cluster.slurm.query); where NodeAddr is the name itself (the
default) nothing changes, and without an answer the names stay.
"""
from __future__ import annotations

import glob
import os
from typing import Dict, Iterable

from cluster.plan.spec import ClusterPlan
from cluster.slurm import query

PORT_BASE_ENV = "TFBENCH_SLURM_PORT_BASE"
DEFAULT_PORT_BASE = 8888


def visible_gpus() -> int:
    """GPUs this task may use: CUDA_VISIBLE_DEVICES when set, else the NVIDIA device nodes (0 on CPU nodes)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    return len(glob.glob("/dev/nvidia[0-9]*"))


def node_addresses(names: Iterable[str]) -> Dict[str, str]:
    """{node name: NodeAddr} as slurmctld knows them (sinfo); {} when it cannot tell."""
    return {name: node["address"] for name, node in query.nodes(names).items() if node["address"]}


def at_addresses(cluster: Dict[str, list], addresses: Dict[str, str]) -> Dict[str, list]:
    """The cluster spec with every node name replaced by its address."""
    def address(task: str) -> str:
        host, _, port = task.rpartition(":")
        return f"{addresses.get(host, host)}:{port}"

    return {job: [address(t) for t in tasks] for job, tasks in cluster.items()}


def jobs_of(plan: ClusterPlan) -> Dict[str, int]:
    """Job name -> task count, as in the plan's cluster spec."""
    jobs: Dict[str, int] = {}
    for task in plan.tasks:
        jobs[task.role] = jobs.get(task.role, 0) + 1
    return jobs


def _resolver_class():
    from tfbench.framework.tf_import import tf

    class CpuSlurmClusterResolver(tf.distribute.cluster_resolver.SlurmClusterResolver):
        """SlurmClusterResolver that neither calls nvidia-smi nor needs a GPU per task, and gives
        every task at its node's NodeAddr."""

        def __init__(self, jobs, port_base):
            num_tasks = int(os.environ.get("SLURM_STEP_NUM_TASKS") or os.environ.get("SLURM_NTASKS") or 0)
            super().__init__(jobs=jobs, port_base=port_base, gpus_per_node=max(1, num_tasks), gpus_per_task=1,
                             auto_set_gpu=False)
            self.node_addresses = node_addresses(self._task_configuration)

        def cluster_spec(self):
            spec = super().cluster_spec().as_dict()
            return tf.train.ClusterSpec(at_addresses(spec, self.node_addresses))

        def num_accelerators(self, task_type=None, task_id=None, config_proto=None):
            del task_type, task_id, config_proto
            return {"GPU": visible_gpus()}

    return CpuSlurmClusterResolver


def resolver(plan: ClusterPlan, port_base: int = 0):
    """The resolver of the calling task, from the SLURM_* variables of its srun step."""
    port_base = port_base or int(os.environ.get(PORT_BASE_ENV) or DEFAULT_PORT_BASE)
    return _resolver_class()(jobs_of(plan), port_base)
