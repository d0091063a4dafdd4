"""Bytes per global step on each emulated host's link against docs/definitions.md's reference points, on
a model whose parameter size |w| is known: the tiny CNN with 25,000 classes has
3·3·3·8+8 + 8·25000+25000 = 225,224 parameters, |w| = 900,896 bytes fp32.

Two workers on a 100 Mbit/s link (so that traffic, steady at the link rate, dominates and the
0.1 s counter samples interpolate the window's edges well):
  one separate, synchronous ps: the ps host sends and receives N·|w| per global step, each worker
  ≈ |w| (synchronous, so that every worker does exactly one update per global step; asynchronous
  workers split the updates unevenly, though their sum is the same);
  ring all-reduce (MWMS, Horovod): each host sends ≈ 2(N−1)/N·|w| = |w|.
Interface counters include TCP/IP and gRPC framing, so ±15%."""
import os

import pytest

from cluster.net import links
from conftest import run_cli
from tfrun import cluster_record, records, run_tiny

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

CLASSES = 25000
W_BYTES = (3 * 3 * 3 * 8 + 8 + 8 * CLASSES + CLASSES) * 4
N = 2
TRAFFIC = [f"--num_classes={CLASSES}", "--num_steps=10", "--monitor_interval=0.1", "--network=emulated",
           "--link_bandwidth=100mbit", f"--num_workers={N}"]


def per_step(logdir, run_id, *args, split=None):
    _, run = run_tiny(logdir, run_id, *TRAFFIC, *args)
    record = cluster_record(run)
    if split is not None:
        split.update(record["step_breakdown"])
    assert record["link"]["measured_tx_bps"] == pytest.approx(links.expected_goodput(10 ** 8), rel=0.10)
    traffic = record["link_traffic"]
    assert all(t["samples_in_window"] >= 3 for t in traffic.values()), traffic
    return {host: (t["tx_bytes_per_step"] / W_BYTES, t["rx_bytes_per_step"] / W_BYTES) for host, t in traffic.items()}


def wire_s(bytes_one_way: float) -> float:
    """Seconds to carry bytes_one_way at the goodput of the tests' 100 Mbit/s links."""
    return bytes_one_way * 8 / links.expected_goodput(10 ** 8)


def test_parameter_server_host_moves_n_times_w_per_step(logdir):
    split = {}
    hosts = per_step(logdir, "ps", "--strategy=parameter_server", "--ps_placement=separate", "--ps_sync", split=split)
    print({h: (round(tx, 3), round(rx, 3)) for h, (tx, rx) in hosts.items()}, split["mean_s"])
    # the step split's pull really moves |w| to the worker over its own link, and its push moves
    # |w| back after it: at least wire time of |w|, and of 2·|w| for both. (Whether the workers'
    # pulls overlap on the ps link, which would take N·|w| of wire time, depends on how the
    # synchronous workers happen to line up, so it is not a bound.)
    assert split["sum_check"]["within"]
    assert split["mean_s"]["pull"] >= 0.9 * wire_s(W_BYTES)
    assert split["mean_s"]["communication"] >= 0.9 * wire_s(2 * W_BYTES)
    assert sorted(hosts) == ["h0", "h1", "h2"]  # two worker hosts, the ps host
    assert hosts["h2"] == pytest.approx((N, N), rel=0.15)
    for worker in ("h0", "h1"):
        assert hosts[worker] == pytest.approx((1, 1), rel=0.15)


@pytest.mark.parametrize("strategy", ["multi_worker_mirrored", "horovod"])
def test_ring_all_reduce_moves_2_n_minus_1_over_n_w_per_host(logdir, strategy):
    split = {}
    hosts = per_step(logdir, strategy, f"--strategy={strategy}", split=split)
    assert split["sum_check"]["within"] and split["source"] == "in-step timestamps of every rank"
    # gradients done to step end: at least the ring's 2(N-1)/N·|w| each way over the link
    assert split["mean_s"]["communication"] >= 0.7 * wire_s(2 * (N - 1) / N * W_BYTES)
    print(strategy, {h: (round(tx, 3), round(rx, 3)) for h, (tx, rx) in hosts.items()})
    assert sorted(hosts) == ["h0", "h1"]
    ring = 2 * (N - 1) / N
    for host in hosts.values():
        assert host == pytest.approx((ring, ring), rel=0.15)


def test_an_emulated_parameter_server_step_moves_the_bytes_of_a_real_one(logdir):
    """A recommender with tables beside 1.9 MB of dense weights (dlrm_criteo's MLPs, its tables at
    0.1% of their rows), a synchronous ps on each of the 2 hosts, compute emulated: each host sends
    and receives |w| of dense weights a global step (its worker pushes the half held by the other
    host's ps and pulls it; its ps serves the other worker the same), as a real step does, plus the
    few rows of a 64-example batch. With the reads inside the batch's colocation group, the emulated
    step carried 1.6x that here."""
    run = os.path.join(logdir, "ps-emulated")
    proc = run_cli("--model=dlrm_criteo", "--embedding_scale=0.001", "--batch_size=64", "--num_warmup_steps=2",
                   "--num_steps=10", "--monitor_interval=0.1", "--network=emulated", "--link_bandwidth=100mbit",
                   "--num_workers=2", "--num_ps=2", "--strategy=parameter_server", "--ps_sync", "--compute=emulated",
                   "--compute_ms=5", "--stall_timeout=120", f"--logdir={logdir}", "--run_id=ps-emulated")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    plan = next(r["comm_plan"] for r in records(run) if r.get("comm_plan"))
    w_bytes = plan["bytes_per_step"] / 2  # every dense shard pulled, its gradient pushed
    traffic = cluster_record(run)["link_traffic"]
    print({h: (round(t["tx_bytes_per_step"] / w_bytes, 3), round(t["rx_bytes_per_step"] / w_bytes, 3))
           for h, t in traffic.items()})
    assert sorted(traffic) == ["h0", "h1"]
    for host in traffic.values():
        assert (host["tx_bytes_per_step"] / w_bytes, host["rx_bytes_per_step"] / w_bytes) == pytest.approx(
            (1, 1), rel=0.15)
