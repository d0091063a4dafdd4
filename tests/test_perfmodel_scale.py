"""What `make model-scale` computes (tfbench.perfmodel.fitting.scale, tools.model scale): the error at each
N, its trend per doubling of N, the drift from the largest fitted N, the median and the goals; and
a fit on N <= 4 of synthetic runs made by the model from known parameters predicting their 8-16
workers. No TensorFlow."""
import dataclasses
import math

import pytest

from conftest import run_cli
from tfbench.perfmodel.dense import equations as eq
from tfbench.perfmodel.fitting import fit as fit_lib
from tfbench.perfmodel import intervals
from tfbench.perfmodel.dense import prediction, sync_step, terms
from tfbench.perfmodel.fitting import scale as scale_lib
from tfbench.perfmodel.fitting import spread as spread_lib
from tfbench.perfmodel.fitting.observations import from_run
from tools.model import scale

Row = scale_lib.Row


@pytest.fixture(autouse=True)
def few_refits(monkeypatch):
    """Every fit is refitted for its intervals: 20 and 20 pilot refits here (test_perfmodel_intervals
    checks the intervals themselves)."""
    monkeypatch.setattr(spread_lib, "REPLICATES", 20)
    monkeypatch.setattr(spread_lib, "PILOT", 20)


def test_the_error_is_relative_to_the_measured_rate_and_absent_without_a_prediction():
    assert Row("x", 8, 100.0, 110.0, True).error == pytest.approx(0.10)
    assert Row("x", 8, 100.0, 85.0, True).error == pytest.approx(-0.15)
    assert Row("x", 8, 100.0, None, True).error is None


def test_repeats_of_an_n_are_averaged():
    rows = [Row("x", 8, 100.0, 110.0, True), Row("x", 8, 100.0, 120.0, True), Row("x", 16, 50.0, 45.0, True)]
    assert scale_lib.errors_by_n(rows) == pytest.approx({8: 0.15, 16: -0.10})


def test_bias_per_doubling_is_the_slope_against_log2_n():
    # error = 0.01 + 0.04 * log2(N / 4): +4 points per doubling, whatever the spacing of N
    errors = {n: 0.01 + 0.04 * math.log2(n / 4) for n in (4, 8, 12, 16)}
    assert scale_lib.per_doubling(errors) == pytest.approx(0.04)
    assert scale_lib.per_doubling({4: 0.3, 16: 0.3}) == pytest.approx(0.0)
    assert scale_lib.per_doubling({8: 0.1}) is None


def biased(strategy, slope, offset=0.0):
    """Rows of one strategy whose error is offset + slope * log2(N/4); N <= 4 fitted."""
    return [Row(strategy, n, 100.0, 100.0 * (1 + offset + slope * math.log2(n / 4)), n > 4)
            for n in (1, 2, 4, 8, 12, 16)]


def test_trend_starts_at_the_largest_fitted_n_and_drift_runs_to_the_largest_n():
    t = scale_lib.trend("ring", biased("ring", 0.03, offset=0.02))
    assert (t.from_n, t.to_n) == (4, 16)
    assert t.per_doubling == pytest.approx(0.03)  # over N = 4, 8, 12, 16 only
    assert t.drift == pytest.approx(0.06)  # two doublings from 4 to 16
    assert t.errors[1] == pytest.approx(0.02 - 0.06)
    alone = scale_lib.trend("ps", [Row("ps", 8, 10.0, 11.0, True)])
    assert alone.drift is None and alone.per_doubling is None and alone.from_n is None


def test_summary_is_over_held_out_runs_and_checks_each_goal():
    rows = biased("ring", 0.0, offset=0.05) + [Row("ps", 4, 10.0, 10.0, False), Row("ps", 8, 10.0, 9.2, True),
                                               Row("ps", 16, 10.0, 8.5, True), Row("ps", 12, 10.0, None, True)]
    s = scale_lib.summary(rows)
    # held out: ring +5% at 8, 12, 16; ps -8% and -15% (the fitted N=4 rows do not count)
    assert s["points"] == 5 and s["unpredicted"] == 1
    assert s["median_abs_error"] == pytest.approx(0.05)
    assert s["max_abs_error"] == pytest.approx(0.15)
    assert s["max_drift"] == pytest.approx(0.15)  # ps: -15% at 16 from 0% at 4
    assert s["goals"] == {"median": True, "max": True, "drift": False, "coverage": False, "width": False}
    assert s["coverage"]["points"] == 0  # no row has an interval
    drifting = scale_lib.summary(biased("ring", 0.06))
    assert drifting["max_drift"] == pytest.approx(0.12) and not drifting["goals"]["drift"]
    assert scale_lib.summary([Row("x", 2, 1.0, 1.0, False)])["median_abs_error"] is None


def test_the_report_prints_each_strategys_trend_and_the_median():
    rows = biased("horovod", 0.02) + [Row("mwms", n, 100.0, 97.0, n > 4) for n in (1, 4, 8, 16)]
    lines = scale.trend_lines(rows)
    assert lines[0].startswith("horovod: error N=1 -4.0%, N=2 -2.0%, N=4 +0.0%, N=8 +2.0%, N=12 +3.2%, N=16 +4.0%")
    assert "per doubling of N +2.0 points; drift +4.0 points from N=4 to N=16" in lines[0]
    assert "drift +0.0 points from N=4 to N=16" in lines[1]
    summary = scale.summary_lines(rows, 4)
    assert summary[0].startswith("median abs error = 3.0%, max abs error = 4.0% over 5 held-out runs (N = 8-16, "
                                 "fitted on N <= 4)")
    assert summary[1] == "coverage = n/a (no held-out point has an interval)"
    assert summary[2] == ("goals: median <= 10% met, max <= 20% met, drift <= 10 points met (largest 4.0 points), "
                          "coverage >= 80% missed, median width <= 30% missed")
    held = [dataclasses.replace(r, interval=intervals.Interval(r.predicted, 0.9 * r.predicted, 1.1 * r.predicted))
            for r in rows]
    assert scale.summary_lines(held, 4)[1] == ("coverage = 100% of held-out points inside their 90% interval, "
                                               "median width 20% (5 points)")


def test_memory_is_the_machines_peak_and_the_largest_runs_task_sum():
    line = scale.memory_line([("a", 3, 1536.0, 2048.0), ("b", 33, 20480.0, 9216.0), ("c", 18, 11264.0, 5120.0)])
    assert line.startswith("memory: the machine had at most 9.0 GiB in use during a run; the largest run, b (33 tasks), "
                           "20.0 GiB summed")


# ---- a fit on N <= 4 of runs made by the model itself ---------------------------------------------

W, MS_PER_IMAGE, BATCH, ALPHA_S, BETA_BPS = 154_280.0, 1.5, 8, 4e-4, 4.8e6
# LeNet at 16 px on 8 ps: its dense kernel (131 kB) alone on one shard
SHARDS = (1728.0, 64.0, 18432.0, 128.0, 131072.0, 256.0, 2560.0, 40.0)
# (overhead s, share of beta, duplex chi): a synchronous ps fits chi at its link's probed beta, a ring
# its protocol's share of beta
TRUE = {"separate": (0.020, 1.0, 0.4), "collocated": (0.030, 1.0, 0.3), "multi_worker_mirrored": (0.004, 0.90, 0.0),
        "horovod": (0.002, 0.95, 0.0)}


def shards_for(k):
    """SHARDS placed round-robin on k ps (8 variables, k <= 16)."""
    sizes = [0.0] * k
    for i, b in enumerate(SHARDS):
        sizes[i % k] += b
    counts = [sum(1 for i in range(len(SHARDS)) if i % k == j) for j in range(k)]
    return tuple(sizes), tuple(counts)


def synthetic(family, n):
    ps = family in ("separate", "collocated")
    k = n if family == "collocated" else 1
    sizes, counts = shards_for(k) if family == "collocated" else ((), ())
    overhead, share, chi = TRUE[family]
    truth = prediction.Setting(
        strategy="parameter_server" if ps else family, w_bytes=W, compute_s=MS_PER_IMAGE * BATCH / 1e3,
        batch_size=BATCH, link=eq.Link(ALPHA_S, share * BETA_BPS / 8), num_ps=k,
        ps_placement=family if ps else "separate", ps_sync=ps, ps_apply_s=0.003 if ps else 0.0, overhead_s=overhead,
        extra=sync_step.Extra(shard_bytes=sizes or None, shard_variables=counts or None, chi=chi))
    p = prediction.point(truth, n)
    config = {"strategy": truth.strategy, "num_workers": n, "ps_placement": truth.ps_placement, "ps_sync": ps,
              "batch_size": BATCH, "model": "lenet", "mode": "train", "precision": "fp32", "image_size": 16,
              "num_classes": 10, "network": "emulated", "link_bandwidth": "5mbit"}
    source = "the coordinator's closures and probes" if ps else (
        "in-step timestamps of every rank" if n > 1 else "the task's own steps")
    cluster = {"status": "ok", "num_ps": k if ps else 0, "cores_per_worker": 1, "images_per_sec": p.images_per_sec,
               "link": {"configured_bps": 5_000_000, "alpha_ms": ALPHA_S * 1e3, "beta_bps": BETA_BPS},
               "step_breakdown": {"source": source, "step_mean_s": p.step_s,
                                  "mean_s": {"compute": p.compute_s, "communication": p.communication_s,
                                             "apply": p.apply_s, "waiting": p.overhead_s}}}
    obs, why = from_run(f"{family}-w{n}", config, cluster, W)
    assert obs is not None, why
    return dataclasses.replace(obs, shard_bytes=sizes, shard_variables=counts) if sizes else obs


def test_a_fit_on_four_workers_predicts_sixteen_for_every_strategy():
    observations = [synthetic(f, n) for f in TRUE for n in (1, 2, 4, 8, 12, 16)]
    rows = scale.rows(observations, fit_up_to=4)
    assert {r.strategy for r in rows} == {"horovod", "multi_worker_mirrored", "parameter_server (sync, separate, 1 ps)",
                                          "parameter_server (sync, collocated, k = N)"}
    assert [r.held_out for r in rows if r.strategy == "horovod"] == [False, False, False, True, True, True]
    for r in rows:
        assert r.error == pytest.approx(0.0, abs=2e-3), (r.strategy, r.num_workers, r.error)
        # the model's own runs scatter by nothing: only the link's beta, known to BETA_FLOOR, widens it
        assert r.interval.width <= 4 * spread_lib.BETA_FLOOR
    colloc = [r for r in rows if "collocated" in r.strategy and r.num_workers == 16][0]
    assert colloc.bottleneck == prediction.PS_LINK  # the host of the dense kernel's shard
    # the same runs charged |w|/k per shard instead of the busiest one are predicted far too fast
    even = [dataclasses.replace(o, shard_bytes=(), shard_variables=()) for o in observations]
    wrong = [r for r in scale.rows(even, 4) if "collocated" in r.strategy and r.num_workers == 16][0]
    assert wrong.error > 0.5
    goals = scale_lib.summary(rows)["goals"]
    assert goals["median"] and goals["max"] and goals["drift"] and goals["width"]


def test_nothing_above_the_cut_is_bad_input():
    observations = [synthetic("horovod", n) for n in (1, 2, 4)]
    with pytest.raises(Exception, match="nothing to predict"):
        scale.rows(observations, fit_up_to=4)


@pytest.mark.parametrize("args, message", [
    (["scale"], "give one sweep directory"),
    (["scale", "/no/such/sweep"], "/no/such/sweep: no such directory"),
    (["scale", "/tmp", "--fit_up_to=0"], "--fit_up_to must be 1 or more"),
])
def test_bad_input_exits_2_with_one_line(args, message):
    result = run_cli(*args, module="tools.model", timeout=120)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("tfbench: error: ") and message in lines[0]


def test_bytes_lines_name_each_runs_busiest_ps_host_and_the_largest_error():
    """The busiest ps host by the placed shards, its counter against terms.wire_bytes of its load."""
    o = synthetic("collocated", 4)
    loads = fit_lib.ps_host_loads(o)
    wire = [terms.wire_bytes(b, b) for b in loads]
    busiest = max(range(len(wire)), key=wire.__getitem__)
    measured = tuple(w * (1.10 if i == busiest else 1.5) for i, w in enumerate(wire))
    lines = scale.bytes_lines([dataclasses.replace(o, ps_host_tx=measured)])
    assert f"busiest ps host (ps {busiest})" in lines[0] and "(+10.0%)" in lines[0]
    assert "the other 3" in lines[0]
    assert lines[-1] == "busiest ps host, measured against the placed shards: largest error +10.0% over 1 run"
    assert scale.bytes_lines([o]) == []  # no counters, no check
