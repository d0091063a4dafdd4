"""Topology -> ClusterPlan: which processes a strategy needs, where they run, and their TF_CONFIG.

- default / mirrored: one worker process.
- multi_worker_mirrored: N workers; worker 0 is the chief (TF_CONFIG has no "chief" job).
- parameter_server: a coordinator ("chief"), N workers and K ps served by tf.distribute.Server;
  each ps on a worker's host (collocated) or on a host of its own (separate).
- horovod: N ranks with a host:slots list for horovodrun instead of TF_CONFIG.
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
from typing import Dict, List, Optional, Sequence, Tuple

from cluster import cores as cores_lib
from cluster.kinds import kind_of
from cluster.ports import PortAllocator, is_local
from cluster.spec import ClusterPlan, TaskSpec
from tfbench.config import RunConfig

GPU_GROWTH = "TF_FORCE_GPU_ALLOW_GROWTH"  # TensorFlow's switch for allocating GPU memory on demand


def make_plan(config: RunConfig, cores: Optional[Sequence[int]] = None,
              ports: Optional[PortAllocator] = None) -> ClusterPlan:
    cores = tuple(cores) if cores is not None else cores_lib.available_cores()
    ports = ports or PortAllocator(config.base_port)
    n = config.num_workers
    emulated = kind_of(config).emulated_hosts
    hosts = emulated_hosts(config) if emulated else list(config.hosts)
    local = (lambda host: True) if emulated else is_local
    warnings: List[str] = []
    ps_strategy = config.strategy == "parameter_server"
    k = config.effective_num_ps

    worker_hosts = [hosts[i % len(hosts)] for i in range(n)]
    if config.strategy == "horovod":  # horovodrun numbers ranks host by host (-H a:2,b:1)
        worker_hosts = sorted(worker_hosts, key=hosts.index)
    separate_hosts = hosts[n:] if len(hosts) > n else []
    ps_hosts = [worker_hosts[j % n] if config.ps_placement == "collocated" else
                (separate_hosts[j % len(separate_hosts)] if separate_hosts else hosts[0]) for j in range(k)]
    local_workers = [i for i, h in enumerate(worker_hosts) if local(h)]
    local_ps = [j for j, h in enumerate(ps_hosts) if local(h)]
    per_worker = config.cores_per_worker * max(1, config.effective_num_local_devices)
    # a ps and the coordinator get a core of their own when the machine has one to spare
    reserve = [1] * len(local_ps) + ([1] if ps_strategy and local(hosts[0]) else [])
    groups, spare, enough = cores_lib.split_with_reserve(cores, max(1, len(local_workers)), per_worker, reserve)
    if not enough and local_workers:  # tasks on other machines take none of these cores
        warnings.append(f"{len(local_workers)} compute tasks share {len(cores)} cores: steps will be "
                        f"slower than on dedicated cores")
    worker_cores: Dict[int, tuple] = {i: groups[x] for x, i in enumerate(local_workers)}
    spare = list(spare)

    def light_cores(host: str) -> tuple:
        """A core of its own for a ps or the coordinator if one is spare; else it shares the cores
        of the workers on its host (all of them alike, so no worker is favoured)."""
        if not local(host):
            return ()
        if spare:
            return (spare.pop(0),)
        shared = sorted({c for i in local_workers if worker_hosts[i] == host for c in worker_cores[i]})
        return tuple(shared) or cores

    def task(role, index, host, task_cores, *, port=0, service=False, measures=True, rank=-1, env=None):
        intra, inter = (cores_lib.thread_counts(task_cores, config.num_intra_threads, config.num_inter_threads)
                        if task_cores else (config.num_intra_threads, config.num_inter_threads))
        if service:
            # A tf.distribute.Server runs the coordinator's functions, whose ops block on
            # iterators and cross-task receives: one inter-op thread deadlocks them.
            inter = max(inter, 2)
        return TaskSpec(role=role, index=index, host=host, port=port, cores=tuple(task_cores),
                        intra_threads=intra, inter_threads=inter, service=service,
                        measures=measures, horovod_rank=rank, env=env or {})

    gpu_env = _gpu_env(config, worker_hosts)

    if config.strategy in ("default", "mirrored"):
        return _finish(ClusterPlan(config.strategy, (task("worker", 0, worker_hosts[0], worker_cores.get(0, ()),
                                                          env=gpu_env[0]),), warnings=tuple(warnings)))

    if config.strategy == "horovod":
        tasks = tuple(task("worker", i, worker_hosts[i], worker_cores.get(i, ()), rank=i, env=gpu_env[i])
                      for i in range(n))
        slots: Dict[str, int] = {}
        for h in worker_hosts:
            slots[h] = slots.get(h, 0) + 1
        return _finish(ClusterPlan("horovod", tasks, horovod_hosts=",".join(f"{h}:{s}" for h, s in slots.items()),
                                   warnings=tuple(warnings)))

    if config.strategy == "multi_worker_mirrored":
        tasks = [task("worker", i, worker_hosts[i], worker_cores.get(i, ()), port=ports.port_for(worker_hosts[i]),
                      env=gpu_env[i]) for i in range(n)]
        return _with_tf_config(_finish(ClusterPlan("multi_worker_mirrored", tuple(tasks), warnings=tuple(warnings))))

    # parameter_server: ps first, so that a spare core goes to a ps before the coordinator
    if config.ps_placement == "separate" and not separate_hosts and len(hosts) > 1:
        warnings.append("--ps_placement=separate with no host left over: ps share the workers' hosts")
    no_gpu = _hidden_gpus(config)
    ps = [task("ps", j, ps_hosts[j], light_cores(ps_hosts[j]), port=ports.port_for(ps_hosts[j]), service=True,
               measures=False, env=no_gpu) for j in range(k)]
    chief = task("chief", 0, hosts[0], light_cores(hosts[0]), port=ports.port_for(hosts[0]), env=no_gpu)
    workers = [task("worker", i, worker_hosts[i], worker_cores.get(i, ()), port=ports.port_for(worker_hosts[i]),
                    service=True, measures=True, env=gpu_env[i]) for i in range(n)]
    plan = _finish(ClusterPlan("parameter_server", tuple([chief] + workers + ps), warnings=tuple(warnings)))
    shared_ps = [t.name for t in plan.tasks if t.role == "ps" and t.shares_cores_with]
    if shared_ps:
        plan = dataclasses.replace(plan, warnings=plan.warnings + (
            f"no spare core for {', '.join(shared_ps)}: it shares the workers' cores (recorded per task)",))
    return _with_tf_config(plan)


def _finish(plan: ClusterPlan) -> ClusterPlan:
    """Each task learns which other tasks of this machine are pinned to any of its cores."""
    shares = cores_lib.sharing({t.name: t.cores for t in plan.tasks if t.cores})
    tasks = tuple(_replace(t, shares_cores_with=shares.get(t.name, ())) for t in plan.tasks)
    return dataclasses.replace(plan, tasks=tasks)


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
    plan = dataclasses.replace(plan, tasks=tasks, horovod_hosts=hosts)
    return _with_tf_config(plan) if any(t.tf_config for t in tasks) else plan


def _gpu_env(config: RunConfig, worker_hosts: Sequence[str]) -> List[Dict[str, str]]:
    """Per worker: the GPU(s) it sees. Each compute task on a host sees the GPU of its local
    index there (mirrored: its first num_local_devices GPUs), with memory growth on, so that
    ranks sharing a host never all land on GPU:0 nor grab all of each other's memory."""
    if config.device != "gpu":
        return [{} for _ in worker_hosts]
    if config.strategy == "mirrored":
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
