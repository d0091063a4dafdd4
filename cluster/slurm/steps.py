"""The srun commands of a run on Slurm, and what they need: nodes, tasks, cores, ports.

One step runs every task (`python -m tfbench.task --task slurm`: each finds its role through
SlurmClusterResolver), placed node by node as cluster.slurm.layout decides (arbitrary
distribution, SLURM_HOSTFILE), another one system monitor per node. Both steps are --overlap so
that the monitor never holds back the tasks' CPUs. The tasks' ports start at
TFBENCH_SLURM_PORT_BASE on every node (one more per task of the node), picked free on the node
that starts the steps.
"""
from __future__ import annotations

import dataclasses
import os
import random
import sys
from typing import Dict, List

from cluster.plan.ports import port_is_free
from cluster.plan.spec import ClusterPlan
from cluster.plan.topology import make_plan
from cluster.slurm import layout
from cluster.slurm.resolver import PORT_BASE_ENV
from tfbench.config import RunConfig
from tfbench.results.rundir import RunDir

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLACEHOLDER_HOST = "slurm-node"  # Slurm picks the nodes; tasks learn their address at start-up
DONE_FILE = "slurm.done"  # written when the tasks' step is over: node monitors stop
PORT_FLOOR = 20000  # task ports are picked between this and the ephemeral range


def plan_for(config: RunConfig) -> ClusterPlan:
    """The run's tasks for hosts Slurm will choose: no cores pinned from here, no ports yet;
    Horovod's hosts are the nodes the layout puts its ranks on (cluster.slurm.horovod). Emulated nodes are Slurm's
    to place tasks on, so the plan is made as for any Slurm run."""
    plan = make_plan(config.replace(hosts=(PLACEHOLDER_HOST,), network="local", link_bandwidth="", link_latency=0.0))
    placed = layout.of(config, plan)
    if plan.ranked_tasks:
        plan = dataclasses.replace(plan, horovod_hosts=layout.rank_hosts(placed, plan))
    warning = layout.warning(config, placed)
    return dataclasses.replace(plan, warnings=plan.warnings + ((warning,) if warning else ()))


def cpus_per_task(config: RunConfig) -> int:
    return max(1, config.cores_per_worker) * max(1, config.effective_num_local_devices)


def num_nodes(config: RunConfig, plan: ClusterPlan) -> int:
    return layout.of(config, plan).num_nodes


def tasks_per_node(config: RunConfig, plan: ClusterPlan) -> int:
    """At most this many tasks share a node."""
    return layout.of(config, plan).tasks_per_node


def pick_port_base(config: RunConfig, tasks_per_node: int) -> int:
    """--base_port, or the first of tasks_per_node consecutive ports free on this node, below the
    kernel's ephemeral range: the tasks bind them seconds after submission, and an ephemeral port
    (srun's own I/O sockets, any outgoing connection) could be taken by then."""
    if config.base_port:
        return config.base_port
    low = min(ephemeral_low(), 65536 - tasks_per_node)
    while True:
        base = random.randrange(PORT_FLOOR, max(PORT_FLOOR + 1, low - tasks_per_node))
        if all(port_is_free(base + i) for i in range(tasks_per_node)):
            return base


def ephemeral_low() -> int:
    """The first port of this machine's ephemeral range (net.ipv4.ip_local_port_range)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="utf-8") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def environment(run: RunDir, port_base: int) -> Dict[str, str]:
    """What every step's processes need on top of the job's environment."""
    env = dict(os.environ)
    env.update({"PYTHONUNBUFFERED": "1", PORT_BASE_ENV: str(port_base),
                "PYTHONPATH": os.pathsep.join(p for p in (PROJECT_ROOT, os.environ.get("PYTHONPATH")) if p)})
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # the run's scratch directory (cluster.supervision.scratch), not the TMPDIR Slurm gives a job:
    # a task Slurm ends leaves its temporary files there; a node without it falls back to /tmp
    env["TMPDIR"] = run.scratch
    return env


def tasks_step(run: RunDir, config: RunConfig, plan: ClusterPlan) -> List[str]:
    """All tasks in one step, each on the node SLURM_HOSTFILE names for its rank; a task that fails
    ends the step (--kill-on-bad-exit)."""
    return ["srun", f"--ntasks={len(plan.tasks)}", f"--nodes={num_nodes(config, plan)}", "--distribution=arbitrary",
            f"--cpus-per-task={cpus_per_task(config)}", "--kill-on-bad-exit=1", "--overlap",
            "--job-name=tfbench-tasks", sys.executable, "-m", "tfbench.task", "--run_dir", run.path,
            "--task", "slurm"]


def monitor_step(run: RunDir, config: RunConfig, plan: ClusterPlan) -> List[str]:
    nodes = num_nodes(config, plan)
    return ["srun", f"--ntasks={nodes}", f"--nodes={nodes}", "--ntasks-per-node=1", "--cpus-per-task=1",
            "--overlap", "--job-name=tfbench-monitor", sys.executable, "-m", "cluster.slurm.node_monitor",
            "--run_dir", run.path]
