"""The emulated launcher: each host of the plan a network namespace, joined by shaped links.

setup() removes the namespaces of dead runs, claims a run key, builds the hosts, switch and
links (cluster.net.links), gives the plan's hosts h0, h1, ... their addresses (TF_CONFIG follows),
measures the rate the links really carry, and for launcher ranks starts Horovod's Gloo rendezvous
inside the switch namespace (cluster.horovod.gloo). Every task then runs inside its host's
namespace (cluster.net.netns_exec), so its gRPC servers are reachable from the run's namespaces
only. cleanup() stops the rendezvous and the delay line (a delayed network's), and removes
every namespace of the run, and with them the bridge, the veth or TAP pairs and their shaping;
the owner file lets the next start remove them if the launcher itself was killed.
"""
from __future__ import annotations

from typing import List, Optional

from cluster.horovod import gloo as horovod_gloo
from cluster.launchers.base import Launcher, TaskCommand, Unit
from cluster.net import link_facts, links, netns, netns_exec
from cluster.plan.spec import ClusterPlan, TaskSpec
from cluster.plan.topology import with_hosts
from tfbench.config import RunConfig
from tfbench.results.rundir import RunDir

NETWORK_FILE = "network.json"


class EmulatedLauncher(Launcher):
    name = "emulated"

    def __init__(self, run: RunDir, config: RunConfig, command_for: Optional[TaskCommand] = None):
        super().__init__(run, command_for)
        self.config = config
        self.key: Optional[str] = None
        self.net: Optional[links.Network] = None
        self.running: Optional[links.Running] = None  # a delayed network's delay line
        self.rendezvous: Optional[horovod_gloo.Rendezvous] = None
        self.facts: dict = {"network": self.name}

    def setup(self, plan: ClusterPlan) -> ClusterPlan:
        self.key = netns.open_run(self.run.path)
        names = list(dict.fromkeys(t.host for t in plan.tasks))
        self.net = links.plan_network(self.key, len(names), self.config.link_rate_bps, self.config.link_latency,
                                      self.config.link_jitter)
        self.running = links.build(self.net)
        plan = with_hosts(plan, {name: host.address for name, host in zip(names, self.net.hosts)})
        self.facts["link"] = link_facts.facts(self.net, self.config.link_bandwidth)
        if plan.ranked_tasks:
            self.rendezvous = netns_exec.run_in(self.net.switch, lambda: horovod_gloo.start_rendezvous(plan))
        self.run.write_json(NETWORK_FILE, {**self.facts["link"], **self.net.to_dict()})
        return plan

    def wrap(self, command: List[str], spec: TaskSpec) -> List[str]:
        host = self.net.host_of(spec.host)
        return netns_exec.command(host.netns, command, hostname=host.address)

    def units(self, plan: ClusterPlan) -> List[Unit]:
        """A process per task, in its host's namespace; a launcher rank with its rendezvous environment."""
        if not plan.ranked_tasks:
            return super().units(plan)
        envs = horovod_gloo.rank_envs(plan, self.net.bridge_address, self.rendezvous.port, links.HOST_IFACE)
        return [self.task_unit(spec, envs[spec.horovod_rank] if spec.horovod_rank >= 0 else None)
                for spec in plan.tasks]

    def cleanup(self) -> None:
        if self.rendezvous is not None:
            self.rendezvous.stop()
            self.rendezvous = None
        if self.running is not None:
            self.running.stop()
            self.running = None
        if self.key is not None:
            netns.close_run(self.key)

    def record(self) -> dict:
        return dict(self.facts)
