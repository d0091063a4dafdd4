"""Emulated hosts with real network namespaces, driven by tests/fake_task.py (no TensorFlow):
shaped link rates, tasks inside their hosts, servers unreachable from outside the run, and
nothing left behind after success, failure, a task killed with SIGKILL, or the launcher
killed with SIGKILL. Needs root (namespaces); every test also checks no namespace of its run
is left."""
import io
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from cluster.launchers import launch as launcher
from cluster.net import link_probe, links, netns, netns_exec
from cluster.plan.topology import make_plan
from conftest import processes_mentioning
from tfbench.config import RunConfig
from tfbench.loop import progress
from tfbench.results import records, rundir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_TASK = os.path.join(ROOT, "tests", "fake_task.py")
pytestmark = [pytest.mark.root, pytest.mark.timeout(90),
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

# Records where the task runs (network namespace, hostname), then becomes the fake task.
WHERE = textwrap.dedent("""
    import json, os, socket, sys

    with open(os.path.join(os.environ["TFBENCH_RUN_DIR"], "tasks", os.environ["TFBENCH_TASK"] + ".where"), "w") as f:
        json.dump({"netns": os.readlink("/proc/self/ns/net"), "hostname": socket.gethostname()}, f)
    os.execv(sys.executable, [sys.executable, sys.argv[1]])
""")


def where_command(spec):
    return [sys.executable, "-c", WHERE, FAKE_TASK]


def setup_run(tmp_path, strategy="multi_worker_mirrored", envs=None, name="run", **config):
    config = RunConfig(**{"strategy": strategy, "num_workers": 2, "logdir": str(tmp_path), "stall_timeout": 20.0,
                          "network": "emulated", "link_bandwidth": "100mbit", "monitor": False, **config})
    plan = make_plan(config)
    if envs:
        import dataclasses

        plan = dataclasses.replace(plan, tasks=tuple(dataclasses.replace(t, env=envs.get(t.name, {}))
                                                     for t in plan.tasks))
    run = rundir.create(str(tmp_path), name)
    run.write_json("plan.json", plan.to_dict())
    run.write_json("config.json", config.to_dict())
    return plan, run, config


def run_namespaces(run) -> list:
    """Namespaces owned by this run (by the owner files' run_dir)."""
    return [n for n in netns.list_namespaces() if (netns.owner(netns.key_of(n)) or {}).get("run_dir") == run.path]


def assert_nothing_left(run):
    assert processes_mentioning(run.path) == []
    assert run_namespaces(run) == []
    key = run.read_json("network.json")["key"]
    assert [n for n in netns.list_namespaces() if netns.key_of(n) == key] == []
    assert netns.owner(key) is None


@pytest.mark.serial
@pytest.mark.parametrize("rate", [50 * 10 ** 6, 200 * 10 ** 6])
def test_shaped_rate_between_two_hosts_is_the_configured_rate(rate):
    """One TCP stream h0 -> h1 crosses two shaped links (h0's tx, h1's rx): its goodput is the
    configured rate less TCP/IP headers (1448 of 1514 bytes a frame), within 10%."""
    key = netns.run_key("test-rate")
    netns.claim(key, "test-rate")
    net = links.plan_network(key, 2, rate)
    try:
        links.build(net)
        h0, h1 = net.hosts
        measured = link_probe.stream((h0.netns, h0.address), (h1.netns, h1.address), seconds=1.5)["bps"]
        reverse = link_probe.stream((h1.netns, h1.address), (h0.netns, h0.address), seconds=1.0)["bps"]
    finally:
        assert netns.remove_run(key) == []
    print(f"configured {rate / 1e6:g} Mbit/s: h0->h1 {measured / 1e6:.1f}, h1->h0 {reverse / 1e6:.1f} Mbit/s")
    assert measured == pytest.approx(links.expected_goodput(rate), rel=0.10)
    assert reverse == pytest.approx(links.expected_goodput(rate), rel=0.10)
    assert [n for n in netns.list_namespaces() if netns.key_of(n) == key] == []


def fan_out_s(sender, receivers, nbytes: int) -> float:
    """Seconds until each of `receivers` has `nbytes` that `sender` sent to all of them at once over
    one TCP connection each (a ps answering every worker's pull)."""
    def listen(host):
        def make():
            s = socket.socket()
            s.bind((host.address, 0))
            s.listen(1)
            return s
        return netns_exec.run_in(host.netns, make)

    def connect(address):
        return netns_exec.run_in(sender.netns, lambda: socket.create_connection(address, timeout=30))

    servers = [listen(h) for h in receivers]
    outgoing = [connect(s.getsockname()) for s in servers]
    incoming = [s.accept()[0] for s in servers]
    done = [0.0] * len(receivers)
    start = time.monotonic()

    def receive(i):
        got = 0
        while got < nbytes:
            got += len(incoming[i].recv(1 << 20))
        done[i] = time.monotonic() - start

    threads = ([threading.Thread(target=outgoing[i].sendall, args=(b"x" * nbytes,)) for i in range(len(receivers))]
               + [threading.Thread(target=receive, args=(i,)) for i in range(len(receivers))])
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for s in servers + outgoing + incoming:
        s.close()
    return max(done)


@pytest.mark.serial
def test_sixteen_flows_into_one_slow_link_take_their_wire_time():
    """Sixteen hosts pulling 100 kB each from one host over 5 Mbit/s links (a ps and its workers):
    the sender's queue holds a few frames of every flow, so TCP recovers losses by fast
    retransmit instead of waiting out retransmission timeouts (incast), and the median of three
    rounds ends within 15% of 16 x 100 kB at the link's goodput (with a 64 KiB queue: 38% over)."""
    rate, nbytes, n = 5 * 10 ** 6, 100_000, 16
    key = netns.run_key("test-incast")
    netns.claim(key, "test-incast")
    net = links.plan_network(key, n + 1, rate)
    try:
        links.build(net)
        rounds = [fan_out_s(net.hosts[n], net.hosts[:n], nbytes) for _ in range(3)]
    finally:
        assert netns.remove_run(key) == []
    wire = n * nbytes * 8 / links.expected_goodput(rate)
    print(f"16 x {nbytes} bytes at 5 Mbit/s: rounds {[round(r, 2) for r in rounds]} s, wire time {wire:.2f} s")
    assert sorted(rounds)[1] <= 1.15 * wire


def test_success_runs_each_task_in_its_host_and_leaves_nothing(tmp_path):
    plan, run, config = setup_run(tmp_path, strategy="parameter_server", ps_placement="separate",
                                  envs={n: {"FAKE_MODE": "serve"} for n in ("worker_0", "worker_1", "ps_0")})
    result = launcher.run(plan, run, config, command_for=where_command, out=io.StringIO())
    assert result.ok, result.reason
    network = run.read_json("network.json")
    addresses = [h["address"] for h in network["hosts"]]
    final = run.read_json("plan.json")
    hosts = {t["role"] + "_" + str(t["index"]): t["host"] for t in final["tasks"]}
    assert hosts == {"chief_0": addresses[0], "worker_0": addresses[0], "worker_1": addresses[1], "ps_0": addresses[2]}
    assert final["cluster_spec"]["ps"] == [f"{addresses[2]}:{plan.task('ps_0').port}"]
    where = {name: json.load(open(os.path.join(run.tasks_dir, name + ".where"))) for name in hosts}
    assert {w["hostname"] for w in where.values()} == set(addresses)
    assert where["chief_0"]["netns"] == where["worker_0"]["netns"] != where["ps_0"]["netns"]
    assert len({w["netns"] for w in where.values()}) == 3
    assert os.readlink("/proc/self/ns/net") not in {w["netns"] for w in where.values()}
    record = result.cluster_record
    assert record["network"] == "emulated" and record["link"]["configured_bps"] == 10 ** 8
    assert record["link"]["expected_goodput_bps"] == round(links.expected_goodput(10 ** 8))
    assert record["link"]["measured_tx_bps"] == pytest.approx(links.expected_goodput(10 ** 8), rel=0.10)
    assert_nothing_left(run)


def test_servers_are_reachable_only_from_the_runs_namespaces(tmp_path):
    """A task's server answers from another host of the run, not from a namespace outside it;
    the machine's own namespace holds no address of the run's subnet (probing it from there
    would leave the machine through its default route, so it is only inspected)."""
    import psutil
    from pyroute2 import NetNS
    from pyroute2 import netns as pr_netns

    plan, run, config = setup_run(tmp_path, envs={"worker_0": {"FAKE_MODE": "serve"}, "worker_1": {"FAKE_MODE": "serve"}})
    outsider_key = netns.run_key("outsider")
    netns.claim(outsider_key, "outsider")
    outsider = netns.ns_name(outsider_key, "x")
    pr_netns.create(outsider)
    with NetNS(outsider, flags=0) as ns:
        ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
    seen = {}

    def probe_when_ready():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if all(progress.reached(progress.read_progress(run.path, n), "ready") for n in ("worker_0", "worker_1")):
                break
            time.sleep(0.1)
        net = run.read_json("network.json")
        host, port = run.read_json("plan.json")["cluster_spec"]["worker"][0].rsplit(":", 1)
        seen["from_h1"] = netns_exec.run_in(net["hosts"][1]["netns"], lambda: _connects((host, int(port))))
        seen["from_outside"] = netns_exec.run_in(outsider, lambda: _connects((host, int(port))))
        subnet = host.rsplit(".", 1)[0] + "."
        seen["machine_has_subnet"] = any(a.address.startswith(subnet) for addrs in psutil.net_if_addrs().values()
                                         for a in addrs)

    try:
        thread = threading.Thread(target=probe_when_ready)
        thread.start()
        result = launcher.run(plan, run, config.replace(deadline=8.0), command_for=where_command, out=io.StringIO())
        thread.join()
    finally:
        assert netns.remove_run(outsider_key) == []
    assert not result.ok and result.reason == "deadline of 8 s reached"
    assert seen == {"from_h1": True, "from_outside": False, "machine_has_subnet": False}
    assert_nothing_left(run)


def _connects(address) -> bool:
    try:
        with socket.create_connection(address, timeout=1.0):
            return True
    except OSError:
        return False


def test_task_killed_with_sigkill_leaves_nothing(tmp_path):
    plan, run, config = setup_run(tmp_path, envs={"worker_1": {"FAKE_MODE": "crash"},
                                                  "worker_0": {"FAKE_STEPS": "1000"}})
    result = launcher.run(plan, run, config, command_for=where_command, out=io.StringIO())
    assert not result.ok and result.reason == "worker_1 exited with code -9 (SIGKILL)"
    assert records.read(run.results)[-1]["network"] == "emulated"
    assert_nothing_left(run)


DRIVER = textwrap.dedent("""
    import sys

    sys.path.insert(0, sys.argv[2])
    from cluster.launchers import launch as launcher
    from cluster.plan.spec import ClusterPlan
    from tfbench.config import RunConfig
    from tfbench.results.rundir import RunDir

    run = RunDir(sys.argv[1])
    launcher.run(ClusterPlan.from_dict(run.read_json("plan.json")), run,
                 RunConfig.from_dict(run.read_json("config.json")),
                 command_for=lambda spec: [sys.executable, sys.argv[3]])
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_launcher_interrupted_or_killed_leaves_nothing(tmp_path, sig):
    """Ctrl-C: the launcher removes its namespaces itself. SIGKILL: the tasks die with their
    parent and the next start removes the dead run's namespaces."""
    plan, run, config = setup_run(tmp_path, envs={"worker_0": {"FAKE_MODE": "serve"}, "worker_1": {"FAKE_MODE": "serve"}})
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, run.path, ROOT, FAKE_TASK],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not all(progress.reached(progress.read_progress(run.path, t.name), "ready") for t in plan.tasks):
            assert time.monotonic() < deadline and driver.poll() is None, "tasks never got ready"
            time.sleep(0.1)
        assert len(run_namespaces(run)) == 3
        key = run.read_json("network.json")["key"]
        driver.send_signal(sig)
        driver.wait(timeout=20)
    finally:
        driver.kill()
    if sig == signal.SIGKILL:
        assert key in netns.stale_keys()
        plan2, run2, config2 = setup_run(tmp_path, name="next", num_workers=1)
        result = launcher.run(plan2, run2, config2, command_for=where_command, out=io.StringIO())
        assert result.ok, result.reason
        assert_nothing_left(run2)
    assert_nothing_left(run)


@pytest.mark.serial  # its namespace is stale by design: a clean-up by any test beside it would take it first
def test_cleanup_command_removes_namespaces_of_dead_owners(tmp_path):
    from pyroute2 import netns as pr_netns

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    key = netns.run_key("dead-run")
    os.makedirs(netns.OWNER_DIR, exist_ok=True)
    with open(os.path.join(netns.OWNER_DIR, f"{key}.json"), "w") as f:
        json.dump({"pid": dead.pid, "create_time": 0.0, "run_dir": "dead-run"}, f)
    pr_netns.create(netns.ns_name(key, "h0"))
    listing = subprocess.run([sys.executable, "-m", "cluster.net.netns", "--list"], cwd=ROOT, capture_output=True,
                             text=True, timeout=60).stdout
    assert f"{netns.ns_name(key, 'h0')}\tstale" in listing
    cleanup = subprocess.run([sys.executable, "-m", "cluster.net.netns", "--cleanup"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert cleanup.returncode == 0 and f"stale run {key}" in cleanup.stdout
    assert [n for n in netns.list_namespaces() if netns.key_of(n) == key] == [] and netns.owner(key) is None


def test_two_runs_at_once_do_not_clash(tmp_path):
    runs = [setup_run(tmp_path, name=f"run{i}") for i in range(2)]
    results = {}

    def go(i):
        plan, run, config = runs[i]
        results[i] = launcher.run(plan, run, config, command_for=where_command, out=io.StringIO())

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert all(results[i].ok for i in range(2)), {i: r.reason for i, r in results.items()}
    keys = {runs[i][1].read_json("network.json")["key"] for i in range(2)}
    assert len(keys) == 2
    for _, run, _ in runs:
        assert_nothing_left(run)
