"""The user-space delay line with real namespaces (no TensorFlow): the delay and rate two hosts
see, jitter that never reorders, the launcher with a delayed network, and nothing left behind
(namespaces, TAP devices, the forwarder) after success, an exception while building, or the
builder killed with SIGKILL. Needs root."""
import io
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest
from test_emulated import ROOT, assert_nothing_left, setup_run, where_command

from cluster.launchers import launch as launcher
from cluster.net import delay_line, link_probe, links, netns
from cluster.net.netns_exec import run_in

pytestmark = [pytest.mark.root, pytest.mark.serial, pytest.mark.timeout(90),
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]


def forwarders(key: str):
    """Delay-line processes serving the run `key`."""
    switch = netns.ns_name(key, "sw")
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = p.info["cmdline"] or []
        if "cluster.net.delay_line" in cmdline and switch in cmdline:
            found.append(p)
    return found


def tap_devices_outside_runs():
    """TAP devices in the machine's own namespace (a delayed network creates none there)."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return [link.get_attr("IFLA_IFNAME") for link in ipr.get_links() if link.get(("linkinfo", "kind")) == "tun"]


def kind_of_eth0(host) -> str:
    from pyroute2 import NetNS

    with NetNS(host.netns, flags=0) as ns:
        (link,) = ns.get_links(ns.link_lookup(ifname=links.HOST_IFACE)[0])
        return link.get(("linkinfo", "kind"))


def assert_run_gone(key: str):
    assert [n for n in netns.list_namespaces() if netns.key_of(n) == key] == []
    assert netns.owner(key) is None
    assert forwarders(key) == []
    assert tap_devices_outside_runs() == []


class Network:
    """A claimed, built network of the test's own, removed at the end whatever happened."""

    def __init__(self, n_hosts=2, rate_bps=0, delay_ms=0.0, jitter_ms=0.0):
        self.key = netns.run_key("test-delay")
        netns.claim(self.key, "test-delay")
        self.net = links.plan_network(self.key, n_hosts, rate_bps, delay_ms, jitter_ms)

    def __enter__(self):
        try:
            self.running = links.build(self.net)
        except BaseException:
            netns.remove_run(self.key)
            raise
        return self.net

    def __exit__(self, *exc):
        self.running.stop()
        assert netns.remove_run(self.key) == []
        assert_run_gone(self.key)


def test_a_50_ms_link_shows_a_100_ms_round_trip_between_two_hosts():
    with Network(delay_ms=50.0) as net:
        measured = link_probe.probe(net)
    print({k: measured[k] for k in ("rtt_ms", "alpha_ms", "beta_bps", "throughput_bps")})
    assert measured["rtt_ms"] == pytest.approx(100.0, abs=10.0)
    assert measured["alpha_ms"] == pytest.approx(50.0, abs=5.0)
    assert link_probe.check(measured, 50.0) is None


def test_a_100_mbit_20_ms_link_carries_85_mbit_of_tcp_each_way():
    """Through the TAP pairs, tbf still shapes both directions: one stream gets the link's
    goodput and no more."""
    rate = 10 ** 8
    with Network(rate_bps=rate, delay_ms=20.0) as net:
        assert kind_of_eth0(net.hosts[1]) == "tun"
        measured = link_probe.probe(net)
    print({k: measured[k] for k in ("rtt_ms", "alpha_ms", "beta_bps", "throughput_bps", "window_limited")})
    for bps in measured["throughput_bps"].values():
        assert 85e6 <= bps <= links.expected_goodput(rate) * 1.05
    assert measured["beta_bps"] == pytest.approx(links.expected_goodput(rate), rel=0.15)
    assert measured["rtt_ms"] == pytest.approx(40.0, abs=4.0)
    assert link_probe.check(measured, 20.0, rate, net.shaped) is None


def test_an_unshaped_undelayed_network_is_veth_and_probes_clean():
    with Network() as net:
        assert not net.delayed and kind_of_eth0(net.hosts[0]) == "veth"
        measured = link_probe.probe(net)
        default = run_in(net.hosts[0].netns, lambda: open("/proc/sys/net/ipv4/tcp_congestion_control",
                                                          encoding="utf-8").read().strip())
    assert measured["rtt_ms"] < 1.0 and min(measured["throughput_bps"].values()) > 1e9
    assert link_probe.check(measured, 0.0) is None
    # the algorithm the probe's stream used is the hosts' namespace default, recorded as such
    assert measured["tcp_congestion_control"] == default != ""


def test_jitter_varies_the_delay_but_never_reorders_packets():
    """UDP datagrams every 2 ms over a 10 ± 8 ms link: each one-way delay (the monotonic clock is
    the machine's, in every namespace) lies in 2..18 ms (+ forwarding), they spread over most of
    that range, and they arrive in the order sent."""
    count, gap_s = 150, 0.002
    with Network(delay_ms=10.0, jitter_ms=8.0) as net:
        h0, h1 = net.hosts
        receiver = run_in(h1.netns, lambda: _udp_bound(h1.address))
        sender = run_in(h0.netns, lambda: _udp_bound(h0.address))
        receiver.settimeout(2.0)
        sender.sendto(b"-1 0.0", receiver.getsockname())  # neighbour discovery first, unmeasured
        receiver.recv(64)
        arrived = []

        def receive():
            try:
                while len(arrived) < count:
                    seq, sent = receiver.recv(64).split()
                    arrived.append((int(seq), (time.monotonic() - float(sent)) * 1000))
            except socket.timeout:
                pass

        thread = threading.Thread(target=receive)
        thread.start()
        for seq in range(count):
            sender.sendto(f"{seq} {time.monotonic()!r}".encode(), receiver.getsockname())
            time.sleep(gap_s)
        thread.join()
        sender.close()
        receiver.close()
    seqs = [s for s, _ in arrived]
    delays = [d for _, d in arrived]
    print(f"{len(arrived)} of {count}; one-way delay {min(delays):.2f}..{max(delays):.2f} ms")
    assert seqs == list(range(count))
    assert min(delays) >= 2.0 - 0.2 and max(delays) <= 18.0 + 3.0
    assert max(delays) - min(delays) > 8.0


def _udp_bound(address):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((address, 0))
    return s


@pytest.mark.parametrize("failure", ["shaping", "forwarder start"])
def test_an_exception_while_building_leaves_nothing(monkeypatch, failure):
    """After the TAP devices (and their fds) exist: tbf fails, or the forwarder does not report
    ready in time (it is killed). build() raises, holds no fd, and removing the run's namespaces
    leaves nothing."""
    if failure == "shaping":
        def shape(ipr, index, net):
            raise RuntimeError("tbf refused")

        monkeypatch.setattr(links, "shape", shape)
    else:
        monkeypatch.setattr(delay_line, "START_TIMEOUT_S", 0.0)
    fds_before = set(os.listdir("/proc/self/fd"))
    network = Network(rate_bps=10 ** 8, delay_ms=5.0)
    with pytest.raises(RuntimeError, match="tbf refused|did not start"):
        network.__enter__()
    assert set(os.listdir("/proc/self/fd")) == fds_before
    assert_run_gone(network.key)


BUILDER = textwrap.dedent("""
    import os, sys, time

    sys.path.insert(0, sys.argv[1])
    from cluster.net import links, netns

    key = netns.run_key("killed-builder")
    netns.claim(key, "killed-builder")
    running = links.build(links.plan_network(key, 2, 10 ** 8, 5.0))
    print(key, running.delay_line.pid, flush=True)
    time.sleep(60)
""")


def test_a_builder_killed_with_sigkill_leaves_nothing_after_cleanup():
    """The forwarder dies with the process that built the network (PR_SET_PDEATHSIG); the
    namespaces, and the TAP devices in them, go with `python -m cluster.net.netns --cleanup`."""
    builder = subprocess.Popen([sys.executable, "-c", BUILDER, ROOT], stdout=subprocess.PIPE, text=True)
    try:
        key, pid = builder.stdout.readline().split()
        assert [p.pid for p in forwarders(key)] == [int(pid)]
        assert len([n for n in netns.list_namespaces() if netns.key_of(n) == key]) == 3
    finally:
        builder.kill()
        builder.wait()
    gone, alive = psutil.wait_procs([psutil.Process(int(pid))], timeout=5)
    assert alive == [] and forwarders(key) == []
    cleanup = subprocess.run([sys.executable, "-m", "cluster.net.netns", "--cleanup"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert cleanup.returncode == 0 and f"stale run {key}" in cleanup.stdout
    assert_run_gone(key)


def test_removing_the_namespaces_kills_the_forwarder():
    """The forwarder lives in the switch namespace: netns.remove_run finds and ends it even when
    nobody calls stop()."""
    network = Network(delay_ms=5.0)
    net = network.__enter__()
    pid = network.running.delay_line.pid
    switch_inode = os.stat(os.path.join(netns.NETNS_DIR, net.switch)).st_ino
    assert os.stat(f"/proc/{pid}/ns/net").st_ino == switch_inode
    assert netns.remove_run(network.key) == []
    assert network.running.delay_line.popen.wait(5) is not None
    assert_run_gone(network.key)


def test_the_emulated_launcher_runs_tasks_over_a_delayed_network_and_leaves_nothing(tmp_path):
    plan, run, config = setup_run(tmp_path, link_latency=5.0)
    result = launcher.run(plan, run, config, command_for=where_command, out=io.StringIO())
    assert result.ok, result.reason
    network = run.read_json("network.json")
    assert network["links"] == "tap pairs and a user-space delay line" and network["delay_ms"] == 5.0
    assert network["measured_tx_bps"] == pytest.approx(links.expected_goodput(10 ** 8), rel=0.10)
    assert_nothing_left(run)
    assert_run_gone(network["key"])


def test_the_support_check_probes_tap_devices_not_netem(monkeypatch):
    assert netns.probe().get("tap") == "ok"
    assert netns.support_error(want_delay=True) is None
    assert netns.support_error(want_delay=True, delay_ms=0.5).startswith("a link delay of 0.5 ms")
    monkeypatch.setattr(netns, "probe", lambda: {"tbf": "ok", "tap": "/dev/net/tun is missing"})
    assert netns.support_error(want_delay=False) is None
    assert netns.support_error(want_delay=True) == (
        "--link_latency needs TAP devices for its user-space delay line: /dev/net/tun is missing")


def test_the_forwarder_exits_when_a_device_is_deleted():
    """A deleted TAP device detaches its fd (EBADFD): the forwarder stops instead of spinning."""
    from pyroute2 import NetNS

    with Network(delay_ms=5.0) as net:
        (forwarder,) = forwarders(net.key)
        with NetNS(net.hosts[1].netns, flags=0) as ns:
            ns.link("del", index=ns.link_lookup(ifname=links.HOST_IFACE)[0])
        forwarder.wait(5)
        assert not forwarder.is_running()
