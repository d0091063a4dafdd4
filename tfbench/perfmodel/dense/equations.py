"""Every equation of tfbench's performance model, each a small function with its closed form.

Symbols: N workers; W = |w| bytes (4 x trainable parameters: mixed precision keeps variables in
fp32); C = compute seconds of one worker's step (batch x seconds per image); a link is Hockney's
(alpha seconds per message, beta bytes/s), full duplex with each direction shaped on its own;
k ps shards, placed `separate` (a host each) or `collocated` (shard j on worker j mod N's host,
as tfbench places them, so that worker's traffic to it stays off the link); A = ps_apply_s, the
seconds one ps takes to apply one update of |w| (a shard applies W/k of it: A/k); O = a fixed
per-step overhead (e.g. the coordinator's dispatch). One pull or push is a request and its
reply: 2 alpha + bytes/beta on the busiest link it crosses, and nothing when no byte crosses one.

Assumed throughout: C does not change with N, workers are alike, the switch has full bisection
(only the named host links are shared), communication never overlaps computation.
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple, Optional, Tuple

import numpy as np

SEPARATE, COLLOCATED = "separate", "collocated"
PLACEMENTS = (SEPARATE, COLLOCATED)
UNLIMITED = math.inf  # k = UNLIMITED: the limit of ever more shards


@dataclasses.dataclass(frozen=True)
class Link:
    """Hockney's link: alpha_s per message, beta bytes/s in each direction."""

    alpha_s: float
    beta: float

    def __post_init__(self):
        if not (self.alpha_s >= 0 and self.beta > 0):
            raise ValueError(f"a link needs alpha_s >= 0 and beta > 0, got {self.alpha_s}, {self.beta}")

    def with_beta_share(self, share: float) -> "Link":
        """The link as a protocol sees it that gets `share` (0 < share <= 1) of its bandwidth."""
        return Link(self.alpha_s, self.beta * share)


class Comm(NamedTuple):
    """One communication's time, its alpha terms apart from its bytes/beta terms (the split that
    names a latency bottleneck)."""

    latency_s: float
    bytes_s: float

    @property
    def total(self) -> float:
        return self.latency_s + self.bytes_s


NO_COMM = Comm(0.0, 0.0)


def _check(n: float, w: float, k: float = 1, placement: str = SEPARATE) -> None:
    if not (n >= 1 and w > 0 and k >= 1 and placement in PLACEMENTS):
        raise ValueError(f"need N >= 1, W > 0, k >= 1 and placement in {PLACEMENTS}; got {n}, {w}, {k}, {placement!r}")


def exchange(link: Link, nbytes: float) -> Comm:
    """One pull or push whose busiest link carries `nbytes` one way: 2 alpha + nbytes/beta
    (request and reply); 0 when nothing crosses a link."""
    return Comm(2 * link.alpha_s, nbytes / link.beta) if nbytes > 0 else NO_COMM


def shards_per_host(n: int, k: float) -> Tuple[float, float]:
    """Collocated shards on the fullest and the emptiest worker host: (ceil(k/N), floor(k/N))."""
    return math.ceil(k / n), math.floor(k / n)


def ps_link_bytes(n: int, w: float, k: float = 1, placement: str = SEPARATE) -> Tuple[float, float]:
    """(busiest ps host link, busiest worker link): bytes one way during one synchronous pull
    (a push is the mirror image), which is also what a ps host moves each way per global step.

    separate:   ps host N*W/k,                      worker W
    collocated: ps host ceil(k/N)*(N-1)*W/k,        worker (k - floor(k/N))*W/k
                (k <= N: (N-1)*W/k and, for k = N, (N-1)*W/N; N = k = 1: no link traffic)
    k -> inf:   separate (0, W); collocated ((N-1)*W/N, (N-1)*W/N)
    """
    _check(n, w, k, placement)
    if math.isinf(k):
        return (0.0, w) if placement == SEPARATE else ((n - 1) * w / n, (n - 1) * w / n)
    if placement == SEPARATE:
        return n * w / k, w
    most, fewest = shards_per_host(n, k)
    return most * (n - 1) * w / k, (k - fewest) * w / k


def apply_share_s(ps_apply_s: float, k: float = 1) -> float:
    """A shard applies W/k of an update: A/k (0 with unlimited shards)."""
    return 0.0 if math.isinf(k) else ps_apply_s / k


def sync_ps(n: int, w: float, c: float, link: Link, k: float = 1, placement: str = SEPARATE,
            ps_apply_s: float = 0.0, overhead_s: float = 0.0) -> dict:
    """Synchronous PS, one global step (one update from every worker's gradient):
    step = pull + C + push + A/k + O, pull = push = 2 alpha + max(ps host bytes, worker bytes)/beta
    with the bytes of ps_link_bytes."""
    ps_bytes, worker_bytes = ps_link_bytes(n, w, k, placement)
    comm = exchange(link, max(ps_bytes, worker_bytes))
    apply = apply_share_s(ps_apply_s, k)
    return {"pull": comm, "push": comm, "compute_s": c, "apply_s": apply, "overhead_s": overhead_s,
            "step_s": 2 * comm.total + c + apply + overhead_s, "ps_bytes": ps_bytes, "worker_bytes": worker_bytes}


def async_worker_bytes(n: int, w: float, k: float = 1, placement: str = SEPARATE) -> np.ndarray:
    """Bytes one way on each worker's own link per update of its own:
    separate W; collocated (k - s_j)*W/k with s_j the shards on worker j's host (k -> inf:
    (N-1)*W/N)."""
    _check(n, w, k, placement)
    if placement == SEPARATE:
        return np.full(n, float(w))
    if math.isinf(k):
        return np.full(n, (n - 1) * w / n)
    hosted = np.bincount(np.arange(int(k)) % n, minlength=n)
    return (k - hosted) * w / k


def async_ps_host_bytes_per_update(n: int, w: float, k: float = 1, placement: str = SEPARATE) -> float:
    """Bytes one way on the busiest ps host link per update of the cluster (updates spread evenly
    over the workers): separate W/k; collocated ceil(k/N)*(N-1)/N*W/k, since updates of the
    worker that shares the host stay local (k -> inf: separate 0, collocated (N-1)*W/N^2)."""
    _check(n, w, k, placement)
    if math.isinf(k):
        return 0.0 if placement == SEPARATE else (n - 1) * w / n ** 2
    if placement == SEPARATE:
        return w / k
    return shards_per_host(n, k)[0] * (n - 1) / n * w / k


def async_link_cap(n: int, w: float, link: Link, k: float = 1, placement: str = SEPARATE) -> float:
    """Updates/s the ps host links carry: beta / async_ps_host_bytes_per_update, i.e.
    separate k*beta/W; collocated (k <= N) k*N*beta/((N-1)*W); inf when nothing crosses."""
    per_update = async_ps_host_bytes_per_update(n, w, k, placement)
    return link.beta / per_update if per_update > 0 else math.inf


def async_apply_cap(ps_apply_s: float, k: float = 1) -> float:
    """Updates/s the shards apply, working side by side: k/A (inf for A = 0 or k -> inf)."""
    share = apply_share_s(ps_apply_s, k)
    return 1.0 / share if share > 0 else math.inf


def async_ps(n: int, w: float, c: float, link: Link, k: float = 1, placement: str = SEPARATE,
             ps_apply_s: float = 0.0, overhead_s: float = 0.0) -> dict:
    """Asynchronous PS; a global step is N updates.

    Worker j's update: T_j = pull_j + C + push_j + A/k + O, pull_j = push_j = exchange over its own
    link (async_worker_bytes); a worker's push returns once its update is applied, so at N = 1
    this equals sync_ps. Cluster updates/s = min(sum_j 1/T_j, async_link_cap, async_apply_cap);
    step = N / updates/s. Beyond sum_j 1/T_j the extra time is queueing at the cap that binds:
    communication for the ps links, apply for the ps apply.
    """
    worker_bytes = async_worker_bytes(n, w, k, placement)
    comms = [exchange(link, b) for b in worker_bytes]
    apply = apply_share_s(ps_apply_s, k)
    per_update = np.array([2 * cm.total for cm in comms]) + c + apply + overhead_s
    workers_rate = float(np.sum(1.0 / per_update))
    caps = {"workers": workers_rate, "ps link": async_link_cap(n, w, link, k, placement),
            "ps apply": async_apply_cap(ps_apply_s, k)}
    limit = min(caps, key=caps.get)  # dicts keep order: the workers win a tie, then the link
    rate = caps[limit]
    mean_update = n / workers_rate  # the update time that gives the workers' summed rate
    comm = mean_update - c - apply - overhead_s
    queue = n / rate - mean_update
    worst = comms[int(np.argmax(per_update))]
    return {"pull_s": comm / 2 + (queue / 2 if limit == "ps link" else 0.0),
            "push_s": comm / 2 + (queue / 2 if limit == "ps link" else 0.0),
            "worst": Comm(2 * worst.latency_s, 2 * worst.bytes_s), "compute_s": c,
            "apply_s": apply + (queue if limit == "ps apply" else 0.0), "overhead_s": overhead_s,
            "step_s": n / rate, "updates_per_s": rate, "limit": limit, "caps": caps,
            "ps_bytes": ps_link_bytes(n, w, k, placement)[0], "worker_bytes": float(np.max(worker_bytes))}


def ring_allreduce(n: int, w: float, link: Link) -> Comm:
    """Ring all-reduce (scatter-reduce then all-gather): 2(N-1) alpha + 2(N-1)/N * W/beta."""
    _check(n, w)
    return Comm(2 * (n - 1) * link.alpha_s, 2 * (n - 1) / n * w / link.beta)


def ring_bytes_per_host(n: int, w: float) -> float:
    """Bytes each host sends (and receives) per all-reduce: 2(N-1)/N * W."""
    return 2 * (n - 1) / n * w


def tree_allreduce(nodes: int, w: float, link: Link) -> Comm:
    """Binomial-tree reduce then broadcast: 2*ceil(log2 nodes) * (alpha + W/beta). With a ps as
    the root of N workers, nodes = N + 1 (the lecture's 2*ceil(log2(n+1)) T_w)."""
    _check(nodes, w)
    rounds = 2 * math.ceil(math.log2(nodes))
    return Comm(rounds * link.alpha_s, rounds * w / link.beta)


def tree_root_bytes(nodes: int, w: float) -> float:
    """Bytes one way on the root's link per all-reduce: ceil(log2 nodes) * W."""
    return math.ceil(math.log2(nodes)) * w


def sync_allreduce_step_s(c: float, allreduce: Comm, overhead_s: float = 0.0) -> float:
    """A synchronous all-reduce step: C + all-reduce + O."""
    return c + allreduce.total + overhead_s


def bus_bandwidth(n: int, w: float, allreduce_s: float) -> Tuple[Optional[float], Optional[float]]:
    """(algbw, busbw) in bytes/s as nccl-tests reports an all-reduce: algbw = W/t,
    busbw = algbw * 2(N-1)/N; (None, None) when no time is spent (N = 1)."""
    if allreduce_s <= 0:
        return None, None
    algbw = w / allreduce_s
    return algbw, algbw * 2 * (n - 1) / n


def images_per_sec(n: int, batch_size: int, step_s: float) -> float:
    """A global step processes N * batch images: N*b/step."""
    return n * batch_size / step_s


def scaling_efficiency(rate_n: float, n: int, rate_1: float) -> float:
    """rate(N) / (N * rate(1)), same strategy and setting."""
    return rate_n / (n * rate_1)
