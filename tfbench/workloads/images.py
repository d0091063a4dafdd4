"""Image workloads: every model of tfbench.models (tfbench's own CNNs and the tf_keras.applications
models) on square RGB images with one class label each, counted in images.

Synthetic images are uniform noise cropped once, before timing (tfbench.data.synthetic); real
digits come from tfbench.data.datasets. The loss is softmax cross-entropy over the classes.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Tuple

from tfbench.models import ModelSpec
from tfbench.workloads.base import Workload, need

# Bounds that hold for every registered model (checked against their counts by the tests):
# below them no count is needed, which spares small runs a TensorFlow import before they start.
BOUND_PARAMS = 60 * 10 ** 6  # parameters besides the classifier (ResNet50 23.5 M, AlexNet 46.7 M)
BOUND_FEATURES = 4096  # inputs of the classifier (ResNet50 2048, AlexNet 4096)
BOUND_FLOATS_PER_PIXEL = 1300  # forward activations per input pixel (ResNet50: 952 at 224 px, 1164 at 32)
MAX_IMAGE_SIZE = 2048


@dataclasses.dataclass(frozen=True)
class ImageWorkload(Workload):
    spec: Optional[ModelSpec] = None
    unit: str = "images"
    inputs: str = "images"
    own_flags: Tuple[str, ...] = ("image_size", "source_image_size", "num_classes", "data_format", "dataset",
                                  "eval_every", "target_accuracy")
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


def image_workloads(models: Dict[str, ModelSpec]) -> Dict[str, ImageWorkload]:
    return {name: ImageWorkload(name, spec.description, spec=spec) for name, spec in models.items()}
