"""A private Slurm of several nodes, each an emulated host behind a shaped link
(cluster/slurm/node_cluster.py): real slurmctld, one slurmd per node in its own network and UTS
namespaces, real links. Without TensorFlow: jobs land on distinct nodes, node names resolve inside
the nodes only, a step on h0 reaches h1 at the shaped rate, a killed slurmd takes its node down,
and nothing is left after stop() or after the owner is killed outright. With TensorFlow
(`--launcher=slurm --network=emulated`, marked slow): one run per strategy across nodes, asserted
from the records (every task's Slurm node and address, shaped links, per-node monitors and link
counters), a task killed by --fault, a node lost mid-run, and nothing left after any of them.
Skipped without root."""
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


pytestmark = [pytest.mark.timeout(90),
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
    from cluster import links

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


def test_zz_stop_cancels_jobs_and_leaves_nothing(cluster):
    from cluster import netns, root_link

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
    assert not [p for p in inside + daemons if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not [n for n in netns.list_namespaces() if netns.key_of(n) == cluster.key]
    assert netns.owner(cluster.key) is None and not root_link.present(cluster.network)


@pytest.mark.parametrize("everything", [False, True], ids=["slurmd", "whole_node"])
def test_killed_node_goes_down_and_its_job_ends_naming_it(everything, tmp_path):
    """slurmctld pings every SlurmdTimeout/3; a failed ping marks the node not responding ('*'),
    and once it has not answered for SlurmdTimeout it is set DOWN and the job on it ends
    (NODE_FAIL, not requeued). Whether only slurmd died or the node's steps with it makes no
    difference to what Slurm says."""
    from cluster import netns

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
        killed = cluster.kill_node("h1", everything=everything)
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
from cluster import root_link
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
    until `python -m cluster.netns --cleanup`, which kills them and removes the namespaces and link."""
    from pyroute2 import IPRoute

    from cluster import netns

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
        proc = subprocess.run([sys.executable, "-m", "cluster.netns", "--cleanup"], cwd=ROOT, capture_output=True,
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


# ---- tfbench runs on a private Slurm of emulated nodes (--launcher=slurm --network=emulated) ----------------------
# Each run starts its own cluster (the launcher owns it), sized by the run's layout; tiny model, 16 px, few steps.

EMULATED = ["--launcher=slurm", "--network=emulated", "--link_bandwidth=100mbit", "--stall_timeout=120"]


def run_on_nodes(logdir, run_id, *args, ok=True):
    from conftest import TINY, run_cli

    proc = run_cli(*TINY, f"--logdir={logdir}", f"--run_id={run_id}", *EMULATED, *args, timeout=200)
    assert (proc.returncode == 0) == ok, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "cleanup failed" not in proc.stdout + proc.stderr
    return proc.stdout + proc.stderr, os.path.join(logdir, run_id)


def assert_nothing_left(run):
    """No namespace, owner file, login link or daemon of the run's cluster; its job left the queue."""
    from pyroute2 import IPRoute

    from cluster import netns
    from tfrun import cluster_record

    with open(os.path.join(run, "network.json")) as f:
        key = json.load(f)["key"]
    cluster = cluster_record(run)
    assert not [n for n in netns.list_namespaces() if netns.key_of(n) == key] and netns.owner(key) is None
    with IPRoute() as ipr:
        assert not ipr.link_lookup(ifname=f"tfb{key}-login")
    directory = cluster["slurm_cluster"]["directory"]
    daemons = [p for p in psutil.process_iter(["cmdline"]) if any(directory in a for a in p.info["cmdline"] or [])]
    assert not daemons and not os.path.exists(directory)
    assert cluster["slurm_job_state"] in ("COMPLETED", "CANCELLED", "FAILED", "NODE_FAIL")  # ended, not queued


def assert_across_nodes(run, nodes):
    """Every task record names its Slurm node and that node's address; the links were shaped and
    their counters, the node monitors and TensorBoard cover every node."""
    from cluster import links
    from tfrun import cluster_record, scalars, task_records

    cluster = cluster_record(run)
    assert cluster["status"] == "ok", cluster.get("reason")
    address = {n["node"]: n["address"] for n in cluster["slurm_cluster"]["nodes"]}
    tasks = task_records(run)
    assert {name: t["slurm_node"] for name, t in tasks.items()} == {n: nodes[n] for n in tasks}
    assert all(t["host"] == address[t["slurm_node"]] for t in tasks.values())
    assert cluster["slurm_task_nodes"] == nodes and len(set(nodes.values())) >= 2
    assert cluster["link"]["shaped"] and cluster["link"]["configured_bps"] == RATE
    assert cluster["link"]["measured_tx_bps"] == pytest.approx(links.expected_goodput(RATE), rel=0.1)
    assert set(cluster["link_traffic"]) == set(address) == set(cluster["resources"]["host_links"])
    monitored = cluster["resources"]["nodes"]
    assert {n: sorted(s["tasks"]) for n, s in monitored.items()} == {
        n: sorted(t for t, on in nodes.items() if on == n) for n in address}
    assert "link/tx_kbps" in scalars(os.path.join(run, "tb", "host_h1"))
    assert_nothing_left(run)
    return cluster


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_multi_worker_mirrored_workers_on_two_nodes(logdir):
    out, run = run_on_nodes(logdir, "mwms", "--strategy=multi_worker_mirrored", "--num_workers=2", "--slurm_nodes=2")
    cluster = assert_across_nodes(run, {"worker_0": "h0", "worker_1": "h1"})
    assert cluster["slurm_job_state"] == "COMPLETED" and cluster["images"] == 24
    assert [n["cpus"] for n in cluster["slurm_cluster"]["nodes"]] == [1, 1]
    sent = cluster["resources"]["host_links"]["h1"]["tx_bytes"]
    assert sent > 10_000  # the ring's gradients crossed h1's link
    with open(os.path.join(run, "slurm.sbatch")) as f:
        assert "#SBATCH --no-requeue" in f.read()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_synchronous_parameter_server_with_the_ps_on_its_own_node(logdir):
    _, run = run_on_nodes(logdir, "ps-sync", "--strategy=parameter_server", "--ps_sync", "--ps_placement=separate",
                          "--num_workers=2", "--slurm_nodes=0")
    cluster = assert_across_nodes(run, {"chief_0": "h0", "ps_0": "h1", "worker_0": "h2", "worker_1": "h3"})
    assert cluster["slurm_job_state"] == "CANCELLED"  # the ps and workers serve until the job is ended
    traffic = cluster["resources"]["host_links"]
    assert all(traffic[n]["tx_bytes"] > 10_000 and traffic[n]["rx_bytes"] > 10_000 for n in ("h1", "h2", "h3"))


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_asynchronous_parameter_server_collocated_with_the_first_worker(logdir):
    _, run = run_on_nodes(logdir, "ps-async", "--strategy=parameter_server", "--num_workers=2", "--slurm_nodes=2")
    cluster = assert_across_nodes(run, {"chief_0": "h0", "ps_0": "h0", "worker_0": "h0", "worker_1": "h1"})
    assert [n["cpus"] for n in cluster["slurm_cluster"]["nodes"]] == [3, 3]  # the fullest node's three tasks


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_horovod_ranks_on_two_nodes(logdir):
    import importlib.util

    if importlib.util.find_spec("horovod") is None:
        pytest.skip("Horovod is not installed (make horovod)")
    _, run = run_on_nodes(logdir, "hvd", "--strategy=horovod", "--num_workers=2", "--slurm_nodes=2")
    cluster = assert_across_nodes(run, {"worker_0": "h0", "worker_1": "h1"})
    assert cluster["slurm_job_state"] == "COMPLETED" and cluster["images"] == 24


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_task_killed_on_its_node_ends_the_job_naming_the_fault(logdir):
    """--fault reaches the task's process on its node (all nodes are this machine: the pid from its
    progress file); srun ends the step (--kill-on-bad-exit) and the record names task and fault."""
    from tfrun import cluster_record

    _, run = run_on_nodes(logdir, "kill", "--strategy=multi_worker_mirrored", "--num_workers=2", "--slurm_nodes=2",
                          "--num_steps=400", "--display_every=1000", "--fault=worker_1:kill@2", ok=False)
    cluster = cluster_record(run)
    assert cluster["status"] == "failed" and cluster["failed_task"] == "worker_1"
    assert "before worker_1 was done (--fault kill after measured step" in cluster["reason"]
    assert "Slurm job" in cluster["reason"] and cluster["slurm_job_state"] == "FAILED"
    (fault,) = cluster["faults"]
    assert fault["signal"] == "SIGKILL" and "error" not in fault and fault["target"] == "process"
    assert cluster["slurm_task_nodes"] == {"worker_0": "h0", "worker_1": "h1"}
    assert_nothing_left(run)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_lost_node_ends_the_job_naming_the_node(logdir):
    """h1's slurmd is killed mid-run (what NodeSlurm.kill_node does): slurmctld sets the node DOWN
    after SlurmdTimeout, the job ends NODE_FAIL (never requeued) and the failure names h1."""
    from cluster import netns
    from conftest import ROOT, TINY
    from tfrun import cluster_record

    run = os.path.join(logdir, "lost")
    command = [sys.executable, "-m", "tfbench", *TINY, f"--logdir={logdir}", "--run_id=lost", *EMULATED,
               "--strategy=multi_worker_mirrored", "--num_workers=2", "--slurm_nodes=2", "--num_steps=1000000",
               "--display_every=1000000"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        end = time.monotonic() + 120
        while not (os.path.exists(os.path.join(run, "tasks", "worker_1.progress"))
                   and json.load(open(os.path.join(run, "tasks", "worker_1.progress")))["phase"] == "measure"):
            assert proc.poll() is None and time.monotonic() < end, proc.communicate()[0][-3000:]
            time.sleep(0.3)
        with open(os.path.join(run, "network.json")) as f:
            h1 = next(h for h in json.load(f)["hosts"] if h["name"] == "h1")
        (slurmd,) = [p for p in netns.processes_in(h1["netns"]) if p.name() == "slurmd"]
        slurmd.kill()
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, out[-3000:]
    cluster = cluster_record(run)
    assert cluster["status"] == "failed" and cluster["slurm_job_state"] == "NODE_FAIL"
    assert "ended NODE_FAIL" in cluster["reason"] and "node h1 down" in cluster["reason"], cluster["reason"]
    assert_nothing_left(run)
