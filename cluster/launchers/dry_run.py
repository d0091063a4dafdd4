"""What `python -m tfbench --dry_run` prints for each launcher kind (cluster.launchers.registry
picks one): what it would do, built from the functions the launcher itself calls, with nothing
started and nothing written.

- local: every task's command, inside the run's private network namespace when the launcher
  makes one (multi-task runs, as root); Horovod: the one horovodrun that starts every rank.
- emulated: the namespaces, addresses, bridge, link rate and shaping (tbf, the delay line) and every
  task's command wrapped in its host's namespace; Horovod ranks start one by one with the
  environment of Horovod's rendezvous in the switch namespace (no horovodrun).
- slurm: the sbatch script it would write and submit (outside an allocation) or the srun steps
  (inside one), and which task each Slurm rank becomes; Horovod ranks meet at the rendezvous the
  launching process serves (no horovodrun). With --network=emulated, first the private Slurm of
  emulated nodes it would start: the daemons, each node's namespace, address, CPUs and tasks, and
  the links.

What exists only once the run starts is shown by name: KEY (the run's 6 hex digits, naming its
namespaces), 10.X.Y (the /24 the key picks) and PORT (the rendezvous server's port).
"""
from __future__ import annotations

import json
import os
import shlex
from typing import Dict, List

from cluster.horovod import elastic as horovod_elastic
from cluster.launchers.base import default_command
from cluster.launchers.local import default_group_command
from cluster.launchers.slurm import inside_allocation
from cluster.net import links, netns, netns_exec, private_net, root_link
from cluster.plan.spec import ClusterPlan, TaskSpec
from cluster.plan.topology import with_hosts
from cluster.slurm import batch, layout, steps
from cluster.slurm import horovod as slurm_horovod
from tfbench.config import RunConfig
from tfbench.results.rundir import RunDir

KEY = "KEY"
SUBNET = "10.X.Y"
PORT = "PORT"


def slurm_nodes_lines(config: RunConfig, plan: ClusterPlan, run: RunDir) -> List[str]:
    return _slurm_nodes(config, plan) + slurm_lines(config, plan, run)


def _task_line(t: TaskSpec) -> List[str]:
    cores = ",".join(map(str, t.cores)) if t.cores else "not pinned"
    role = "serves until stopped" if t.service else ("measures" if t.measures else "side task")
    lines = [f"{t.name}: host={t.host} cores={cores} threads={t.intra_threads} intra / {t.inter_threads} inter "
             f"port={t.port or 'none'} ({role})"]
    if t.tf_config is not None:
        lines.append(f"    TF_CONFIG={json.dumps(t.tf_config, sort_keys=True)}")
    return lines


def local_lines(config: RunConfig, plan: ClusterPlan, run: RunDir) -> List[str]:
    """cluster.launchers.local: processes of this machine, in a private namespace when it makes one."""
    lines, namespace = [], None
    if private_net.needed(plan.traits):
        if os.geteuid() == 0:
            namespace = netns.ns_name(KEY, "local")
            lines.append(f"network: every task inside the private network namespace {namespace} (loopback only: "
                         f"no other machine reaches its gRPC servers; {KEY} is picked at start)")
        else:
            lines.append("network: not root, so no private network namespace: the tasks' servers would listen on "
                         "every address of this machine, unauthenticated (README: Security)")
    wrap = (lambda command: netns_exec.command(namespace, command)) if namespace else list
    command_for = default_command(run)
    for t in plan.tasks:
        lines += _task_line(t)
        if t.horovod_rank >= 0:
            lines.append(f"    Horovod rank {t.horovod_rank}, started by horovodrun below")
        else:
            lines.append(f"    command: {shlex.join(wrap(command_for(t)))}")
    if plan.ranked_tasks:
        lines.append(f"horovodrun (one process for every rank): "
                     f"{shlex.join(wrap(default_group_command(run, config)(plan)))}")
    if config.horovod_elastic:
        lines.append(horovod_elastic.describe(len(plan.workers)))
    return lines


def emulated_lines(config: RunConfig, plan: ClusterPlan, run: RunDir) -> List[str]:
    """cluster.launchers.emulated: the same hosts, addresses, shaping and wrapped commands."""
    names = list(dict.fromkeys(t.host for t in plan.tasks))
    address = {name: f"{SUBNET}.{i + 2}" for i, name in enumerate(names)}
    switch, bridge = netns.ns_name(KEY, "sw"), f"{SUBNET}.1"
    lines = [f"network: switch namespace {switch} with bridge {links.BRIDGE} ({bridge}/{links.PREFIXLEN}); "
             f"{KEY} and {SUBNET}.0/{links.PREFIXLEN} are picked at start"]
    for name in names:
        lines.append(f"  host {name}: namespace {netns.ns_name(KEY, name)}, {links.HOST_IFACE} {address[name]}, "
                     f"joined to port {name} of {links.BRIDGE}")
    lines.append(f"links: {_shaping(config)}")
    lines.append("then the link probe (cluster.net.link_probe) measures round trip, alpha, beta and one TCP stream "
                 "each way between h0 and h1, refuses links that are not what was asked for, and records them")
    plan = with_hosts(plan, address)
    envs = _rank_envs(plan, bridge) if plan.ranked_tasks else {}
    command_for = default_command(run)
    for t in plan.tasks:
        lines += _task_line(t)
        host_ns = netns.ns_name(KEY, names[list(address.values()).index(t.host)])
        if t.name in envs:
            lines.append(f"    Horovod rank {t.horovod_rank}: " + " ".join(f"{k}={v}" for k, v in envs[t.name].items()))
        lines.append(f"    command: {shlex.join(netns_exec.command(host_ns, command_for(t), hostname=t.host))}")
    if plan.ranked_tasks:
        lines.append(f"Horovod's rendezvous server runs in {switch} at {bridge}:{PORT}; no horovodrun")
    return lines


def _shaping(config: RunConfig) -> str:
    delay = (f"; TAP pairs instead of veth, and one user-space delay line (cluster.net.delay_line, in the switch "
             f"namespace) holds what each host sends {config.link_latency:g} ms"
             + (f" ± {config.link_jitter:g} ms" if config.link_jitter else "") if config.link_latency else "")
    rate = config.link_rate_bps
    if not rate:
        return ("unshaped TAP pairs" if config.link_latency else "unshaped veth") + " (as fast as the CPU carries it)" + delay
    tbf = links.tbf_params(rate)
    return (f"every host link shaped to {rate / 1e6:g} Mbit/s each way ({config.link_bandwidth}) with tbf on the "
            f"host's {links.HOST_IFACE} and its switch port: rate {tbf['rate']} bytes/s, burst {tbf['burst']} bytes, "
            f"queue limit {tbf['limit']} bytes{delay}")


def _rank_envs(plan: ClusterPlan, rendezvous_address: str) -> Dict[str, Dict[str, str]]:
    """Task name -> the rank variables the emulated launcher gives it (cluster.horovod.gloo)."""
    from cluster.horovod import gloo as horovod_gloo

    keep = ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_HOSTNAME", "HOROVOD_GLOO_RENDEZVOUS_ADDR",
            "HOROVOD_GLOO_RENDEZVOUS_PORT", "HOROVOD_GLOO_IFACE")
    envs = horovod_gloo.rank_envs(plan, rendezvous_address, PORT, links.HOST_IFACE)
    return {plan.horovod_rank(r).name: {k: env[k] for k in keep} for r, env in enumerate(envs)}


def _slurm_nodes(config: RunConfig, plan: ClusterPlan) -> List[str]:
    """cluster.launchers.slurm_nodes: the private Slurm of emulated nodes the job is submitted to."""
    placed = layout.of(config, plan)
    cpus = placed.tasks_per_node * steps.cpus_per_task(config)
    lines = [f"first a private Slurm of {placed.num_nodes} emulated node(s) (cluster.slurm.node_cluster): munged and "
             f"slurmctld on this machine, reached by the nodes at {SUBNET}.{root_link.HOST_PART} (an unshaped login "
             f"link into switch namespace {netns.ns_name(KEY, 'sw')}); SLURM_CONF points at its slurm.conf"]
    for i in range(placed.num_nodes):
        lines.append(f"  node h{i}: slurmd -N h{i} in namespace {netns.ns_name(KEY, f'h{i}')} (hostname h{i}), "
                     f"{links.HOST_IFACE} {SUBNET}.{i + 2}, claims CPUs={cpus}; tasks: {', '.join(placed.tasks_on(i))}")
    lines.append(f"links: {_shaping(config)}")
    lines.append("then the link probe (cluster.net.link_probe) measures h0-h1 as for --network=emulated, and the job "
                 "below is submitted to that cluster; its daemons, namespaces and links stop when the job ends")
    return lines


def slurm_lines(config: RunConfig, plan: ClusterPlan, run: RunDir) -> List[str]:
    """cluster.launchers.slurm: the sbatch script, or the srun steps inside an allocation."""
    exports = {}
    if plan.ranked_tasks:
        exports[slurm_horovod.RENDEZVOUS_ENV] = f"{slurm_horovod.rendezvous_address()}:{PORT}"
    lines = _slurm_ranks(config, plan)
    if inside_allocation():
        base = steps.pick_port_base(config, steps.tasks_per_node(config, plan))
        lines.append(f"inside Slurm job {os.environ['SLURM_JOB_ID']}: the tasks start as one srun step "
                     f"({steps.PORT_BASE_ENV}={base}"
                     + "".join(f" {k}={v}" for k, v in exports.items()) + "):")
        lines.append(f"  {shlex.join(steps.tasks_step(run, config, plan))}")
        if config.monitor:
            lines.append(f"and one system monitor per node: {shlex.join(steps.monitor_step(run, config, plan))}")
        return lines
    path = run.file(batch.SCRIPT)
    lines.append(f"outside an allocation: tfbench writes {path}, submits it (sbatch --parsable) and follows the "
                 f"job; {steps.PORT_BASE_ENV} is picked free at submission:")
    lines.append(f"----- {path} -----")
    lines += batch.script(run, config, plan, exports).rstrip("\n").splitlines()
    lines.append("-----")
    return lines


def _slurm_ranks(config: RunConfig, plan: ClusterPlan) -> List[str]:
    """Which task each Slurm rank becomes, and on which node (cluster.slurm.layout)."""
    cpus = steps.cpus_per_task(config)
    placed = layout.of(config, plan)
    lines = []
    for r, (name, node) in enumerate(zip(placed.order, placed.nodes)):
        t = plan.task(name)
        horovod = f" = Horovod rank {t.horovod_rank}" if t.horovod_rank >= 0 else ""
        does = "serves until stopped" if t.service else ("measures" if t.measures else "side task")
        lines.append(f"{name}: Slurm rank {r}{horovod}, task {placed.nodes[:r].count(node)} of node {node}, "
                     f"{cpus} CPU(s), {does}")
    if plan.traits.tf_roles:
        lines.append(f"every task runs `python -m tfbench.task --task slurm`: SlurmClusterResolver gives it its role "
                     f"and TF_CONFIG (ranks in job order chief, ps, worker; ports from {steps.PORT_BASE_ENV} up, one "
                     f"per task of a node)")
    if plan.ranked_tasks:
        lines.append(f"every rank runs `python -m tfbench.task --task slurm` and meets the others at Horovod's "
                     f"rendezvous, served by this tfbench process at {slurm_horovod.rendezvous_address()}:{PORT} "
                     f"(no horovodrun, no ssh)")
    return lines
