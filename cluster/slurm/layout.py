"""Which Slurm node each task of a run lands on, and how srun is told so.

SlurmClusterResolver turns Slurm's ranks into tasks by listing the step's nodes sorted by name,
each with as many addresses as it runs tasks, and handing them out to the jobs in sorted order
(chief, ps, worker). Rank r therefore has to run on the node of slot r: the ranks of a node are
consecutive, nodes in name order. Within that rule tfbench chooses the layout itself, as the
plan's --ps_placement asks, instead of leaving it to Slurm's default block distribution:

    workers only (MWMS, Horovod)     workers in equal blocks (the first nodes get one more)
    ps tasks, collocated             the coordinator (if any) and the ps on the first node, with
                                     the first workers
    ps tasks, separate               the coordinator on node 0, each ps on a node of its own,
                                     workers on the rest (with one node to spare: coordinator and
                                     ps share node 0; on one node everything shares it)

and runs the tasks' step with --distribution=arbitrary and SLURM_HOSTFILE, one node name per rank
(the batch script writes that file from the job's node list, sorted as the resolver sorts them).
Launcher ranks (Horovod's, the hybrid's workers) are workers, so they are the last Slurm ranks
and Horovod's host list names the nodes the layout puts them on (rank_hosts).
--slurm_nodes=0 asks for one node per worker, plus with separate ps one per ps and one for the
coordinator. The job asks every node for as many tasks as the fullest one runs.
"""
from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
from typing import List, Tuple

from cluster.plan.spec import ClusterPlan
from tfbench.config import RunConfig
from tfbench.results.rundir import RunDir

HOSTFILE = "tasks/slurm.hosts"


@dataclasses.dataclass(frozen=True)
class Layout:
    order: Tuple[str, ...]  # task names in the resolver's rank order
    nodes: Tuple[int, ...]  # node index of each rank, never decreasing

    @property
    def num_nodes(self) -> int:
        return max(self.nodes) + 1 if self.nodes else 1

    @property
    def tasks_per_node(self) -> int:
        """Tasks on the fullest node."""
        return max(self.nodes.count(n) for n in range(self.num_nodes)) if self.nodes else 1

    def tasks_on(self, node: int) -> List[str]:
        return [name for name, n in zip(self.order, self.nodes) if n == node]


def rank_order(plan: ClusterPlan) -> Tuple[str, ...]:
    """Task names in the order SlurmClusterResolver gives ranks to them: jobs sorted by name,
    tasks by index. Launcher ranks are workers numbered as their index, so they come last, in
    rank order, after any ps (a strategy whose ranks also join a TF cluster)."""
    return tuple(t.name for t in sorted(plan.tasks, key=lambda t: (t.role, t.index)))


def rank_hosts(placed: Layout, plan: ClusterPlan) -> str:
    """Horovod's host list (node<n>:slots, n the Slurm node's index) for the plan's launcher ranks
    where the layout puts them."""
    ranked = {t.name for t in plan.ranked_tasks}
    slots: dict = {}
    for name, node in zip(placed.order, placed.nodes):
        if name in ranked:
            slots[node] = slots.get(node, 0) + 1
    return ",".join(f"node{n}:{k}" for n, k in slots.items())


def blocks(count: int, nodes: int, first: int = 0) -> List[int]:
    """Node indices of `count` tasks in equal blocks over `nodes` nodes from `first` on."""
    nodes = max(1, min(nodes, count))
    return [first + n for n in range(nodes) for _ in range(count // nodes + (1 if n < count % nodes else 0))]


def of(config: RunConfig, plan: ClusterPlan) -> Layout:
    order = rank_order(plan)
    nodes = config.effective_slurm_nodes
    workers = [n for n in order if n.startswith("worker_")]
    light = len(order) - len(workers)  # a coordinator and the ps, first in the resolver's order
    if not light:
        return Layout(order, tuple(blocks(len(workers), nodes)))
    k = sum(1 for n in order if n.startswith("ps_"))
    coordinator = light - k
    if config.ps_placement == "separate" and nodes >= light + 1:
        own = [0] * coordinator + [coordinator + j for j in range(k)]
        return Layout(order, tuple(own + blocks(len(workers), nodes - light, first=light)))
    if config.ps_placement == "separate" and nodes >= 2:
        return Layout(order, tuple([0] * light + blocks(len(workers), nodes - 1, first=1)))
    return Layout(order, tuple([0] * light + blocks(len(workers), nodes)))


def warning(config: RunConfig, layout: Layout) -> str:
    """Why --ps_placement=separate could not give the ps a node of its own, or ''."""
    if not config.traits.ps_tasks or config.ps_placement != "separate" or layout.num_nodes > 1:
        return ""
    return "--ps_placement=separate on one Slurm node: the ps share it with the workers (raise --slurm_nodes)"


def hostfile_lines(run: RunDir, layout: Layout) -> List[str]:
    """Batch-script lines that write SLURM_HOSTFILE from the job's nodes, sorted as the resolver
    sorts them, and export it for the tasks' step (started after the monitors' step)."""
    path = shlex.quote(run.file(HOSTFILE))
    names = " ".join(f'"${{nodes[{n}]}}"' for n in layout.nodes)
    return ['nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST" | LC_ALL=C sort))',
            f"printf '%s\\n' {names} > {path}  # one line per rank: {', '.join(layout.order)}",
            f"export SLURM_HOSTFILE={path}"]


def write_hostfile(run: RunDir, layout: Layout, job_nodelist: str) -> str:
    """The same file written from here, inside an allocation; returns its path."""
    proc = subprocess.run(["scontrol", "show", "hostnames", job_nodelist], capture_output=True, text=True, check=True)
    names = sorted(proc.stdout.split())
    missing = layout.num_nodes - len(names)
    if missing > 0:
        raise RuntimeError(f"the allocation has {len(names)} node(s) and the run's layout needs {layout.num_nodes}")
    path = run.file(HOSTFILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(f"{names[n]}\n" for n in layout.nodes))
    return path
