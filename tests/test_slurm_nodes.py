"""A private Slurm of several nodes, each an emulated host behind a shaped link
(cluster/slurm/node_cluster.py): real slurmctld, one slurmd per node in its own network and UTS
namespaces, real links. Without TensorFlow: jobs land on distinct nodes, node names resolve inside
the nodes only, a step on h0 reaches h1 at the shaped rate, a killed slurmd takes its node down,
and nothing is left after stop() (with a job running) or after the owner is killed outright.
tfbench's runs on such nodes are in test_slurm_nodes_runs.py. Skipped without root."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import psutil
import pytest

from conftest import ROOT

RATE = 100_000_000
PROBE_PORT = 5201
PROBE = r"""
import os, socket, sys, time
address, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
if os.environ["SLURM_PROCID"] == "1":
    server = socket.create_server((address, port))
    server.settimeout(30)
    conn, peer = server.accept()
    start = time.monotonic()
    counted, first, last = 0, None, None
    while True:
        n = len(conn.recv(1 << 20))
        now = time.monotonic()
        if n == 0 or now - start > seconds + 0.2:
            break
        if now - start >= 0.2:
            first = first or now
            counted, last = counted + n, now
    print(f"host={socket.gethostname()} peer={peer[0]} bits_per_s={counted * 8 / (last - first):.0f}", flush=True)
else:
    end = time.monotonic() + 20
    while True:
        try:
            client = socket.create_connection((address, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)
    block, end = b"\0" * (256 * 1024), time.monotonic() + seconds + 1
    try:
        while time.monotonic() < end:
            client.sendall(block)
    except OSError:
        pass
    print(f"host={socket.gethostname()}", flush=True)
"""


pytestmark = [pytest.mark.root, pytest.mark.timeout(90),
              pytest.mark.skipif(os.geteuid() != 0, reason="Slurm's daemons and network namespaces need root")]


def _install():
    """Installs Slurm and munge when missing (tools/scripts/install_slurm.sh); as root a failure fails the test."""
    from cluster.slurm import local_cluster

    reason = local_cluster.unavailable_reason()
    assert not reason, reason


def _start(num_nodes, cpus_per_node, link_rate_bps=0, **timeouts):
    from cluster.slurm.node_cluster import NodeSlurm

    _install()
    directory = tempfile.mkdtemp(prefix="tfbench-slurm-nodes-")  # munged must reach it: not pytest's tmp
    cluster = NodeSlurm(directory, **timeouts)
    cluster.start(num_nodes, cpus_per_node, link_rate_bps)
    return cluster


def _kill_node(cluster, name, everything=False):
    """SIGKILL the node's slurmd (its steps go on running, as they do when a real slurmd dies);
    with everything=True every process of the node, as if the host were lost. Returns the pids."""
    from cluster.net import netns

    slurmd = cluster.daemons[f"slurmd-{name}"]
    procs = netns.processes_in(cluster.node(name).netns) if everything else [psutil.Process(slurmd.pid)]
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=5)
    slurmd.poll()
    return [p.pid for p in procs]


def _finish(cluster):
    left = cluster.stop()
    if not left:
        shutil.rmtree(cluster.dir, ignore_errors=True)
    assert not left, f"left after stop(): {left} (logs in {cluster.dir}/log)"


@pytest.fixture(scope="module")
def cluster():
    cluster = _start(2, cpus_per_node=2, link_rate_bps=RATE)
    try:
        yield cluster
    finally:
        _finish(cluster)


def srun(cluster, *args, timeout=60):
    return subprocess.run(["srun", *args], env=cluster.env, capture_output=True, text=True, timeout=timeout)


def wait_for_empty_queue(cluster, timeout=30):
    end = time.monotonic() + timeout
    while cluster.jobs():
        assert time.monotonic() < end, f"jobs still queued: {cluster.jobs()}"
        time.sleep(0.2)


def test_two_tasks_run_on_two_nodes_named_as_in_slurm(cluster, tmp_path):
    proc = srun(cluster, "-N2", "-n2", "--label", "bash", "-c", "echo $(hostname) $SLURMD_NODENAME")
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split("\n")[:2]) == ["0: h0 h0", "1: h1 h1"]
    h0, h1 = cluster.nodes  # inside the nodes the names resolve (their /etc/hosts), outside they do not
    proc = srun(cluster, "-N1", "-w", "h1", "getent", "hosts", "h0", "h1")
    assert proc.returncode == 0 and proc.stdout.split() == [h0.address, "h0", h1.address, "h1"], proc.stderr
    assert subprocess.run(["getent", "hosts", "h1"], capture_output=True).returncode != 0
    assert sorted(cluster.node_states()) == ["h0", "h1"]
    out = tmp_path / "batch.out"  # a batch script runs on the first node and starts steps from there
    proc = subprocess.run(["sbatch", "-N2", "-n2", f"--output={out}", "--wrap",
                           "echo batch=$(hostname); srun --label hostname -I"],
                          env=cluster.env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    wait_for_empty_queue(cluster)  # sbatch --wait polls every few seconds
    lines = out.read_text().split("\n")
    assert lines[0] == "batch=h0"
    assert sorted(line.strip() for line in lines[1:3]) == [f"0: {h0.address}", f"1: {h1.address}"]


def test_step_on_h0_reaches_h1_through_the_shaped_links(cluster, tmp_path):
    from cluster.net import links

    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    h0, h1 = cluster.nodes
    proc = srun(cluster, "-N2", "-n2", sys.executable, str(probe), h1.address, str(PROBE_PORT), "1.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = re.search(r"host=(\S+) peer=(\S+) bits_per_s=(\d+)", proc.stdout)
    assert found, proc.stdout
    assert found.group(1) == "h1" and found.group(2) == h0.address
    assert "host=h0" in proc.stdout
    assert int(found.group(3)) == pytest.approx(links.expected_goodput(RATE), rel=0.1)


def test_stop_cancels_running_jobs_and_leaves_nothing():
    """A cluster of its own, stopped while a job's steps run on both nodes."""
    from cluster.net import netns, root_link

    cluster = _start(2, cpus_per_node=1)
    try:
        inside, daemons = _stop_with_a_job_running(cluster)
        assert not [p for p in inside + daemons if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert not [n for n in netns.list_namespaces() if netns.key_of(n) == cluster.key]
        assert netns.owner(cluster.key) is None and not root_link.present(cluster.network)
    finally:
        _finish(cluster)  # stops again: nothing to do after a clean stop


def _stop_with_a_job_running(cluster):
    """Submits a 2-node job, waits for its steps, stops the cluster; (job processes, daemons)."""
    from cluster.net import netns

    proc = subprocess.run(["sbatch", "-N2", "-n2", "--output=/dev/null", "--wrap", "srun sleep 300"],
                          env=cluster.env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    end = time.monotonic() + 20
    while not any(p.name() == "sleep" for n in cluster.nodes for p in netns.processes_in(n.netns)):
        assert time.monotonic() < end, "the job's steps never started"
        time.sleep(0.2)
    inside = [p for n in cluster.nodes for p in netns.processes_in(n.netns)]
    assert {"slurmd", "slurmstepd", "sleep"} <= {p.name() for p in inside}
    daemons = [psutil.Process(p.pid) for p in cluster.daemons.values()]
    assert cluster.stop() == []
    return inside, daemons


@pytest.mark.parametrize("everything", [False, True], ids=["slurmd", "whole_node"])
def test_killed_node_goes_down_and_its_job_ends_naming_it(everything, tmp_path):
    """slurmctld pings every SlurmdTimeout/3; a failed ping marks the node not responding ('*'),
    and once it has not answered for SlurmdTimeout it is set DOWN and the job on it ends
    (NODE_FAIL, not requeued). Whether only slurmd died or the node's steps with it makes no
    difference to what Slurm says."""
    from cluster.net import netns

    cluster = _start(2, cpus_per_node=1, slurmd_timeout=3, message_timeout=2)
    try:
        out = tmp_path / "job.out"
        proc = subprocess.run(["sbatch", "--parsable", "-N2", "-n2", f"--output={out}", "--wrap", "srun sleep 100"],
                              env=cluster.env, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        job = proc.stdout.strip()
        end = time.monotonic() + 20
        while not any(p.name() == "sleep" for p in netns.processes_in(cluster.node("h1").netns)):
            assert time.monotonic() < end, "the job's step never started on h1"
            time.sleep(0.2)
        assert cluster.node_states()["h1"][0] == "allocated"
        names = {p.pid: p.name() for p in netns.processes_in(cluster.node("h1").netns)}
        killed_at = time.monotonic()
        killed = _kill_node(cluster, "h1", everything=everything)
        expected = {"slurmd", "slurmstepd", "sleep"} if everything else {"slurmd"}
        assert {names[pid] for pid in killed} == expected
        assert cluster.daemons["slurmd-h1"].pid in killed
        wait_for_empty_queue(cluster)
        noticed_s = time.monotonic() - killed_at
        assert noticed_s < 20, f"Slurm took {noticed_s:.1f} s to end the job"
        show = subprocess.run(["scontrol", "show", "job", job], env=cluster.env, capture_output=True, text=True).stdout
        assert "JobState=NODE_FAIL Reason=NodeDown" in show and "Restarts=0" in show, show
        assert "srun: error: Node failure on h1" in out.read_text()
        assert cluster.node_states()["h1"] == ("down*", "Not responding")
        assert cluster.node_states()["h0"][0] == "idle"
    finally:
        _finish(cluster)


OWNER = r"""
import json, subprocess, sys, time
from cluster.net import root_link
from cluster.slurm.node_cluster import NodeSlurm
cluster = NodeSlurm(sys.argv[1])
cluster.start(2, cpus_per_node=1, link_rate_bps=10_000_000)
subprocess.run(["sbatch", "-N2", "-n2", "--output=/dev/null", "--wrap", "srun sleep 300"], env=cluster.env, check=True,
               capture_output=True)
print(json.dumps({"key": cluster.key, "link": root_link.ifname(cluster.network), "netns": [n.netns for n in cluster.nodes],
                  "pids": {name: p.pid for name, p in cluster.daemons.items()}}), flush=True)
time.sleep(600)
"""


def test_owner_killed_outright_leaves_nothing_after_netns_cleanup():
    """munged, slurmctld and slurmd die with their owner; the job's processes stay in the namespaces
    until `python -m cluster.net.netns --cleanup`, which kills them and removes the namespaces and link."""
    from pyroute2 import IPRoute

    from cluster.net import netns

    _install()
    directory = tempfile.mkdtemp(prefix="tfbench-slurm-nodes-")
    owner = subprocess.Popen([sys.executable, "-c", OWNER, directory], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    facts = {}
    try:
        facts = json.loads(owner.stdout.readline() or "{}")
        assert facts, f"the owner did not start its cluster (logs in {directory}/log)"
        end = time.monotonic() + 20
        while sum(p.name() == "sleep" for ns in facts["netns"] for p in netns.processes_in(ns)) < 2:
            assert time.monotonic() < end, "the job's steps never started"
            time.sleep(0.2)
        inside = [p for ns in facts["netns"] for p in netns.processes_in(ns)]
        daemons = {name: psutil.Process(pid) for name, pid in facts["pids"].items()}
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        gone, alive = psutil.wait_procs(list(daemons.values()), timeout=10)
        assert not alive, f"daemons outlived their owner: {[p.name() for p in alive]}"
        assert facts["key"] in netns.stale_keys()
        assert any(p.is_running() and p.name() == "slurmstepd" for p in inside)  # what only the clean-up ends
        proc = subprocess.run([sys.executable, "-m", "cluster.net.netns", "--cleanup"], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0 and f"stale run {facts['key']}" in proc.stdout, proc.stdout + proc.stderr
        _, alive = psutil.wait_procs(inside, timeout=5)
        assert not alive, f"left in the namespaces: {[p.name() for p in alive]}"
        assert not [n for n in netns.list_namespaces() if netns.key_of(n) == facts["key"]]
        assert netns.owner(facts["key"]) is None
        end = time.monotonic() + 10  # the link goes with the switch namespace, asynchronously
        with IPRoute() as ipr:
            while ipr.link_lookup(ifname=facts["link"]) and time.monotonic() < end:
                time.sleep(0.2)
            assert not ipr.link_lookup(ifname=facts["link"])
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if facts:
            netns.remove_run(facts["key"])  # after a failure above; a no-op once the clean-up has run
    shutil.rmtree(directory)  # kept, with its logs, when the test failed
