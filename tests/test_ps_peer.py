"""The parameter-server row of `python -m tools.bench` (tools/bench/ps_peer.py) and its reference,
tools/bench/minimal_ps_loop.py: bad input refused with one line, the reference placed as tfbench
places its processes, and a real run of it that prints its rate and leaves nothing behind, even
when killed outright."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from cluster.plan import topology
from conftest import ROOT, processes_mentioning
from tfbench.config import RunConfig
from tools.bench import minimal_ps_loop

MINIMAL = os.path.join(ROOT, "tools", "bench", "minimal_ps_loop.py")
TINY = ["--embedding_tables=2", "--embedding_rows=50", "--embedding_dim=4", "--dense_features=3", "--batch_size=4",
        "--num_workers=2", "--num_warmup_steps=2", "--num_steps=4"]
GONE_WITHIN_S = 15.0


@pytest.mark.parametrize("module,args,expected", [
    ("tools.bench", ["--ps_num_steps=0"], "tools.bench: error: --ps_num_steps must be at least 1, got 0"),
    ("tools.bench", ["--ps_batch_size=-1"], "tools.bench: error: --ps_batch_size must be at least 1, got -1"),
    ("tools.bench", ["--repeats=0"], "tools.bench: error: --repeats must be at least 1, got 0"),
    ("tools.bench.ps_peer", ["--ps_num_warmup_steps=0"],
     "tools.bench.ps_peer: error: --ps_num_warmup_steps must be at least 1, got 0"),
    ("tools.bench.minimal_ps_loop", ["--num_workers=0"],
     "tools.bench.minimal_ps_loop: error: --num_workers must be at least 1, got 0"),
    ("tools.bench.minimal_ps_loop", ["--zipf_alpha=-1"],
     "tools.bench.minimal_ps_loop: error: --zipf_alpha must be 0 or more, got -1"),
    ("tools.bench.minimal_ps_loop", ["--num_steps=x"], "tools.bench.minimal_ps_loop: error: argument --num_steps"),
    ("tools.bench.minimal_ps_loop", ["--id_layout=other"],
     "tools.bench.minimal_ps_loop: error: --id_layout must be hashed or hot_first, got 'other'"),
    ("tools.bench.minimal_ps_loop", ["--record=all"],
     "tools.bench.minimal_ps_loop: error: --record must be one of none, held, per_worker, got 'all'"),
    ("tools.bench.minimal_ps_loop", ["--data=files"],
     "tools.bench.minimal_ps_loop: error: --data must be stream or fixed, got 'files'"),
])
def test_bad_input_is_one_line_and_exit_2_before_anything_runs(module, args, expected):
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith(expected), proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("cores", [(0,), (0, 1), (0, 1, 2), (0, 1, 2, 3), (2, 5, 7)])
@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("num_ps", [1, 0])  # 0: the recommender's default (one per worker, at least 2)
def test_the_reference_is_placed_as_tfbench_places_one_core_workers(cores, workers, num_ps):
    config = RunConfig(model="dlrm", strategy="parameter_server", num_workers=workers, num_ps=num_ps,
                       cores_per_worker=1)
    plan = topology.make_plan(config, cores=cores)
    planned = {t.name: (t.cores, t.intra_threads, t.inter_threads) for t in plan.tasks}
    assert minimal_ps_loop.placement(workers, cores, config.effective_num_ps) == planned


@pytest.mark.slow
@pytest.mark.parametrize("worker,step", [(0, 0), (1, 7)])
def test_the_reference_trains_on_the_examples_tfbench_reads(worker, step):
    """The minimal loop's --data=stream batch of (worker, step) is tfbench's batch of that data
    shard and step, to the bit: both sides of the row train on the same click stream."""
    import numpy as np

    from tfbench.framework.tf_import import tf

    a = minimal_ps_loop.parse(["--batch_size=16", "--embedding_rows=5000", "--zipf_alpha=1.2", "--seed=3"])
    config = RunConfig(model="dlrm", strategy="parameter_server", num_workers=2, batch_size=16,
                       embedding_rows=5000, zipf_alpha=1.2, seed=3)
    theirs, their_labels = minimal_ps_loop.clicks_batch(a, tf.constant(worker), tf.constant(step, tf.int64))
    ours, our_labels = config.workload.batch(config, 16, worker, step)
    assert np.array_equal(theirs["ids"].numpy(), ours["sparse"].numpy())
    assert np.array_equal(theirs["numeric"].numpy(), ours["dense"].numpy())
    assert np.array_equal(their_labels.numpy(), our_labels.numpy())
    assert len(np.unique(ours["sparse"].numpy())) > 1  # a real batch, not a constant


@pytest.mark.slow
def test_a_run_prints_its_rate_and_leaves_nothing(logdir):
    """The logdir fixture fails the test if any process still carries its path (here: in its
    environment, which every server inherits)."""
    proc = subprocess.run([sys.executable, MINIMAL, *TINY], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, MINIMAL_PS_LOOP_TEST=logdir))
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["closures"] == 4 and out["window_s"] > 0
    assert out["examples_per_sec"] == pytest.approx(4 * 4 / out["window_s"])
    cores = sorted(os.sched_getaffinity(0))
    assert out["placement"] == {k: {"cores": list(c), "intra_threads": i, "inter_threads": j}
                                for k, (c, i, j) in minimal_ps_loop.placement(2, cores).items()}


@pytest.mark.slow
@pytest.mark.parametrize("record,data", [("held", "fixed"), ("per_worker", "stream")])
def test_every_closures_record_reaches_the_coordinator_held_or_kept_on_its_worker(logdir, record, data):
    """Warm-up and timed closures each leave one record (loss, start, end on its worker): fetched from
    its RemoteValue, or written into its worker's copy of a per-worker variable and read back once the
    closures are joined; with either kind of batch."""
    proc = subprocess.run([sys.executable, MINIMAL, *TINY, "--num_ps=2", f"--record={record}", f"--data={data}"],
                          cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, MINIMAL_PS_LOOP_TEST=logdir))
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (out["record"], out["records_read"], out["data"]) == (record, 2 + 4, data)
    # its temporary directory (TensorFlow's autograph sources, which os._exit leaves) is gone with it
    made = [line.rsplit(" ", 1)[1] for line in proc.stderr.splitlines() if "temporary directory" in line]
    assert len(made) == 1 and made[0].startswith(os.path.join(tempfile.gettempdir(), "minimal_ps_loop-"))
    assert not os.path.exists(made[0])


@pytest.mark.slow
def test_killed_outright_its_servers_end_with_it(logdir):
    """SIGKILL to the coordinator once its cluster is connected: the kernel ends the servers."""
    proc = subprocess.Popen([sys.executable, MINIMAL, *TINY, "--num_steps=100000"], cwd=ROOT, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=dict(os.environ, MINIMAL_PS_LOOP_TEST=logdir))
    scratch = None
    try:
        for line in proc.stderr:
            if "temporary directory" in line:
                scratch = line.split()[-1]  # its autograph sources: a loop killed outright leaves them
            if "connected" in line:
                break
        assert len(processes_mentioning(logdir)) == 4, "the coordinator, 2 workers and 1 ps"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    deadline = time.monotonic() + GONE_WITHIN_S
    while processes_mentioning(logdir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not processes_mentioning(logdir)
    assert scratch and os.path.isdir(scratch)
    shutil.rmtree(scratch)
