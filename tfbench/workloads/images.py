"""Image workloads: tfbench's own CNNs (tfbench.models' builders) and every tf_keras.applications
model by its snake-case name, each one `ModelSpec` line of MODELS, on square RGB images with one
class label each, counted in images.

Synthetic images are uniform noise cropped once, before timing (tfbench.data.synthetic); real
digits come from tfbench.data.datasets. The loss is softmax cross-entropy over the classes.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Callable, Dict, Optional, Tuple

from tfbench.models import applications
from tfbench.workloads.arguments import Arg, Arguments
from tfbench.workloads.base import Workload, WorkloadKind, need

# Bounds that hold for every registered model (checked against their counts by the tests):
# below them no count is needed, which spares small runs a TensorFlow import before they start.
BOUND_PARAMS = 60 * 10 ** 6  # parameters besides the classifier (ResNet50 23.5 M, AlexNet 46.7 M)
BOUND_FEATURES = 4096  # inputs of the classifier (ResNet50 2048, AlexNet 4096)
BOUND_FLOATS_PER_PIXEL = 1300  # forward activations per input pixel (ResNet50: 952 at 224 px, 1164 at 32)
MAX_IMAGE_SIZE = 2048


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """An image model: its builder (imported, with TensorFlow, only when a model is built), as
    tf_cnn_benchmarks' model_config maps a name to one."""

    name: str
    builder: str  # "module:function", imported when a model is built
    min_image_size: int
    description: str
    # tfbench.measure.memory's bounds hold for it (checked by the tests), so small runs need no count
    bounded: bool = True
    application: str = ""  # a tf_keras.applications model: its snake-case name, passed to the builder

    def build(self, num_classes: int, image_size: int, data_format: str = "NHWC"):
        """A tf_keras model producing logits for `num_classes` from square RGB images."""
        module, function = self.builder.split(":")
        build: Callable = getattr(importlib.import_module(module), function)
        if self.application:
            return build(self.application, num_classes=num_classes, image_size=image_size, data_format=data_format)
        return build(num_classes=num_classes, image_size=image_size, data_format=data_format)


OWN: Dict[str, ModelSpec] = {spec.name: spec for spec in (
    ModelSpec("resnet50", "tfbench.models.resnet:resnet50", 32,
              "tf_keras.applications ResNet50, weights=None (25.6 M parameters at 1000 classes)"),
    ModelSpec("alexnet", "tfbench.models.alexnet:alexnet", 16,
              "AlexNet: 5 convolutions and 3 dense layers, first stride adapted to the image size"),
    ModelSpec("lenet", "tfbench.models.lenet:lenet", 8,
              "two convolutions, pooling and two dense layers: a small CNN for --dataset=digits"),
    ModelSpec("tiny", "tfbench.models.tiny:tiny", 8, "one convolution and a classifier, for tests"),
)}
MODELS: Dict[str, ModelSpec] = dict(OWN)  # tfbench's own, then every tf_keras.applications model
for _name, _class in applications.NAMES.items():
    MODELS.setdefault(_name, ModelSpec(_name, "tfbench.models.applications:build", applications.min_image_size(_name),
                                       f"tf_keras.applications {_class}, weights=None", bounded=False,
                                       application=_name))
OWN_MODELS = tuple(OWN)

ARGUMENTS = Arguments(f"Image models (--model={', '.join(OWN_MODELS)} or a tf_keras.applications model)", (
    Arg("integer", "image_size", 224, "Side of the square images the model sees (after cropping)."),
    Arg("integer", "source_image_size", 0, "Side of the synthetic images before cropping; 0: image_size x 300/224."),
    Arg("integer", "num_classes", 1000, "Number of classes."),
    Arg("string", "data_format", "NHWC", "NHWC or NCHW (NCHW needs a GPU)."),
    Arg("string", "dataset", "synthetic", "synthetic (ImageNet-like noise, no accuracy) or digits (scikit-learn's "
                                          "handwritten digits, shipped in the package; 20% held out for evaluation)."),
    Arg("integer", "eval_every", 0, "Real data: evaluate held-out accuracy every this many steps (0: 10 times a run)."),
    Arg("float", "target_accuracy", 0.0, "Real data: record the training time to this held-out accuracy (0: none)."),
    Arg("string", "data_dir", "", "Image workloads: a directory of TFRecord shards (train-*) of JPEG images in "
                                  "ImageNet's layout (image/encoded, image/class/label; python -m tools.data writes "
                                  "one), decoded, cropped, flipped and batched by tf.data inside every step; '': "
                                  "synthetic images made before timing."),
))


@dataclasses.dataclass(frozen=True)
class ImageWorkload(Workload):
    spec: Optional[ModelSpec] = None
    unit: str = "images"
    inputs: str = "images"
    own_flags: Tuple[str, ...] = ARGUMENTS.names
    reads_files: bool = True
    kind: str = "image"

    def check(self, config) -> None:
        c = self
        need(config.image_size >= c.spec.min_image_size,
             f"--image_size={config.image_size} is too small for {c.name}; it needs at least {c.spec.min_image_size}")
        need(config.image_size <= MAX_IMAGE_SIZE,
             f"--image_size={config.image_size} is larger than tfbench supports ({MAX_IMAGE_SIZE})")
        need(config.source_image_size == 0 or config.source_image_size >= config.image_size,
             f"--source_image_size={config.source_image_size} is smaller than --image_size={config.image_size}; "
             f"images are cropped, not enlarged")

    def describe(self, config) -> str:
        return f"image={config.image_size}px"

    def key(self, config) -> str:
        return f"{self.name}|{config.image_size}px|{config.num_classes} classes|{config.data_format}"

    def record(self, config) -> Dict:
        return {"image_size": config.image_size, "num_classes": config.num_classes}

    def build(self, config):
        return self.spec.build(config.num_classes, config.image_size, config.data_format)

    def batch(self, config, batch_size: int, shard=0) -> Tuple:
        from tfbench.data.synthetic import synthetic_batch

        return synthetic_batch(batch_size, config.image_size, config.effective_source_image_size, config.num_classes,
                               config.data_format, config.seed, shard)

    def dataset(self, config, shard, num_shards: int, batch_size: int, cores: int = 1):
        """JPEG files (--data_dir, tfbench.data.records) or a real dataset (--dataset, tfbench.data.datasets)."""
        if config.data_dir:
            from tfbench.data import records

            return records.dataset(config, shard, num_shards, batch_size, config.image_size, cores)
        from tfbench.data import datasets

        return datasets.train_dataset(config, shard, num_shards, batch_size)

    def example_spec(self, config) -> Tuple:
        from tfbench.framework.tf_import import tf
        from tfbench.models.layout import input_shape

        return (tf.TensorSpec((1, *input_shape(config.image_size, config.data_format)), tf.float32),
                tf.TensorSpec((1,), tf.int32))

    def per_example_loss(self, labels, outputs):
        from tfbench.framework.tf_import import keras, tf

        return keras.losses.sparse_categorical_crossentropy(labels, tf.cast(outputs, tf.float32), from_logits=True)

    def memory_bound(self, config) -> Optional[Dict[str, int]]:
        if not self.spec.bounded:
            return None
        pixels = config.image_size * config.image_size
        return {"params": BOUND_PARAMS + (BOUND_FEATURES + 1) * config.num_classes,
                "activation_floats": BOUND_FLOATS_PER_PIXEL * pixels, "largest_floats": BOUND_FLOATS_PER_PIXEL * pixels}


KIND = WorkloadKind(
    "image", f"an image model ({', '.join(OWN_MODELS)}), a tf_keras.applications model by its snake-case name "
             f"({', '.join(n for n in MODELS if n not in OWN_MODELS)})",
    ARGUMENTS, {name: ImageWorkload(name, spec.description, spec=spec) for name, spec in MODELS.items()})
