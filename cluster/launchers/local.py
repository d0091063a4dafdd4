"""The local launcher: every task a process of this machine, talking over loopback.

Ports come from portpicker; one that something else holds is replaced before a start, and a
task that fails to bind its port restarts the cluster with a fresh one (cluster.launchers.supervise
decides when). A plan's launcher ranks run as one horovodrun process whose ranks report progress
under the ranks' task names (--horovod_elastic: horovodrun's elastic driver, each rank on a loopback
address of its own, cluster.horovod.elastic). Multi-task runs start inside a private network
namespace with only a loopback interface (cluster.net.private_net): their gRPC servers are
unreachable from elsewhere.
"""
from __future__ import annotations

import os
import sys
from typing import Callable, Dict, List, Optional, Sequence

import portpicker

from cluster.horovod import elastic as horovod_elastic
from cluster.horovod import horovodrun
from cluster.launchers.base import HOROVOD_GROUP, Launcher, TaskCommand, Unit, unit_env
from cluster.net import netns, netns_exec, private_net
from cluster.plan.ports import is_local, port_is_free
from cluster.plan.spec import ClusterPlan, TaskSpec
from cluster.plan.topology import with_new_ports
from tfbench.results.rundir import RunDir

GroupCommand = Callable[[ClusterPlan], List[str]]
MAX_PORT_CHECKS = 3


def default_group_command(run: RunDir, config=None) -> GroupCommand:
    """horovodrun (cluster.horovod.horovodrun) from the same environment as this Python, starting every rank's task."""
    if config is not None and config.horovod_elastic:
        script = os.path.join(run.path, "horovod", horovod_elastic.SCRIPT)
        return lambda plan: horovod_elastic.command(plan, run.path, script, config.horovod_min_workers)
    return lambda plan: [*horovodrun.command(), "--gloo", "-np", str(len(plan.workers)), "-H", plan.horovod_hosts,
                         sys.executable, "-m", "tfbench.task", "--run_dir", run.path, "--task", "horovod"]


class _FreshPorts:
    """Free local ports that no task of the plan uses yet (a with_new_ports allocator)."""

    def __init__(self, plan: ClusterPlan):
        self._used = {t.port for t in plan.tasks if t.port}

    def port_for(self, host: str) -> int:
        while True:
            port = portpicker.pick_unused_port()
            if port not in self._used and port_is_free(port):
                self._used.add(port)
                return port


class LocalLauncher(Launcher):
    name = "local"

    def __init__(self, run: RunDir, config=None, command_for: Optional[TaskCommand] = None,
                 group_command: Optional[GroupCommand] = None):
        super().__init__(run, command_for)
        self.group_command = group_command or default_group_command(run, config)
        self.elastic = bool(config is not None and config.horovod_elastic)
        self.elastic_record: dict = {}
        self.elastic_hosts: List[str] = []  # worker_i's loopback address, set up with the namespace
        self._ports: Optional[_FreshPorts] = None
        self.key: Optional[str] = None
        self.namespace: Optional[str] = None
        self.isolation: dict = {}

    def setup(self, plan: ClusterPlan) -> ClusterPlan:
        self._ports = _FreshPorts(plan)
        if private_net.needed(plan.traits):
            self.key, self.namespace, why = private_net.create(self.run)
            self.isolation = ({"netns": self.namespace, "reachable_from": "the run's own tasks only (loopback of a "
                               "private network namespace)"} if self.namespace else
                              {"netns": None, "reachable_from": f"every machine that can reach this one ({why})"})
            self.run.write_json(private_net.ISOLATION_FILE, self.isolation)
            if not self.namespace:
                print(f"tfbench: warning: the tasks' gRPC servers listen on every address of this machine, "
                      f"unauthenticated: {why} (README: Security)", file=sys.stderr, flush=True)
        if self.elastic:
            self._set_up_elastic(plan)
        return plan

    def _set_up_elastic(self, plan: ClusterPlan) -> None:
        """A loopback address per rank in the private namespace, and the discovery script."""
        if not self.namespace:
            raise RuntimeError("--horovod_elastic needs the run's private network namespace (root), where each "
                               "rank gets a loopback address of its own")
        self.elastic_hosts = addresses = horovod_elastic.hosts(len(plan.workers))
        horovod_elastic.add_addresses(self.namespace, addresses)
        horovod_elastic.write_discovery_script(os.path.join(self.run.path, "horovod"), addresses)
        self.elastic_record = {"hosts": addresses, "blacklist_cooldown_s": list(horovod_elastic.COOLDOWN_S),
                               "discovery": "every rank's host listed all the time"}

    def wrap(self, command: List[str], spec: TaskSpec) -> List[str]:
        return netns_exec.command(self.namespace, command) if self.namespace else command

    def cleanup(self) -> None:
        if self.key is not None:
            key, self.key = self.key, None
            netns.close_run(key)

    def record(self) -> dict:
        return {**super().record(), **({"grpc_isolation": self.isolation} if self.isolation else {}),
                **({"horovod_elastic": self.elastic_record} if self.elastic_record else {})}

    def port_task(self, spec: TaskSpec) -> Optional[TaskSpec]:
        return spec if spec.port and is_local(spec.host) else None

    def units(self, plan: ClusterPlan) -> List[Unit]:
        """A process per task; the launcher ranks together as one horovodrun."""
        ranked = plan.ranked_tasks
        if not ranked:
            return super().units(plan)
        env: Dict[str, str] = {}
        for spec in ranked:
            env.update(spec.full_env())
        if self.elastic:
            env[horovod_elastic.HOSTS_ENV] = ",".join(self.elastic_hosts)
        cores = tuple(sorted({c for spec in ranked for c in spec.cores}))
        command = self.group_command(plan)
        command = netns_exec.command(self.namespace, command) if self.namespace else command
        return [self.task_unit(spec) for spec in plan.tasks if spec not in ranked] + [
            Unit(HOROVOD_GROUP, tuple(command), unit_env(self.run, HOROVOD_GROUP, env, "horovod"),
                 self.run.task_log(HOROVOD_GROUP), cores)]

    def free_ports(self, plan: ClusterPlan, message: Callable[[str], None]) -> ClusterPlan:
        """The plan with every local port that something else holds replaced."""
        for _ in range(MAX_PORT_CHECKS):
            taken = [t.name for t in plan.tasks if t.port and is_local(t.host) and not port_is_free(t.port)]
            if not taken:
                break
            new = self.rebind(plan, taken)
            for name in taken:
                message(f"tfbench: port {plan.task(name).port} of {name} is taken; using {new.task(name).port}")
            plan = new
        return plan

    def rebind(self, plan: ClusterPlan, names: Sequence[str]) -> ClusterPlan:
        return with_new_ports(plan, names, self._ports or _FreshPorts(plan))
