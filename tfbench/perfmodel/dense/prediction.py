"""One predicted point per worker count: the step split into its parts, the rate, the scaling
efficiency and the bottleneck, from the equations of tfbench.perfmodel.dense.equations.

The bottleneck is the largest part of the step: compute, the communication or the ps apply (an
asynchronous PS capped by its ps links or its apply is named by that cap). Communication is
named by where its bytes queue (the ps host's link or a worker's link), or `latency` when its
alpha terms outweigh its bytes terms. The fixed overhead is never named: it is no resource.
"""
from __future__ import annotations

import dataclasses
import math
from typing import List, Optional, Sequence

from tfbench.perfmodel import protocols
from tfbench.perfmodel.dense import equations as eq
from tfbench.perfmodel.dense import sync_step

RING_STRATEGIES = protocols.RINGS
STRATEGIES = protocols.STRATEGIES
COMPUTE, PS_LINK, WORKER_LINK, PS_APPLY, LATENCY = (
    "compute", "network at ps host", "network at worker link", "ps apply", "latency")
CORE, INTRA, MESSAGES, STRAGGLERS = "network core", "intra-node aggregation", "messages", "stragglers"
BOTTLENECKS = (COMPUTE, PS_LINK, WORKER_LINK, PS_APPLY, LATENCY, CORE, INTRA, MESSAGES, STRAGGLERS)


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
    extra: sync_step.Extra = sync_step.Extra()  # busiest shard, duplex, messages, nodes, stragglers, core
    global_batch_size: int = 0  # strong scaling: each worker's batch is this / N (0: batch_size each)
    compute_per_step_s: float = 0.0  # c0 of compute = c0 + c * batch (the rest of compute_s is per image)

    def batch(self, n: int) -> float:
        return self.global_batch_size / n if self.global_batch_size else self.batch_size

    def compute_at(self, n: int) -> float:
        """One worker's compute per step at its batch: c0 + c*b (terms.compute_s)."""
        if not self.global_batch_size:
            return self.compute_s
        per_image = (self.compute_s - self.compute_per_step_s) / self.batch_size
        return self.compute_per_step_s + per_image * self.batch(n)

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
    nodes: int = 0  # nodes the N workers occupy (devices per node); 0: one worker per node
    wait_s: float = 0.0  # stragglers: E[slowest of N] - mean compute
    batch_size: float = 0.0  # each worker's batch at this N


def _step_bottleneck(st: sync_step.Step, comm_name: str) -> str:
    """The largest part of a synchronous step of sync_step (compute against each communication part)."""
    parts = {COMPUTE: st.compute_s, comm_name: st.network_s, CORE: st.core_s, INTRA: st.intra_s,
             MESSAGES: st.messages_s, PS_APPLY: st.apply_s, STRAGGLERS: st.wait_s}
    return max(parts, key=parts.get)


def _sync_ps_point(s: Setting, n: int) -> Point:
    c = s.compute_at(n)
    st = sync_step.sync_ps(n, s.w_bytes, c, s.link, int(s.num_ps), s.ps_placement, s.extra, s.ps_apply_s,
                           s.overhead_s)
    comm = st.communication_s
    name = (LATENCY if st.latency_s > st.network_s - st.latency_s else
            PS_LINK if st.ps_host_bytes >= st.worker_host_bytes and st.ps_host_bytes > 0 else WORKER_LINK)
    return Point(num_workers=n, step_s=st.step_s, compute_s=c, communication_s=comm, pull_s=comm / 2, push_s=comm / 2,
                 allreduce_s=0.0, apply_s=st.apply_s, overhead_s=s.overhead_s,
                 images_per_sec=n * s.batch(n) / st.step_s, updates_per_sec=1.0 / st.step_s,
                 bottleneck=_step_bottleneck(st, name), ps_host_bytes=st.ps_host_bytes,
                 worker_host_bytes=st.worker_host_bytes, nodes=st.nodes, wait_s=st.wait_s, batch_size=s.batch(n))


def _comm_bottleneck(comm: eq.Comm, ps_bytes: float, worker_bytes: float) -> str:
    if comm.latency_s > comm.bytes_s:
        return LATENCY
    return PS_LINK if ps_bytes >= worker_bytes and ps_bytes > 0 else WORKER_LINK


def _largest(compute_s: float, comm_s: float, apply_s: float, comm_name: str) -> str:
    parts = {COMPUTE: compute_s, comm_name: comm_s, PS_APPLY: apply_s}
    return max(parts, key=parts.get)  # ties go to compute, then communication


def _ps_point(s: Setting, n: int) -> Point:
    if s.ps_sync and not math.isinf(s.num_ps):
        return _sync_ps_point(s, n)
    args = (n, s.w_bytes, s.compute_at(n), s.link, s.num_ps, s.ps_placement, s.ps_apply_s, s.overhead_s)
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
    return Point(num_workers=n, step_s=r["step_s"], compute_s=s.compute_at(n), communication_s=pull + push,
                 pull_s=pull, push_s=push, allreduce_s=0.0, apply_s=r["apply_s"], overhead_s=s.overhead_s,
                 images_per_sec=n * s.batch(n) / r["step_s"], updates_per_sec=updates,
                 bottleneck=bottleneck, ps_host_bytes=r["ps_bytes"], worker_host_bytes=r["worker_bytes"],
                 nodes=n, batch_size=s.batch(n))


def _ring_point(s: Setting, n: int) -> Point:
    c = s.compute_at(n)
    st = sync_step.ring(n, s.w_bytes, c, s.link, s.extra, s.overhead_s)
    allreduce = st.communication_s
    algbw, busbw = eq.bus_bandwidth(st.nodes, s.w_bytes, st.network_s)
    name = LATENCY if st.latency_s > st.network_s - st.latency_s else WORKER_LINK
    return Point(num_workers=n, step_s=st.step_s, compute_s=c, communication_s=allreduce, pull_s=0.0, push_s=0.0,
                 allreduce_s=allreduce, apply_s=0.0, overhead_s=s.overhead_s,
                 images_per_sec=n * s.batch(n) / st.step_s, updates_per_sec=None,
                 bottleneck=_step_bottleneck(st, name) if allreduce > 0 or c > 0 else COMPUTE, ps_host_bytes=0.0,
                 worker_host_bytes=st.worker_host_bytes, algbw=algbw, busbw=busbw, nodes=st.nodes, wait_s=st.wait_s,
                 batch_size=s.batch(n))


def _allreduce_point(s: Setting, n: int) -> Point:
    if s.strategy != "tree":
        return _ring_point(s, n)
    if s.strategy == "tree":
        comm, root = eq.tree_allreduce(n, s.w_bytes, s.link), eq.tree_root_bytes(n, s.w_bytes)
    else:
        comm, root = eq.ring_allreduce(n, s.w_bytes, s.link), eq.ring_bytes_per_host(n, s.w_bytes)
    c = s.compute_at(n)
    step = eq.sync_allreduce_step_s(c, comm, s.overhead_s)
    algbw, busbw = eq.bus_bandwidth(n, s.w_bytes, comm.total)
    bottleneck = _largest(c, comm.total, 0.0, _comm_bottleneck(comm, 0.0, root))
    return Point(num_workers=n, step_s=step, compute_s=c, communication_s=comm.total, pull_s=0.0,
                 push_s=0.0, allreduce_s=comm.total, apply_s=0.0, overhead_s=s.overhead_s,
                 images_per_sec=n * s.batch(n) / step, updates_per_sec=None,
                 bottleneck=bottleneck, ps_host_bytes=0.0, worker_host_bytes=root, algbw=algbw, busbw=busbw,
                 nodes=n, batch_size=s.batch(n))


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


def step_s(setting: Setting, n: int) -> float:
    """Just the step time (what the what-if answers compare)."""
    return point(setting, n).step_s


def with_beta(setting: Setting, beta: float) -> Setting:
    """The same setting on a link of another bandwidth (bytes/s), alpha unchanged."""
    return dataclasses.replace(setting, link=eq.Link(setting.link.alpha_s, beta))
