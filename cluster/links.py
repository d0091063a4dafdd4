"""Emulated hosts joined by shaped links: the namespaces, bridge, veth pairs and tbf of a run.

    switch namespace tfb-<key>-sw:  bridge br0 (10.A.B.1/24), one port h<i> per host
    host namespace tfb-<key>-h<i>:  eth0 (10.A.B.<i+2>/24), the other end of port h<i>

Every host link is shaped in both directions with tbf: egress of the host's eth0 limits what
the host sends, egress of its switch port what it receives. tbf keeps its rate in a 32-bit
bytes/s field, so a link faster than 34 Gbit/s stays unshaped (veth carries ~10 Gbit/s here,
bounded by the CPU); the rate measured at setup is what the run really had. Delay needs
sch_netem: with it, a netem root adds the delay and the tbf hangs below it; without it (as on
this machine's kernel) cluster.netns.support_error refuses --link_latency before anything starts.
"""
from __future__ import annotations

import dataclasses
import socket
import threading
import time
from typing import List, Optional, Tuple

from cluster import netns
from cluster.netns_exec import run_in

BRIDGE = "br0"
HOST_IFACE = "eth0"
PREFIXLEN = 24
TBF_MAX_BPS = (2 ** 32 - 1) * 8  # tbf's rate field: bytes/s in 32 bits
BURST_S = 0.004  # tokens for 4 ms at the link rate
MIN_BURST = 32 * 1024
QUEUE_S = 0.05  # at most 50 ms of data waits in a link's queue
TCP_PAYLOAD_SHARE = 1448 / 1514  # payload of a full Ethernet frame with TCP timestamps


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
    delay_ms: float = 0.0  # per direction, through netem

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
                "delay_ms": self.delay_ms,
                "hosts": [dict(dataclasses.asdict(h), port=h.port) for h in self.hosts]}


def subnet(key: str) -> str:
    """A private /24 per run (10.200.0.0 - 10.249.255.0), from the run's key."""
    return f"10.{200 + int(key[:2], 16) % 50}.{int(key[2:4], 16)}"


def plan_network(key: str, n_hosts: int, rate_bps: int = 0, delay_ms: float = 0.0) -> Network:
    net = subnet(key)
    hosts = tuple(Host(f"h{i}", netns.ns_name(key, f"h{i}"), f"{net}.{i + 2}") for i in range(n_hosts))
    return Network(key, netns.ns_name(key, "sw"), f"{net}.1", hosts, rate_bps,
                   shaped=0 < rate_bps <= TBF_MAX_BPS, delay_ms=delay_ms)


def build(net: Network) -> None:
    """Creates the namespaces, bridge, links, addresses and shaping (cluster.netns.claim first)."""
    from pyroute2 import NetNS
    from pyroute2 import netns as pr_netns

    for name in net.namespaces:
        pr_netns.create(name)
    with NetNS(net.switch, flags=0) as sw:
        _up(sw, "lo")
        sw.link("add", ifname=BRIDGE, kind="bridge")
        bridge = _index(sw, BRIDGE)
        sw.addr("add", index=bridge, address=net.bridge_address, prefixlen=PREFIXLEN)
        sw.link("set", index=bridge, state="up")
        for host in net.hosts:
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


def shape(ipr, index: int, net: Network) -> None:
    """tbf at the link rate (a few ms of burst, a queue of QUEUE_S), below a netem root that
    adds the delay when one is asked for."""
    parent = {}
    if net.delay_ms > 0:
        ipr.tc("add", "netem", index=index, handle=0x10000, delay=int(net.delay_ms * 1000), limit=100000)
        parent = {"parent": 0x10001, "handle": 0x100000}
    if not net.shaped:
        return
    rate = net.rate_bps // 8
    burst = max(int(rate * BURST_S), MIN_BURST)
    ipr.tc("add", "tbf", index=index, rate=rate, burst=burst, limit=int(rate * QUEUE_S) + burst,
           **(parent or {"handle": 0x10000}))


def _index(ipr, ifname: str) -> int:
    (index,) = ipr.link_lookup(ifname=ifname)
    return index


def _up(ipr, ifname: str) -> None:
    ipr.link("set", index=_index(ipr, ifname), state="up")


def counters(net: Network) -> dict:
    """{host: (tx_bytes, rx_bytes)} of each host's link, read on the switch ports (one netlink
    dump): what a port sends is what its host receives."""
    from pyroute2 import NetNS

    out = {}
    with NetNS(net.switch, flags=0) as sw:
        for link in sw.get_links():
            name = link.get_attr("IFLA_IFNAME")
            stats = link.get_attr("IFLA_STATS64")
            if stats is not None and name.startswith("h") and name[1:].isdigit():
                out[name] = (int(stats["rx_bytes"]), int(stats["tx_bytes"]))
    return out


# ---- measuring a link ------------------------------------------------------------------------

def facts(net: Network, link_bandwidth: str, seconds: float = 0.6) -> dict:
    """What the run's links were asked for and what one TCP stream really got, both ways between
    h0 and the switch (the record's `link` and network.json)."""
    h0 = net.hosts[0]
    tx = measure(h0.netns, net.switch, net.bridge_address, seconds)
    rx = measure(net.switch, h0.netns, h0.address, seconds)
    rate = net.rate_bps
    out = {
        "num_hosts": len(net.hosts),
        "link_bandwidth": link_bandwidth or "unshaped",
        "configured_bps": rate or None,
        "shaped": net.shaped,
        "delay_ms": net.delay_ms,
        "expected_goodput_bps": round(expected_goodput(rate)) if net.shaped else None,
        "measured_tx_bps": tx,
        "measured_rx_bps": rx,
        "measured_with": f"one TCP stream for {seconds:g} s each way between h0 and the switch",
    }
    if rate and not net.shaped:
        out["note"] = (f"{rate / 1e9:g} Gbit/s is above tbf's 32-bit rate (34 Gbit/s): the links are "
                       f"unshaped and bounded by the CPU (veth)")
    elif not rate:
        out["note"] = "unshaped: the rate is what veth and the CPU carry"
    return out


def expected_goodput(rate_bps: int) -> float:
    """What one TCP stream can carry over a link shaped to rate_bps: tbf counts whole frames,
    so headers take their share and the payload rate sits about 4% below the configured one."""
    return rate_bps * TCP_PAYLOAD_SHARE


def measure(src_ns: str, dst_ns: str, dst_address: str, seconds: float = 0.6, skip_s: float = 0.1) -> float:
    """Bits/s of one TCP stream from namespace src_ns to dst_address (in dst_ns), counted
    after the first skip_s seconds so that the tbf burst does not inflate it."""
    server = run_in(dst_ns, lambda: _listener(dst_address))
    port = server.getsockname()[1]
    got: dict = {}
    receiver = threading.Thread(target=_receive, args=(server, seconds, skip_s, got), daemon=True)
    receiver.start()
    try:
        client = run_in(src_ns, lambda: socket.create_connection((dst_address, port), timeout=10))
        _send(client, seconds + 0.1)
    finally:
        receiver.join(timeout=seconds + 10)
        server.close()
    if "bits_per_s" not in got:
        raise RuntimeError(f"no data arrived from {src_ns} at {dst_address}")
    return got["bits_per_s"]


def _listener(address: str) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((address, 0))
    s.listen(1)
    s.settimeout(10)
    return s


def _send(client: socket.socket, seconds: float) -> None:
    block = b"\0" * (256 * 1024)
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            client.sendall(block)
    except OSError:
        pass
    finally:
        client.close()


def _receive(server: socket.socket, seconds: float, skip_s: float, got: dict) -> None:
    conn, _ = server.accept()
    conn.settimeout(10)
    buf = bytearray(1024 * 1024)
    start: Optional[float] = None
    counted, first = 0, None
    with conn:
        while True:
            n = conn.recv_into(buf)
            now = time.monotonic()
            if n == 0:
                break
            start = start or now
            if now - start < skip_s:
                continue
            if first is None:
                first = now
            else:
                counted += n
            if now - start >= seconds:
                last = now
                if last > first:
                    got["bits_per_s"] = counted * 8 / (last - first)
                break
