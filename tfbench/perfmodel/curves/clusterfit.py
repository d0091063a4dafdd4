"""A cluster's measured scaling curve, fitted on its small points and predicted at large ones:
the published tf_cnn_benchmarks tables (`python -m tools.model published`) and a user's own
CSV (`python -m tools.model cluster`).

One synchronous step of g GPUs on n = ceil(g/d) nodes (tfbench.perfmodel.dense.terms):

    step = max(C, T) + phi*min(C, T) + m*M + E[slowest of n] - mean
    T    = max(duplex(B, B, n, beta, chi), core bytes / F) + intra-node(d)

C = b*c + c0 (compute per step at the per-GPU batch b), B the busiest host link's bytes one way
(the real shard sizes, placed as the run's placer places them), M the messages the busiest host
handles (variables x workers, plus tf_cnn_benchmarks' N^2 token barriers), F the fabric's
capacity (none: full bisection). Ring all-reduce replaces B by 2(N-1)/N*W on every node link
and M by 2(N-1) per bucket.

Fitted on the points it is told to fit: c (and c0 with two batch sizes) from the one-GPU points;
phi and m by scipy.optimize.least_squares on the log rate errors, at a beta (refit). Beta itself
is only bounded from below while the fitted points are compute-bound (a faster link changes
nothing there): tfbench.perfmodel.curves.clusterspread takes every beta the points allow up to the
link's line rate, and the rule that makes a prediction's point from them.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tfbench.perfmodel.dense import shards, terms

MODES = ("parameter_server", "distributed_replicated", "tfbench_ps", "allreduce")
BETA_GRID = np.logspace(6, 12, 61)  # bytes/s tried: 1 MB/s to 1 TB/s
MAX_PER_MESSAGE_S = 1e-3


@dataclasses.dataclass(frozen=True)
class Point:
    gpus: int
    devices_per_node: int
    num_ps: int
    mode: str
    images_per_sec: float = 0.0
    batch_size: int = 64


@dataclasses.dataclass(frozen=True)
class Params:
    per_image_s: float
    beta: float  # bytes/s each way on a node's link
    phi: float = 1.0
    per_message_s: float = 0.0
    per_step_s: float = 0.0
    chi: float = 0.0
    sigma_s: float = 0.0
    fabric: Optional[float] = None  # bytes/s the core carries; None: full bisection
    intra_node: str = "pcie"
    beta_source: str = ""


@dataclasses.dataclass(frozen=True)
class Parts:
    step_s: float
    compute_s: float
    network_s: float
    intra_s: float
    messages_s: float
    wait_s: float
    busiest_bytes: float
    busiest_host: str
    core_s: float

    @property
    def bottleneck(self) -> str:
        parts = {"compute": self.compute_s, f"network at the busiest {self.busiest_host} host link": self.network_s,
                 "the network's core": self.core_s, "intra-node aggregation": self.intra_s,
                 "messages (per-message cost)": self.messages_s}
        return max(parts, key=parts.get)


class Cluster:
    """A model's variables and the placements its points need (cached per k and mode)."""

    def __init__(self, variables: Sequence[shards.Variable]):
        self.variables = list(variables)
        self.trainable = [v for v in self.variables if v.trainable]
        self.w = float(sum(v.nbytes for v in self.trainable))
        self._placed: Dict[Tuple[int, str], shards.Placement] = {}

    def placement(self, k: int, mode: str) -> shards.Placement:
        if (k, mode) not in self._placed:
            if mode == "parameter_server":  # replica_device_setter + GreedyLoadBalancingStrategy: every variable
                p = shards.place(self.variables, k, placer="greedy")
            elif mode == "distributed_replicated":  # shadow copies of the trainable ones, round-robin
                p = shards.place(self.trainable, k)
            else:  # TF2's ParameterServerStrategy, creation order
                p = shards.place(self.variables, k)
            self._placed[(k, mode)] = p
        return self._placed[(k, mode)]

    def parts(self, point: Point, p: Params, batch: Optional[float] = None) -> Parts:
        b = point.batch_size if batch is None else batch
        d, g = point.devices_per_node, point.gpus
        n, local = terms.nodes(g, d), min(g, d)
        c = terms.compute_s(b, p.per_image_s, p.per_step_s)
        intra = terms.intra_node_s(local, self.w, p.intra_node)
        if point.mode == "allreduce":
            busiest, host = terms.ring_core_bytes(n, self.w) / n, "worker"  # 2(N-1)/N*W, both ways at once
            network = busiest / p.beta
            core = terms.core_s(terms.ring_core_bytes(n, self.w), p.fabric)
            messages = terms.ring_messages(n)
        else:
            placed = self.placement(point.num_ps, point.mode)
            busiest, host = terms.busiest_host_bytes(n, self.w, placed.shard_bytes, terms.COLLOCATED)
            network = terms.duplex_s(busiest, busiest, n, p.beta, p.chi)
            core = terms.core_s(terms.ps_core_bytes(n, self.w, self.w), p.fabric)
            barriers = {"parameter_server": 1, "distributed_replicated": 1 + len(self.trainable)}.get(point.mode, 0)
            messages = (terms.ps_messages(n, placed.shard_variables, terms.COLLOCATED)
                        + terms.barrier_messages(n, barriers, point.num_ps))
        comm = max(network, core) + intra
        wait = terms.straggler_wait_s(n, p.sigma_s)
        msg_s = terms.messages_s(messages, p.per_message_s)
        step = terms.overlapped_s(c, comm, p.phi) + msg_s + wait
        return Parts(step, c, network, intra, msg_s, wait, busiest, host, core)

    def rate(self, point: Point, p: Params, batch: Optional[float] = None) -> float:
        b = point.batch_size if batch is None else batch
        return point.gpus * b / self.parts(point, p, batch).step_s


def compute_from(points: Sequence[Point]) -> Tuple[float, float]:
    """(per_image_s, per_step_s) from the one-GPU points: c = step/b from one batch size, the
    line c0 + c*b (terms.fit_compute) from two or more."""
    single = [q for q in points if q.gpus == 1 and q.images_per_sec > 0]
    if not single:
        raise ValueError("the fit needs a point with one GPU (its compute per image)")
    if len({q.batch_size for q in single}) >= 2:
        return terms.fit_compute([q.batch_size for q in single], [q.batch_size / q.images_per_sec for q in single])
    q = single[0]
    return 1.0 / q.images_per_sec, 0.0


def base_params(points: Sequence[Point], fabric: Optional[float] = None, intra_node: str = "pcie") -> Params:
    """Params with the compute of the one-GPU points (compute_from), the rest to be fitted."""
    per_image, per_step = compute_from(points)
    return Params(per_image_s=per_image, per_step_s=per_step, beta=1.0, fabric=fabric, intra_node=intra_node)


def refit(cluster: Cluster, points: Sequence[Point], base: Params, beta: float) -> Tuple[float, Params]:
    """(RMS of the log rate errors, params) with phi and m fitted at this beta."""

    def residuals(x):
        p = dataclasses.replace(base, beta=beta, phi=float(x[0]), per_message_s=float(x[1]))
        return [math.log(cluster.rate(q, p) / q.images_per_sec) for q in points]

    from scipy import optimize  # here: scipy takes a second to import, refusals need none

    result = optimize.least_squares(residuals, [0.2, 1e-6], bounds=([0.0, 0.0], [1.0, MAX_PER_MESSAGE_S]),
                                    x_scale=[0.1, 1e-5])
    fitted = dataclasses.replace(base, beta=beta, phi=float(result.x[0]), per_message_s=float(result.x[1]))
    return math.sqrt(2 * result.cost / len(points)), fitted


def errors(cluster: Cluster, points: Sequence[Point], p: Params) -> List[Tuple[Point, float, float, Parts]]:
    """(point, predicted images/s, relative error, parts) for each point."""
    out = []
    for q in points:
        predicted = cluster.rate(q, p)
        out.append((q, predicted, (predicted - q.images_per_sec) / q.images_per_sec, cluster.parts(q, p)))
    return out
