"""One predicted point per worker count: the step split into its parts, the rate, the scaling
efficiency and the bottleneck, from the equations of tfbench.perfmodel.equations.

The bottleneck is the largest part of the step: compute, the communication or the ps apply (an
asynchronous PS capped by its ps links or its apply is named by that cap). Communication is
named by where its bytes queue (the ps host's link or a worker's link), or `latency` when its
alpha terms outweigh its bytes terms. The fixed overhead is never named: it is no resource.
"""
from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence

from tfbench.perfmodel import equations as eq

RING_STRATEGIES = ("multi_worker_mirrored", "horovod")
STRATEGIES = ("parameter_server",) + RING_STRATEGIES + ("tree",)
COMPUTE, PS_LINK, WORKER_LINK, PS_APPLY, LATENCY = (
    "compute", "network at ps host", "network at worker link", "ps apply", "latency")
BOTTLENECKS = (COMPUTE, PS_LINK, WORKER_LINK, PS_APPLY, LATENCY)


@dataclasses.dataclass(frozen=True)
class Setting:
    """Everything but N: strategy, |w| bytes, one worker's compute seconds per step, the link."""

    strategy: str
    w_bytes: float
    compute_s: float
    batch_size: int
    link: eq.Link
    num_ps: float = 1
    ps_placement: str = eq.SEPARATE
    ps_sync: bool = False
    ps_apply_s: float = 0.0
    overhead_s: float = 0.0

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy {self.strategy!r} is unknown; choose one of {', '.join(STRATEGIES)}")
        if not (self.w_bytes > 0 and self.compute_s >= 0 and self.batch_size >= 1 and self.ps_apply_s >= 0
                and self.overhead_s >= 0 and self.num_ps >= 1 and self.ps_placement in eq.PLACEMENTS):
            raise ValueError(f"bad setting: {self}")


@dataclasses.dataclass(frozen=True)
class Point:
    """One worker count's prediction; times in seconds, bytes one way per global step."""

    num_workers: int
    step_s: float
    compute_s: float
    communication_s: float
    pull_s: float
    push_s: float
    allreduce_s: float
    apply_s: float
    overhead_s: float
    images_per_sec: float
    updates_per_sec: Optional[float]  # parameter server only: updates applied per second
    bottleneck: str
    ps_host_bytes: float  # busiest ps host link (parameter server), else 0
    worker_host_bytes: float  # busiest worker link
    algbw: Optional[float] = None  # all-reduce only, bytes/s as nccl-tests reports it
    busbw: Optional[float] = None
    scaling_efficiency: Optional[float] = None


def _comm_bottleneck(comm: eq.Comm, ps_bytes: float, worker_bytes: float) -> str:
    if comm.latency_s > comm.bytes_s:
        return LATENCY
    return PS_LINK if ps_bytes >= worker_bytes and ps_bytes > 0 else WORKER_LINK


def _largest(compute_s: float, comm_s: float, apply_s: float, comm_name: str) -> str:
    parts = {COMPUTE: compute_s, comm_name: comm_s, PS_APPLY: apply_s}
    return max(parts, key=parts.get)  # ties go to compute, then communication


def _ps_point(s: Setting, n: int) -> Point:
    args = (n, s.w_bytes, s.compute_s, s.link, s.num_ps, s.ps_placement, s.ps_apply_s, s.overhead_s)
    if s.ps_sync:
        r = eq.sync_ps(*args)
        pull, push = r["pull"].total, r["push"].total
        comm = eq.Comm(2 * r["pull"].latency_s, 2 * r["pull"].bytes_s)
        name = _comm_bottleneck(comm, r["ps_bytes"], r["worker_bytes"])
        bottleneck = _largest(s.compute_s, pull + push, r["apply_s"], name)
        updates = 1.0 / r["step_s"]
    else:
        r = eq.async_ps(*args)
        pull, push = r["pull_s"], r["push_s"]
        if r["limit"] == "ps link":
            bottleneck = PS_LINK
        elif r["limit"] == "ps apply":
            bottleneck = PS_APPLY
        else:
            name = _comm_bottleneck(r["worst"], 0.0, r["worker_bytes"])
            bottleneck = _largest(s.compute_s, pull + push, r["apply_s"], name)
        updates = r["updates_per_s"]
    return Point(num_workers=n, step_s=r["step_s"], compute_s=s.compute_s, communication_s=pull + push,
                 pull_s=pull, push_s=push, allreduce_s=0.0, apply_s=r["apply_s"], overhead_s=s.overhead_s,
                 images_per_sec=eq.images_per_sec(n, s.batch_size, r["step_s"]), updates_per_sec=updates,
                 bottleneck=bottleneck, ps_host_bytes=r["ps_bytes"], worker_host_bytes=r["worker_bytes"])


def _allreduce_point(s: Setting, n: int) -> Point:
    if s.strategy == "tree":
        comm, root = eq.tree_allreduce(n, s.w_bytes, s.link), eq.tree_root_bytes(n, s.w_bytes)
    else:
        comm, root = eq.ring_allreduce(n, s.w_bytes, s.link), eq.ring_bytes_per_host(n, s.w_bytes)
    step = eq.sync_allreduce_step_s(s.compute_s, comm, s.overhead_s)
    algbw, busbw = eq.bus_bandwidth(n, s.w_bytes, comm.total)
    bottleneck = _largest(s.compute_s, comm.total, 0.0, _comm_bottleneck(comm, 0.0, root))
    return Point(num_workers=n, step_s=step, compute_s=s.compute_s, communication_s=comm.total, pull_s=0.0,
                 push_s=0.0, allreduce_s=comm.total, apply_s=0.0, overhead_s=s.overhead_s,
                 images_per_sec=eq.images_per_sec(n, s.batch_size, step), updates_per_sec=None,
                 bottleneck=bottleneck, ps_host_bytes=0.0, worker_host_bytes=root, algbw=algbw, busbw=busbw)


def point(setting: Setting, n: int) -> Point:
    """The prediction at N workers, without the scaling efficiency (see predict)."""
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"the number of workers must be a whole number >= 1, got {n!r}")
    return (_ps_point if setting.strategy == "parameter_server" else _allreduce_point)(setting, n)


def predict(setting: Setting, counts: Sequence[int]) -> List[Point]:
    """Points for each N, with scaling efficiency rate(N) / (N * rate(1)) of this same setting."""
    rate_1 = point(setting, 1).images_per_sec
    return [dataclasses.replace(p, scaling_efficiency=eq.scaling_efficiency(p.images_per_sec, p.num_workers, rate_1))
            for p in (point(setting, n) for n in counts)]


def predict_shard_per_worker(setting: Setting, counts: Sequence[int]) -> List[Point]:
    """predict() with k = N ps shards at every N (one ps per worker node)."""
    rate_1 = point(dataclasses.replace(setting, num_ps=1), 1).images_per_sec
    return [dataclasses.replace(p, scaling_efficiency=eq.scaling_efficiency(p.images_per_sec, n, rate_1))
            for n in counts for p in [point(dataclasses.replace(setting, num_ps=n), n)]]


def step_s(setting: Setting, n: int) -> float:
    """Just the step time (what the what-if answers compare)."""
    return point(setting, n).step_s


def with_beta(setting: Setting, beta: float) -> Setting:
    """The same setting on a link of another bandwidth (bytes/s), alpha unchanged."""
    return dataclasses.replace(setting, link=eq.Link(setting.link.alpha_s, beta))
