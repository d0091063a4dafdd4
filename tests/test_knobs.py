"""Each strategy's knobs (tfbench.config.knobs): refused with one line when bad, counted by each
library's own rule, saved and read back by tunings, and reaching the live strategy in a run."""
import json
import os
import time

import pytest

from conftest import run_cli
from tfbench.config import RunConfig, knobs
from tfbench.config.errors import ConfigError
from tfbench.measure import comm, machine
from tfbench.results import tuned
from tfrun import cluster_record, task_records
from tools.sweep import grid as grid_lib

MIB = 1 << 20


@pytest.mark.parametrize("args,message", [
    (["--mwms_bytes_per_pack=-1", "--strategy=multi_worker_mirrored", "--num_workers=2"],
     "--mwms_bytes_per_pack must be 0 (one pack) or more bytes, got -1"),
    (["--mwms_bytes_per_pack=4194304"], "--mwms_bytes_per_pack applies to --strategy=multi_worker_mirrored only"),
    (["--strategy=horovod", "--horovod_fusion_threshold_mb=-3"], "--horovod_fusion_threshold_mb must be -1"),
    (["--strategy=horovod", "--horovod_cycle_time_ms=0"], "--horovod_cycle_time_ms must be -1"),
    (["--strategy=horovod", "--horovod_compression=bf16"], "--horovod_compression='bf16' is unknown"),
    (["--strategy=horovod", "--horovod_autotune", "--horovod_fusion_threshold_mb=8"],
     "--horovod_autotune chooses the fusion threshold"),
    (["--strategy=parameter_server", "--ps_partitioner=even"], "--ps_partitioner='even' is unknown"),
    (["--strategy=parameter_server", "--ps_placer=lpt"], "--ps_placer='lpt' is unknown"),
    (["--strategy=parameter_server", "--ps_partitioner=fixed", "--ps_min_shard_bytes=4096"],
     "--ps_min_shard_bytes applies to --ps_partitioner=min_size only"),
    (["--tune", "--strategy=default"], "--tune has no knobs to try for --strategy=default"),
    (["--tune", "--strategy=parameter_server"], "with one ps (the partitioner needs two or more)"),
    (["--tune", "--strategy=horovod", "--tune_budget=0"], "--tune_budget must be positive"),
])
def test_bad_knobs_exit_2_with_one_line(args, message, tmp_path):
    result = run_cli(*args, f"--logdir={tmp_path / 'runs'}")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not (tmp_path / "runs").exists()


def test_tensorflow_packs_follow_group_by_size_on_reversed_gradients():
    sizes = [1, 2, 3, 10]  # variable order; TensorFlow reduces them last first: 10, 3, 2, 1
    assert comm.tf_packs(sizes, 0) == [16]
    assert comm.tf_packs(sizes, 4) == [10, 5, 1]  # a new pack once the last one exceeds 4
    assert comm.tf_packs(sizes, 100) == [16]
    assert comm.tf_packs([], 4) == []


def test_fusion_buffers_are_the_fewest_that_hold_the_gradients():
    assert comm.fused_buffers([4, 4, 4], 8) == [8, 4]
    assert comm.fused_buffers([20, 1, 1], 8) == [2, 20]
    assert comm.fused_buffers([1, 2, 3], 0) == [3, 2, 1]  # no fusion: one per tensor
    plan = comm.plan_horovod([MIB] * 10, 4, wire_bytes_per_value=0.5)
    assert plan["messages_per_step"] == 2 and plan["bytes_per_step"] == 5 * MIB and not plan["exact"]


def test_bus_bandwidth_is_nccl_tests_all_reduce_definition():
    plan = comm.plan_all_reduce([50_000_000, 50_000_000], 0)
    out = comm.achieved(plan, 0.5, workers=4)
    assert out["algbw_gbit_s"] == pytest.approx(100e6 * 8 / 0.5 / 1e9)
    assert out["busbw_gbit_s"] == pytest.approx(out["algbw_gbit_s"] * 2 * 3 / 4)
    ps = comm.achieved(comm.plan_parameter_server([10, 20]), 1.0, workers=2)
    assert ps["messages_per_step"] == 4 and ps["bytes_per_step"] == 60 and "busbw_gbit_s" not in ps
    assert "busbw" in comm.line(out) and "exact" in comm.line(out)


def test_tune_grid_changes_one_knob_at_a_time_from_the_default():
    config = RunConfig(strategy="horovod", num_workers=2)
    points = knobs.tune_points(config)
    assert points[0] == {"horovod_fusion_threshold_mb": -1, "horovod_cycle_time_ms": -1.0}
    for point in points[1:]:
        assert sum(point[k] != points[0][k] for k in point) == 1
    assert len(points) == 1 + 2 + 3  # fusion 4, 16 MB; cycle 5, 20, 50 ms
    with pytest.raises(ConfigError):
        knobs.tune_points(RunConfig(strategy="parameter_server", num_workers=2))
    base = {"ps_partitioner": "min_size", "ps_placer": "round_robin"}
    assert knobs.tune_points(RunConfig(strategy="parameter_server", num_workers=2, num_ps=2))[1:] == [
        dict(base, ps_partitioner="none"), dict(base, ps_partitioner="fixed"), dict(base, ps_placer="greedy")]


def fake_points(rates):
    """tune.run_point replaced: point i runs at rates[i] images/sec with no spread of its own."""
    ran = []

    def run_point(config, point, points_dir):
        ran.append(point.index)
        return {"run_id": f"p{point.index}", "elapsed_s": 0.0, "status": "ok",
                "images_per_sec": rates[point.index], "ci_share": 0.0, "communication_ms": 1.0}
    return ran, run_point


@pytest.mark.parametrize("rates, ran_order, best", [
    ((10.0, 10.3, 5.0), [0, 1, 2, 1, 0, 1, 0], 0),  # 0 and 1 overlap: both again, twice; the default stays
    ((10.0, 20.0, 5.0), [0, 1, 2], 1),  # 1 beats the default beyond both intervals: no repeat
])
def test_tune_repeats_the_two_best_while_they_overlap_and_keeps_the_default_unless_beaten(
        tmp_path, monkeypatch, rates, ran_order, best):
    from tfbench.app import tune

    ran, run_point = fake_points(rates)
    monkeypatch.setattr(tune, "run_point", run_point)
    config = RunConfig(strategy="multi_worker_mirrored", num_workers=2, logdir=str(tmp_path), run_id="t")
    assert tune.tune(config, budget_s=600, store=str(tmp_path / "tuned.json")) == 0
    assert ran == ran_order
    document = json.load(open(tmp_path / "t" / "tune.json"))
    assert document["best"]["knobs"] == document["points"][best]["knobs"]
    assert document["whole_grid"] and json.load(open(tmp_path / "tuned.json"))  # the whole grid ran: saved


def test_tune_stops_at_its_budget(tmp_path, monkeypatch):
    from tfbench.app import tune

    ran, run_point = fake_points((10.0, 10.3, 5.0))
    monkeypatch.setattr(tune, "run_point", lambda *a: time.sleep(0.05) or run_point(*a))
    config = RunConfig(strategy="multi_worker_mirrored", num_workers=2, logdir=str(tmp_path), run_id="t")
    assert tune.tune(config, budget_s=0.02, store=str(tmp_path / "tuned.json")) == 0
    assert ran == [0]  # the budget was spent by the first point: no other point, no repeat
    assert not json.load(open(tmp_path / "t" / "tune.json"))["whole_grid"]
    assert not (tmp_path / "tuned.json").exists()  # a best of part of the grid is no tuning: nothing saved


def test_saved_tunings_feed_sweep_points_tuned_only_where_they_differ(tmp_path, monkeypatch):
    store = str(tmp_path / "tuned.json")
    monkeypatch.setenv(tuned.STORE_ENV, store)
    axes = {"strategy": ["multi_worker_mirrored", "horovod"], "num_workers": [2], "model": ["tiny"],
            "image_size": [16], "batch_size": [4], "tuning": ["default", "best"], "fixed": {"cores_per_worker": 1}}
    grid = grid_lib.Grid.from_dict(axes)
    with pytest.raises(ConfigError, match="no saved tuning of multi_worker_mirrored"):
        grid_lib.expand(grid, str(tmp_path / "runs"))
    for strategy, chosen in (("multi_worker_mirrored", {"mwms_bytes_per_pack": 4 * MIB}),
                             ("horovod", {"horovod_fusion_threshold_mb": -1, "horovod_cycle_time_ms": -1.0})):
        config = RunConfig(strategy=strategy, num_workers=2, model="tiny", image_size=16, batch_size=4,
                           cores_per_worker=1)
        tuned.save(config.to_dict(), strategy, {"knobs": chosen, "measured": "2026-11-25", "tfbench_commit": "abc"})
    points, _ = grid_lib.expand(grid, str(tmp_path / "runs"))
    ids = [p.id for p in points]
    assert len(ids) == 3  # MWMS default and tuned; Horovod's best is its default: one point
    (tuned_point,) = [p for p in points if p.knobs]
    assert tuned_point.id.endswith("-tuned-r0")
    assert "--mwms_bytes_per_pack=4194304" in tuned_point.flags({})
    assert any(f.startswith("--knob_source=tuned 2026-11-25 at abc") for f in tuned_point.flags({}))
    assert json.load(open(store))  # written whole (os.replace), readable




@pytest.mark.slow
def test_mwms_bytes_per_pack_reaches_the_live_strategy(clusters):
    launched = clusters["mwms"]
    packs, timeout = launched.config["mwms_bytes_per_pack"], launched.config["mwms_timeout"]
    assert packs > 0 and timeout > 0
    for name, record in task_records(launched.run).items():
        assert record["communication_options"]["bytes_per_pack"] == packs, name
        assert record["communication_options"]["timeout_seconds"] == timeout
    cluster = cluster_record(launched.run)
    assert cluster["communication"]["messages_per_step"] >= 1
    assert cluster["communication"]["busbw_gbit_s"] > 0


@pytest.mark.slow
def test_horovod_knobs_reach_horovods_environment(clusters):
    launched = clusters["horovod_fp16_hard"]
    config = launched.config
    fusion_mb, cycle_ms = config["horovod_fusion_threshold_mb"], config["horovod_cycle_time_ms"]
    assert fusion_mb > 0 and cycle_ms > 0 and config["horovod_compression"] == "fp16"
    for name, record in task_records(launched.run).items():
        env = record["horovod_environment"]  # read back from the rank's environment after hvd.init()
        assert env["HOROVOD_FUSION_THRESHOLD"] == str(fusion_mb * MIB) and env["HOROVOD_CYCLE_TIME"] == str(cycle_ms)
        assert record["horovod_compressor"] == "FP16Compressor"
    assert f"knobs: horovod_fusion_threshold_mb={fusion_mb} horovod_cycle_time_ms={cycle_ms:g} " \
           "horovod_compression=fp16" in launched.out


def expected_shards(config: dict):
    """Bytes per ps as the performance model places the run's model (tfbench.perfmodel.dense.shards)."""
    from tfbench.measure.variables import count_variables
    from tfbench.perfmodel.dense import shards as shards_model

    variables = shards_model.from_records(count_variables(config["model"], config["image_size"], config["num_classes"]))
    return shards_model.place(variables, config["num_ps"], config["ps_partitioner"], placer=config["ps_placer"])


@pytest.mark.slow
def test_greedy_placer_balances_the_ps_as_the_model_places_them(clusters):
    launched = clusters["ps_async"]
    config = launched.config
    assert config["ps_placer"] == "greedy" and config["ps_partitioner"] == "none" and config["num_ps"] >= 2
    shards = task_records(launched.run)["chief_0"]["ps_shards"]
    expected = expected_shards(config)
    assert [shards[f"ps:{i}/CPU:0"]["bytes"] for i in range(config["num_ps"])] == list(expected.shard_bytes)


@pytest.mark.slow
def test_fixed_partitioner_splits_every_variable_over_the_ps(clusters):
    launched = clusters["ps_two_ps_forward"]
    config = launched.config
    assert config["ps_partitioner"] == "fixed" and config["num_ps"] == 2
    shards = task_records(launched.run)["chief_0"]["ps_shards"]  # from the live variables' devices
    assert sorted(shards) == ["ps:0/CPU:0", "ps:1/CPU:0"]
    assert shards["ps:0/CPU:0"]["shards"] == shards["ps:1/CPU:0"]["shards"]  # every variable in two
    assert [shards[f"ps:{i}/CPU:0"]["bytes"] for i in range(2)] == list(expected_shards(config).shard_bytes)


@pytest.mark.slow
def test_tune_runs_its_grid_and_saves_the_best(tmp_path, logdir):
    """A tuning saves its best only when the budget ran every point. Each point here takes about 5 s
    (2026-12-06), and a point starts only while the budget left covers one more at the mean so far:
    30 s covers the 3 points on a machine nearly twice as slow (15 s did not: the third was left)."""
    store = tmp_path / "tuned.json"
    result = run_cli("--model=tiny", "--image_size=16", "--num_classes=10", "--batch_size=4", "--num_warmup_steps=2",
                     "--num_steps=3", "--strategy=multi_worker_mirrored", "--num_workers=2", "--tune",
                     "--tune_budget=30", f"--tune_store={store}", f"--logdir={logdir}", "--run_id=tuning", timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    document = json.load(open(os.path.join(logdir, "tuning", "tune.json")))
    assert [p["knobs"] for p in document["points"]] == [{"mwms_bytes_per_pack": v} for v in (0, 4 * MIB, 32 * MIB)]
    assert document["points"][0]["runs"][0]["status"] == "ok"
    assert document["best"]["knobs"] in [p["knobs"] for p in document["points"]]
    assert os.path.exists(os.path.join(logdir, "tuning", "tune.md"))
    saved = json.load(open(store))
    (machine_key,) = saved  # saved under this machine's key
    assert machine_key == machine.key()
    (entry,) = saved[machine_key].values()
    assert entry["multi_worker_mirrored"]["knobs"] == document["best"]["knobs"]
    assert entry["multi_worker_mirrored"]["tune_run"] == "tuning"  # the run's id, no path
