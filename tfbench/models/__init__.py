"""Model registry: a name maps to a builder, the way tf_cnn_benchmarks' model_config does.

Builders import TensorFlow lazily so that the registry (and flag validation that consults it)
stays cheap.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    builder: str  # "module:function", imported when a model is built
    min_image_size: int
    description: str

    def build(self, num_classes: int, image_size: int, data_format: str = "NHWC"):
        """A tf_keras model producing logits for `num_classes` from square RGB images."""
        import importlib

        module, function = self.builder.split(":")
        build: Callable = getattr(importlib.import_module(module), function)
        return build(num_classes=num_classes, image_size=image_size, data_format=data_format)


MODELS: Dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec("resnet50", "tfbench.models.resnet:resnet50", 32,
                  "tf_keras.applications ResNet50, weights=None (25.6 M parameters at 1000 classes)"),
        ModelSpec("alexnet", "tfbench.models.alexnet:alexnet", 16,
                  "AlexNet: 5 convolutions and 3 dense layers, first stride adapted to the image size"),
        ModelSpec("lenet", "tfbench.models.lenet:lenet", 8,
                  "two convolutions, pooling and two dense layers: a small CNN for --dataset=digits"),
        ModelSpec("tiny", "tfbench.models.tiny:tiny", 8,
                  "one convolution and a classifier, for tests"),
    )
}
