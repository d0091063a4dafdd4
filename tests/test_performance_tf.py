"""With TensorFlow: FLOP counts equal the hand count, the GEMM peak is measured, mixed-precision
training steps stay numerically sane, and a real run (the shared `default` of tests/clusters.py)
records its start-up phases and FLOP/s."""
import math

import pytest

from tfrun import task_records

pytestmark = pytest.mark.slow


def layers(build, shape):
    """A workload of one model on float inputs of `shape` with class labels, as flops counts any."""
    import dataclasses

    from tfbench.framework.tf_import import tf
    from tfbench.workloads.images import ImageWorkload

    @dataclasses.dataclass(frozen=True)
    class Layers(ImageWorkload):
        def build(self, config):
            return build()

        def example_spec(self, config):
            return tf.TensorSpec((1, *shape), tf.float32), tf.TensorSpec((1,), tf.int32)

    return Layers("layers", "hand-counted layers")


def test_flops_of_layers_equal_the_hand_count():
    from tfbench.config import RunConfig
    from tfbench.framework.tf_import import keras
    from tfbench.measure import flops

    k, n = 64, 10
    dense = flops.count_model(RunConfig(), layers(
        lambda: keras.Sequential([keras.Input((k,)), keras.layers.Dense(n, use_bias=False)]), (k,)))
    assert dense["forward"] == 2 * k * n  # one [1, K] x [K, N] product
    assert dense["params"] == k * n
    # train = forward + the weight gradient (another 2·K·N) + the loss's few FLOPs per class;
    # no gradient flows into the input, which is not a variable.
    assert 4 * k * n <= dense["train"] < 4 * k * n + 20 * n

    h, kh, cin, cout = 16, 3, 3, 8
    conv = flops.count_model(RunConfig(), layers(lambda: keras.Sequential([
        keras.Input((h, h, cin)), keras.layers.Conv2D(cout, kh, padding="same", use_bias=False),
        keras.layers.Flatten()]), (h, h, cin)))
    assert conv["forward"] == 2 * h * h * kh * kh * cin * cout  # per output pixel: kh·kw·Cin·Cout MACs
    # its weight gradient costs as much again; the input gradient is pruned (no variable needs it)
    classes = h * h * cout
    assert 2 * conv["forward"] <= conv["train"] < 2 * conv["forward"] + 20 * classes


def test_flops_per_example_of_the_registered_models_are_cached(tmp_path, monkeypatch):
    from tfbench.config import RunConfig
    from tfbench.measure import flops

    monkeypatch.setenv(flops.CACHE_ENV, str(tmp_path / "flops.json"))
    config = RunConfig(model="tiny", image_size=16, num_classes=10)
    tiny = flops.per_example(config)
    # conv 3x3x3->8 at 16x16 (2·16·16·27·8), then the 8->10 classifier (2·8·10), plus bias adds
    # and the pooling mean that TensorFlow also counts.
    assert 2 * 16 * 16 * 27 * 8 + 2 * 8 * 10 <= tiny["forward"] < 1.1 * (2 * 16 * 16 * 27 * 8)
    assert 2 * tiny["forward"] < tiny["train"] < 4 * tiny["forward"]
    monkeypatch.setattr(flops, "count_model", lambda *a: pytest.fail("counted again instead of cached"))
    assert flops.per_example(config) == tiny


def test_peak_tool_measures_positive_gemm_rates_on_a_small_matrix():
    from tools.bench import peak

    for p in ("fp32", "bf16"):
        rate = peak.gemm_flops_per_s(p, n=64, min_time=0.05, trials=1)
        assert rate > 1e6 and math.isfinite(rate)


def _train_losses(precision_name: str, steps_to_run: int = 15):
    """Losses of repeated training steps on one fixed batch of the tiny model at `precision_name`."""
    from tfbench.data.synthetic import synthetic_batch
    from tfbench.framework import precision
    from tfbench.framework.tf_import import keras, tf
    from tfbench.loop import steps
    from tfbench.workloads.images import MODELS

    keras.utils.set_random_seed(0)
    precision.apply_policy(precision_name)
    try:
        model = MODELS["tiny"].build(10, 16)
        optimizer = precision.wrap_optimizer(keras.optimizers.SGD(0.1), precision_name)
        images, labels = synthetic_batch(8, 16, 20, 10)
        step = tf.function(lambda: steps.train(model, optimizer, images, labels, 8))
        losses = [float(step()) for _ in range(steps_to_run)]
        return losses, model, optimizer
    finally:
        precision.apply_policy("fp32")


@pytest.mark.parametrize("name,compute", [("bf16", "bfloat16"), ("fp16", "float16")])
def test_mixed_precision_training_step_is_numerically_sane(name, compute):
    """The step the CLI refuses on this CPU still has to be right where it runs: the layers
    compute in the low precision, variables stay fp32, and the loss is finite and falls."""
    losses, model, optimizer = _train_losses(name)
    assert model.layers[0].compute_dtype == compute
    assert all(v.dtype == "float32" for v in model.trainable_variables)
    assert all(math.isfinite(x) for x in losses), losses
    assert losses[-1] < 0.9 * losses[0], losses
    if name == "fp16":
        assert hasattr(optimizer, "get_scaled_loss")  # dynamic loss scaling is on
    fp32_losses, _, _ = _train_losses("fp32")
    assert losses[0] == pytest.approx(fp32_losses[0], rel=0.05)  # the same loss, to bf16's precision


def test_run_records_startup_phases_in_order_and_flops(clusters):
    from tfbench.measure import startup

    out, run_dir = clusters["default"].out, clusters["default"].run
    (task,) = task_records(run_dir).values()
    marks = task["startup"]["marks"]
    assert list(sorted(marks, key=marks.get)) == list(startup.PHASES)
    assert task["startup"]["total_s"] > 0
    assert task["flops"]["train_per_example"] > 0 and task["flops"]["achieved_flops_per_s"] > 0
    assert task["precision"] == "fp32"
    assert "FLOP/s = " in out and "start-up " in out
