"""Model registry: a name maps to a builder, the way tf_cnn_benchmarks' model_config does.

Builders import TensorFlow lazily so that the registry (and flag validation that consults it)
stays cheap. Beside tfbench's own models, every tf_keras.applications model is registered by its
snake-case name (tfbench.models.applications: inception_v3, resnet152, vgg16, ...).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict

from tfbench.models import applications


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    builder: str  # "module:function", imported when a model is built
    min_image_size: int
    description: str
    # tfbench.measure.memory's bounds hold for it (checked by the tests), so small runs need no count
    bounded: bool = True
    application: str = ""  # a tf_keras.applications model: its snake-case name, passed to the builder

    def build(self, num_classes: int, image_size: int, data_format: str = "NHWC"):
        """A tf_keras model producing logits for `num_classes` from square RGB images."""
        import importlib

        module, function = self.builder.split(":")
        build: Callable = getattr(importlib.import_module(module), function)
        if self.application:
            return build(self.application, num_classes=num_classes, image_size=image_size, data_format=data_format)
        return build(num_classes=num_classes, image_size=image_size, data_format=data_format)


OWN: Dict[str, ModelSpec] = {
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
MODELS: Dict[str, ModelSpec] = dict(OWN)  # tfbench's own, then every tf_keras.applications model
for _name, _class in applications.NAMES.items():
    MODELS.setdefault(_name, ModelSpec(_name, "tfbench.models.applications:build", applications.min_image_size(_name),
                                       f"tf_keras.applications {_class}, weights=None", bounded=False,
                                       application=_name))
OWN_MODELS = tuple(OWN)
