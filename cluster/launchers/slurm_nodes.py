"""`--launcher=slurm --network=emulated`: the run's Slurm job on a private Slurm of emulated nodes.

setup() starts a NodeSlurm (cluster.slurm.node_cluster): slurmctld on this machine and one slurmd
per node, each node an emulated host behind a link shaped to --link_bandwidth. There are as many
nodes as the run's layout uses (cluster.slurm.layout), and each claims CPUs= for the tasks of the
fullest node times --cores_per_worker (this machine's cores are shared: slurm.conf's
config_overrides lets nodes claim more than there are). SLURM_CONF then points at that cluster,
for this process and everything it starts; the links are measured and written to network.json,
whose switch ports the launcher samples (cluster.slurm.node_monitor, tfbench.monitor.link_monitor);
and the run is submitted and followed exactly as on any Slurm cluster (SlurmLauncher): sbatch from
here, the batch script and srun steps on the nodes, each task at its node's address. Horovod's
rendezvous is served on this machine's end of the login link, which every node reaches.

cleanup() cancels the job, stops the cluster (its daemons, namespaces and links), keeps the
daemons' logs in <run>/slurm-cluster/ and removes the cluster's directory, whether the run
ended, failed or was interrupted. If this process is killed outright, munged, slurmctld and
slurmd die with it and the next emulated run (or `python -m cluster.net.netns --cleanup`) removes the
namespaces and whatever still runs in them.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Optional

from cluster.launchers.base import TaskCommand
from cluster.launchers.emulated import NETWORK_FILE
from cluster.launchers.slurm import SlurmLauncher
from cluster.net import link_facts
from cluster.plan.spec import ClusterPlan
from cluster.slurm import layout, steps
from cluster.slurm.node_cluster import NodeSlurm
from tfbench.config import RunConfig
from tfbench.results.rundir import RunDir

LOG_COPY = "slurm-cluster"
SLURMD_TIMEOUT_S = 5  # a lost node is noticed within ~16 s (cluster.slurm.node_cluster)
MESSAGE_TIMEOUT_S = 5


class NodeSlurmLauncher(SlurmLauncher):
    def __init__(self, run: RunDir, config: RunConfig, command_for: Optional[TaskCommand] = None):
        super().__init__(run, config, command_for)
        self.inside = False  # the job is submitted to the private cluster, never run in a caller's allocation
        self.cluster: Optional[NodeSlurm] = None
        self.facts: dict = {"network": "emulated"}
        self.slurm_record: Optional[dict] = None
        self.saved_conf: Optional[str] = None

    def rendezvous_host(self) -> str:
        return self.cluster.login_address

    def setup(self, plan: ClusterPlan) -> ClusterPlan:
        placed = layout.of(self.config, plan)
        cpus = placed.tasks_per_node * steps.cpus_per_task(self.config)
        self.cluster = NodeSlurm(tempfile.mkdtemp(prefix="tfbench-nodes-"), SLURMD_TIMEOUT_S, MESSAGE_TIMEOUT_S)
        self.saved_conf = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = self.cluster.conf
        nodes = self.cluster.start(placed.num_nodes, cpus, self.config.link_rate_bps,
                                   link_delay_ms=self.config.link_latency,
                                   link_jitter_ms=self.config.link_jitter)
        link = link_facts.facts(self.cluster.network, self.config.link_bandwidth)
        self.run.write_json(NETWORK_FILE, {**link, **self.cluster.network.to_dict()})
        claimed = self.cluster.claimed_cpus()
        self.facts.update(link=link, slurm_cluster={
            "nodes": [{"node": n.name, "address": n.address, "cpus": claimed.get(n.name),
                       "tasks": placed.tasks_on(i)} for i, n in enumerate(nodes)],
            "login_address": self.cluster.login_address, "machine_cores": os.cpu_count(), "directory": self.cluster.dir,
            "cpus_note": f"each node claims {cpus} CPUs (tasks of the fullest node x cores per task) of this "
                         f"machine's {os.cpu_count()} cores, which all nodes share"})
        return super().setup(plan)

    def cleanup(self) -> None:
        try:
            super().cleanup()  # the job has left the queue (ended or cancelled) ...
        finally:
            try:
                self.slurm_record = SlurmLauncher.record(self)  # ... and slurmctld still remembers how it ended
            finally:
                self._stop_cluster()

    def _stop_cluster(self) -> None:
        if self.cluster is None:
            return
        cluster, self.cluster = self.cluster, None
        left = cluster.stop()
        if os.path.isdir(cluster.log_dir):
            shutil.copytree(cluster.log_dir, self.run.file(LOG_COPY), dirs_exist_ok=True)
        if self.saved_conf is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = self.saved_conf
        if left:
            raise RuntimeError(f"left after stopping the Slurm nodes: {', '.join(left)} (logs in {cluster.dir}/log)")
        shutil.rmtree(cluster.dir, ignore_errors=True)

    def record(self) -> dict:
        return {**(self.slurm_record or SlurmLauncher.record(self)), **self.facts}
