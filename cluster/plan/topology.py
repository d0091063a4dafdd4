"""Topology -> ClusterPlan: which processes a strategy needs, where they run, and their TF_CONFIG.

The plan is composed from what the strategy's traits (tfbench.config.strategy_traits) say it does:
- one process: one worker;
- variables on ps tasks (ps_tasks): K ps, each on a worker's host (collocated) or on a host of its
  own (separate), serving until stopped;
- a coordinator driving the steps (coordinated): a "chief" task, and workers that serve;
- tasks meeting by TF_CONFIG role (tf_roles): a port per task and every task's TF_CONFIG (with
  peers only, worker 0 is the chief: TF_CONFIG has no "chief" job);
- workers that are launcher ranks (launcher_ranks): a rank each, and a host:slots list for
  horovodrun or Horovod's rendezvous; with tf_roles too they hold TF_CONFIG beside the ps.
Tasks go round-robin over --hosts. On this machine workers get disjoint cores; a ps and the
coordinator get a core of their own when one is spare, else share the workers' cores, and
every task's spec names the tasks it shares cores with. With --device=gpu each compute task
sees the GPU of its local index on its host (CUDA_VISIBLE_DEVICES) with memory growth on.
With --network=emulated the hosts are h0, h1, ... (one network namespace each, all on this
machine): one per worker, plus one per ps when ps are separate; the launcher gives them
addresses (with_hosts) once their namespaces exist.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from cluster.plan import cores as cores_lib
from cluster.plan.ports import PortAllocator, is_local
from cluster.plan.spec import ClusterPlan, TaskSpec
from tfbench.config import RunConfig
from tfbench.config.kinds import kind_of

GPU_GROWTH = "TF_FORCE_GPU_ALLOW_GROWTH"  # TensorFlow's switch for allocating GPU memory on demand


@dataclasses.dataclass
class _Layout:
    """Where a plan's tasks go: hosts, workers' hosts and cores, spare cores for light tasks."""

    config: RunConfig
    ports: PortAllocator
    hosts: List[str]
    worker_hosts: List[str]
    ps_hosts: List[str]
    separate_hosts: List[str]
    local: Callable[[str], bool]
    worker_cores: Dict[int, tuple]
    spare: List[int]
    cores: tuple
    warnings: List[str]

    def light_cores(self, host: str) -> tuple:
        """A core of its own for a ps or the coordinator if one is spare; else it shares the cores
        of the workers on its host (all of them alike, so no worker is favoured)."""
        if not self.local(host):
            return ()
        if self.spare:
            return (self.spare.pop(0),)
        shared = sorted({c for i, h in enumerate(self.worker_hosts) if h == host and self.local(h)
                         for c in self.worker_cores[i]})
        return tuple(shared) or self.cores

    def task(self, role, index, host, task_cores, *, port=0, service=False, measures=True, rank=-1,
             env=None) -> TaskSpec:
        c = self.config
        intra, inter = (cores_lib.thread_counts(task_cores, c.num_intra_threads, c.num_inter_threads)
                        if task_cores else (c.num_intra_threads, c.num_inter_threads))
        if service:
            # A tf.distribute.Server runs the coordinator's functions, whose ops block on
            # iterators and cross-task receives: one inter-op thread deadlocks them.
            inter = max(inter, 2)
        return TaskSpec(role=role, index=index, host=host, port=port, cores=tuple(task_cores),
                        intra_threads=intra, inter_threads=inter, service=service,
                        measures=measures, horovod_rank=rank, env=env or {})

    def worker(self, i: int, **kw) -> TaskSpec:
        return self.task("worker", i, self.worker_hosts[i], self.worker_cores.get(i, ()),
                         env=_gpu_env(self.config, self.worker_hosts)[i], **kw)


def make_plan(config: RunConfig, cores: Optional[Sequence[int]] = None,
              ports: Optional[PortAllocator] = None) -> ClusterPlan:
    """The run's processes, as the strategy's traits say they are laid out (module docstring)."""
    layout = _layout(config, tuple(cores) if cores is not None else cores_lib.available_cores(),
                     ports or PortAllocator(config.base_port))
    return _compose(layout) if config.traits.multi_task else _one_task(layout)


def _layout(config: RunConfig, cores: tuple, ports: PortAllocator) -> _Layout:
    n, traits = config.num_workers, config.traits
    emulated = kind_of(config).emulated_hosts
    hosts = emulated_hosts(config) if emulated else list(config.hosts)
    local = (lambda host: True) if emulated else is_local
    worker_hosts = [hosts[i % len(hosts)] for i in range(n)]
    if traits.launcher_ranks:  # horovodrun numbers ranks host by host (-H a:2,b:1)
        worker_hosts = sorted(worker_hosts, key=hosts.index)
    separate_hosts = hosts[n:] if len(hosts) > n else []
    ps_hosts = [worker_hosts[j % n] if config.ps_placement == "collocated" else
                (separate_hosts[j % len(separate_hosts)] if separate_hosts else hosts[0])
                for j in range(config.effective_num_ps)]
    local_workers = [i for i, h in enumerate(worker_hosts) if local(h)]
    per_worker = config.cores_per_worker * max(1, config.effective_num_local_devices)
    # a ps and the coordinator get a core of their own when the machine has one to spare
    reserve = [1] * sum(1 for h in ps_hosts if local(h)) + ([1] if traits.coordinated and local(hosts[0]) else [])
    groups, spare, enough = cores_lib.split_with_reserve(cores, max(1, len(local_workers)), per_worker, reserve)
    warnings: List[str] = []
    if not enough and local_workers:  # tasks on other machines take none of these cores
        warnings.append(f"{len(local_workers)} compute tasks share {len(cores)} cores: steps will be "
                        f"slower than on dedicated cores")
    return _Layout(config, ports, hosts, worker_hosts, ps_hosts, separate_hosts, local,
                   {i: groups[x] for x, i in enumerate(local_workers)}, list(spare), cores, warnings)


def _one_task(lay: _Layout) -> ClusterPlan:
    """One process: one worker."""
    return _finish(ClusterPlan(lay.config.strategy, (lay.worker(0),), warnings=tuple(lay.warnings)))


def _compose(lay: _Layout) -> ClusterPlan:
    """Several tasks: ps first, so that a spare core goes to a ps before the coordinator, then the
    coordinator, then the workers (ranks, TF_CONFIG peers or a coordinator's servers)."""
    config, hosts, traits = lay.config, lay.hosts, lay.config.traits
    if traits.ps_tasks and config.ps_placement == "separate" and not lay.separate_hosts and len(hosts) > 1:
        lay.warnings.append("--ps_placement=separate with no host left over: ps share the workers' hosts")
    no_gpu = _hidden_gpus(config)
    ps = [lay.task("ps", j, host, lay.light_cores(host), port=lay.ports.port_for(host), service=True,
                   measures=False, env=no_gpu) for j, host in enumerate(lay.ps_hosts)]
    chief = ([lay.task("chief", 0, hosts[0], lay.light_cores(hosts[0]), port=lay.ports.port_for(hosts[0]),
                       env=no_gpu)] if traits.coordinated else [])
    ranks = traits.launcher_ranks
    workers = [lay.worker(i, port=lay.ports.port_for(lay.worker_hosts[i]) if traits.tf_roles else 0,
                          rank=i if ranks else -1, service=traits.coordinated) for i in range(config.num_workers)]
    slots: Dict[str, int] = {}
    for h in lay.worker_hosts if ranks else ():
        slots[h] = slots.get(h, 0) + 1
    plan = _finish(ClusterPlan(config.strategy, tuple(chief + workers + ps),
                               horovod_hosts=",".join(f"{h}:{s}" for h, s in slots.items()),
                               warnings=tuple(lay.warnings)))
    shared_ps = [t.name for t in plan.tasks if t.role == "ps" and t.shares_cores_with]
    if shared_ps:
        plan = dataclasses.replace(plan, warnings=plan.warnings + (
            f"no spare core for {', '.join(shared_ps)}: it shares the workers' cores (recorded per task)",))
    return _with_tf_config(plan) if traits.tf_roles else plan


def _finish(plan: ClusterPlan) -> ClusterPlan:
    """Each task learns which other tasks of this machine are pinned to any of its cores."""
    shares = cores_lib.sharing({t.name: t.cores for t in plan.tasks if t.cores})
    tasks = tuple(_replace(t, shares_cores_with=shares.get(t.name, ())) for t in plan.tasks)
    return dataclasses.replace(plan, tasks=tasks)


def emulated_hosts(config: RunConfig) -> List[str]:
    """h0 .. h(N-1) for the workers, then one host per separate ps."""
    separate = config.effective_num_ps if config.ps_placement == "separate" else 0
    count = 1 if not config.traits.multi_task else config.num_workers + separate
    return [f"h{i}" for i in range(count)]


def with_hosts(plan: ClusterPlan, address: Dict[str, str]) -> ClusterPlan:
    """The same plan with every host renamed through `address` (TF_CONFIG and Horovod's host
    list follow)."""
    tasks = tuple(_replace(t, host=address.get(t.host, t.host)) for t in plan.tasks)
    hosts = ",".join(f"{address.get(h, h)}:{s}" for h, s in
                     (item.rsplit(":", 1) for item in plan.horovod_hosts.split(",") if item))
    plan = dataclasses.replace(plan, tasks=tasks, horovod_hosts=hosts)
    return _with_tf_config(plan) if any(t.tf_config for t in tasks) else plan


def _gpu_env(config: RunConfig, worker_hosts: Sequence[str]) -> List[Dict[str, str]]:
    """Per worker: the GPU(s) it sees. Each compute task on a host sees the GPU of its local
    index there (mirrored: its first num_local_devices GPUs), with memory growth on, so that
    ranks sharing a host never all land on GPU:0 nor grab all of each other's memory."""
    if config.device != "gpu":
        return [{} for _ in worker_hosts]
    if config.traits.local_devices:
        visible = ",".join(str(g) for g in range(max(1, config.effective_num_local_devices)))
        return [{"CUDA_VISIBLE_DEVICES": visible, GPU_GROWTH: "true"}]
    seen: Dict[str, int] = {}
    out = []
    for host in worker_hosts:
        local = seen.get(host, 0)
        seen[host] = local + 1
        out.append({"CUDA_VISIBLE_DEVICES": str(local), GPU_GROWTH: "true"})
    return out


def _hidden_gpus(config: RunConfig) -> Dict[str, str]:
    """The ps and the coordinator compute nothing on a GPU: they keep variables on the CPU and
    leave every GPU to the workers."""
    return {"CUDA_VISIBLE_DEVICES": "-1"} if config.device == "gpu" else {}


def _with_tf_config(plan: ClusterPlan) -> ClusterPlan:
    """Adds the cluster spec and each task's TF_CONFIG."""
    spec: Dict[str, List[str]] = {}
    for t in plan.tasks:
        spec.setdefault(t.role, []).append(t.address)
    tasks = tuple(
        _replace(t, tf_config={"cluster": spec, "task": {"type": t.role, "index": t.index}})
        for t in plan.tasks)
    return dataclasses.replace(plan, tasks=tasks, cluster_spec=spec)


def _replace(task: TaskSpec, **changes) -> TaskSpec:
    return dataclasses.replace(task, **changes)


def with_new_ports(plan: ClusterPlan, names: Sequence[str], ports: PortAllocator) -> ClusterPlan:
    """The same plan with fresh ports for the named tasks (a port was found taken)."""
    tasks = tuple(_replace(t, port=ports.port_for(t.host)) if t.name in names else t for t in plan.tasks)
    plan = dataclasses.replace(plan, tasks=tasks)
    return _with_tf_config(plan) if any(t.tf_config for t in tasks) else plan


def retarget(plan: ClusterPlan, addresses: Dict[str, Tuple[str, int]]) -> ClusterPlan:
    """The same plan with the named tasks at new (host, port) addresses, TF_CONFIG rebuilt:
    for engines that decide where tasks run (Kubernetes pods, Slurm nodes)."""
    tasks = tuple(_replace(t, host=addresses[t.name][0], port=addresses[t.name][1]) if t.name in addresses else t
                  for t in plan.tasks)
    plan = dataclasses.replace(plan, tasks=tasks)
    return _with_tf_config(plan) if any(t.tf_config for t in tasks) else plan
