"""Aggregation is real: from the same initial weights and data, one synchronous distributed
training step leaves the weights equal to one single-device step on the concatenated global
batch. Each run saves its initial and final weights and the data shards of its step. A run
has at least one warm-up step, so the runs make two steps on the same global batch (the
synthetic data repeats) and the reference makes the same two."""
import json
import os

import numpy as np
import pytest

from tfrun import run_tiny

pytestmark = pytest.mark.slow

TWO_STEPS = ["--num_warmup_steps=1", "--num_steps=1", "--batch_size=4", "--image_size=16"]


def single_device_step(config_dict, initial, shards, steps_run=2):
    """The reference: tfbench's own steps on one device over the shards' batches, concatenated."""
    from tfbench.config import RunConfig
    from tfbench.data.synthetic import batch_for
    from tfbench.framework.tf_import import tf
    from tfbench.loop import steps
    from tfbench.models import MODELS

    config = RunConfig.from_dict(config_dict)
    model = MODELS[config.model].build(config.num_classes, config.image_size, config.data_format)
    optimizer = steps.optimizer(config)
    optimizer.build(model.trainable_variables)
    for variable, value in zip(model.trainable_variables, initial):
        variable.assign(value)
    batches = [batch_for(config, config.batch_size, int(s)) for s in shards]
    images = tf.concat([b[0] for b in batches], axis=0)
    labels = tf.concat([b[1] for b in batches], axis=0)
    for _ in range(steps_run):
        steps.train(model, optimizer, images, labels, global_batch_size=int(images.shape[0]))
    return [v.numpy() for v in model.trainable_variables]


@pytest.mark.parametrize("flags", [
    ["--strategy=multi_worker_mirrored", "--num_workers=2"],
    ["--strategy=horovod", "--num_workers=2"],
    ["--strategy=parameter_server", "--num_workers=2", "--num_ps=1", "--ps_sync"],
    ["--strategy=mirrored", "--num_local_devices=2"],
], ids=["mwms", "horovod", "ps_sync", "mirrored"])
def test_one_sync_step_equals_a_single_device_step_on_the_global_batch(logdir, tmp_path, flags):
    dump = str(tmp_path / "weights.npz")
    _, run = run_tiny(logdir, "agg", *flags, *TWO_STEPS, env={"TFBENCH_DUMP_WEIGHTS": dump})
    with open(os.path.join(run, "config.json")) as f:
        config = json.load(f)
    saved = np.load(dump)
    n = len([k for k in saved.files if k.startswith("initial_")])
    initial = [saved[f"initial_{i}"] for i in range(n)]
    final = [saved[f"final_{i}"] for i in range(n)]
    shards = saved["shards"]
    assert sorted(shards.tolist()) == [0, 1], "one global step covers both replicas' data"

    expected = single_device_step(config, initial, shards)
    moved = max(float(np.abs(e - i).max()) for e, i in zip(expected, initial))
    assert moved > 1e-4, "the reference step must change the weights for the comparison to mean anything"
    for got, want in zip(final, expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    # and not what one replica's batch alone would give
    alone = single_device_step(config, initial, shards[:1])
    assert max(float(np.abs(a - f).max()) for a, f in zip(alone, final)) > 1e-5
