"""Intervals on the performance model's predictions (tfbench.perfmodel.intervals, spread,
clusterspread, cost): the bootstrap over tfbench runs recovers a known spread and covers held-out
runs of synthetic sweeps at about its level; beta bounded from one side gives a range holding the
true link; cost and energy per image against hand-computed values; bad prices exit 2. No
TensorFlow."""
import dataclasses
import math

import numpy as np
import pytest

from conftest import run_cli
from tfbench.perfmodel import cost, intervals
from tfbench.perfmodel.curves import clusterfit, clusterspread
from tfbench.perfmodel.curves import synthetic as synthetic_curves
from tfbench.perfmodel.dense import shards
from tfbench.perfmodel.fitting import synthetic
from tfbench.perfmodel.fitting import fit as fit_lib
from tfbench.perfmodel.fitting import params as params_lib
from tfbench.perfmodel.fitting import nofit
from tfbench.perfmodel.fitting import spread as spread_lib
from tfbench.perfmodel.intervals import Interval

# ---- the interval itself -------------------------------------------------------------------------


def test_an_interval_from_samples_is_their_quantiles_and_says_its_level():
    found = intervals.from_samples(50.0, np.arange(1.0, 102.0), 0.9, "test")
    assert (found.low, found.high) == pytest.approx((6.0, 96.0)) and found.level == 0.9
    assert found.contains(50.0) and not found.contains(97.0)
    assert found.width == pytest.approx(90.0 / 50.0) and found.text(1) == "50.0 [6.0, 96.0]"
    assert intervals.exact(3.0, "x").level_text == "range" and found.level_text == "90%"
    assert intervals.span(2.0, [Interval(2, 1, 3), Interval(2, 0.5, 2.5)]) == Interval(2, 0.5, 3)


def test_the_center_is_the_least_worst_relative_error_over_the_range():
    low, high = 100.0, 400.0
    c = intervals.center(low, high)
    assert c == 200.0
    worst = lambda x: max(abs(math.log(low / x)), abs(math.log(high / x)))  # noqa: E731
    assert all(worst(c) <= worst(x) for x in np.linspace(low, high, 50))


def test_coverage_counts_points_inside_and_the_median_width():
    pairs = [(10.0, Interval(10, 9, 11)), (10.0, Interval(12, 11, 13)), (5.0, Interval(5, 4, 7))]
    c = intervals.coverage(pairs)
    assert c["inside"] == pytest.approx(2 / 3) and c["median_width"] == pytest.approx(2 / 10)
    assert intervals.coverage_line(c) == ("coverage = 67% of held-out points inside their 90% interval, median "
                                          "width 20% (3 points)")
    assert intervals.coverage_line(intervals.coverage([])).startswith("coverage = n/a")


# ---- the bootstrap over tfbench runs -------------------------------------------------------------

SIGMA = 0.05  # each synthetic run's rate scatters by 5% (log-normal) about the model's


def test_the_bootstrap_covers_held_out_runs_at_about_its_level_and_holds_the_true_parameters(monkeypatch):
    """Synthetic sweeps made by the model with a known parameter set and a known scatter
    (tfbench.perfmodel.fitting.synthetic): fitted on N <= 2, fresh 3-worker runs inside their 90% intervals
    about 90% of the time, the scatter found near the true one, and each fitted parameter's 90%
    range over the refits holding the true value about as often. (`python -m tools.model
    calibrate` runs the same with more sweeps and refits.)"""
    monkeypatch.setattr(spread_lib, "PILOT", 30)  # the leverages from 30 refits, the intervals from 40
    found = synthetic.calibrate(SIGMA, sweeps=12, replicates=40, seed=7)
    assert found["coverage"]["points"] == 72 and 0.75 <= found["coverage"]["inside"] <= 0.99, found
    assert 0.5 * SIGMA < found["scale"] < 2 * SIGMA
    assert all(count >= 0.6 * 12 for count in found["parameters"].values()), found["parameters"]


def test_the_recommenders_and_a_cluster_curves_intervals_hold_fresh_runs_near_their_level():
    """What `tools.model calibrate` checks of the two other kinds of interval called 90%: fresh
    runs at 8-16 workers of a recommender fitted on N <= 4, fresh points at 32-128 GPUs of a curve
    fitted on 1-16, each scattered by SIGMA about the truth."""
    rec = synthetic_curves.calibrate_recommender(SIGMA, 12, seed=3)
    curve = synthetic_curves.calibrate_curve(SIGMA, 12, seed=3)
    for found in (rec, curve):
        assert found["level"] == intervals.LEVEL and found["points"] > 0
        assert intervals.LEVEL - 0.2 <= found["inside"] <= 1.0, found


def test_runs_without_scatter_still_leave_the_links_beta_unsure():
    """Runs that fit exactly leave a new run no scatter, but each link's beta is perturbed in the
    refits (spread.BETA_FLOOR at least): the interval holds the truth, narrow, never a point."""
    data, found = fit_lib.with_spread(synthetic.sweep(), replicates=40)
    o = synthetic.observation("parameter_server", 3, "100mbit")
    iv = found.interval(lambda d: fit_lib.predicted_rate(d, o))
    assert iv.point == pytest.approx(o.images_per_sec, rel=1e-3) and iv.low < o.images_per_sec < iv.high
    refitted_betas = {round(d["links"]["100mbit"]["beta_bps"]) for d in found.replicates}
    assert len(refitted_betas) > 1 and 0 < iv.width < 10 * spread_lib.BETA_FLOOR


def test_the_refits_travel_in_the_parameters_file_and_are_checked(tmp_path):
    training = synthetic.sweep(SIGMA, np.random.default_rng(3))
    data, found = fit_lib.with_spread(training, replicates=12)
    path = str(tmp_path / "params.json")
    params_lib.save(path, data)
    loaded = params_lib.load(path)
    refits = params_lib.refits(loaded)
    assert len(refits) == 12 and "spread" not in refits[0]
    assert refits[5]["overhead_s"] == found.replicates[5]["overhead_s"]
    assert loaded["spread"]["scatter"]["scale"] == pytest.approx(found.scatter.scale)
    broken = dict(loaded, spread=dict(loaded["spread"], paths=[["compute", 0, "nonsense"]]))
    with pytest.raises(params_lib.ParamsError, match=r"spread.paths\[0\] must be the keys of a fitted number"):
        params_lib.validate(broken)


# ---- beta bounded from one side ------------------------------------------------------------------

def _cluster():
    v = shards.Variable
    return clusterfit.Cluster([v(f"k{i}", (64, 64, 3, 3)) for i in range(40)] + [v("logits", (2048, 1000))])


def _points(cluster, truth, gpus):
    points = [clusterfit.Point(g, 1, g, "parameter_server", 0.0, 32) for g in gpus]
    return [dataclasses.replace(q, images_per_sec=cluster.rate(q, truth)) for q in points]


def test_compute_bound_points_give_a_beta_range_from_their_bound_to_the_ceiling_that_holds_the_truth():
    cluster = _cluster()
    truth = clusterfit.Params(per_image_s=0.02, beta=3e8, phi=0.1)
    fitted = _points(cluster, truth, (1, 2, 4, 8, 16))
    assert all(cluster.parts(q, truth).bottleneck == "compute" for q in fitted[1:])
    prof = clusterspread.profile(cluster, fitted, ceiling=1.25e9)
    assert prof.betas[0] <= truth.beta <= prof.betas[-1] == 1.25e9
    big = _points(cluster, truth, (256,))[0]
    assert cluster.parts(big, truth).bottleneck.startswith("network")
    found = prof.interval(big)
    assert found.contains(big.images_per_sec) and found.low < found.point < found.high
    rates = {rule: prof.point(big, rule)[0] for rule in clusterspread.RULES}
    assert rates["bound"] < rates["center"] < rates["ceiling"]
    assert rates["center"] == pytest.approx(intervals.center(min(prof.rates(big)), max(prof.rates(big))))


def test_network_bound_points_pin_beta_and_a_given_beta_is_kept():
    cluster = _cluster()
    truth = clusterfit.Params(per_image_s=0.001, beta=2e7, phi=0.1)
    fitted = _points(cluster, truth, (1, 2, 4, 8, 16))
    prof = clusterspread.profile(cluster, fitted, ceiling=1.25e9)
    assert prof.betas[0] == pytest.approx(2e7, rel=0.05) and prof.betas[-1] == pytest.approx(2e7, rel=0.05)
    big = _points(cluster, truth, (128,))[0]
    assert prof.interval(big).point == pytest.approx(big.images_per_sec, rel=0.05)
    given = clusterspread.profile(cluster, fitted, ceiling=2e7, beta=2e7)
    assert given.given and given.betas == (2e7,) and given.fits[0].phi == pytest.approx(0.1, abs=5e-3)


def test_a_fit_with_no_degree_of_freedom_carries_a_new_runs_scatter_not_nothing():
    """Two points that communicate fit phi and m exactly: their scatter is unknown, and the
    intervals carry a run's scatter by the no-fit rule, as a range with no level, saying so."""
    cluster = _cluster()
    truth = clusterfit.Params(per_image_s=0.02, beta=3e8, phi=0.1)
    prof = clusterspread.profile(cluster, _points(cluster, truth, (1, 2, 4)), ceiling=1.25e9)
    assert prof.dof == 0
    big = _points(cluster, truth, (64,))[0]
    rates, found = prof.rates(big), prof.interval(big)
    assert (found.low, found.high) == pytest.approx((rates.min() / nofit.SCATTER_FACTOR,
                                                     rates.max() * nofit.SCATTER_FACTOR))
    assert found.level is None and f"a new run's scatter {nofit.SCATTER:.1%}" in found.basis
    more = clusterspread.profile(cluster, _points(cluster, truth, (1, 2, 4, 8, 16)), ceiling=1.25e9)
    assert more.dof == 2 and "the fitted points' scatter (4 points)" in more.interval(big).basis
    assert more.interval(big).level == intervals.LEVEL


def test_one_more_point_where_beta_binds_narrows_the_intervals_most():
    cluster = _cluster()
    truth = clusterfit.Params(per_image_s=0.02, beta=3e8, phi=0.1)
    fitted = _points(cluster, truth, (1, 2, 4, 8, 16))
    prof = clusterspread.profile(cluster, fitted, ceiling=1.25e9)
    asked = _points(cluster, truth, (128, 256))
    found = clusterspread.narrowing(prof, fitted, asked, _points(cluster, truth, (32, 64)))
    now = float(np.median([prof.interval(q).width for q in asked]))
    assert [w for _, w in found] == sorted(w for _, w in found) and all(w < now for _, w in found)
    assert {what for what, _ in found} >= {"the link's bandwidth measured (--link_bandwidth)",
                                           "one measured point at 64 GPUs"}


# ---- cost and energy -----------------------------------------------------------------------------

def test_cost_and_energy_per_image_against_hand_computed_values():
    # 16 nodes at $3/h for 800 images/s: $48/h for 2.88 M images/h = $16.67 per million images;
    # 16 x 300 W = 4800 J/s over 800 images/s = 6 J per image
    prices = cost.Prices(usd_per_node_hour=3.0, watts_per_node=300.0)
    out = cost.per_unit(Interval(800.0, 400.0, 1000.0), 16, prices)
    assert out["usd_per_million_images"].point == pytest.approx(48 / 2.88)
    assert (out["usd_per_million_images"].low, out["usd_per_million_images"].high) == pytest.approx((48 / 3.6, 48 / 1.44))
    assert out["joules_per_image"] == Interval(6.0, 4.8, 12.0)
    tokens = cost.per_unit(2000.0, 1, cost.Prices(watts_per_node=500.0), cost.Unit("tokens", "token"))
    assert tokens == {"joules_per_token": 0.25}
    assert cost.nodes(33, 8, separate_ps=2) == 7 and cost.Prices().columns() == []


def test_the_cheapest_setting_reaching_a_rate():
    options = [cost.Option("ps", 16, 17, Interval(900.0, 700.0, 1000.0)),
               cost.Option("ring", 16, 16, Interval(1200.0, 1100.0, 1300.0)),
               cost.Option("ring", 8, 8, Interval(640.0, 600.0, 700.0))]
    best, usd = cost.cheapest(options, 800.0, 2.0)
    assert (best.label, best.workers) == ("ring", 16) and usd.point == pytest.approx(2 * 16 / 3600 / 1200 * 1e6)
    assert cost.cheapest(options, 1150.0, 2.0, sure=True) is None and cost.cheapest(options, 5000.0, 2.0) is None


@pytest.mark.parametrize("verb, flag", [
    (["predict", "--compute_ms_per_image=1", "--link_bandwidth=1gbe"], "--price_per_node_hour=-1"),
    (["predict", "--compute_ms_per_image=1", "--link_bandwidth=1gbe"], "--watts_per_node=inf"),
    (["published"], "--price_per_node_hour=nan"),
    (["cheapest", "--target_rate=100", "--compute_ms_per_image=1", "--link_bandwidth=1gbe"], "--watts_per_node=0"),
])
def test_bad_prices_exit_2_with_one_line(tmp_path, verb, flag):
    env = {"TFBENCH_MODEL_MEMORY_CACHE": str(tmp_path / "never-written.json")}
    result = run_cli(*verb, flag, module="tools.model", env=env, timeout=120)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"tfbench: error: {flag.split('=')[0]} must be a positive number"), lines[0]
    assert not (tmp_path / "never-written.json").exists()
