"""Model registry: parameter counts and forward shapes."""
import numpy as np
import pytest

from tfbench.workloads.images import MODELS
from tfbench.models.alexnet import first_conv


def test_registry_names():
    assert {"resnet50", "alexnet", "tiny"} <= set(MODELS)


@pytest.mark.slow  # builds the model in TensorFlow
def test_resnet50_has_the_published_parameter_count():
    model = MODELS["resnet50"].build(num_classes=1000, image_size=224)
    assert model.count_params() == 25_636_712


def alexnet_params(image_size, classes):
    """Parameters of the AlexNet definition, counted by hand from its layers."""
    kernel, stride, pool_padding = first_conv(image_size)
    if stride == 4:
        side = (image_size - kernel) // stride + 1
    else:
        side = -(-image_size // stride)
    for _ in range(3):  # three 3x3/2 max pools
        side = (side - 3) // 2 + 1 if pool_padding == "valid" else -(-side // 2)
    convs = [(kernel, 3, 96), (5, 96, 256), (3, 256, 384), (3, 384, 384), (3, 384, 256)]
    total = sum(k * k * cin * cout + cout for k, cin, cout in convs)
    flat = side * side * 256
    total += flat * 4096 + 4096 + 4096 * 4096 + 4096 + 4096 * classes + classes
    return total


@pytest.mark.slow  # builds the model in TensorFlow
@pytest.mark.parametrize("image_size", [224, 64, 32])
def test_alexnet_parameter_count_matches_its_definition(image_size):
    model = MODELS["alexnet"].build(num_classes=1000, image_size=image_size)
    assert model.count_params() == alexnet_params(image_size, 1000)


@pytest.mark.slow  # builds the model in TensorFlow
def test_alexnet_at_227_has_the_published_size():
    # The original 227 px input gives 6x6x256 features and the well-known 62.4 M parameters.
    assert MODELS["alexnet"].build(1000, 227).count_params() == 62_378_344


@pytest.mark.slow  # builds the model in TensorFlow
@pytest.mark.parametrize("name,size", [("resnet50", 32), ("alexnet", 32), ("tiny", 8)])
def test_forward_shapes_nhwc(name, size):
    model = MODELS[name].build(num_classes=7, image_size=size)
    out = model(np.zeros((2, size, size, 3), np.float32), training=False)
    assert tuple(out.shape) == (2, 7)


def test_min_image_sizes_are_enforced_in_the_registry():
    assert MODELS["resnet50"].min_image_size == 32
    assert MODELS["tiny"].min_image_size <= 16
