"""Fitting and validating the performance model (tfbench.perfmodel.fitting.fit, .validate, .observations)
on synthetic run records made by the model itself from known parameters: the fit must recover
them, and validation must predict the held-out runs. No TensorFlow."""
import dataclasses
import os

import pytest

from tfbench.perfmodel.dense import equations as eq
from tfbench.perfmodel.fitting import fit as fit_lib
from tfbench.perfmodel.fitting import params as params_lib
from tfbench.perfmodel.dense import prediction, sync_step
from tfbench.perfmodel.fitting import spread as spread_lib
from tfbench.perfmodel.fitting import validate as validate_lib
from tfbench.perfmodel.fitting.observations import from_run

W = 2.12e6  # bytes, LeNet at 64 px
MS_PER_IMAGE, BATCH = 1.25, 32
ALPHA_S = {"50mbit": 3e-4, "100mbit": 2e-4, "200mbit": 1.5e-4}
BETA_BPS = {"50mbit": 4.9e7, "100mbit": 9.7e7, "200mbit": 1.9e8}
# a synchronous ps fits the share chi of its link's directions that does not overlap (the link at
# its probed beta); the ring its protocol's share of beta
TRUE = {"parameter_server_sync": {"overhead": 0.030, "share": 1.0, "chi": 0.4, "apply": 0.006},
        "multi_worker_mirrored": {"overhead": 0.008, "share": 0.9, "chi": 0.0, "apply": 0.0}}


@pytest.fixture(autouse=True)
def few_refits(monkeypatch):
    """Validation refits every fit for its intervals: 20 and 20 pilot refits here
    (test_perfmodel_intervals checks the intervals themselves)."""
    monkeypatch.setattr(spread_lib, "REPLICATES", 20)
    monkeypatch.setattr(spread_lib, "PILOT", 20)


def true_setting(strategy, link, sync=True):
    key = params_lib.strategy_key(strategy, sync)
    t = TRUE[key]
    return prediction.Setting(strategy=strategy, w_bytes=W, compute_s=MS_PER_IMAGE * BATCH / 1e3, batch_size=BATCH,
                              link=eq.Link(ALPHA_S[link], t["share"] * BETA_BPS[link] / 8), num_ps=1,
                              ps_placement="separate", ps_sync=sync, ps_apply_s=t["apply"], overhead_s=t["overhead"],
                              extra=sync_step.Extra(chi=t["chi"]))


def record(strategy, n, link, run_id):
    """A config and cluster record as tfbench writes them, with the step the true model gives."""
    p = prediction.point(true_setting(strategy, link), n)
    compute = MS_PER_IMAGE * BATCH / 1e3
    config = {"strategy": strategy, "num_workers": n, "ps_placement": "separate", "ps_sync": strategy == "parameter_server",
              "batch_size": BATCH, "model": "lenet", "mode": "train", "precision": "fp32", "image_size": 64,
              "num_classes": 10, "network": "emulated", "link_bandwidth": link}
    source = "the coordinator's closures and probes" if strategy == "parameter_server" else (
        "in-step timestamps of every rank" if n > 1 else "the task's own steps")
    cluster = {"status": "ok", "num_ps": 1 if strategy == "parameter_server" else 0, "cores_per_worker": 1,
               "images_per_sec": p.images_per_sec,
               "link": {"configured_bps": int(link[:-4]) * 10 ** 6, "alpha_ms": ALPHA_S[link] * 1e3,
                        "beta_bps": BETA_BPS[link]},
               "step_breakdown": {"source": source, "step_mean_s": p.step_s,
                                  "mean_s": {"compute": compute, "communication": p.communication_s,
                                             "apply": p.apply_s, "waiting": p.overhead_s}},
               "link_traffic": {"h0": {"tx_bytes_per_step": p.worker_host_bytes},
                                **({f"h{n}": {"tx_bytes_per_step": p.ps_host_bytes}}
                                   if strategy == "parameter_server" else {})}}
    obs, why = from_run(run_id, config, cluster, W)
    assert obs is not None, why
    return obs


def sweep():
    return [record(s, n, link, f"{s[:4]}-{n}-{link}") for s in ("parameter_server", "multi_worker_mirrored")
            for n in (1, 2, 3) for link in ALPHA_S]


def test_fitting_recovers_the_parameters_the_runs_were_made_with():
    data = fit_lib.fit(sweep())
    (compute,) = data["compute"]
    assert compute["ms_per_image"] == pytest.approx(MS_PER_IMAGE)
    # timed in the step (not a parameter server's derived compute), by a single worker (nothing overlapped)
    assert compute["from_runs"] == sorted(o.run_id for o in sweep()
                                          if o.strategy == "multi_worker_mirrored" and o.num_workers == 1)
    for link in ALPHA_S:  # from the runs' link probes
        assert data["links"][link]["alpha_s"] == pytest.approx(ALPHA_S[link])
        assert data["links"][link]["beta_bps"] == pytest.approx(BETA_BPS[link])
    assert data["ps_apply_s"]["parameter_server_sync"]["value_s"] == pytest.approx(0.006)
    for key, true in TRUE.items():
        assert data["overhead_s"][key]["value_s"] == pytest.approx(true["overhead"], abs=1e-4)
        if key == "parameter_server_sync":
            assert data["duplex_chi"][key]["value"] == pytest.approx(true["chi"], abs=1e-3)
            assert key not in data["link_efficiency"]
        else:
            assert data["link_efficiency"][key]["value"] == pytest.approx(true["share"], rel=1e-3)
            assert key not in data["duplex_chi"]
        assert len(data["overhead_s"][key]["from_runs"]) == 9
    ps_checks = [c for c in data["bytes_per_step"] if c["host"] == "ps"]
    assert ps_checks and all(c["measured_bytes"] == pytest.approx(c["predicted_bytes"]) for c in ps_checks)


def test_validation_predicts_held_out_runs_of_a_consistent_sweep_exactly():
    rows = validate_lib.validate(sweep())
    splits = {r.split for r in rows}
    assert splits == {"held out: 3 workers", "held out: link 100mbit"}
    assert len(rows) == 2 * 3 + 2 * 3  # N=3 at every link; every N at 100mbit, for both strategies
    assert all(abs(r.error) < 1e-3 for r in rows)
    s = validate_lib.summary(rows)
    assert s["points"] == 12 and s["max_abs_error"] < 1e-3
    # runs without scatter: every interval as narrow as the links' beta, known to BETA_FLOOR (its 90% range
    # of +-1.645 floors), leaves it
    assert s["coverage"]["points"] == 12 and s["coverage"]["median_width"] <= 4 * spread_lib.BETA_FLOOR
    held = [r for r in rows if r.split == "held out: 3 workers"]
    assert {r.observation.num_workers for r in held} == {3}


def test_a_held_out_link_is_named_and_must_exist():
    rows = validate_lib.validate(sweep(), hold_out_link="200mbit")
    assert any(r.split == "held out: link 200mbit" for r in rows)
    with pytest.raises(ValueError, match="no link of these runs"):
        validate_lib.validate(sweep(), hold_out_link="10gbe")


def test_too_few_runs_fit_the_overhead_alone():
    two = [record("multi_worker_mirrored", n, "100mbit", f"m{n}") for n in (1, 2)]
    data = fit_lib.fit(two)
    assert "multi_worker_mirrored" in data["overhead_s"] and not data["link_efficiency"]


def test_runs_the_model_cannot_use_say_why():
    config = {"strategy": "horovod", "mode": "forward"}
    assert from_run("r", config, {"status": "failed"}, W) == (None, "the run failed")
    assert "forward-only" in from_run("r", config, {"status": "ok"}, W)[1]
    config["mode"] = "train"
    assert "no step split" in from_run("r", config, {"status": "ok", "step_breakdown": {"source": "none",
                                                                                      "note": "XLA"}}, W)[1]


def test_fitted_parameters_file_round_trips_and_feeds_predict(tmp_path):
    path = str(tmp_path / "params.json")
    params_lib.save(path, fit_lib.fit(sweep()))
    data = params_lib.load(path)
    obs = record("parameter_server", 3, "50mbit", "x")
    assert fit_lib.predicted_rate(data, obs) == pytest.approx(obs.images_per_sec, rel=1e-3)
    assert os.path.getsize(path) > 0


def test_workers_sharing_a_core_compute_slower_and_the_fit_knows_it():
    """3 workers on 2 cores: worker_0 and worker_2 share core 0. Their mean compute is 5/3 of one
    worker's alone; a synchronous step waits for the crowded pair (2x)."""
    obs = record("multi_worker_mirrored", 3, "100mbit", "crowded")
    cluster_shared = {"worker_0": ["worker_2"], "worker_2": ["worker_0", "ps_0"]}
    from tfbench.perfmodel.fitting.observations import _core_share

    share = _core_share({"shared_cores": cluster_shared}, 3)
    assert share == {"core_share_mean": pytest.approx(5 / 3), "core_share_max": 2.0}
    import dataclasses

    crowded = dataclasses.replace(obs, compute_s=obs.compute_s * 5 / 3, num_workers=3, **share)
    data = fit_lib.fit([crowded])
    assert data["compute"][0]["ms_per_image"] == pytest.approx(MS_PER_IMAGE)
    assert fit_lib.setting(crowded, data).compute_s == pytest.approx(2 * MS_PER_IMAGE * BATCH / 1e3)



def ps_run(placement, n, k, tx):
    """A synchronous ps run's observation whose hosts h0... sent `tx` bytes per global step."""
    config = {"strategy": "parameter_server", "num_workers": n, "ps_placement": placement, "ps_sync": True,
              "batch_size": BATCH, "model": "lenet", "mode": "train", "precision": "fp32", "image_size": 64,
              "num_classes": 10, "network": "emulated", "link_bandwidth": "50mbit"}
    cluster = {"status": "ok", "num_ps": k, "cores_per_worker": 1, "images_per_sec": 10.0,
               "step_breakdown": {"source": "the coordinator's closures and probes", "step_mean_s": 1.0,
                                  "mean_s": {"compute": 0.1, "communication": 0.9}},
               "link_traffic": {f"h{i}": {"tx_bytes_per_step": b} for i, b in enumerate(tx)}}
    obs, why = from_run(f"ps-{placement}-{n}-{k}", config, cluster, W)
    assert obs is not None, why
    return obs


def test_each_ps_host_is_checked_against_the_shards_it_holds():
    """Separate: ps host j moves N*S_j each way per step; collocated: host h moves W + S_h*(N-2)
    (terms.host_loads); its counter sees that load in TCP frames plus the ACKs of what comes in
    (terms.wire_bytes); the measured side is each ps host's counter, in plan order."""
    shards = (0.5 * W, 0.3 * W, 0.2 * W)
    separate = ps_run("separate", 4, 3, [W] * 4 + [4 * s * 1.05 for s in shards])
    assert separate.ps_host_tx == pytest.approx([4 * s * 1.05 for s in shards])
    separate = dataclasses.replace(separate, shard_bytes=shards, shard_variables=(2, 1, 1))
    checks = fit_lib.ps_host_checks(separate)
    assert [i for i, _, _ in checks] == [0, 1, 2]
    wire = 1514 / 1448 + 66 / 2896
    assert [p for _, p, _ in checks] == pytest.approx([4 * s * wire for s in shards])
    assert all(m / p == pytest.approx(1.05 / wire) for _, p, m in checks)
    colloc = dataclasses.replace(ps_run("collocated", 3, 3, [1.0, 2.0, 3.0]), shard_bytes=shards,
                                 shard_variables=(2, 1, 1))
    assert [p for _, p, _ in fit_lib.ps_host_checks(colloc)] == pytest.approx([(W + s) * wire for s in shards])
    assert fit_lib.bytes_checks([colloc])[0]["predicted_bytes"] == pytest.approx(1.5 * W)  # the busiest host
    # N = k = 1 collocated moves nothing over a link: nothing to check
    assert fit_lib.ps_host_checks(ps_run("collocated", 1, 1, [5.0])) == []
