"""Every tools.model verb that predicts, end to end as a user runs it: the same --format, prices and
refusals everywhere; `published` and `cluster` with the fitted and the no-fit path side by side,
agreeing on the points both see; a prediction with nothing fitted that ranges both ways; the
recommender's prediction without runs, with its crossover's interval. No TensorFlow (the model
counts are shipped or cached)."""
import csv
import io
import json
import os

import numpy as np
import pytest

from conftest import ROOT, run_cli
from tfbench.perfmodel import cost
from tfbench.perfmodel.curves import synthetic as synthetic_curves
from tfbench.perfmodel.fitting import measured, nofit
from tfbench.perfmodel.intervals import Interval

EXAMPLE = os.path.join(ROOT, "tfbench", "perfmodel", "data", "example_cluster.csv")
CLUSTER = ["cluster", EXAMPLE, "--model=inception_v3", "--image_size=299", "--batch_size=64", "--link_ceiling=10gbe"]
DLRM = ["predict", "--model=dlrm", "--compute_ms_per_example=1", "--link_bandwidth=10mbit", "--batch_size=512",
        "--embedding_rows=20000", "--zipf_alpha=0.6", "--num_workers=2,4,8,16,32,64"]
IMAGE = ["predict", "--model=lenet", "--image_size=16", "--num_classes=10", "--batch_size=8",
         "--compute_ms_per_image=0.2", "--link_bandwidth=5mbit", "--num_workers=1,2,4,16"]


def model_cli(*args, env=None):
    return run_cli(*args, module="tools.model", env=env, timeout=120)


@pytest.fixture
def counts(tmp_path):
    """Model-count caches holding LeNet at 16 px (its parameters, one variable of them all)."""
    path, variables = tmp_path / "counts.json", tmp_path / "variables.json"
    path.write_text(json.dumps({"lenet|16px|10 classes|NHWC": {"params": 38_000, "variables": 8,
                                                               "activation_floats": 1, "largest_floats": 1}}))
    variables.write_text(json.dumps({"lenet|16px|10 classes": [{"name": "all", "shape": [38_000], "itemsize": 4,
                                                                "trainable": True}]}))
    return {"TFBENCH_MODEL_MEMORY_CACHE": str(path), "TFBENCH_MODEL_VARIABLES_CACHE": str(variables)}


def rows_of(result) -> list:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["rows"]


def interval(cell: dict) -> Interval:
    return Interval(cell["point"], cell["low"], cell["high"], cell["level"], cell["basis"])


@pytest.mark.parametrize("verb", [IMAGE, DLRM, ["cheapest", "--target_rate=100"] + IMAGE[1:], ["published"],
                                  CLUSTER, ["recommender", "/no/such/sweep"]])
@pytest.mark.parametrize("flag, message", [("--price_per_node_hour=-5", "--price_per_node_hour must be a positive"),
                                           ("--watts_per_node=0", "--watts_per_node must be a positive"),
                                           ("--format=xml", "--format='xml' is unknown")])
def test_every_predicting_verb_refuses_bad_prices_and_formats_naming_the_flag(verb, flag, message, counts):
    result = model_cli(*verb, flag, env=counts)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and message in lines[0], result.stderr


@pytest.mark.parametrize("verb", [IMAGE, DLRM, ["cheapest", "--target_rate=1", "--price_per_node_hour=1"] + IMAGE[1:],
                                  ["published"], CLUSTER])
def test_every_predicting_verb_prints_csv_and_json_with_the_cost_of_each_rate(verb, counts):
    prices = ["--price_per_node_hour=2", "--watts_per_node=300"]
    as_json = rows_of(model_cli(*verb, *prices, "--format=json", env=counts))
    as_csv = model_cli(*verb, *prices, "--format=csv", env=counts)
    assert as_csv.returncode == 0, as_csv.stderr
    header = next(csv.reader(io.StringIO(as_csv.stdout)))
    assert any(c.endswith("usd_per_million_images") or c.endswith("usd_per_million_examples") for c in header)
    assert any(c.endswith("joules_per_image") or c.endswith("joules_per_example") for c in header)
    assert len(list(csv.reader(io.StringIO(as_csv.stdout)))) == len(as_json) + 1


def test_a_prediction_with_nothing_fitted_reaches_up_and_down_for_every_strategy(counts):
    for strategy in ("--strategy=parameter_server --ps_sync", "--strategy=parameter_server",
                     "--strategy=multi_worker_mirrored", "--strategy=horovod", "--strategy=tree"):
        rows = rows_of(model_cli(*IMAGE, *strategy.split(), "--format=json", env=counts))
        for row in rows[1:]:  # from 2 workers on, the unknowns move the rate both ways
            rate = interval(row["images_per_sec"])
            assert rate.low < rate.point < rate.high and rate.level is None, (strategy, row)


def test_the_no_fit_rule_puts_its_point_at_the_median_of_tfbenchs_fits_inside_its_range():
    found = nofit.unknowns("parameter_server_sync", 1e6)
    assert set(found) == {"share", "chi", "overhead_s", "apply_s", "phi"}
    assert all(u.low <= u.point <= u.high for u in found.values())
    assert found["phi"].low == 0.0 and found["phi"].point == found["phi"].high == 1.0
    assert found["overhead_s"].low == found["apply_s"].low == 0.0
    assert set(nofit.unknowns("tree", 1e6)) == {"share", "overhead_s", "phi"}  # an all-reduce: no chi, no apply
    span = nofit.span(lambda v: 1.0 / (1 + v["overhead_s"] + v["phi"] - v["share"]), found)
    assert span.low < span.point < span.high and span.level is None


def test_a_no_fit_range_carries_a_new_runs_scatter_even_with_nothing_unknown():
    """A prediction is of a run: with every unknown given, the range is a run's scatter as tfbench's
    fits measured it, not a point; with unknowns, the corners' ends move out by the same factor."""
    assert min(measured.RUN_SCATTER) <= nofit.SCATTER <= max(measured.RUN_SCATTER)
    given = nofit.span(lambda v: 100.0, {})
    assert given.point == 100.0 and given.level is None
    assert given.low == pytest.approx(100.0 / nofit.SCATTER_FACTOR) and given.high == pytest.approx(
        100.0 * nofit.SCATTER_FACTOR)
    assert 1.03 < nofit.SCATTER_FACTOR < 1.15  # the 95% quantile of a 3-7% scatter
    found = {"phi": nofit.Unknown("phi", 1.0, 0.0, 1.0)}
    ranged = nofit.span(lambda v: 100.0 / (1 + v["phi"]), found)
    assert (ranged.low, ranged.point, ranged.high) == pytest.approx(
        (50.0 / nofit.SCATTER_FACTOR, 50.0, 100.0 * nofit.SCATTER_FACTOR))
    assert f"a new run's scatter {nofit.SCATTER:.1%}" in ranged.basis


def test_published_prints_the_fit_and_the_no_fit_path_side_by_side():
    result = model_cli("published", "--format=csv")
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert {r["cluster"] for r in rows} == {"piz_daint", "p2.xlarge", "p2.8xlarge"}
    for r in rows:
        fit = [float(r[f"predicted_images_per_sec{e}"]) for e in ("_low", "", "_high")]
        unfitted = [float(r[f"nofit_images_per_sec{e}"]) for e in ("_low", "", "_high")]
        assert fit == sorted(fit) and unfitted == sorted(unfitted) and unfitted[0] < unfitted[2], r
        if int(r["gpus"]) == 1:  # the point its compute came from: the measured rate, ranged by a run's scatter
            measured_rate = float(r["measured_images_per_sec"])
            assert unfitted == pytest.approx([measured_rate / nofit.SCATTER_FACTOR, measured_rate,
                                              measured_rate * nofit.SCATTER_FACTOR]), r
    closing = result.stderr
    assert "coverage = " in closing and "no fit (compute from the smallest point, the nominal link" in closing


def test_published_takes_tensorflows_k80_table_and_ranges_every_point_both_ways():
    """Five curves of three models, each fitted on 1-16 GPUs (two points that communicate: no
    degree of freedom) and held out at 32 and 64: no interval of zero width, fitted or not."""
    rows = rows_of(model_cli("published", "--table=tensorflow_k80", "--format=json"))
    assert {r["cluster"] for r in rows} == {"k80_inception_v3_b64", "k80_resnet50_b64", "k80_resnet152_b32",
                                            "k80_inception_v3_b32", "k80_resnet50_b32"}
    assert sorted({r["gpus"] for r in rows if r["role"] == "held out"}) == [32, 64]
    for r in rows:
        fit, unfitted = interval(r["predicted_images_per_sec"]), interval(r["nofit_images_per_sec"])
        assert fit.low < fit.point < fit.high and unfitted.low < unfitted.high, r
        assert "a new run's scatter" in fit.basis


def test_the_csv_path_and_the_published_path_agree_on_the_same_points():
    """The shipped example CSV is p2.xlarge up to 16 GPUs: `cluster` on it and `published` fit the
    same points the same way, and predict them alike, with and without the fit."""
    published = [r for r in rows_of(model_cli("published", "--format=json")) if r["cluster"] == "p2.xlarge"
                 and r["gpus"] <= 16]
    mine = [r for r in rows_of(model_cli(*CLUSTER, "--format=json")) if r["role"] != "predicted"]
    assert [r["gpus"] for r in mine] == [r["gpus"] for r in published] and mine
    for a, b in zip(mine, published):
        for column in ("predicted_images_per_sec", "nofit_images_per_sec"):
            for end in ("point", "low", "high"):
                assert a[column][end] == pytest.approx(b[column][end], rel=1e-9), (a["gpus"], column, end)


def test_cluster_predicts_the_asked_sizes_and_says_what_would_narrow_them():
    result = model_cli(*CLUSTER, "--num_workers=32,64")
    assert result.returncode == 0, result.stderr
    assert "what would narrow them most" in result.stdout and "median width" in result.stdout
    rows = rows_of(model_cli(*CLUSTER, "--num_workers=32,64", "--format=json"))
    asked = [r for r in rows if r["role"] == "predicted"]
    assert [r["gpus"] for r in asked] == [32, 64]
    assert all(interval(r["predicted_images_per_sec"]).width > 0 for r in asked)


def test_a_recommender_without_runs_names_the_crossover_with_its_interval(counts):
    result = model_cli(*DLRM, env=counts)
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if "crossover" in x and "every N of 2.." in x)
    assert line.startswith(("crossover at N=", "no crossover up to N=")) and "range of N: " in line
    assert "the hybrid (no fit: the values of Horovod's ring and the synchronous ps it runs) is predicted" in \
        result.stdout
    for row in rows_of(model_cli(*DLRM, "--format=json", env=counts)):
        for strategy in ("parameter_server", "multi_worker_mirrored", "horovod", "hybrid"):
            rate = interval(row[f"{strategy}_examples_per_sec"])
            assert rate.low < rate.point < rate.high
        # the hybrid's ps carry the rows alone: its busiest host never moves more than the parameter server's
        assert row["hybrid_MB_per_step"] <= row["parameter_server_MB_per_step"] + 1e-9
    refused = model_cli("predict", "--model=dlrm", "--link_bandwidth=10mbit", env=counts)
    assert refused.returncode == 2 and "--compute_ms_per_example" in refused.stderr


def test_the_recommender_verbs_table_carries_intervals_costs_and_coverage():
    from tools.model import recommender

    rng = np.random.default_rng(0)
    runs = synthetic_curves.recommender_runs(0.03, rng) + synthetic_curves.recommender_runs(
        0.03, rng, synthetic_curves.REC_HELD)
    rows, columns, lines = recommender.table(runs, 4, [2, 4, 8, 16], cost.Prices(2.0, 300.0))
    assert {r["num_workers"] for r in rows} == set(synthetic_curves.REC_HELD)
    assert all(isinstance(r["predicted_examples_per_sec"], Interval) and "joules_per_example" in r for r in rows)
    assert {"usd_per_million_examples", "measured_joules_per_example"} <= {c.name for c in columns}
    assert lines[-1].startswith("coverage = ") and any(line.startswith("median abs error = ") for line in lines)
