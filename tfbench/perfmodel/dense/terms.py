"""The mechanisms that decide large clusters, each a small function with its closed form:
bytes on the busiest host link from the real shard sizes, full duplex, per-message costs,
stragglers, devices aggregated inside a node, compute against batch, and the network's core.

Symbols as in tfbench.perfmodel.dense.equations; in addition: S_j bytes and V_j variables on ps shard j
(tfbench.perfmodel.dense.shards), V variables in all, d devices (replicas) per node, m seconds per
message, chi the non-overlapped share of the two directions, phi the share of the shorter of
compute and communication that does not overlap the longer, sigma the standard deviation of a
worker's compute per step, F the fabric's aggregate capacity in bytes/s.
"""
from __future__ import annotations

import functools
import math
from typing import Optional, Sequence, Tuple

import numpy as np

SEPARATE, COLLOCATED = "separate", "collocated"


def host_loads(n: int, w: float, shard_bytes: Sequence[float], placement: str) -> Tuple[np.ndarray, np.ndarray]:
    """Bytes one way per synchronous global step on every ps-holding host link and on a worker's
    link without a shard, as (ps hosts, worker hosts). In each direction the load is the same
    (pulls go out as pushes come in):

    separate:   ps host j: N*S_j;  worker host: W
    collocated: shard j on worker host j mod N, S_h = sum of its shards;
                host h: S_h*(N-1) [the other workers' pulls and pushes of its shards]
                        + (W - S_h) [its own worker's pulls and pushes to the other hosts]
                = W + S_h*(N-2); a host without a shard: W.
    One worker holding every shard (N = 1, collocated) moves nothing: W + W*(1-2) = 0.
    """
    if not (n >= 1 and w > 0 and len(shard_bytes) >= 1 and placement in (SEPARATE, COLLOCATED)):
        raise ValueError(f"need N >= 1, W > 0, shards and a placement; got {n}, {w}, {shard_bytes}, {placement!r}")
    s = np.asarray(shard_bytes, dtype=float)
    if placement == SEPARATE:
        return n * s, np.full(n, float(w))
    hosted = np.zeros(n)
    np.add.at(hosted, np.arange(len(s)) % n, s)
    loads = np.maximum(w + hosted * (n - 2), 0.0)
    holding = np.bincount(np.arange(len(s)) % n, minlength=n) > 0
    return loads[holding], loads[~holding] if (~holding).any() else np.zeros(0)


FRAME, FRAME_PAYLOAD, ACK = 1514, 1448, 66  # Ethernet frame with TCP timestamps, its payload, an ACK


def wire_bytes(payload_out: float, payload_in: float) -> float:
    """Bytes a host's link counter sees leaving the host for `payload_out` bytes of messages sent
    and `payload_in` received over TCP: full frames (1514 bytes carry 1448) and one ACK (66 bytes)
    for every two frames received:

        payload_out * 1514/1448 + payload_in / (2 * 1448) * 66"""
    return payload_out * FRAME / FRAME_PAYLOAD + payload_in / (2 * FRAME_PAYLOAD) * ACK


def busiest_host_bytes(n: int, w: float, shard_bytes: Sequence[float], placement: str) -> Tuple[float, str]:
    """(bytes one way on the busiest host link per synchronous step, 'ps' or 'worker')."""
    ps, workers = host_loads(n, w, shard_bytes, placement)
    top_ps, top_worker = float(ps.max(initial=0.0)), float(workers.max(initial=0.0))
    return (top_ps, "ps") if top_ps >= top_worker else (top_worker, "worker")


def even_shards(w: float, k: int) -> Tuple[float, ...]:
    """|w|/k on each of k shards: what the equations assumed before shards were placed."""
    return (w / k,) * k


def duplex_s(in_bytes: float, out_bytes: float, n: int, beta: float, chi: float = 0.0) -> float:
    """Seconds a full-duplex host link needs for `in_bytes` arriving and `out_bytes` leaving in one
    step of N workers:

        T = [max(in, out) + min(in, out) * (1/N + chi*(N-1)/N)] / beta

    One worker's own pull and push cannot overlap (its compute lies between them): with N = 1 the
    two directions add up. Other workers' pulls and pushes interleave on the two directions; chi
    is the share of that which still does not overlap (chi = 1: the directions one after the
    other, T = (in + out)/beta; chi = 0: only 1/N of the shorter direction is exposed)."""
    if not (beta > 0 and n >= 1 and 0.0 <= chi <= 1.0 and in_bytes >= 0 and out_bytes >= 0):
        raise ValueError(f"bad duplex inputs: in={in_bytes}, out={out_bytes}, N={n}, beta={beta}, chi={chi}")
    longer, shorter = max(in_bytes, out_bytes), min(in_bytes, out_bytes)
    return (longer + shorter * (1.0 / n + chi * (n - 1) / n)) / beta


def overlapped_s(compute_s: float, comm_s: float, phi: float = 1.0) -> float:
    """Compute and communication of one step that overlap but for a share phi of the shorter:

        max(C, T) + phi * min(C, T)        (phi = 1: C + T, nothing overlaps; phi = 0: max(C, T))

    TF1 graphs pull a variable when the forward pass needs it and push a gradient as soon as the
    backward pass has it, so most of the shorter hides behind the longer."""
    if not (0.0 <= phi <= 1.0 and compute_s >= 0 and comm_s >= 0):
        raise ValueError(f"bad overlap inputs: C={compute_s}, T={comm_s}, phi={phi}")
    return max(compute_s, comm_s) + phi * min(compute_s, comm_s)


def ps_messages(n: int, shard_variables: Sequence[int], placement: str) -> int:
    """Messages the busiest host handles per synchronous step: a pull and a push per variable of
    each shard for every worker that talks to it over the network:

    separate:   ps host j: 2*V_j*N;  worker: 2*V
    collocated: host h: 2*(V_h*(N-1) + V - V_h)   (its own worker reaches the other shards)
    """
    v = np.asarray(shard_variables, dtype=float)
    total = float(v.sum())
    if placement == SEPARATE:
        return int(max(2 * v.max() * n, 2 * total))
    hosted = np.zeros(n)
    np.add.at(hosted, np.arange(len(v)) % n, v)
    return int((2 * (hosted * (n - 1) + total - hosted)).max())


def barrier_messages(n: int, barriers: int, num_ps: int) -> int:
    """tf_cnn_benchmarks' token barrier (add_sync_queues_and_barrier): each of N workers enqueues
    a token for each of the N-1 others and dequeues its own, N^2 messages per barrier on one ps;
    barriers go round-robin over the k ps, so the busiest handles ceil(barriers/k)*N^2 (one barrier
    at the step's end in parameter_server mode; one more per variable in distributed_replicated)."""
    if barriers <= 0 or n <= 1:
        return 0
    return math.ceil(barriers / num_ps) * n * n


def ring_messages(n: int, buckets: int = 1) -> int:
    """Messages each host sends per ring all-reduce: 2(N-1) per fused bucket."""
    return 2 * (n - 1) * buckets


def messages_s(messages: float, per_message_s: float) -> float:
    """messages * m: the cost per message that bandwidth does not shrink (RPC handling, a barrier)."""
    return messages * per_message_s


@functools.lru_cache(maxsize=None)
def expected_max_std_normal(n: int) -> float:
    """E[max of N independent standard normal draws]:
    integral of N x phi(x) Phi(x)^(N-1) dx; 0 for N = 1, 1/sqrt(pi) for N = 2, 3/(2 sqrt(pi)) for 3."""
    if n < 1:
        raise ValueError(f"N must be >= 1, got {n}")
    if n == 1:
        return 0.0
    from scipy import integrate, stats  # here: scipy takes a second to import, refusals need none

    value, _ = integrate.quad(lambda x: n * x * stats.norm.pdf(x) * stats.norm.cdf(x) ** (n - 1), -12, 12,
                              limit=200)
    return float(value)


def expected_max_empirical(samples: Sequence[float], n: int) -> float:
    """E[max of N draws with replacement] from measured per-worker compute times x_(1) <= ... <= x_(M):

        sum_i x_(i) * [(i/M)^N - ((i-1)/M)^N]"""
    x = np.sort(np.asarray(samples, dtype=float))
    if x.size == 0 or n < 1:
        raise ValueError("need samples and N >= 1")
    i = np.arange(1, x.size + 1)
    return float(np.sum(x * ((i / x.size) ** n - ((i - 1) / x.size) ** n)))


def straggler_wait_s(n: int, sigma_s: float, samples: Optional[Sequence[float]] = None) -> float:
    """The synchronous step waits for the slowest of N workers: E[max] - mean, from the measured
    samples when given, else sigma * E[max of N standard normals] (normal approximation)."""
    if samples is not None and len(samples):
        return expected_max_empirical(samples, n) - float(np.mean(samples))
    if sigma_s < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma_s}")
    return sigma_s * expected_max_std_normal(n) if sigma_s > 0 else 0.0


INTRA_NODE = {
    # PCIe 3.0 x16: 15.75 GB/s theoretical each way, about 12 GB/s in practice; the devices reduce
    # through the host (tf_cnn_benchmarks' local parameter device CPU), so d copies share it.
    "pcie": (12e9, "PCIe 3.0 x16, about 12 GB/s each way of 15.75 GB/s theoretical; devices reduce through the host"),
    # NVLink 2.0: 25 GB/s each way per link; a ring over the devices (hierarchical all-reduce).
    "nvlink": (25e9, "NVLink 2.0, 25 GB/s each way per link; a ring over the node's devices"),
}


def intra_node_s(d: int, w: float, kind: str = "pcie", beta: Optional[float] = None) -> float:
    """Seconds to aggregate d devices' gradients inside a node and hand the result back, before
    and after the network:

    pcie   (through the host, one shared link): 2*d*W/beta   (d copies up, d down)
    nvlink (a ring over the devices):           2*(d-1)/d*W/beta
    d = 1: 0."""
    if kind not in INTRA_NODE:
        raise ValueError(f"intra-node link {kind!r} is unknown; choose one of {', '.join(INTRA_NODE)}")
    if d <= 1:
        return 0.0
    beta = beta or INTRA_NODE[kind][0]
    return (2 * d * w if kind == "pcie" else 2 * (d - 1) / d * w) / beta


def nodes(n: int, d: int) -> int:
    """Nodes that hold N workers, d to a node: ceil(N/d)."""
    return -(-n // d)


def compute_s(batch: float, per_image_s: float, per_step_s: float = 0.0) -> float:
    """One worker's compute per step at a per-worker batch b: c0 + c*b (a fixed part per step,
    e.g. kernel launches and the update, plus a part per image)."""
    return per_step_s + per_image_s * batch


def fit_compute(batches: Sequence[float], step_compute_s: Sequence[float]) -> Tuple[float, float]:
    """(per_image_s c, per_step_s c0) of compute_s by non-negative least squares (scipy's
    lsq_linear) on measured compute per step at two or more batch sizes."""
    b = np.asarray(batches, dtype=float)
    if len(set(b.tolist())) < 2:
        raise ValueError("compute against batch needs runs at two or more batch sizes")
    a = np.column_stack([b, np.ones_like(b)])
    from scipy import optimize

    result = optimize.lsq_linear(a, np.asarray(step_compute_s, dtype=float), bounds=(0, np.inf))
    return float(result.x[0]), float(result.x[1])


def core_s(total_bytes: float, capacity: Optional[float]) -> float:
    """Seconds the network's core needs for every byte that crosses it in one step: total/F
    (0 with a full-bisection switch, capacity None)."""
    return 0.0 if not capacity else total_bytes / capacity


def fabric_capacity(node_count: int, beta: float, oversubscription: float) -> float:
    """F from an oversubscription ratio r: the hosts' links together, nodes*beta, divided by r."""
    if oversubscription < 1:
        raise ValueError(f"oversubscription must be >= 1, got {oversubscription}")
    return node_count * beta / oversubscription


def ps_core_bytes(n: int, w: float, local_bytes: float) -> float:
    """Bytes crossing the core per synchronous PS step (both directions): each worker pulls and
    pushes W, less what its own host holds: 2*(N*W - local); collocated with every shard on a
    worker host local = W, so 2*W*(N-1); separate 2*N*W."""
    return 2.0 * (n * w - local_bytes)


def ring_core_bytes(n: int, w: float) -> float:
    """Bytes crossing the core per ring all-reduce: N hosts x 2(N-1)/N*W = 2(N-1)W."""
    return 2.0 * (n - 1) * w
