"""Real data and convergence: the digits dataset loads offline from scikit-learn's package, the
held-out set is fixed and disjoint from training, and a short run's held-out accuracy rises above
chance with its points in the records and in TensorBoard on both axes (time and updates)."""
import os

import numpy as np
import pytest

import tfbench.config as config_lib
from tfbench.data import datasets
from tfbench.loop import convergence
from tfbench.results import table
from tfrun import cluster_record, run_tiny, scalars, task_records

DIGITS = ["--model=lenet", "--dataset=digits", "--num_classes=10", "--batch_size=32", "--num_warmup_steps=1"]


@pytest.mark.slow  # TensorFlow: the dataset, tf.data and the model
def test_digits_load_offline_with_a_fixed_disjoint_held_out_set(monkeypatch):
    monkeypatch.setenv("no_proxy", "")
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")  # any download attempt would fail
    x_train, y_train, x_test, y_test = datasets.arrays("digits", 16)
    assert x_train.shape == (1437, 16, 16, 3) and x_test.shape == (360, 16, 16, 3)
    assert x_train.dtype == np.float32 and 0.0 <= x_train.min() and x_train.max() <= 1.0
    assert sorted(set(y_train.tolist())) == list(range(10)) and sorted(set(y_test.tolist())) == list(range(10))
    assert datasets.shard_size("digits", 1) == len(x_train)  # validation agrees with what loads
    assert datasets.shard_size("digits", 2) == len(x_train) // 2
    train_rows = {row.tobytes() for row in x_train[:, ::2, ::2, 0]}
    overlap = sum(row.tobytes() in train_rows for row in x_test[:, ::2, ::2, 0])
    assert overlap < 10  # a handful of identical digits exist in the raw data; the split itself is disjoint
    again = datasets.arrays.__wrapped__("digits", 16)  # not the cache: the split is fixed
    assert np.array_equal(again[3], y_test)


@pytest.mark.slow  # TensorFlow: the dataset, tf.data and the model
def test_shards_are_disjoint_and_batches_full():
    config = config_lib.RunConfig(model="lenet", dataset="digits", num_classes=10, image_size=8, batch_size=50)
    seen = []
    for shard in range(2):
        batches = list(datasets.train_dataset(config, shard, 2, 50).take(14).as_numpy_iterator())
        assert all(len(x) == 50 for x, _ in batches)
        seen.append({x.tobytes() for batch, _ in batches for x in batch})
    assert len(seen[0]) > 600 and len(seen[1]) > 600  # an epoch of each shard went by
    assert len(seen[0] & seen[1]) < 10


@pytest.mark.slow  # TensorFlow: the dataset, tf.data and the model
def test_evaluator_points_and_time_to_accuracy(tmp_path):
    from tfbench.framework.tf_import import keras
    from tfbench.workloads.images import MODELS

    config = config_lib.RunConfig(model="lenet", dataset="digits", num_classes=10, image_size=8,
                                  num_warmup_steps=1, num_steps=4, eval_every=2, target_accuracy=0.01)
    keras.utils.set_random_seed(0)  # an untrained model's accuracy depends on its initial weights
    model = MODELS["lenet"].build(10, 8)
    evaluator = convergence.Evaluator(config, model, str(tmp_path / "tb"), str(tmp_path))
    evaluator.start(100.0, updates=1, examples=32)
    assert not evaluator.due(0) and not evaluator.due(1) and evaluator.due(2) and evaluator.due(4)
    evaluator.evaluate(101.0, updates=3, examples=96, step=3)
    evaluator.close()
    summary = evaluator.summary()
    first, second = summary["points"]
    assert first["train_s"] == 0.0 and first["updates"] == 1
    assert second["train_s"] == pytest.approx(1.0 - first["eval_s"])  # the first evaluation paused training
    assert 0.0 <= second["accuracy"] <= 1.0 and second["loss"] > 0
    assert summary["reached"] and summary["time_to_accuracy_s"] == 0.0 and summary["updates_to_accuracy"] == 1
    events = scalars(str(tmp_path / "tb"))
    assert [e.step for e in events["eval_by_update/accuracy"]] == [1, 3]
    assert len(events["eval/accuracy"]) == 2 and len(events["eval/loss"]) == 2
    assert "reached in 0.0 s, 1 updates" in table.convergence_line(summary)


@pytest.mark.slow
def test_accuracy_rises_above_chance_on_a_short_run(logdir):
    out, run = run_tiny(logdir, "digits_default", *DIGITS, "--num_steps=60", "--eval_every=20",
                        "--target_accuracy=0.3")
    record = cluster_record(run)["convergence"]
    points = record["points"]
    assert [p["step"] for p in points] == [1, 21, 41, 61]
    assert [p["updates"] for p in points] == [1, 21, 41, 61]  # one update per step
    assert points[-1]["accuracy"] > 0.3 > 0.1  # chance is 0.1 on ten classes
    assert record["reached"] and record["updates_to_accuracy"] <= 61
    assert "held-out accuracy (digits)" in out and "0.30 reached in" in out
    events = scalars(os.path.join(run, "tb", "worker_0"))
    assert [round(e.value, 5) for e in events["eval_by_update/accuracy"]] == [round(p["accuracy"], 5) for p in points]


@pytest.mark.slow
def test_parameter_server_coordinator_evaluates_async_training(logdir):
    _, run = run_tiny(logdir, "digits_ps", *DIGITS, "--strategy=parameter_server", "--num_workers=2",
                      "--num_steps=20", "--eval_every=10")
    chief = task_records(run)["chief_0"]
    record = chief["convergence"]
    assert record["evaluation_pauses_training"] is False  # workers keep training meanwhile
    assert chief["closure_records"].startswith("held")  # the coordinator is at step i when it evaluates
    assert [p["step"] for p in record["points"]] == [1, 11, 21]
    assert record["points"][0]["updates"] >= 2 and record["points"][-1]["updates"] >= 40  # 2 updates a round
    assert cluster_record(run)["convergence"]["final_accuracy"] == record["final_accuracy"]
