"""The link a prediction uses, and where its alpha and beta came from.

A named class (1gbe, 10gbe, ...) is a configured rate (tfbench.config.LINK_PRESETS gives beta)
with the alpha stated below; a plain rate (100mbit, ...) takes --link_latency_ms or the stated
default. A link measured on tfbench runs (the params file, keyed by the same name) replaces both,
and --link_latency_ms, when given, replaces alpha over everything: what was measured or asked
for beats a typical figure.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from tfbench.perfmodel.dense.equations import Link

# Hockney's alpha per class: the one-way time of one small message. The figures are typical,
# not measured here; a params file fitted on tfbench runs (gRPC adds its own per-message cost)
# or --link_latency_ms replaces them.
LINK_ALPHA_S = {
    # Kernel TCP over 1 GbE: half the round trip of a small message, as NetPIPE and netperf
    # TCP_RR report it, is typically 25-60 us with the NICs' default interrupt coalescing.
    "1gbe": (50e-6, "kernel TCP half round trip, typical 25-60 us"),
    # "5 to 10 microseconds for other commercially available [10GE] adapters", against 1.3 us for
    # RoCE (The Register, 2011-06-06, on Mellanox ConnectX-3): the kernel TCP end, 10 us.
    "10gbe": (10e-6, "kernel TCP, 5-10 us on commodity 10GE adapters"),
    # Faster Ethernet: the kernel's TCP stack, not the wire, sets alpha; assumed between RoCE's
    # 1.3 us and commodity 10GE's 5-10 us (same source).
    "25gbe": (8e-6, "kernel TCP, assumed below 10GE's 5-10 us"),
    "100gbe": (5e-6, "kernel TCP, assumed below 10GE's 5-10 us"),
    # FDR InfiniBand with RDMA: sub-microsecond on ConnectX-3 (same source); 1 us allows for the
    # verbs software path. gRPC over IPoIB is TCP and slower: measure it or give the latency.
    "fdr_ib": (1e-6, "RDMA verbs, sub-microsecond on ConnectX-3 FDR"),
}
DEFAULT_ALPHA_S = 50e-6  # a plain rate without --link_latency_ms: the 1gbe figure


@dataclasses.dataclass(frozen=True)
class ResolvedLink:
    link: Link
    alpha_source: str
    beta_source: str


def rate_text(bits_per_s: float) -> str:
    """1e9 -> '1 Gbit/s', 2.5e9 -> '2.5 Gbit/s', 1e8 -> '100 Mbit/s'."""
    for scale, unit in ((1e12, "Tbit/s"), (1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bits_per_s >= scale:
            return f"{bits_per_s / scale:.4g} {unit}"
    return f"{bits_per_s:.4g} bit/s"


def runs_text(from_runs) -> str:
    return "fitted on runs " + ", ".join(from_runs)


def resolve(name: str, rate_bps: float, latency_ms: Optional[float] = None,
            measured: Optional[dict] = None) -> ResolvedLink:
    """The link of --link_bandwidth=`name` (rate_bps bits/s); `measured` is the params file's
    entry for that name ({'alpha_s', 'beta_bps', 'from_runs'}) or None."""
    name = name.strip().lower()
    if measured is not None:
        beta_bps, beta_source = measured["beta_bps"], f"{runs_text(measured['from_runs'])} (link {name})"
    else:
        beta_bps, beta_source = rate_bps, f"--link_bandwidth={name}"
    if latency_ms is not None:
        if latency_ms < 0:
            raise ValueError(f"--link_latency_ms must be 0 or more, got {latency_ms:g}")
        alpha, alpha_source = latency_ms / 1e3, "given (--link_latency_ms)"
    elif measured is not None:
        alpha, alpha_source = measured["alpha_s"], f"{runs_text(measured['from_runs'])} (link {name})"
    elif name in LINK_ALPHA_S:
        alpha, why = LINK_ALPHA_S[name]
        alpha_source = f"stated for {name}: {why} (tfbench/perfmodel/dense/links.py)"
    else:
        alpha, alpha_source = DEFAULT_ALPHA_S, "default for a plain rate; --link_latency_ms sets it"
    return ResolvedLink(Link(alpha_s=alpha, beta=beta_bps / 8.0), alpha_source,
                        f"{beta_source}: {rate_text(beta_bps)}")
