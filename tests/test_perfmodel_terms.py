"""The mechanisms of the performance model against their closed forms (tfbench.perfmodel.dense.terms,
shards, sync_step), and fitting that recovers known parameters from synthetic points
(tfbench.perfmodel.curves.clusterfit)."""
import dataclasses
import json
import math
import os

import numpy as np
import pytest

from tfbench.perfmodel.curves import clusterfit, published
from tfbench.perfmodel.dense import shards, sync_step, terms
from tfbench.perfmodel.dense import equations as eq

V = shards.Variable
INCEPTION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tfbench", "measure", "data",
                         "variables_inception_v3_299px_1000.json")


# ---- shards: placed as ParameterServerStrategy / tf_cnn_benchmarks place them -------------------

def test_round_robin_in_creation_order_without_a_partitioner():
    vs = [V("a", (10,)), V("b", (20,)), V("c", (30,)), V("d", (40,)), V("e", (50,))]
    p = shards.place(vs, 2)
    assert [x.shard for x in p.pieces] == [0, 1, 0, 1, 0]
    assert p.shard_bytes == (4 * 90, 4 * 60) and p.shard_variables == (3, 2) and p.busiest == 0
    assert p.largest.variable.name == "e" and p.largest.shard == 0


def test_min_size_partitioner_follows_tf_semantics():
    # MinSizePartitioner(min_shard_bytes=4, max_shards=k): min(shape[0], k, ceil(bytes/min)) parts on axis 0
    assert shards.partitions(V("x", (6, 1)), 2, "min_size", 4) == 2  # the TF docstring's examples
    assert shards.partitions(V("x", (6, 1)), 10, "min_size", 4) == 6
    assert shards.partitions(V("x", (3, 3)), 10, "min_size", 1 << 20) == 1  # under 256K: whole
    assert shards.partitions(V("s", ()), 4, "min_size", 1) == 1  # rank 0 is never split
    assert shards.partitions(V("x", (10, 3)), 2, "fixed") == 2 and shards.partitions(V("x", (1, 3)), 4, "fixed") == 1
    # 'div' partitioning: 10 rows in 4 parts are 3, 3, 2, 2; each part placed round-robin
    assert shards.split_rows(10, 4) == [3, 3, 2, 2]
    p = shards.place([V("s", ()), V("w", (10, 2))], 4, "fixed")
    assert [(x.variable.name, x.variable.shape, x.shard) for x in p.pieces] == [
        ("s", (), 0), ("w/part_0", (3, 2), 1), ("w/part_1", (3, 2), 2), ("w/part_2", (2, 2), 3), ("w/part_3", (2, 2), 0)]


def test_greedy_placer_goes_to_the_least_loaded_ps():
    vs = [V("a", (100,)), V("b", (10,)), V("c", (10,)), V("d", (50,))]
    p = shards.place(vs, 2, placer="greedy")
    assert [x.shard for x in p.pieces] == [0, 1, 1, 1]
    # with a partitioner: each variable's parts start on the least-loaded ps and go round from there
    split = shards.place([V("a", (100,)), V("w", (8,))], 2, "fixed", placer="greedy")
    assert [(x.variable.name, x.shard) for x in split.pieces] == [
        ("a/part_0", 0), ("a/part_1", 1), ("w/part_0", 0), ("w/part_1", 1)]
    with pytest.raises(ValueError):
        shards.place(vs, 0)


def test_inceptionv3_round_robin_puts_every_kernel_on_one_of_four_ps():
    """Conv kernel, BN beta, moving mean, moving variance: with k = 4 every kernel lands on ps 0."""
    with open(INCEPTION, encoding="utf-8") as f:
        variables = shards.from_records(json.load(f)["variables"])
    trainable = [v for v in variables if v.trainable]
    assert len(trainable) == 190 and sum(v.nbytes for v in trainable) == 4 * 23_817_352
    p = shards.place(variables, 4)
    assert p.largest.variable.name == "predictions/kernel" and p.largest.variable.nbytes == 4 * 2048 * 1000
    assert p.shard_bytes[0] > 0.99 * p.total_bytes
    # tfbench's MinSizePartitioner(256 KiB, 4) splits the large kernels over all four; the small ones stay whole
    split = shards.place(variables, 4, "min_size")
    assert 0.25 * split.total_bytes < max(split.shard_bytes) < 0.35 * split.total_bytes
    assert "predictions/kernel [2048, 1000] (8.19 MB)" in shards.describe(p)


# ---- terms against their closed forms -----------------------------------------------------------

def test_host_loads_closed_forms():
    w, s = 100.0, [25.0] * 4
    ps, workers = terms.host_loads(8, w, s, "separate")
    assert list(ps) == [200.0] * 4 and list(workers) == [100.0] * 8  # N*S_j and W
    ps, workers = terms.host_loads(8, w, s, "collocated")
    assert list(ps) == [100 + 25 * 6] * 4 and list(workers) == [100.0] * 4  # W + S_h(N-2)
    assert terms.busiest_host_bytes(1, w, [w], "collocated") == (0.0, "ps")  # nothing leaves one host


def test_duplex_closed_form():
    assert terms.duplex_s(10, 10, 1, 1.0, 0.0) == 20  # one worker: its pull and push add up
    assert terms.duplex_s(10, 10, 4, 1.0, 0.0) == pytest.approx(10 + 10 / 4)
    assert terms.duplex_s(10, 4, 4, 2.0, 1.0) == pytest.approx(7.0)  # chi = 1: (in + out)/beta
    assert terms.duplex_s(10, 10, 3, 1.0, 0.5) == pytest.approx(10 + 10 * (1 / 3 + 0.5 * 2 / 3))


def test_overlap_and_messages_closed_forms():
    assert terms.overlapped_s(3.0, 1.0, 0.0) == 3.0 and terms.overlapped_s(3.0, 1.0, 1.0) == 4.0
    assert terms.overlapped_s(1.0, 3.0, 0.5) == 3.5
    assert terms.ps_messages(4, [5, 3], "separate") == max(2 * 5 * 4, 2 * 8)
    assert terms.ps_messages(4, [5, 3], "collocated") == 2 * (5 * 3 + 8 - 5)
    assert terms.barrier_messages(8, 1, 2) == 64 and terms.barrier_messages(8, 3, 2) == 128
    assert terms.ring_messages(5, 2) == 16 and terms.messages_s(1000, 2e-6) == pytest.approx(2e-3)


def test_stragglers_expected_maximum():
    assert terms.expected_max_std_normal(1) == 0.0
    assert terms.expected_max_std_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-6)
    assert terms.expected_max_std_normal(3) == pytest.approx(3 / (2 * math.sqrt(math.pi)), rel=1e-6)
    assert terms.straggler_wait_s(2, 0.1) == pytest.approx(0.1 / math.sqrt(math.pi), rel=1e-6)
    # empirical: two equally likely values; the max of 2 draws is the larger unless both are small
    assert terms.expected_max_empirical([1.0, 3.0], 2) == pytest.approx(1 * 0.25 + 3 * 0.75)
    assert terms.straggler_wait_s(2, 0, samples=[1.0, 3.0]) == pytest.approx(2.5 - 2.0)


def test_devices_per_node_intra_node_and_nodes():
    assert terms.nodes(128, 8) == 16 and terms.nodes(1, 8) == 1 and terms.nodes(9, 8) == 2
    assert terms.intra_node_s(1, 1e9) == 0.0
    assert terms.intra_node_s(8, 1e8, "pcie", 1e10) == pytest.approx(2 * 8 * 1e8 / 1e10)
    assert terms.intra_node_s(4, 1e8, "nvlink", 1e10) == pytest.approx(2 * 3 / 4 * 1e8 / 1e10)


def test_compute_against_batch():
    assert terms.compute_s(32, 0.01, 0.05) == pytest.approx(0.37)
    c, c0 = terms.fit_compute([16, 32, 64], [0.05 + 0.01 * b for b in (16, 32, 64)])
    assert c == pytest.approx(0.01) and c0 == pytest.approx(0.05)
    with pytest.raises(ValueError):
        terms.fit_compute([32, 32], [1.0, 1.0])


def test_network_core_and_where_it_binds():
    assert terms.core_s(1e9, None) == 0.0 and terms.core_s(1e9, 1e9) == 1.0
    assert terms.fabric_capacity(10, 1e8, 2) == 5e8
    assert terms.ps_core_bytes(4, 100, 100) == 600 and terms.ring_core_bytes(4, 100) == 600
    link = eq.Link(0.0, 1.25e8)
    x = sync_step.Extra(fabric=4 * 1.25e8)  # the core carries four links' worth
    n = sync_step.core_binds_at(1e8, link, lambda nodes: nodes, "collocated", x, ring_strategy=True)
    ring = sync_step.ring(n, 1e8, 0.0, link, x)
    assert ring.core_s > ring.network_s - ring.latency_s
    smaller = sync_step.ring(n // 2, 1e8, 0.0, link, x)
    assert smaller.core_s <= smaller.network_s - smaller.latency_s


def test_sync_step_reduces_to_the_old_equation_and_devices_change_the_network():
    link, w, c = eq.Link(1e-4, 1.25e8), 1e8, 0.5
    old = eq.sync_ps(8, w, c, link, 2, "separate")["step_s"]
    new = sync_step.sync_ps(8, w, c, link, 2, "separate", sync_step.Extra())
    assert new.step_s == pytest.approx(old)
    # full duplex with interleaving workers (chi = 0): the ps host's directions overlap
    faster = sync_step.sync_ps(8, w, c, link, 2, "separate", sync_step.Extra(chi=0.0))
    assert faster.step_s < new.step_s
    # eight devices per node: the network sees one node, only the intra-node aggregation remains
    node = sync_step.sync_ps(8, w, c, link, 1, "collocated", sync_step.Extra(devices_per_node=8))
    assert node.nodes == 1 and node.ps_host_bytes == 0 and node.intra_s == pytest.approx(2 * 8 * w / 12e9)


# ---- fitting recovers known parameters from synthetic points ------------------------------------

def _synthetic_cluster():
    variables = [V(f"k{i}", (64, 64, 3, 3)) for i in range(40)] + [V("logits", (2048, 1000))]
    return clusterfit.Cluster(variables)


def test_cluster_fit_recovers_phi_and_a_given_beta():
    cluster = _synthetic_cluster()
    truth = clusterfit.Params(per_image_s=0.01, beta=5e7, phi=0.2, per_message_s=2e-5)
    points = [clusterfit.Point(g, 1, max(1, g // 2), "parameter_server", 0.0, 32) for g in (1, 2, 4, 8, 16)]
    points = [dataclasses.replace(q, images_per_sec=cluster.rate(q, truth)) for q in points]
    rms, fitted = clusterfit.refit(cluster, points[1:], clusterfit.base_params(points), 5e7)
    assert fitted.per_image_s == pytest.approx(0.01) and fitted.phi == pytest.approx(0.2, abs=1e-3)
    assert fitted.per_message_s == pytest.approx(2e-5, rel=1e-2) and rms < 1e-4


def test_compute_against_batch_from_one_gpu_points():
    points = [clusterfit.Point(1, 1, 1, "parameter_server", b / (0.05 + 0.01 * b), b) for b in (16, 64)]
    assert clusterfit.compute_from(points) == pytest.approx((0.01, 0.05))


def test_published_tables_are_shipped_with_their_source():
    doc, clusters = published.load_published()
    assert "e-bug/distributed-tensorflow-benchmarks" in doc["source"] and "August 2017" in doc["source"]
    assert set(clusters) == {"piz_daint", "p2.xlarge", "p2.8xlarge"}
    daint = {q.gpus: q for q in clusters["piz_daint"]}
    assert daint[128].num_ps == 116 and daint[128].images_per_sec == 9219.70
    assert all(q.devices_per_node == 8 for q in clusters["p2.8xlarge"])


def test_tensorflows_k80_table_is_shipped_with_its_source_and_each_curves_workload():
    doc, clusters = published.load_published(published.TABLES["tensorflow_k80"])
    assert "tensorflow/docs_src/performance/benchmarks.md" in doc["source"] and "May 2017" in doc["source"]
    assert len(clusters) == 5 and all(len(points) == 5 for points in clusters.values())
    assert published.workload(doc, "k80_resnet152_b32") == {"model": "resnet152", "image_size": 224,
                                                            "num_classes": 1000, "batch_size": 32}
    r152 = {q.gpus: q for q in clusters["k80_resnet152_b32"]}
    assert (r152[64].num_ps, r152[64].images_per_sec, r152[64].batch_size) == (4, 981.0, 32)
    assert all(q.devices_per_node == 8 and q.mode == "distributed_replicated"
               for points in clusters.values() for q in points)


def test_user_csv_is_read_and_bad_rows_are_one_line(tmp_path):
    good = tmp_path / "mine.csv"
    good.write_text("workers,gpus_per_node,images_per_sec,num_ps\n1,4,100,1\n8,4,700,2\n")
    points = published.load_csv(str(good), "parameter_server", 32)
    assert [(q.gpus, q.devices_per_node, q.num_ps, q.batch_size) for q in points] == [(1, 4, 1, 32), (8, 4, 2, 32)]
    bad = tmp_path / "bad.csv"
    bad.write_text("workers,gpus_per_node,images_per_sec\n1,1,fast\n")
    with pytest.raises(published.CsvError, match="line 2: images_per_sec='fast' is not a number"):
        published.load_csv(str(bad), "parameter_server", 32)
    (tmp_path / "none.csv").write_text("gpus,rate\n1,2\n")
    with pytest.raises(published.CsvError, match="missing workers, gpus_per_node, images_per_sec"):
        published.load_csv(str(tmp_path / "none.csv"), "parameter_server", 32)
    assert np.isfinite(1.0)


def test_wire_bytes_are_full_frames_out_and_an_ack_for_every_two_frames_in():
    assert terms.wire_bytes(1448.0, 0.0) == pytest.approx(1514.0)
    assert terms.wire_bytes(0.0, 2 * 1448.0) == pytest.approx(66.0)
    assert terms.wire_bytes(1e6, 1e6) == pytest.approx(1e6 * (1514 / 1448 + 66 / 2896))
