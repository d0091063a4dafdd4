"""tfbench on a private Slurm of emulated nodes (`--launcher=slurm --network=emulated`,
cluster/slurm/node_cluster.py): one run per strategy across nodes, asserted from the records
(every task's Slurm node and address, shaped links, per-node monitors and link counters), a task
killed by --fault, a node lost mid-run, and nothing left after any of them. Each run starts its
own cluster (the launcher owns it), sized by the run's layout; tiny model, 16 px, few steps.
Skipped without root."""
import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from conftest import ROOT, TINY, run_cli

RATE = 100_000_000  # the links of the emulated nodes, bits/s

pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.timeout(240),
              pytest.mark.skipif(os.geteuid() != 0, reason="Slurm's daemons and network namespaces need root")]

EMULATED = ["--launcher=slurm", "--network=emulated", "--link_bandwidth=100mbit", "--stall_timeout=120"]


def run_on_nodes(logdir, run_id, *args, ok=True):
    proc = run_cli(*TINY, f"--logdir={logdir}", f"--run_id={run_id}", *EMULATED, *args, timeout=200)
    assert (proc.returncode == 0) == ok, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "cleanup failed" not in proc.stdout + proc.stderr
    return proc.stdout + proc.stderr, os.path.join(logdir, run_id)


def assert_nothing_left(run):
    """No namespace, owner file, login link or daemon of the run's cluster; its job left the queue."""
    from pyroute2 import IPRoute

    from cluster.net import netns
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
    from cluster.net import links
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


def test_multi_worker_mirrored_workers_on_two_nodes(logdir):
    out, run = run_on_nodes(logdir, "mwms", "--strategy=multi_worker_mirrored", "--num_workers=2", "--slurm_nodes=2")
    cluster = assert_across_nodes(run, {"worker_0": "h0", "worker_1": "h1"})
    assert cluster["slurm_job_state"] == "COMPLETED" and cluster["images"] == 24
    assert [n["cpus"] for n in cluster["slurm_cluster"]["nodes"]] == [1, 1]
    sent = cluster["resources"]["host_links"]["h1"]["tx_bytes"]
    assert sent > 10_000  # the ring's gradients crossed h1's link
    with open(os.path.join(run, "slurm.sbatch")) as f:
        assert "#SBATCH --no-requeue" in f.read()


def test_synchronous_parameter_server_with_the_ps_on_its_own_node(logdir):
    _, run = run_on_nodes(logdir, "ps-sync", "--strategy=parameter_server", "--ps_sync", "--ps_placement=separate",
                          "--num_workers=2", "--slurm_nodes=0")
    cluster = assert_across_nodes(run, {"chief_0": "h0", "ps_0": "h1", "worker_0": "h2", "worker_1": "h3"})
    assert cluster["slurm_job_state"] == "CANCELLED"  # the ps and workers serve until the job is ended
    traffic = cluster["resources"]["host_links"]
    assert all(traffic[n]["tx_bytes"] > 10_000 and traffic[n]["rx_bytes"] > 10_000 for n in ("h1", "h2", "h3"))


def test_asynchronous_parameter_server_collocated_with_the_first_worker(logdir):
    _, run = run_on_nodes(logdir, "ps-async", "--strategy=parameter_server", "--num_workers=2", "--slurm_nodes=2")
    cluster = assert_across_nodes(run, {"chief_0": "h0", "ps_0": "h0", "worker_0": "h0", "worker_1": "h1"})
    assert [n["cpus"] for n in cluster["slurm_cluster"]["nodes"]] == [3, 3]  # the fullest node's three tasks


def test_horovod_ranks_on_two_nodes(logdir):
    import importlib.util

    if importlib.util.find_spec("horovod") is None:
        pytest.skip("Horovod is not installed (make horovod)")
    _, run = run_on_nodes(logdir, "hvd", "--strategy=horovod", "--num_workers=2", "--slurm_nodes=2")
    cluster = assert_across_nodes(run, {"worker_0": "h0", "worker_1": "h1"})
    assert cluster["slurm_job_state"] == "COMPLETED" and cluster["images"] == 24


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


def test_a_lost_node_ends_the_job_naming_the_node(logdir):
    """h1's slurmd is killed mid-run (as tests/test_slurm_nodes.py kills one): slurmctld sets the node DOWN
    after SlurmdTimeout, the job ends NODE_FAIL (never requeued) and the failure names h1."""
    from cluster.net import netns
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
