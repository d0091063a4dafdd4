"""Emulated hosts joined by shaped links: the namespaces, bridge, veth pairs and tbf of a run.

    switch namespace tfb-<key>-sw:  bridge br0 (10.A.B.1/24), one port h<i> per host
    host namespace tfb-<key>-h<i>:  eth0 (10.A.B.<i+2>/24), the other end of port h<i>

Every host link is shaped in both directions with tbf: egress of the host's eth0 limits what
the host sends, egress of its switch port what it receives. tbf keeps its rate in a 32-bit
bytes/s field, so a faster link cannot be shaped and validation refuses one (an empty
--link_bandwidth asks for unshaped veth, bounded by the CPU); the rate measured at setup
(cluster.net.link_facts) is what the run really had. This kernel has no sch_netem, so a delayed
network's links are TAP pairs instead of veth pairs (cluster.net.taps), shaped the same way, and
one user-space process
(cluster.net.delay_line) delays what each host sends; build() returns the handle that stops it.
"""
from __future__ import annotations

import dataclasses
import os
from typing import List, Optional, Tuple

from cluster.net import delay_line, netns, taps
from tfbench.config.choices import TBF_MAX_BPS
from tfbench.perfmodel.dense.terms import FRAME, FRAME_PAYLOAD

BRIDGE = "br0"
HOST_IFACE = "eth0"
PREFIXLEN = 24
BURST_S = 0.004  # tokens for 4 ms at the link rate
MIN_BURST = 2 * FRAME  # two full Ethernet frames: tbf sends no frame larger than its burst
QUEUE_S = 0.05  # at most 50 ms of data waits in a link's queue
# ... but at least 256 KiB (about 180 full frames, a switch port's share of its buffer): a TSO packet
# of 64 KB enters at once, and 16 senders converging on one slow host (a ps answering 16 pulls) keep
# a few frames each, enough for fast retransmit; with 64 KiB they lose whole windows and wait out
# TCP's retransmission timeouts (incast: 16 x 154 kB at 5 Mbit/s took 5.7 s instead of 4.1)
MIN_QUEUE = 256 * 1024
TCP_PAYLOAD_SHARE = FRAME_PAYLOAD / FRAME  # payload of a full Ethernet frame with TCP timestamps


@dataclasses.dataclass(frozen=True)
class Host:
    name: str  # h0, h1, ...
    netns: str
    address: str

    @property
    def port(self) -> str:
        """The host's veth end in the switch namespace."""
        return self.name


@dataclasses.dataclass(frozen=True)
class Network:
    key: str
    switch: str  # the switch namespace
    bridge_address: str
    hosts: Tuple[Host, ...]
    rate_bps: int = 0  # configured per direction; 0: unshaped
    shaped: bool = False
    delay_ms: float = 0.0  # one way between any two hosts, by the delay line
    jitter_ms: float = 0.0  # uniform in [-jitter_ms, +jitter_ms] around delay_ms, never reordering

    @property
    def delayed(self) -> bool:
        return self.delay_ms > 0

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def host_of(self, address: str) -> Host:
        return next(h for h in self.hosts if h.address == address)

    @property
    def namespaces(self) -> List[str]:
        return [self.switch, *(h.netns for h in self.hosts)]

    def to_dict(self) -> dict:
        return {"key": self.key, "switch": self.switch, "bridge_address": self.bridge_address,
                "bridge": BRIDGE, "host_iface": HOST_IFACE, "rate_bps": self.rate_bps, "shaped": self.shaped,
                "delay_ms": self.delay_ms, "jitter_ms": self.jitter_ms,
                "links": "tap pairs and a user-space delay line" if self.delayed else "veth pairs",
                "hosts": [dict(dataclasses.asdict(h), port=h.port) for h in self.hosts]}


def subnet(key: str) -> str:
    """A private /24 per run (10.200.0.0 - 10.249.255.0), from the run's key."""
    return f"10.{200 + int(key[:2], 16) % 50}.{int(key[2:4], 16)}"


def plan_network(key: str, n_hosts: int, rate_bps: int = 0, delay_ms: float = 0.0,
                 jitter_ms: float = 0.0) -> Network:
    """The run's network on paper; ValueError (one line) for a delay the delay line cannot keep."""
    refused = delay_line.refusal(delay_ms, jitter_ms, rate_bps)
    if refused:
        raise ValueError(refused)
    net = subnet(key)
    hosts = tuple(Host(f"h{i}", netns.ns_name(key, f"h{i}"), f"{net}.{i + 2}") for i in range(n_hosts))
    return Network(key, netns.ns_name(key, "sw"), f"{net}.1", hosts, rate_bps,
                   shaped=0 < rate_bps <= TBF_MAX_BPS, delay_ms=delay_ms, jitter_ms=jitter_ms)


@dataclasses.dataclass
class Running:
    """What build() started beside the namespaces: the delay line of a delayed network."""

    delay_line: Optional[delay_line.DelayLine] = None

    def stop(self) -> None:
        """Stops it (idempotent); the namespaces themselves go with netns.remove_run."""
        if self.delay_line is not None:
            self.delay_line.stop()


def build(net: Network) -> Running:
    """Creates the namespaces, bridge, links, addresses and shaping (cluster.net.netns.claim first),
    and for a delayed network starts its delay line. On an exception the delay line is stopped;
    the namespaces are the caller's to remove (netns.remove_run), as on success."""
    from pyroute2 import NetNS
    from pyroute2 import netns as pr_netns

    for name in net.namespaces:
        pr_netns.create(name)
    fds: List[int] = []
    try:
        if net.delayed:
            for host in net.hosts:  # each TAP's fd is opened in its own namespace
                fds += [taps.create(host.netns, HOST_IFACE), taps.create(net.switch, host.port)]
        with NetNS(net.switch, flags=0) as sw:
            _up(sw, "lo")
            sw.link("add", ifname=BRIDGE, kind="bridge")
            bridge = _index(sw, BRIDGE)
            sw.addr("add", index=bridge, address=net.bridge_address, prefixlen=PREFIXLEN)
            sw.link("set", index=bridge, state="up")
            for host in net.hosts:
                if not net.delayed:
                    sw.link("add", ifname=host.port, kind="veth", peer={"ifname": HOST_IFACE, "net_ns_fd": host.netns})
                port = _index(sw, host.port)
                sw.link("set", index=port, master=bridge, state="up")
                shape(sw, port, net)
        for host in net.hosts:
            with NetNS(host.netns, flags=0) as ns:
                _up(ns, "lo")
                iface = _index(ns, HOST_IFACE)
                ns.addr("add", index=iface, address=host.address, prefixlen=PREFIXLEN)
                ns.link("set", index=iface, state="up")
                shape(ns, iface, net)
        if not net.delayed:
            return Running()
        pairs = list(zip(fds[::2], fds[1::2]))
        return Running(delay_line.start(net.switch, pairs, net.delay_ms, net.jitter_ms, seed=int(net.key, 16)))
    finally:
        for fd in fds:  # the delay line holds its own copies
            os.close(fd)


def shape(ipr, index: int, net: Network) -> None:
    """tbf at the link rate (a few ms of burst, a queue of QUEUE_S) as the root of the device's
    egress; nothing for an unshaped network."""
    if not net.shaped:
        return
    ipr.tc("add", "tbf", index=index, handle=0x10000, **tbf_params(net.rate_bps))


def tbf_params(rate_bps: int) -> dict:
    """tbf's rate (bytes/s), burst (a few ms at the rate) and queue limit (QUEUE_S of data) in bytes."""
    rate = rate_bps // 8
    burst = max(int(rate * BURST_S), MIN_BURST)
    return {"rate": rate, "burst": burst, "limit": max(int(rate * QUEUE_S), MIN_QUEUE) + burst}


def _index(ipr, ifname: str) -> int:
    (index,) = ipr.link_lookup(ifname=ifname)
    return index


def _up(ipr, ifname: str) -> None:
    ipr.link("set", index=_index(ipr, ifname), state="up")


def counters(net: Network, unit: str = "bytes") -> dict:
    """{host: (tx, rx)} of each host's link in `unit` (bytes or packets), read on the switch ports
    (one netlink dump): what a port sends is what its host receives."""
    from pyroute2 import NetNS

    out = {}
    with NetNS(net.switch, flags=0) as sw:
        for link in sw.get_links():
            name = link.get_attr("IFLA_IFNAME")
            stats = link.get_attr("IFLA_STATS64")
            if stats is not None and name.startswith("h") and name[1:].isdigit():
                out[name] = (int(stats[f"rx_{unit}"]), int(stats[f"tx_{unit}"]))
    return out


def expected_goodput(rate_bps: int) -> float:
    """What one TCP stream can carry over a link shaped to rate_bps: tbf counts whole frames,
    so headers take their share and the payload rate sits about 4% below the configured one."""
    return rate_bps * TCP_PAYLOAD_SHARE
