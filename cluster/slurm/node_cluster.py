"""A private Slurm of several nodes on this machine, each node an emulated host behind a shaped link.

    this machine's namespace:  munged, slurmctld, sbatch/srun/squeue/scancel; tfb<key>-login, .254
    switch tfb-<key>-sw:       bridge br0 (.1); port "login" unshaped, ports h<i> shaped (tbf)
    node   tfb-<key>-h<i>:     slurmd -N h<i> with hostname h<i>, eth0 .<i+2> shaped (tbf)

Each slurmd runs in its host's network namespace (its own address) and UTS namespace (hostname =
node name), started through cluster.net.netns_exec; job steps are its descendants and inherit both,
so a task on h1 reaches h0 through two shaped links. The filesystem is the machine's own, except
/etc/hosts: each slurmd has a mount namespace in which <dir>/hosts names every node's address and
this machine's (at the login address), as a cluster's DNS would, so that a node's name resolves
inside the nodes (Gloo resolves its hostname for Horovod's process sets; Slurm's srun gives
slurmctld its short hostname). Outside the nodes the names resolve nowhere: slurmctld reaches a
node at its NodeAddr, and so do tfbench's launcher and records (cluster.slurm.resolver).

What this relies on in Debian's slurm-wlm 22.05.8-4+deb12u3 (bookworm); checked with
`slurmd -V` (22.05.8) and `scontrol show config` (MULTIPLE_SLURMD = Yes: Debian builds with
--enable-multiple-slurmd):
- Not on multiple-slurmd mode itself. That mode lets several slurmd share one host, told apart by
  `Port=` per NodeName; built without it, slurm.conf may not give two nodes one NodeHostname
  ("Duplicated NodeHostName"). Here every slurmd has its own address and hostname, so each is an
  ordinary one-node slurmd on the default SlurmdPort (6818) in its namespace:
  `NodeName=h<i> NodeAddr=<its address> NodeHostname=h<i>`, started as `slurmd -D -N h<i>`
  (-N exists in every build; it would also find itself from its hostname).
- %n in SlurmdSpoolDir, SlurmdPidFile and SlurmdLogFile (slurmd-%n...): slurmd expands it to the
  node name in every build (slurm_conf_expand_slurmd_path; %h is the hostname, the same here).
- One munged for the whole cluster (AuthInfo=socket=<dir>/munge/munge.socket). A job credential
  sent to several nodes is then decoded twice by one munged, which says "Replayed credential";
  Debian's deb12u2 security update (upstream 22.05.11's cred/munge) accepts that for job
  credentials ("We had a replayed credential, but this is expected."). Upstream 22.05.8 as
  released would refuse the step on the second node unless built with multiple-slurmd. Requests
  are signed per connection, so they replay only when forwarded through other nodes (more nodes
  than TreeWidth, 50), which auth/munge accepts in multiple-slurmd builds only.
- slurm.conf: what cluster.slurm.conf writes for every private cluster (proctrack/linuxproc,
  task/none, SlurmdParameters=config_overrides so that every node claims cpus_per_node CPUs),
  SlurmctldHost=<this host>(<login address>) so that the nodes reach the controller over the
  bridge, and the two settings that bound how fast a lost node is noticed: slurmctld pings nodes
  silent for SlurmdTimeout/3, retries a refused connection once a second for
  min(MessageTimeout, 10) s before marking the node not responding ("*"), and sets it DOWN
  ("Not responding") at the first ping round SlurmdTimeout after its last answer; its job steps
  then end with "srun: error: Node failure on <node>". JobRequeue=0: by default a batch job on
  a failed node is requeued (pending again, to rerun from the start); here it ends (NODE_FAIL). Measured here from SIGKILL of a slurmd
  to DOWN: 6-10 s at SlurmdTimeout=3, MessageTimeout=2; 16 s at 5 and 5; 27 s at 10 and 10.

Clean-up: the namespaces are claimed through cluster.net.netns's owner file before they exist, so
`python -m cluster.net.netns --cleanup` (or the next run) removes them and kills what is left in them
(slurmd, slurmstepd, tasks) once the owner is gone; munged and slurmctld die with the owner
(PR_SET_PDEATHSIG), slurmd too (netns_exec). The caller owns `directory` and removes it.
"""
from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
from typing import Dict, List, Optional, Tuple

import portpicker

from cluster.net import links, netns, netns_exec, root_link
from cluster.slurm import conf, daemons
from cluster.slurm.local_cluster import ROOT, cancel_all, queue

KEY_ATTEMPTS = 5


@dataclasses.dataclass(frozen=True)
class Node:
    name: str  # Slurm's NodeName and the hostname inside the node: h0, h1, ...
    address: str  # NodeAddr: the host's address on the emulated network
    netns: str  # the host's network namespace


class NodeSlurm:
    """slurmctld here and one slurmd per emulated host; one default partition "bench" of every node."""

    def __init__(self, directory: str, slurmd_timeout: int = 5, message_timeout: int = 5):
        self.dir = directory
        self.host = socket.gethostname()
        self.conf = os.path.join(directory, "slurm.conf")
        self.hosts = os.path.join(directory, "hosts")
        self.log_dir = os.path.join(directory, "log")
        self.munge_socket = daemons.munge_socket(os.path.join(directory, "munge"))
        self.slurmd_timeout = slurmd_timeout
        self.message_timeout = message_timeout
        self.daemons: Dict[str, subprocess.Popen] = {}
        self.key: Optional[str] = None
        self.network: Optional[links.Network] = None
        self.running: Optional[links.Running] = None  # a delayed network's delay line
        self.login_address = ""
        self.nodes: List[Node] = []

    @property
    def env(self) -> Dict[str, str]:
        """Environment for Slurm commands (sbatch, squeue ...) talking to this cluster."""
        return dict(os.environ, SLURM_CONF=self.conf)

    def start(self, num_nodes: int, cpus_per_node: int = 4, link_rate_bps: int = 0,
              timeout: float = 60.0, link_delay_ms: float = 0.0, link_jitter_ms: float = 0.0) -> List[Node]:
        """Builds the network, starts munged, slurmctld and every slurmd, and returns once every node
        is idle. On failure everything started is stopped again before the error is raised."""
        os.chmod(self.dir, 0o755)  # munged (as the munge user) must reach its directory
        for sub in ("state", "spool", "log"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        try:
            self.daemons["munged"] = daemons.start_munged(os.path.dirname(self.munge_socket), self.log_dir, self.env)
            self._build_network(num_nodes, link_rate_bps, link_delay_ms, link_jitter_ms)
            self._write_conf(cpus_per_node)
            self._write_hosts()
            self.daemons["slurmctld"] = daemons.spawn(self.log_dir, "slurmctld", [daemons.which("slurmctld"), "-D",
                                                                                  "-c", "-f", self.conf], self.env)
            slurmd = daemons.which("slurmd")
            for node in self.nodes:
                command = [slurmd, "-D", "-f", self.conf, "-N", node.name]
                self.daemons[f"slurmd-{node.name}"] = daemons.spawn(
                    self.log_dir, f"slurmd-{node.name}",
                    netns_exec.command(node.netns, command, hostname=node.name, hosts=self.hosts), self.env, cwd=ROOT)
            daemons.wait_until(self._all_idle, timeout, "the Slurm nodes did not all become idle", self.daemons,
                               self.log_dir)
        except BaseException:
            self.stop()
            raise
        return list(self.nodes)

    def _build_network(self, num_nodes: int, rate_bps: int, delay_ms: float, jitter_ms: float) -> None:
        """A run key whose /24 is not in use here yet, its hosts and links, and the login link."""
        for _ in range(KEY_ATTEMPTS):
            self.key = key = netns.open_run(self.dir)
            net = links.plan_network(key, num_nodes, rate_bps, delay_ms, jitter_ms)
            if not root_link.subnet_in_use(net):
                break
            netns.release(key)
            self.key = None
        else:
            raise RuntimeError(f"no free subnet for the cluster's network after {KEY_ATTEMPTS} keys")
        self.network = net
        self.running = links.build(net)
        self.login_address = root_link.attach(net)
        self.nodes = [Node(h.name, h.address, h.netns) for h in net.hosts]

    def _write_conf(self, cpus: int) -> None:
        controller = f"{self.host}({self.login_address})"
        lines = conf.settings(self.dir, controller, portpicker.pick_unused_port(), self.munge_socket)
        lines += [f"SlurmdTimeout={self.slurmd_timeout}", f"MessageTimeout={self.message_timeout}", "JobRequeue=0"]
        lines += [f"NodeName={n.name} NodeAddr={n.address} NodeHostname={n.name} CPUs={cpus} State=UNKNOWN"
                  for n in self.nodes]
        lines.append(conf.partition(",".join(n.name for n in self.nodes)))
        conf.write(self.conf, lines)

    def _write_hosts(self) -> None:
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback",
                 f"{self.login_address} {self.host}", *(f"{n.address} {n.name}" for n in self.nodes)]
        conf.write(self.hosts, lines)

    def node_states(self) -> Dict[str, Tuple[str, str]]:
        """{node: (state, reason)} as sinfo gives them; a trailing '*' means "not responding"."""
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%T|%E"], capture_output=True, text=True, env=self.env)
        states = {}
        for line in proc.stdout.splitlines():
            name, state, reason = line.split("|", 2)
            states[name] = (state, reason)
        return states

    def claimed_cpus(self) -> Dict[str, int]:
        """{node: CPUs} as slurmd registered them (slurm.conf's CPUs=, config_overrides)."""
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%c"], capture_output=True, text=True, env=self.env)
        return {name: int(cpus) for name, cpus in (line.split("|") for line in proc.stdout.splitlines())}

    def _all_idle(self) -> bool:
        states = self.node_states()
        return len(states) == len(self.nodes) and all(s == "idle" for s, _ in states.values())

    def jobs(self) -> List[str]:
        return queue(self.env)

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def stop(self) -> List[str]:
        """Cancels every job, deletes the login link, removes the namespaces (which kills slurmd and
        whatever still runs in them, as `python -m cluster.net.netns --cleanup` would), stops slurmctld
        and munged; returns what is left (empty when all is gone)."""
        left = []
        if "slurmctld" in self.daemons and self.daemons["slurmctld"].poll() is None:
            cancel_all(self.env, self.jobs)
            left += [f"job {j}" for j in self.jobs()]
        if self.network is not None:
            root_link.detach(self.network)
            if root_link.present(self.network):
                left.append(root_link.ifname(self.network))
        if self.running is not None:  # a delayed network's delay line
            self.running.stop()
            self.running = None
        if self.key is not None:
            left += netns.remove_run(self.key)
        for proc in reversed(list(self.daemons.values())):  # slurmd (gone with the namespaces), slurmctld, munged
            daemons.stop(proc)
        return left + [name for name, p in self.daemons.items() if p.poll() is None]
