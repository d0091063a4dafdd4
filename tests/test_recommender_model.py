"""The recommender's step model (tfbench.perfmodel.sparse.recommender): its bytes against the sparse laws
by hand, a fit that recovers the parameters it was made from, and the crossover it finds."""
import dataclasses

import pytest

from tfbench.perfmodel.sparse import recommender as rec
from tfbench.perfmodel.dense import shards
from tfbench.perfmodel.sparse import laws as sparse

SETTING = rec.Setting(table_rows=(100_000,) * 8, embedding_dim=16, ids_per_feature=1, zipf_alpha=0.6,
                      batch_size=512, dense_bytes=4 * 20_000)
BETA = 100e6 / 8  # 100 Mbit/s


def test_all_gather_bytes_grow_with_the_workers_and_a_sharded_ps_grows_with_its_hottest_shard():
    u = SETTING.rows_per_worker()
    assert rec.busiest_host_bytes(rec.ALL_GATHER, 4, SETTING) == pytest.approx(
        1.5 * SETTING.dense_bytes + 3 * u * (64 + 8))
    gather = [rec.busiest_host_bytes(rec.ALL_GATHER, n, SETTING) for n in (2, 4, 8, 16)]
    ps = [rec.busiest_host_bytes(rec.PS, n, SETTING) for n in (2, 4, 8, 16)]
    assert gather[-1] / gather[0] > 10  # (N - 1) u
    assert ps[-1] / ps[0] < gather[-1] / gather[0] / 2  # (N - 1) x the hottest shard's rows, fewer than u
    uniform = rec.Setting(**{**SETTING.__dict__, "zipf_alpha": 0.0})
    flat = [rec.busiest_host_bytes(rec.PS, n, uniform) for n in (2, 4, 8, 16)]
    assert flat[-1] / flat[0] < 2.5  # uniform ids: each host its worker's rows and an N-th of the rest
    assert rec.busiest_host_bytes(rec.PS, 1, SETTING) == 0.0


def test_the_hottest_shard_makes_a_skewed_parameter_server_busier():
    """min_size splits each 6.4 MB table in 8 parts placed round-robin after the 6 variables of the
    bottom MLP: every table's first part, which holds its hottest rows, lands on ps 6."""
    skewed = rec.Setting(**{**SETTING.__dict__, "zipf_alpha": 1.2})
    placed = shards.place(skewed.variables(), 8, "min_size")
    firsts = {p.shard for p in placed.pieces if p.variable.name.endswith("/part_0") and "table" in p.variable.name}
    assert firsts == {6}
    rows = skewed.rows_per_shard(8)
    assert rows.index(max(rows)) == 6 and rows[6] > 3 * (sum(rows) - rows[6]) / 7
    assert sum(rows) == pytest.approx(skewed.rows_per_worker())
    flat = rec.Setting(**{**SETTING.__dict__, "zipf_alpha": 0.0}).rows_per_shard(8)
    assert max(flat) / min(flat) == pytest.approx(1.0, abs=0.02)
    # 20,000-row tables (1.28 MB) split in 5: their first parts land on 8 different ps
    spread = rec.Setting(**{**SETTING.__dict__, "zipf_alpha": 1.2, "table_rows": (20_000,) * 8}).rows_per_shard(8)
    assert max(spread) / min(spread) < 1.2


def synthetic(truth: rec.Fit, kind: str, ns):
    return [rec.Observation(f"{truth.strategy}-{n}", kind, truth.strategy, n,
                            truth.step_s(kind, n, SETTING, BETA), truth.c0 + truth.c1 * n, BETA, SETTING) for n in ns]


def test_the_fit_recovers_known_parameters_and_predicts_larger_clusters():
    truth = rec.Fit("multi_worker_mirrored", 0.040, 0.002, 0.015, 0.6, ())
    fitted = rec.fit(synthetic(truth, rec.ALL_GATHER, (1, 2, 4)))
    assert (fitted.c0, fitted.c1, fitted.overhead_s, fitted.eta) == pytest.approx((0.040, 0.002, 0.015, 0.6), rel=1e-6)
    predicted, true = (f.rate(rec.ALL_GATHER, 16, SETTING, BETA) for f in (fitted, truth))
    assert predicted == pytest.approx(true)


def test_the_crossover_is_where_the_parameter_server_stays_ahead():
    fits = {"parameter_server": rec.Fit("parameter_server", 0.05, 0.0, 0.08, 0.7, ()),
            "multi_worker_mirrored": rec.Fit("multi_worker_mirrored", 0.04, 0.0, 0.01, 0.8, ())}
    kinds = {"parameter_server": rec.PS, "multi_worker_mirrored": rec.ALL_GATHER}
    n = rec.crossover(fits, kinds, SETTING, BETA, (2, 4, 8, 16))
    assert n in (4, 8, 16)
    for m in (2, 4, 8, 16):
        ahead = fits["parameter_server"].rate(rec.PS, m, SETTING, BETA) > \
            fits["multi_worker_mirrored"].rate(rec.ALL_GATHER, m, SETTING, BETA)
        assert ahead == (m >= n)
    slow_ps = dict(fits, parameter_server=rec.Fit("parameter_server", 0.05, 0.0, 5.0, 0.1, ()))
    assert rec.crossover(slow_ps, kinds, SETTING, BETA, (2, 4, 8, 16)) is None


def test_rows_per_worker_follow_the_law():
    assert SETTING.rows_per_worker() == pytest.approx(sparse.expected_unique_tables((100_000,) * 8, 0.6, 512))


def test_refits_spread_with_the_runs_own_spread():
    truth = rec.Fit("horovod", 0.040, 0.0, 0.015, 0.6, ())
    exact = synthetic(truth, rec.ALL_GATHER, (1, 2, 4))
    tight = rec.refits(exact, draws=100)
    loose = rec.refits([dataclasses.replace(o, step_ci_s=0.2 * o.step_s) for o in exact], draws=100)

    def spread(fits):
        rates = [f.rate(rec.ALL_GATHER, 16, SETTING, BETA) for f in fits]
        return (max(rates) - min(rates)) / truth.rate(rec.ALL_GATHER, 16, SETTING, BETA)

    assert 0 < spread(tight) < spread(loose)


def test_an_interval_holds_its_point_and_widens_with_the_fitted_runs_scatter():
    truth = rec.Fit("horovod", 0.040, 0.001, 0.015, 0.6, ())
    runs = synthetic(truth, rec.ALL_GATHER, (1, 2, 4))
    fitted = rec.fit(runs)
    exact = rec.spread(runs, fitted)
    assert exact.scale == rec.NOISE_FLOOR and exact.dof == 1 and exact.fitted_runs == 3
    noisy = [dataclasses.replace(o, step_s=o.step_s * f) for o, f in zip(runs, (1.0, 1.08, 0.93))]
    wide = rec.spread(noisy, rec.fit(noisy))
    assert wide.scale > exact.scale
    narrow, broad = (s.interval(fitted, rec.ALL_GATHER, 16, SETTING, BETA) for s in (exact, wide))
    assert narrow.low < narrow.point < narrow.high and narrow.level == 0.9
    assert broad.width > narrow.width


def write_runs(root, fits, kinds, ns, setting_config):
    """Run directories as tfbench writes them, each a recommender run on emulated hosts whose step
    is the given fit's."""
    import json
    import os

    import tfbench.config as config_lib

    config = config_lib.RunConfig(**setting_config)
    workload = config.workload.record(config)
    setting = rec.Setting(tuple(workload["rows"]), workload["embedding_dim"], workload["ids_per_feature"],
                          workload["zipf_alpha"], config.batch_size, 4.0 * workload["dense_params"],
                          workload["dense_features"], tuple(workload["bottom_mlp"]), tuple(workload["top_mlp"]),
                          config.ps_partitioner, config.ps_min_shard_bytes, workload["id_layout"])
    for strategy, f in fits.items():
        for n in ns:
            run = os.path.join(root, f"{strategy}-w{n}")
            os.makedirs(run)
            step = f.step_s(kinds[strategy], n, setting, BETA)
            cluster = {"kind": "cluster", "status": "ok", "workload": workload, "sparse": {"tables": 8},
                       "link": {"beta_bps": BETA * 8}, "stats": {"mean_s": step, "ci95_s": 0.01 * step},
                       "step_breakdown": {"mean_s": {"compute": f.c0 + f.c1 * n}},
                       "config": {**setting_config, "strategy": strategy, "num_workers": n,
                                  "num_ps": n if kinds[strategy] == rec.PS else 0}}
            with open(os.path.join(run, "results.jsonl"), "w", encoding="utf-8") as out:
                out.write(json.dumps(cluster) + "\n")
    return setting


def test_predict_fits_a_recommender_sweep_and_prints_the_crossover(tmp_path):
    import subprocess
    import sys

    fits = {"parameter_server": rec.Fit("parameter_server", 0.05, 0.0, 0.08, 0.7, ()),
            "multi_worker_mirrored": rec.Fit("multi_worker_mirrored", 0.04, 0.0, 0.01, 0.9, ())}
    kinds = {"parameter_server": rec.PS, "multi_worker_mirrored": rec.ALL_GATHER}
    flags = dict(model="dlrm", batch_size=512, embedding_rows=20_000, zipf_alpha=0.6, ps_partitioner="min_size")
    setting = write_runs(tmp_path, fits, kinds, (1, 2, 4), flags)
    expected = rec.crossover(fits, kinds, setting, BETA, list(range(2, 33)))
    assert expected  # the fits were chosen so that the parameter server overtakes
    base = [sys.executable, "-m", "tools.model", "predict", "--model=dlrm", f"--runs={tmp_path}",
            "--batch_size=512", "--embedding_rows=20000", "--zipf_alpha=0.6", "--link_bandwidth=100mbit",
            "--num_workers=2,4,8,16,32"]
    out = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"crossover at N={expected}" in out.stdout
    assert "parameter_server_examples_per_sec [90%]" in out.stdout and "fitted on 6 runs" in out.stdout
    for drop, add, says in (("--runs", [], "give --compute_ms_per_example=MS (one worker's compute per example) or "
                                           "--runs=DIR"),
                            ("--batch_size", ["--batch_size=64"], "predict at --batch_size=512")):
        args = [a for a in base if not a.startswith(drop)] + add
        refused = subprocess.run(args, capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2 and says in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr


def test_strategies_of_one_form_pool_their_scatter_and_degrees_of_freedom():
    """MultiWorkerMirrored and Horovod share the all-gather step's form: a new run's scatter comes from
    both strategies' residuals, with the degrees of freedom of both (runs - 2 each); the parameter
    server's from its own."""
    truths = {"multi_worker_mirrored": rec.Fit("multi_worker_mirrored", 0.040, 0.001, 0.015, 0.6, ()),
              "horovod": rec.Fit("horovod", 0.035, 0.001, 0.010, 0.7, ()),
              "parameter_server": rec.Fit("parameter_server", 0.05, 0.0, 0.08, 0.7, ())}
    kinds = {"multi_worker_mirrored": rec.ALL_GATHER, "horovod": rec.ALL_GATHER, "parameter_server": rec.PS}
    noise = (1.0, 1.06, 0.95, 1.03, 0.97, 1.05, 0.96, 1.02)
    runs = [dataclasses.replace(o, step_s=o.step_s * f) for s, truth in truths.items()
            for o, f in zip(synthetic(truth, kinds[s], (1, 2, 3, 4) * 2), noise)]
    fits = rec.fit_all(runs, 4)
    pooled = rec.spreads(runs, fits, 4)
    alone = {s: rec.spread([o for o in runs if o.strategy == s], fits[s]) for s in fits}
    assert pooled["multi_worker_mirrored"].dof == pooled["horovod"].dof == 2 * (8 - 2)
    assert pooled["multi_worker_mirrored"].scale == pooled["horovod"].scale
    assert pooled["parameter_server"].dof == alone["parameter_server"].dof == 8 - 2
    assert pooled["parameter_server"].scale == alone["parameter_server"].scale


def test_the_crossover_is_an_interval_of_workers_around_its_point():
    fits = {"parameter_server": rec.Fit("parameter_server", 0.05, 0.0, 0.08, 0.7, ()),
            "multi_worker_mirrored": rec.Fit("multi_worker_mirrored", 0.04, 0.0, 0.01, 0.8, ())}
    kinds = {"parameter_server": rec.PS, "multi_worker_mirrored": rec.ALL_GATHER}
    runs = [o for s, f in fits.items() for o in synthetic(f, kinds[s], (1, 2, 3, 4))]
    noisy = [dataclasses.replace(o, step_s=o.step_s * f) for o, f in zip(runs, (1.0, 1.09, 0.92, 1.05) * 2)]
    narrow, wide = (rec.crossover_interval(rec.fit_all(r, 4), rec.spreads(r, rec.fit_all(r, 4), 4), kinds, SETTING,
                                           BETA, 64) for r in (runs, noisy))
    point, low, high = narrow
    assert point == rec.crossover(fits, kinds, SETTING, BETA, list(range(2, 65)))
    assert low <= point <= high
    assert wide[2] - wide[1] > high - low
    assert f"crossover at N={point}" in rec.crossover_text(*narrow, 64)


def test_the_hybrid_moves_the_ring_and_its_ps_rows():
    """Uniform ids: each host's ring share of the dense bytes, its worker's rows to the other ps and
    the other workers' rows of its ranges (an N-th of theirs), each row's int32 index sent once."""
    uniform = rec.Setting(**{**SETTING.__dict__, "zipf_alpha": 0.0})
    u, row = uniform.rows_per_worker(), uniform.row_bytes
    for n in (2, 4, 8):  # one way: its worker's pushed rows and indices, the rows its ps serves the others
        assert rec.busiest_host_bytes(rec.HYBRID, n, uniform) == pytest.approx(
            2 * (n - 1) / n * uniform.dense_bytes + (n - 1) / n * u * (row + 4) + (n - 1) * u / n * row, rel=1e-3)
    assert rec.busiest_host_bytes(rec.HYBRID, 1, SETTING) == 0.0


def test_the_rotated_rule_spreads_the_hot_ranges_that_aligned_puts_on_one_ps():
    skewed = {rule: rec.Setting(**{**SETTING.__dict__, "zipf_alpha": 1.2, "shard_rule": rule}).rows_per_range_ps(8)
              for rule in ("rotated", "aligned")}
    assert sum(skewed["rotated"]) == pytest.approx(sum(skewed["aligned"]))
    assert skewed["aligned"].index(max(skewed["aligned"])) == 0
    assert max(skewed["rotated"]) < max(skewed["aligned"]) / 3


def test_the_hybrids_crossover_is_where_it_stays_ahead_of_every_other():
    fits = {"hybrid": rec.Fit("hybrid", 0.05, 0.0, 0.02, 0.7, ()),
            "parameter_server": rec.Fit("parameter_server", 0.05, 0.0, 0.08, 0.7, ()),
            "horovod": rec.Fit("horovod", 0.04, 0.0, 0.01, 0.8, ())}
    kinds = {"hybrid": rec.HYBRID, "parameter_server": rec.PS, "horovod": rec.ALL_GATHER}
    n = rec.crossover(fits, kinds, SETTING, BETA, (2, 4, 8, 16), ahead=rec.HYBRID, behind=(rec.PS, rec.ALL_GATHER))
    for m in (2, 4, 8, 16):
        others = max(fits[s].rate(kinds[s], m, SETTING, BETA) for s in ("parameter_server", "horovod"))
        assert (fits["hybrid"].rate(rec.HYBRID, m, SETTING, BETA) > others) == (n is not None and m >= n)
    # the parameter server's own crossover leaves the hybrid out
    assert rec.crossover(fits, kinds, SETTING, BETA, (2, 4, 8, 16)) == rec.crossover(
        {s: f for s, f in fits.items() if s != "hybrid"}, kinds, SETTING, BETA, (2, 4, 8, 16))
