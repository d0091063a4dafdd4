"""Topology -> ClusterPlan: which processes a strategy needs, where they run, and their TF_CONFIG.

- default / mirrored: one worker process.
- multi_worker_mirrored: N workers; worker 0 is the chief (TF_CONFIG has no "chief" job).
- parameter_server: a coordinator ("chief"), N workers and K ps served by tf.distribute.Server,
  optionally an evaluator; each ps collocated with a worker's host and cores, or on its own.
- horovod: N ranks with a host:slots list for horovodrun instead of TF_CONFIG.
Tasks go round-robin over --hosts; on this machine they also get disjoint cores. With
--network=emulated the hosts are h0, h1, ... (one network namespace each, all on this machine):
one per worker, plus one per ps when ps are separate; the launcher gives them addresses
(with_hosts) once their namespaces exist.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from cluster import cores as cores_lib
from cluster.ports import PortAllocator, is_local
from cluster.spec import ClusterPlan, TaskSpec
from tfbench.config import RunConfig


def make_plan(config: RunConfig, cores: Optional[Sequence[int]] = None,
              ports: Optional[PortAllocator] = None) -> ClusterPlan:
    cores = tuple(cores) if cores is not None else cores_lib.available_cores()
    ports = ports or PortAllocator(config.base_port)
    n = config.num_workers
    emulated = config.network == "emulated"
    hosts = emulated_hosts(config) if emulated else list(config.hosts)
    local = (lambda host: True) if emulated else is_local
    warnings: List[str] = []

    worker_hosts = [hosts[i % len(hosts)] for i in range(n)]
    local_workers = [i for i, h in enumerate(worker_hosts) if local(h)]
    per_worker = config.cores_per_worker * max(1, config.effective_num_local_devices)
    groups, spare, enough = cores_lib.split_cores(cores, max(1, len(local_workers)), per_worker)
    if not enough:
        warnings.append(f"{len(local_workers)} compute tasks share {len(cores)} cores: steps will be "
                        f"slower than on dedicated cores")
    worker_cores: Dict[int, tuple] = {i: groups[k] for k, i in enumerate(local_workers)}

    def shared_cores(host: str) -> tuple:
        """Cores for a light task: the spare ones if any, else all (it mostly waits)."""
        if not local(host):
            return ()
        return spare or cores

    def task(role, index, host, task_cores, *, port=0, service=False, measures=True, rank=-1):
        intra, inter = (cores_lib.thread_counts(task_cores, config.num_intra_threads, config.num_inter_threads)
                        if task_cores else (config.num_intra_threads, config.num_inter_threads))
        if service:
            # A tf.distribute.Server runs the coordinator's functions, whose ops block on
            # iterators and cross-task receives: one inter-op thread deadlocks them.
            inter = max(inter, 2)
        return TaskSpec(role=role, index=index, host=host, port=port, cores=tuple(task_cores),
                        intra_threads=intra, inter_threads=inter, service=service,
                        measures=measures, horovod_rank=rank)

    if config.strategy in ("default", "mirrored"):
        return ClusterPlan(config.strategy, (task("worker", 0, worker_hosts[0], worker_cores.get(0, ())),),
                           warnings=tuple(warnings))

    if config.strategy == "horovod":
        tasks = tuple(task("worker", i, worker_hosts[i], worker_cores.get(i, ()), rank=i) for i in range(n))
        slots: Dict[str, int] = {}
        for h in worker_hosts:
            slots[h] = slots.get(h, 0) + 1
        return ClusterPlan("horovod", tasks, horovod_hosts=",".join(f"{h}:{s}" for h, s in slots.items()),
                           warnings=tuple(warnings))

    if config.strategy == "multi_worker_mirrored":
        tasks = [task("worker", i, worker_hosts[i], worker_cores.get(i, ()), port=ports.port_for(worker_hosts[i]))
                 for i in range(n)]
        return _with_tf_config(ClusterPlan("multi_worker_mirrored", tuple(tasks), warnings=tuple(warnings)))

    # parameter_server
    tasks = [task("chief", 0, hosts[0], shared_cores(hosts[0]), port=ports.port_for(hosts[0]))]
    tasks += [task("worker", i, worker_hosts[i], worker_cores.get(i, ()), port=ports.port_for(worker_hosts[i]),
                   service=True, measures=True) for i in range(n)]
    k = config.effective_num_ps
    separate_hosts = hosts[n:] if len(hosts) > n else []
    if config.ps_placement == "separate" and not separate_hosts and len(hosts) > 1:
        warnings.append("--ps_placement=separate with no host left over: ps share the workers' hosts")
    if config.ps_placement == "separate" and local(hosts[0]) and len(hosts) == 1 and not spare:
        warnings.append("--ps_placement=separate with no spare core: ps share the workers' cores")
    for j in range(k):
        if config.ps_placement == "collocated":
            host, ps_cores = worker_hosts[j % n], worker_cores.get(j % n, ())
        else:
            host = separate_hosts[j % len(separate_hosts)] if separate_hosts else hosts[0]
            ps_cores = shared_cores(host)
        tasks.append(task("ps", j, host, ps_cores, port=ports.port_for(host), service=True, measures=False))
    if config.evaluator:
        host = hosts[-1]
        tasks.append(task("evaluator", 0, host, shared_cores(host), measures=False))
    return _with_tf_config(ClusterPlan("parameter_server", tuple(tasks), warnings=tuple(warnings)))


def emulated_hosts(config: RunConfig) -> List[str]:
    """h0 .. h(N-1) for the workers, then one host per separate ps."""
    separate = config.effective_num_ps if config.ps_placement == "separate" else 0
    count = 1 if config.strategy in ("default", "mirrored") else config.num_workers + separate
    return [f"h{i}" for i in range(count)]


def with_hosts(plan: ClusterPlan, address: Dict[str, str]) -> ClusterPlan:
    """The same plan with every host renamed through `address` (TF_CONFIG and Horovod's host
    list follow)."""
    tasks = tuple(_replace(t, host=address.get(t.host, t.host)) for t in plan.tasks)
    hosts = ",".join(f"{address.get(h, h)}:{s}" for h, s in
                     (item.rsplit(":", 1) for item in plan.horovod_hosts.split(",") if item))
    plan = ClusterPlan(plan.strategy, tasks, horovod_hosts=hosts, warnings=plan.warnings)
    return _with_tf_config(plan) if any(t.tf_config for t in tasks) else plan


def _with_tf_config(plan: ClusterPlan) -> ClusterPlan:
    """Adds the cluster spec and each task's TF_CONFIG (the evaluator is not in the spec)."""
    spec: Dict[str, List[str]] = {}
    for t in plan.tasks:
        if t.role != "evaluator":
            spec.setdefault(t.role, []).append(t.address)
    tasks = tuple(
        _replace(t, tf_config={"cluster": spec, "task": {"type": t.role, "index": t.index}})
        for t in plan.tasks)
    return ClusterPlan(plan.strategy, tasks, cluster_spec=spec, horovod_hosts=plan.horovod_hosts,
                       warnings=plan.warnings)


def _replace(task: TaskSpec, **changes) -> TaskSpec:
    import dataclasses

    return dataclasses.replace(task, **changes)


def with_new_ports(plan: ClusterPlan, names: Sequence[str], ports: PortAllocator) -> ClusterPlan:
    """The same plan with fresh ports for the named tasks (a port was found taken)."""
    tasks = tuple(_replace(t, port=ports.port_for(t.host)) if t.name in names else t for t in plan.tasks)
    plan = ClusterPlan(plan.strategy, tasks, horovod_hosts=plan.horovod_hosts, warnings=plan.warnings)
    return _with_tf_config(plan) if any(t.tf_config for t in tasks) else plan


def retarget(plan: ClusterPlan, addresses: Dict[str, Tuple[str, int]]) -> ClusterPlan:
    """The same plan with the named tasks at new (host, port) addresses, TF_CONFIG rebuilt:
    for engines that decide where tasks run (Kubernetes pods, Slurm nodes)."""
    tasks = tuple(_replace(t, host=addresses[t.name][0], port=addresses[t.name][1]) if t.name in addresses else t
                  for t in plan.tasks)
    plan = ClusterPlan(plan.strategy, tasks, horovod_hosts=plan.horovod_hosts, warnings=plan.warnings)
    return _with_tf_config(plan) if any(t.tf_config for t in tasks) else plan
