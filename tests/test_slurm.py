"""tfbench on a real Slurm: a private slurmctld + slurmd + munged on this machine (cluster/slurm/local_cluster.py),
runs submitted through sbatch by `python -m tfbench --launcher=slurm`, their records, a run
cancelled mid-way, and at the end (the module fixture's teardown) an empty queue and every daemon
stopped.
Skipped (with the reason) where Slurm cannot be installed or started (not root)."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import system_packages

from conftest import ROOT, TINY, autograph_files, processes_mentioning, run_cli
from tfbench.results.rundir import RunDir
from tfrun import cluster_record, records, task_records

pytestmark = [pytest.mark.slow, pytest.mark.root]
HOST = socket.gethostname()


@pytest.fixture(scope="module")
def slurm(request):
    """A private Slurm for this module's tests; at the end its queue is empty and every daemon
    stops. munged (as the munge user) must reach its directory: not under pytest's private tmp."""
    import shutil
    import tempfile

    from cluster.slurm import local_cluster as slurm_cluster

    system_packages.slurm(request)
    directory = tempfile.mkdtemp(prefix="tfbench-slurm-")
    cluster = slurm_cluster.LocalSlurm(directory)
    queued = []
    try:
        cluster.start()
        yield cluster
        queued = cluster.jobs()  # every test's job has left the queue
    finally:
        left = cluster.stop()
        if not left:
            shutil.rmtree(directory, ignore_errors=True)
    assert not queued, f"jobs still queued after the last test: {queued}"
    assert not left, f"Slurm daemons still running: {left} (logs in {directory}/log)"
    assert all(p.poll() is not None for p in cluster.daemons.values())


def run_slurm(slurm, logdir, run_id, *args, timeout=240):
    proc = run_cli(*TINY, f"--logdir={logdir}", f"--run_id={run_id}", "--launcher=slurm", "--stall_timeout=120",
                   *args, env=slurm.env, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout, os.path.join(logdir, run_id)


def node_summary(cluster):
    (summary,) = cluster["resources"]["nodes"].values()
    return summary


def test_multi_worker_mirrored_two_workers(slurm, logdir):
    before = autograph_files()
    out, run = run_slurm(slurm, logdir, "mwms", "--strategy=multi_worker_mirrored", "--num_workers=2")
    assert autograph_files() <= before  # the job's TMPDIR was the run's scratch directory, now gone
    with open(os.path.join(run, "slurm.sbatch")) as f:
        script = f.read()
    assert f"export TMPDIR={RunDir(run).scratch}" in script
    assert "#SBATCH --ntasks-per-node=2" in script and "#SBATCH --nodes=1" in script and "#SBATCH --cpus-per-task=1" in script
    tasks = task_records(run)
    assert sorted(tasks) == ["worker_0", "worker_1"]
    assert all(t["host"] == HOST and t["num_measured_steps"] == 3 and t["replicas"] == 2 for t in tasks.values())
    assert len({t["pid"] for t in tasks.values()}) == 2
    cluster = cluster_record(run)
    assert cluster["status"] == "ok" and cluster["launcher"] == "slurm" and cluster["images"] == 2 * 4 * 3
    assert cluster["images_per_sec"] == pytest.approx(24 / cluster["window_s"])
    monitored = node_summary(cluster)
    assert set(monitored["tasks"]) == {"worker_0", "worker_1"} and monitored["samples"] >= 1
    assert list(cluster["resources"]["nodes"]) == [HOST]
    assert os.path.isdir(os.path.join(run, "tb", f"host_{HOST}"))
    assert "worker_1" in out and "cluster images/sec" in out
    with open(os.path.join(run, "tasks", "slurm-job.log")) as f:
        assert f"submitted Slurm job {cluster['slurm_job_id']}" in f.read()
    assert cluster["slurm_job_state"] == "COMPLETED"
    assert slurm.jobs() == []


def test_parameter_server_inside_an_allocation(slurm, logdir, tmp_path):
    """The user's own sbatch script (README) runs tfbench inside the allocation: srun steps."""
    job = tmp_path / "ps.sbatch"
    job.write_text("\n".join([
        "#!/bin/bash", "#SBATCH --nodes=1", "#SBATCH --ntasks=4", "#SBATCH --cpus-per-task=1",
        f"#SBATCH --output={tmp_path}/ps-%j.out",
        f"cd {ROOT} && {sys.executable} -m tfbench {' '.join(TINY)} --launcher=slurm --strategy=parameter_server "
        f"--num_workers=2 --num_ps=1 --logdir={logdir} --run_id=ps --stall_timeout=120", ""]))
    before = autograph_files()
    proc = subprocess.run(["sbatch", "--parsable", str(job)], env=slurm.env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.strip().split(";")[0]
    end = time.monotonic() + 240  # not sbatch --wait: it polls at growing intervals, up to 10 s apart
    while slurm.jobs():
        assert time.monotonic() < end, f"job {job_id} still queued"
        time.sleep(0.5)
    show = subprocess.run(["scontrol", "show", "job", job_id], env=slurm.env, capture_output=True, text=True).stdout
    (output,) = tmp_path.glob("ps-*.out")
    out = output.read_text()
    assert "JobState=COMPLETED" in show and "ExitCode=0:0" in show, out[-3000:] + show
    run = os.path.join(logdir, "ps")
    assert not os.path.exists(os.path.join(run, "slurm.sbatch"))  # no job of its own: steps of this one
    tasks = task_records(run)
    assert sorted(tasks) == ["chief_0", "worker_0", "worker_1"]
    assert all(t["host"] == HOST for t in tasks.values())
    cluster = cluster_record(run)
    assert cluster["status"] == "ok" and cluster["num_ps"] == 1 and cluster["num_tasks"] == 2
    assert cluster["launcher"] == "slurm" and cluster["slurm_job_id"] in output.name
    assert set(node_summary(cluster)["tasks"]) == {"chief_0", "worker_0", "worker_1", "ps_0"}
    assert "ps=1" in out and slurm.jobs() == []
    assert autograph_files() <= before  # the steps' TMPDIR was the run's scratch directory: the ps ended by srun left none


def test_cancelled_mid_run_keeps_what_was_written(slurm, logdir):
    run = os.path.join(logdir, "cancel")
    command = [sys.executable, "-m", "tfbench", *TINY, "--num_steps=200000", "--display_every=20",
               f"--logdir={logdir}", "--run_id=cancel", "--launcher=slurm", "--strategy=multi_worker_mirrored",
               "--num_workers=2"]
    proc = subprocess.Popen(command, cwd=ROOT, env=slurm.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        progress, log = (os.path.join(run, "tasks", f"worker_0.{kind}") for kind in ("progress", "log"))
        end = time.monotonic() + 120
        while time.monotonic() < end:  # measuring, and a step line of its own in its log
            if os.path.exists(progress) and json.load(open(progress))["phase"] == "measure" and _step_line(log):
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.3)
        else:
            pytest.fail("worker_0 never reached its measured steps with a step line in its log")
        assert slurm.jobs(), "the job should be running"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out + err
    assert "interrupted by SIGINT" in err + out
    assert slurm.jobs() == []
    (cluster,) = [r for r in records(run) if r["kind"] == "cluster"]
    assert cluster["status"] == "failed" and "SIGINT" in cluster["reason"]
    assert cluster["slurm_job_state"] == "CANCELLED"
    with open(os.path.join(run, "tasks", "slurm-job.log")) as f:
        assert f"cancelling Slurm job {cluster['slurm_job_id']}" in f.read()
    assert _step_line(log), "the task's log keeps the lines it wrote before the job was cancelled"
    assert json.load(open(progress))["phase"] == "measure"  # the task's last progress is kept
    end = time.monotonic() + 30
    while processes_mentioning(run) and time.monotonic() < end:
        time.sleep(0.5)
    assert not processes_mentioning(run)


def _step_line(log: str) -> bool:
    """Whether worker_0's log holds a line of its steps (its own output, not TensorFlow's)."""
    return os.path.exists(log) and "worker_0: step " in open(log).read()


def test_failed_task_ends_the_job_and_names_the_task(slurm, logdir):
    """worker_0 fails after its measured steps (it cannot save weights to a missing directory)."""
    run = os.path.join(logdir, "fails")
    proc = run_cli(*TINY, f"--logdir={logdir}", "--run_id=fails", "--launcher=slurm", "--strategy=multi_worker_mirrored",
                   "--num_workers=2", env=dict(slurm.env, TFBENCH_DUMP_WEIGHTS="/nonexistent/dir/w.npz"), timeout=240)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    (cluster,) = [r for r in records(run) if r["kind"] == "cluster"]
    assert cluster["status"] == "failed" and cluster["failed_task"] == "worker_0"
    assert cluster["reason"] == ("worker_0: FileNotFoundError: [Errno 2] No such file or directory: "
                                 "'/nonexistent/dir/w.npz'")
    assert cluster["slurm_job_state"] == "FAILED"
    assert "worker_0 failed: FileNotFoundError" in open(os.path.join(run, "tasks", "worker_0.log")).read()
    assert f"tfbench: run failed: {cluster['reason']}" in proc.stderr and slurm.jobs() == []


def test_deadline_ends_the_job(slurm, logdir):
    run = os.path.join(logdir, "deadline")
    proc = run_cli(*TINY, "--num_steps=200000", "--display_every=100000", f"--logdir={logdir}", "--run_id=deadline",
                   "--launcher=slurm", "--strategy=multi_worker_mirrored", "--num_workers=2", "--deadline=4",
                   env=slurm.env, timeout=240)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    (cluster,) = [r for r in records(run) if r["kind"] == "cluster"]
    assert cluster["status"] == "failed" and "deadline of 4 s reached" in cluster["reason"]
    assert slurm.jobs() == [] and not processes_mentioning(run)


def test_horovod_ranks_as_slurm_tasks(slurm, logdir):
    """Two Horovod ranks started by Slurm meet at Horovod's Gloo rendezvous (no horovodrun, no ssh)."""
    import importlib.util

    if importlib.util.find_spec("horovod") is None:
        pytest.skip("Horovod is not installed (make horovod)")
    out, run = run_slurm(slurm, logdir, "hvd", "--strategy=horovod", "--num_workers=2")
    tasks = task_records(run)
    assert sorted(tasks) == ["worker_0", "worker_1"]
    assert sorted(t["horovod_rank"] for t in tasks.values()) == [0, 1]
    assert all(t["replicas"] == 2 and t["host"] == HOST for t in tasks.values())
    cluster = cluster_record(run)
    assert cluster["status"] == "ok" and cluster["images"] == 24 and cluster["slurm_job_state"] == "COMPLETED"
    with open(os.path.join(run, "slurm.sbatch")) as f:
        script = f.read()
    assert "--ntasks-per-node=2" in script and "TFBENCH_HOROVOD_RENDEZVOUS=" in script
    assert not os.path.exists(os.path.join(run, "tasks", "horovodrun.log"))


def test_hybrid_ps_and_ranks_as_slurm_tasks(slurm, logdir):
    """The hybrid's ps are Slurm's first ranks and its workers Horovod ranks that also join their TF
    cluster: the tables' rows go through the ps, the dense gradients through Horovod's ring."""
    import importlib.util

    from clusters import DLRM

    if importlib.util.find_spec("horovod") is None:
        pytest.skip("Horovod is not installed (make horovod)")
    proc = run_cli(*DLRM, f"--logdir={logdir}", "--run_id=hybrid", "--launcher=slurm", "--stall_timeout=120",
                   "--strategy=hybrid", "--num_workers=2", "--num_ps=1", env=slurm.env, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = os.path.join(logdir, "hybrid")
    tasks = task_records(run)
    assert sorted(tasks) == ["worker_0", "worker_1"]
    assert all(t["replicas"] == 2 and sum(t["hybrid_split_ms"].values()) > 0 for t in tasks.values())
    cluster = cluster_record(run)
    # its ps serve until stopped: once the workers are done tfbench cancels the job, as for a parameter server
    assert cluster["status"] == "ok" and cluster["num_ps"] == 1 and cluster["slurm_job_state"] == "CANCELLED"
    assert set(cluster["slurm_task_nodes"]) == {"ps_0", "worker_0", "worker_1"}
    with open(os.path.join(logdir, "hybrid", "tasks", "slurm.hosts")) as f:
        assert len(f.read().split()) == 3  # one line per Slurm rank: ps_0, worker_0, worker_1


def test_job_and_node_facts_with_spaces_in_their_values(slurm, tmp_path, monkeypatch):
    """A job's name and comment and a node's reason hold spaces, '=' and '|': slurmctld's answers
    are read as delimited fields (cluster/slurm/query.py), where splitting `scontrol -o` on
    spaces took the comment's JobState=RUNNING for the job's state."""
    from cluster.slurm import batch, job, query
    from cluster.slurm import resolver as slurm_resolver

    monkeypatch.setenv("SLURM_CONF", slurm.conf)
    script = tmp_path / "exit3.sh"
    script.write_text("#!/bin/bash\nexit 3\n")
    proc = subprocess.run(["sbatch", "--parsable", "--job-name=tfbench x JobState=RUNNING",
                           "--comment=a b | JobState=RUNNING ExitCode=0:0", f"--chdir={tmp_path}",
                           f"--output={tmp_path}/out", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.strip().split(";")[0]
    end = time.monotonic() + 60
    while batch.job_state(job_id) not in ("", "FAILED", "COMPLETED") and time.monotonic() < end:
        time.sleep(0.5)
    shown = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True).stdout
    assert dict(f.split("=", 1) for f in shown.split() if "=" in f)["JobState"] == "RUNNING"  # the old reading
    assert batch.job_facts(job_id) == {"state": "FAILED", "exit_code": "3:0"} and batch.exit_status(job_id) == 3
    assert job.describe(job_id) == f"Slurm job {job_id} ended FAILED (NonZeroExitCode)"
    assert slurm_resolver.node_addresses([HOST]) == {HOST: HOST}
    reason = "checked by admin x=y | z"
    subprocess.run(["scontrol", "update", f"NodeName={HOST}", "State=DRAIN", f"Reason={reason}"], check=True)
    try:
        assert query.nodes([HOST])[HOST]["reason"] == reason
        assert job.failed_nodes(HOST) == {HOST: f"drained: {reason}"}
        assert job.describe(job_id).endswith(f"; node {HOST} drained: {reason}")
    finally:
        subprocess.run(["scontrol", "update", f"NodeName={HOST}", "State=RESUME"], check=True)
