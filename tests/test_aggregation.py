"""Aggregation is real: from the same initial weights and data, synchronous distributed training
steps leave the weights equal to single-device steps on the concatenated global batch. Each run
(a shared scenario of tests/clusters.py that saves its weights) saves its initial and final
weights and the data shards of its step. Every step of a run, warm-up included, trains on the
same global batch (the synthetic data repeats) or, for a workload whose examples are a stream (the
recommender's clicks), on the global batch of that step, and the reference makes as many, with the
workload's own loss (`horovod` runs the transformer, bert_tiny made small)."""
import numpy as np
import pytest

pytestmark = pytest.mark.slow


def single_device_step(config_dict, initial, shards):
    """The reference: tfbench's own steps on one device over the shards' batches, concatenated."""
    from tfbench.config import RunConfig
    from tfbench.framework.tf_import import tf
    from tfbench.loop import steps

    config = RunConfig.from_dict(config_dict)
    model = config.workload.build(config)
    optimizer = steps.optimizer(config)
    steps.prepare(optimizer, model.trainable_variables)
    for variable, value in zip(model.trainable_variables, initial):
        variable.assign(value)
    def global_batch(step):
        batches = [config.workload.batch(config, config.batch_size, int(s), **({"step": step} if config.workload.streams
                                                                               else {})) for s in shards]
        return tf.nest.map_structure(lambda *parts: tf.concat(parts, axis=0), *batches)

    for step in range(config.num_warmup_steps + config.num_steps):
        features, labels = global_batch(step)
        _, grads = steps.gradients(model, features, labels, config.batch_size * len(shards),
                                   loss=config.workload.per_example_loss)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return [v.numpy() for v in model.trainable_variables]


@pytest.mark.parametrize("scenario", ["mwms", "horovod", "ps_sync", "mirrored", "dlrm_mwms", "dlrm_horovod",
                                      "dlrm_ps_sync", "dlrm_hybrid"])
def test_sync_steps_equal_single_device_steps_on_the_global_batch(clusters, scenario):
    launched = clusters[scenario]
    config = launched.config
    saved = np.load(launched.weights)
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
