"""One synchronous global step with every term of tfbench.perfmodel.dense.terms: the parameter server
(busiest shard, full duplex, messages) and ring all-reduce, on nodes of d devices each, with
stragglers and the network's core.

    sync PS:  step = max(C, T) + phi*min(C, T) + m*M + A/k + O + wait
              T = max(duplex(B_ps, B_ps, n, beta, chi), 2*B_worker/beta, core/F) + 4 alpha + intra(d)
    ring:     step = max(C, T) + phi*min(C, T) + m*2(n-1) + O + wait
              T = max(2(n-1)/n * W/beta, 2(n-1)W/F) + 2(n-1) alpha + intra(d)

n = nodes = ceil(N/d) (the network sees nodes, not devices); B_ps, M from the shards' real bytes
and variables (or |w|/k each when no placement is given); a worker host's own pull and push
never overlap each other (2 B_worker/beta); wait = E[slowest of N] - mean compute. With chi = 1,
phi = 1, d = 1, m = 0, no fabric and even shards on separate hosts this is the equation
tfbench.perfmodel.dense.equations.sync_ps: pull + C + push + A/k + O.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence

from tfbench.perfmodel.dense import equations as eq
from tfbench.perfmodel.dense import terms


@dataclasses.dataclass(frozen=True)
class Extra:
    """The terms beyond the equations of tfbench.perfmodel.dense.equations (defaults: what they assume)."""

    shard_bytes: Optional[Sequence[float]] = None  # trainable bytes per shard; None: |w|/k each
    shard_variables: Optional[Sequence[int]] = None
    devices_per_node: int = 1
    intra_node: str = "pcie"
    chi: float = 1.0  # non-overlapped share of the two directions (1: one after the other)
    phi: float = 1.0  # non-overlapped share of compute and communication (1: none overlaps)
    per_message_s: float = 0.0
    sigma_s: float = 0.0  # standard deviation of one worker's compute per step
    fabric: Optional[float] = None  # bytes/s the core carries; None: full bisection


@dataclasses.dataclass(frozen=True)
class Step:
    step_s: float
    compute_s: float
    network_s: float  # the host links' part, alpha included
    core_s: float
    intra_s: float
    messages_s: float
    wait_s: float
    apply_s: float
    latency_s: float
    ps_host_bytes: float
    worker_host_bytes: float
    nodes: int

    @property
    def communication_s(self) -> float:
        return max(self.network_s, self.core_s + self.latency_s) + self.intra_s + self.messages_s


def _shards(w: float, k: int, x: Extra):
    if x.shard_bytes is not None:
        return list(x.shard_bytes), list(x.shard_variables or [1] * len(x.shard_bytes))
    return [w / k] * k, [1] * k


def sync_ps(n: int, w: float, c: float, link: eq.Link, k: int, placement: str, x: Extra,
            ps_apply_s: float = 0.0, overhead_s: float = 0.0) -> Step:
    nodes = terms.nodes(n, x.devices_per_node)
    sizes, counts = _shards(w, k, x)
    ps_loads, worker_loads = terms.host_loads(nodes, w, sizes, placement)
    b_ps, b_worker = float(ps_loads.max(initial=0.0)), float(worker_loads.max(initial=0.0))
    on_link = terms.duplex_s(b_ps, b_ps, nodes, link.beta, x.chi)
    own = 2 * b_worker / link.beta
    latency = 4 * link.alpha_s if max(b_ps, b_worker) > 0 else 0.0
    local = w if placement == terms.COLLOCATED else 0.0
    core = terms.core_s(terms.ps_core_bytes(nodes, w, local), x.fabric)
    intra = terms.intra_node_s(min(n, x.devices_per_node), w, x.intra_node)
    messages = terms.messages_s(terms.ps_messages(nodes, counts, placement), x.per_message_s) if nodes > 1 else 0.0
    comm = max(on_link, own, core) + latency + intra
    wait = terms.straggler_wait_s(n, x.sigma_s)
    apply = eq.apply_share_s(ps_apply_s, k)
    step = terms.overlapped_s(c, comm, x.phi) + messages + apply + overhead_s + wait
    return Step(step, c, max(on_link, own) + latency, core, intra, messages, wait, apply, latency, b_ps, b_worker,
                nodes)


def ring(n: int, w: float, c: float, link: eq.Link, x: Extra, overhead_s: float = 0.0) -> Step:
    nodes = terms.nodes(n, x.devices_per_node)
    comm = eq.ring_allreduce(nodes, w, link)
    core = terms.core_s(terms.ring_core_bytes(nodes, w), x.fabric)
    intra = terms.intra_node_s(min(n, x.devices_per_node), w, x.intra_node)
    messages = terms.messages_s(terms.ring_messages(nodes), x.per_message_s)
    total = max(comm.bytes_s, core) + comm.latency_s + intra
    wait = terms.straggler_wait_s(n, x.sigma_s)
    step = terms.overlapped_s(c, total, x.phi) + messages + overhead_s + wait
    return Step(step, c, comm.total, core, intra, messages, wait, 0.0, comm.latency_s, 0.0,
                eq.ring_bytes_per_host(nodes, w), nodes)


def core_binds_at(w: float, link: eq.Link, k_of, placement: str, x: Extra, ring_strategy: bool,
                  top: int = 1 << 20) -> Optional[int]:
    """The fewest nodes (doubling from 2) at which the core's time exceeds the host links';
    None without a fabric or up to `top` nodes. k_of(nodes) gives the shards at that size."""
    if not x.fabric:
        return None
    n = 2
    while n <= top:
        if ring_strategy:
            s = ring(n * x.devices_per_node, w, 0.0, link, x)
        else:
            s = sync_ps(n * x.devices_per_node, w, 0.0, link, k_of(n), placement,
                        dataclasses.replace(x, shard_bytes=None, shard_variables=None))
        if s.core_s > s.network_s - s.latency_s:
            return n
        n *= 2
    return None


def even(w: float, k: int) -> float:
    """|w|/k: what one shard would hold if variables could be split at will."""
    return w / k if not math.isinf(k) else 0.0
