"""The performance model's equations against their closed forms on hand-computed numbers, the
reference points of docs/definitions.md, the bottleneck names and the what-if answers."""
import ast
import dataclasses
import math
import os
import sys

import pytest

from tfbench.perfmodel.dense import equations as eq
from tfbench.perfmodel.dense import prediction as pr
from tfbench.perfmodel.dense import whatif
from tfbench.perfmodel.dense.prediction import Setting

# Round numbers: |w| = 100 MB over 100 MB/s is T = 1 s; alpha 1 ms; a worker computes for 2 s.
W, BETA, ALPHA, C = 100e6, 100e6, 1e-3, 2.0
LINK = eq.Link(ALPHA, BETA)
NO_ALPHA = eq.Link(0.0, BETA)
RESNET50_W = 4 * 25_583_592  # trainable parameters of tfbench.models resnet50 at 1000 classes, fp32
GBE = eq.Link(50e-6, 1e9 / 8)


def ps(**kw):
    base = dict(strategy="parameter_server", w_bytes=W, compute_s=C, batch_size=32, link=LINK)
    return Setting(**{**base, **kw})


def test_one_pull_or_push_is_a_request_and_its_reply():
    assert eq.exchange(LINK, 50e6) == (2 * ALPHA, 0.5)
    assert eq.exchange(LINK, 50e6).total == pytest.approx(0.502)
    assert eq.exchange(LINK, 0.0) == (0.0, 0.0)  # nothing crosses a link: no message either


@pytest.mark.parametrize("n,k,placement,expected", [
    (4, 1, "separate", (400e6, 100e6)),  # N*W/k on the ps host, W on a worker
    (4, 2, "separate", (200e6, 100e6)),
    (4, 8, "separate", (50e6, 100e6)),  # more shards than workers: the worker's link is busier
    (4, 1, "collocated", (300e6, 100e6)),  # (N-1)*W/k; a worker without a shard pulls all of W
    (4, 4, "collocated", (75e6, 75e6)),  # k = N: (N-1)*W/N both ways
    (4, 6, "collocated", (100e6, 500e6 / 6)),  # 2 shards on the fullest host, 1 on the emptiest
    (1, 1, "collocated", (0.0, 0.0)),  # one worker and its own ps: no link traffic
    (4, math.inf, "separate", (0.0, 100e6)),
    (4, math.inf, "collocated", (75e6, 75e6)),
])
def test_ps_link_bytes_closed_forms(n, k, placement, expected):
    assert eq.ps_link_bytes(n, W, k, placement) == pytest.approx(expected)


def test_sync_ps_step_is_pull_compute_push_apply_overhead():
    r = eq.sync_ps(4, W, C, LINK, 1, "separate", ps_apply_s=0.3, overhead_s=0.1)
    assert r["pull"].total == pytest.approx(0.002 + 4.0)
    assert r["step_s"] == pytest.approx(2 * 4.002 + 2 + 0.3 + 0.1)
    r2 = eq.sync_ps(4, W, C, LINK, 2, "separate", ps_apply_s=0.3, overhead_s=0.1)
    assert r2["apply_s"] == pytest.approx(0.15)  # a shard applies W/k
    assert r2["step_s"] == pytest.approx(2 * 2.002 + 2 + 0.15 + 0.1)
    assert eq.sync_ps(4, W, C, LINK, 8)["step_s"] == pytest.approx(2 * 1.002 + 2)  # the worker link's W
    assert eq.sync_ps(4, W, C, LINK, 1, "collocated")["step_s"] == pytest.approx(2 * 3.002 + 2)


def test_one_worker_with_its_ps_collocated_moves_nothing_over_a_link():
    r = eq.sync_ps(1, W, C, LINK, 1, "collocated", ps_apply_s=0.3, overhead_s=0.1)
    assert r["step_s"] == pytest.approx(C + 0.3 + 0.1)
    assert eq.async_ps(1, W, C, LINK, 1, "collocated", 0.3, 0.1)["step_s"] == pytest.approx(C + 0.3 + 0.1)


@pytest.mark.parametrize("placement", ["separate", "collocated"])
def test_one_worker_async_is_the_same_step_as_sync(placement):
    args = (1, W, C, LINK, 1, placement, 0.3, 0.1)
    assert eq.async_ps(*args)["step_s"] == pytest.approx(eq.sync_ps(*args)["step_s"])


def test_async_rate_is_the_workers_sum_until_the_ps_link_caps_it():
    t = 2 * (0.002 + 1.0) + C  # one update: pull, compute, push over the worker's own link
    four = eq.async_ps(4, W, C, LINK)
    assert four["limit"] == "workers" and four["updates_per_s"] == pytest.approx(4 / t)
    assert four["step_s"] == pytest.approx(t)  # a global step is N updates
    eight = eq.async_ps(8, W, C, LINK)
    assert eq.async_link_cap(8, W, LINK) == pytest.approx(BETA / W)  # k*beta/W
    assert eight["limit"] == "ps link" and eight["updates_per_s"] == pytest.approx(1.0)
    assert eight["step_s"] == pytest.approx(8.0)
    assert eight["pull_s"] + eight["push_s"] == pytest.approx(8.0 - C)  # the queueing is communication
    assert eq.async_link_cap(8, W, LINK, 4) == pytest.approx(4 * BETA / W)


def test_async_collocated_link_cap_spares_the_local_worker():
    # k*N*beta / ((N-1)*W): a quarter of the updates never leave the ps host
    assert eq.async_link_cap(4, W, LINK, 1, "collocated") == pytest.approx(4 / 3)
    assert eq.async_link_cap(4, W, LINK, 2, "collocated") == pytest.approx(8 / 3)
    assert eq.async_link_cap(1, W, LINK, 1, "collocated") == math.inf
    per_worker = eq.async_worker_bytes(4, W, 2, "collocated")
    assert list(per_worker) == pytest.approx([50e6, 50e6, 100e6, 100e6])  # hosts 0 and 1 keep their shard's half


def test_async_rate_capped_by_the_ps_apply():
    fast = eq.Link(ALPHA, 1e12)
    r = eq.async_ps(8, W, C, fast, 1, "separate", ps_apply_s=0.5)
    assert eq.async_apply_cap(0.5, 1) == pytest.approx(2.0) and eq.async_apply_cap(0.5, 4) == pytest.approx(8.0)
    assert r["limit"] == "ps apply" and r["updates_per_s"] == pytest.approx(2.0)
    assert r["step_s"] == pytest.approx(4.0)
    t = 2 * (0.002 + W / 1e12) + C + 0.5
    assert r["apply_s"] == pytest.approx(0.5 + 4.0 - t)  # its queueing counts as apply
    assert pr.point(ps(link=fast, ps_apply_s=0.5), 8).bottleneck == pr.PS_APPLY


def test_ring_allreduce_and_its_bus_bandwidth():
    ring = eq.ring_allreduce(4, W, LINK)
    assert ring == pytest.approx((2 * 3 * ALPHA, 2 * 3 / 4 * 1.0))
    assert eq.sync_allreduce_step_s(C, ring, 0.1) == pytest.approx(C + 0.006 + 1.5 + 0.1)
    algbw, busbw = eq.bus_bandwidth(4, W, eq.ring_allreduce(4, W, NO_ALPHA).total)
    assert algbw == pytest.approx(W / 1.5) and busbw == pytest.approx(BETA)  # nccl-tests: busbw = link rate
    assert eq.bus_bandwidth(1, W, 0.0) == (None, None)
    one = pr.point(Setting("horovod", W, C, 32, LINK, overhead_s=0.1), 1)
    assert one.step_s == pytest.approx(C + 0.1) and one.communication_s == 0 and one.busbw is None


def test_tree_allreduce_rounds():
    assert eq.tree_allreduce(4, W, LINK).total == pytest.approx(4 * (ALPHA + 1.0))
    assert eq.tree_allreduce(5, W, LINK).total == pytest.approx(6 * (ALPHA + 1.0))
    assert eq.tree_allreduce(1, W, LINK).total == 0.0
    assert eq.tree_root_bytes(8, W) == pytest.approx(3 * W)


def test_reference_points_for_four_workers():
    """docs/definitions.md: PS >= 2N*T, tree 2*ceil(log2 N)*T, ring 2(N-1)/N*T; the lecture's 6T is the
    tree with the ps as root of the 4 workers (5 nodes)."""
    t = W / BETA
    assert eq.sync_ps(4, W, 0.0, NO_ALPHA)["step_s"] == pytest.approx(8 * t)
    assert eq.tree_allreduce(4, W, NO_ALPHA).total == pytest.approx(4 * t)
    assert eq.tree_allreduce(4 + 1, W, NO_ALPHA).total == pytest.approx(6 * t)
    assert eq.ring_allreduce(4, W, NO_ALPHA).total == pytest.approx(1.5 * t)
    assert eq.ps_link_bytes(16, W)[0] == pytest.approx(16 * W)  # the ps host moves N*|w| each way
    assert eq.ring_bytes_per_host(1024, W) == pytest.approx(2 * 1023 / 1024 * W)


@pytest.mark.parametrize("sync", [True, False])
@pytest.mark.parametrize("placement", ["separate", "collocated"])
def test_resnet50_on_1gbe_ps_flattens_while_ring_keeps_growing(sync, placement):
    """102 MB of weights, 1 Gbit/s, batch 32 x 100 ms: one ps stops scaling by 64 workers."""
    setting = Setting("parameter_server", RESNET50_W, 3.2, 32, GBE, ps_sync=sync, ps_placement=placement)
    at64, at256 = pr.predict(setting, [64, 256])
    assert at256.images_per_sec < 1.10 * at64.images_per_sec
    assert at64.bottleneck == at256.bottleneck == pr.PS_LINK
    ring64, ring256 = pr.predict(dataclasses.replace(setting, strategy="multi_worker_mirrored"), [64, 256])
    assert ring256.images_per_sec >= 1.5 * ring64.images_per_sec


def test_scaling_efficiency_is_relative_to_one_worker_of_the_same_setting():
    setting = Setting("multi_worker_mirrored", W, C, 32, LINK)
    one, four = pr.predict(setting, [1, 4])
    assert one.scaling_efficiency == pytest.approx(1.0)
    assert four.scaling_efficiency == pytest.approx(C / (C + 0.006 + 1.5))
    assert four.images_per_sec == pytest.approx(4 * 32 / (C + 1.506))


def test_bottleneck_names():
    assert pr.point(ps(ps_sync=True, compute_s=10.0), 1).bottleneck == pr.COMPUTE
    assert pr.point(ps(ps_sync=True), 4).bottleneck == pr.PS_LINK
    assert pr.point(ps(ps_sync=True, num_ps=8), 4).bottleneck == pr.WORKER_LINK
    assert pr.point(ps(ps_sync=True, ps_apply_s=100.0), 4).bottleneck == pr.PS_APPLY
    assert pr.point(ps(ps_sync=False, compute_s=0.0), 1).bottleneck == pr.WORKER_LINK
    slow_messages = eq.Link(1.0, BETA)  # alpha terms outweigh the bytes
    assert pr.point(Setting("multi_worker_mirrored", W, C, 32, slow_messages), 8).bottleneck == pr.LATENCY
    assert pr.point(Setting("multi_worker_mirrored", W, C, 32, LINK), 8).bottleneck == pr.COMPUTE
    assert pr.point(Setting("tree", W, 0.1, 32, LINK), 8).bottleneck == pr.WORKER_LINK
    assert {p.bottleneck for p in pr.predict(ps(), [1, 2, 4, 64])} <= set(pr.BOTTLENECKS)


def test_w_star_closed_form_and_where_the_curve_bends():
    # ResNet50 on 1 Gbit/s with 3.2 s compute: one ps keeps up with about two workers
    assert whatif.w_star(RESNET50_W, 3.2, GBE) == pytest.approx(125e6 * 3.2 / (2 * RESNET50_W))
    link = eq.Link(0.0, 1e8)
    assert whatif.w_star(1e8, 16.0, link) == pytest.approx(8.0)  # k*beta*C/(2W)
    assert whatif.w_star(1e8, 16.0, link, num_ps=2) == pytest.approx(16.0)
    assert whatif.w_star(1e8, 16.0, link, placement="collocated") == pytest.approx(9.0)
    assert whatif.w_star(1e8, 16.0, link, sync=False) == pytest.approx(16.0)  # k*beta*C/W
    # at w* the ps link takes as long as the compute: the step is twice the compute
    setting = Setting("parameter_server", 1e8, 16.0, 32, link, ps_sync=True)
    assert pr.step_s(setting, 8) == pytest.approx(32.0)
    collocated = dataclasses.replace(setting, ps_placement="collocated")
    assert pr.step_s(collocated, 9) == pytest.approx(32.0)


def test_shards_needed_known_answers():
    no_alpha = ps(link=NO_ALPHA, compute_s=0.0, ps_sync=True)
    # step_k = 2*max(N/k, 1)*T against 2T unlimited: k = ceil(N/1.1)
    assert whatif.shards_needed(no_alpha, 16) == 15
    assert whatif.shards_needed(no_alpha, 16, max_shards=14) is None
    # apply 1 s, one worker: 2 + 1/k within 10% of 2 needs k = 5
    assert whatif.shards_needed(dataclasses.replace(no_alpha, ps_apply_s=1.0), 1) == 5
    # async: 16 workers make 8 updates per T; k shards carry k per T (pulls and pushes each use
    # their own direction), so k = 8 already gives the unlimited rate and k = 7 is 14% short
    assert whatif.shards_needed(dataclasses.replace(no_alpha, ps_sync=False), 16) == 8


def test_bandwidth_where_ps_matches_ring_known_answer():
    # C + 8W/b <= 1.1 (C + 1.5W/b)  <=>  b >= 63.5 W / C bytes/s
    setting = Setting("parameter_server", 1e8, 1.0, 32, eq.Link(0.0, 1e6), ps_sync=True)
    match = whatif.bandwidth_match(setting, 4)
    assert match.bps == pytest.approx(8 * 63.5e8, rel=1e-6)
    assert "within 10%" in match.reason
    at = pr.with_beta(setting, match.bps / 8)
    ring = dataclasses.replace(at, strategy="multi_worker_mirrored")
    assert pr.step_s(at, 4) == pytest.approx(1.1 * pr.step_s(ring, 4), rel=1e-6)


def test_bandwidth_match_none_when_what_bandwidth_cannot_shrink_is_too_large():
    setting = Setting("parameter_server", 1e8, 1.0, 32, eq.Link(0.0, 1e6), ps_sync=True, ps_apply_s=1.0)
    match = whatif.bandwidth_match(setting, 4)
    assert match.bps is None
    assert "10 Tbit/s" in match.reason and "ps apply 1000 ms" in match.reason


def test_bandwidth_match_at_the_lowest_bandwidth_when_ps_moves_nothing():
    setting = Setting("parameter_server", 1e8, 1.0, 32, eq.Link(0.0, 1e6), ps_placement="collocated")
    match = whatif.bandwidth_match(setting, 1)
    assert match.bps == whatif.BOTTOM_BPS and "lowest bandwidth tried" in match.reason


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError):
        eq.Link(0.0, 0.0)
    with pytest.raises(ValueError):
        eq.ps_link_bytes(0, W)
    with pytest.raises(ValueError):
        Setting("ring", W, C, 32, LINK)
    with pytest.raises(ValueError):
        pr.point(ps(), 0)


def test_the_package_imports_only_the_standard_library_numpy_and_scipy():
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tfbench", "perfmodel")
    allowed = set(sys.stdlib_module_names) | {"numpy", "scipy", "__future__"}
    for name in sorted(os.listdir(root)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(root, name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        with open(os.path.join(root, name), encoding="utf-8") as f:
            assert len(f.read().splitlines()) <= 400, name
        for node in ast.walk(tree):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module] if isinstance(node, ast.ImportFrom) else [])
            for module in modules:
                assert module.split(".")[0] in allowed or module.startswith("tfbench.perfmodel"), (name, module)


def test_one_ps_shard_per_worker_as_tf_cnn_benchmarks_places_them():
    s = pr.Setting(strategy="parameter_server", w_bytes=1e8, compute_s=1.0, batch_size=32,
                           link=eq.Link(0.0, 1.25e8), ps_placement="collocated", ps_sync=True)
    one, sixteen = (pr.point(dataclasses.replace(s, num_ps=n), n) for n in (1, 16))
    # collocated, k = N: each host's link carries its shard for the 15 others ((N-1)/N of |w|) and its own
    # worker's pulls and pushes of the other 15 shards (another (N-1)/N), each way; directions in turn (chi = 1)
    assert sixteen.communication_s == pytest.approx(2 * 2 * (15 / 16) * 1e8 / 1.25e8)
    assert one.communication_s == 0.0 and sixteen.step_s > one.step_s


def test_the_models_terms_for_tfbenchs_strategies_agree_with_their_traits():
    """tfbench.perfmodel.protocols is the one translation of a strategy's name into the model's terms:
    a strategy whose traits change, or a new one with tables on ps tasks, fails here until it has its term."""
    from tfbench.config import strategy_traits
    from tfbench.perfmodel import protocols

    assert set(protocols.PREDICTED + protocols.ONE_TASK) <= set(strategy_traits.STRATEGIES)
    assert protocols.TREE not in strategy_traits.STRATEGIES
    ps = strategy_traits.of(protocols.PS)
    assert ps.coordinated and ps.ps_tasks and not ps.all_reduce
    assert all(strategy_traits.of(s).all_reduce and not strategy_traits.of(s).ps_tasks for s in protocols.RINGS)
    assert set(protocols.ONE_TASK) == set(strategy_traits.names(lambda t: not t.multi_task))
    for name, traits in strategy_traits.TRAITS.items():
        assert (protocols.tables_kind(name) == protocols.PS) == traits.ps_tasks, name
        assert (protocols.of_run(name) is not None) == (traits.multi_task and (traits.ps_tasks or traits.all_reduce))
