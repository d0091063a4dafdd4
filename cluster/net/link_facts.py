"""What a run's emulated links were asked for and what they really do: the record's `link` entry
and network.json, for every launcher that builds emulated hosts (local emulated and Slurm nodes).

The measurements come from cluster.net.link_probe (round trip, Hockney alpha and beta, one TCP stream
each way); a network that is not what was configured ends the run here, before any task starts.
"""
from __future__ import annotations

from cluster.net import link_probe, links


def facts(net: links.Network, link_bandwidth: str) -> dict:
    """The `link` entry of a built network; RuntimeError (one line) when its measured round trip
    or throughput is not what --link_latency and --link_bandwidth asked for, in two probes."""
    measured = _probed(net)
    problem = link_probe.check(measured, net.delay_ms, net.rate_bps, net.shaped)
    if problem:  # probed once more: a 2-core machine's one slow stream (85 of 86 Mbit/s) is no link's fault
        measured = _probed(net)
        problem = link_probe.check(measured, net.delay_ms, net.rate_bps, net.shaped)
    if problem:
        raise RuntimeError(f"the emulated links are not what was asked for, in two probes: {problem}")
    out = {
        "num_hosts": len(net.hosts),
        "link_bandwidth": link_bandwidth or "unshaped",
        "configured_bps": net.rate_bps or None,
        "shaped": net.shaped,
        "delay_ms": net.delay_ms,
        "jitter_ms": net.jitter_ms,
        "expected_goodput_bps": round(links.expected_goodput(net.rate_bps)) if net.shaped else None,
        "measured_tx_bps": measured["throughput_bps"]["forward"],
        "measured_rx_bps": measured["throughput_bps"]["backward"],
        **{k: measured[k] for k in ("rtt_ms", "alpha_ms", "beta_bps", "window_limited", "path")},
        "measured_with": measured["measured_with"],
        "tcp_congestion_control": measured.get("tcp_congestion_control"),
    }
    if not net.shaped:  # validation refuses rates tbf cannot shape: only an empty one is unshaped
        out["note"] = "unshaped: the rate is what veth and the CPU carry"
    return out


def _probed(net: links.Network) -> dict:
    """link_probe.probe(net), probed once more when a socket of the probe waited out its timeout:
    on a loaded machine one lost connection set-up can stall a probe whose links are fine; a
    second stall ends the run naming the path."""
    for attempt in (1, 2):
        try:
            return link_probe.probe(net)
        except TimeoutError as e:
            if attempt == 2:
                src, dst, _ = link_probe.endpoints(net)
                raise RuntimeError(f"the link probe from {src[1]} to {dst[1]} got no answer within "
                                   f"{link_probe.TIMEOUT_S:g} s, twice: {e}") from e
    raise AssertionError("unreachable")
