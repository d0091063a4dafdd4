"""Real image data for convergence runs, shipped inside a PyPI package: nothing is downloaded.

`digits` is scikit-learn's copy of the UCI handwritten digits (1,797 grey 8x8 images, 10
classes). A fixed 20% (seeded, stratified by class) is held out for evaluation; the rest is the
training set, sharded between the workers (shard i of N takes every N-th image) so that workers
see disjoint data, as in the studies. Images are scaled to [0, 1], resized to --image_size and
given three identical channels so that every tfbench model takes them. The synthetic default
lives in tfbench.data.synthetic.
"""
from __future__ import annotations

import functools
from typing import Tuple

DATASETS = {
    "synthetic": "uniform noise of ImageNet-like shape, made before timing (tfbench.data.synthetic); no accuracy",
    "digits": "scikit-learn's handwritten digits: 1,797 grey 8x8 images, 10 classes, 20% held out",
}
NUM_CLASSES = {"digits": 10}
HELD_OUT = 0.2
SPLIT_SEED = 0  # the held-out set never depends on --seed: every run is evaluated on the same images


@functools.lru_cache(maxsize=4)
def arrays(name: str, image_size: int) -> Tuple:
    """(train images, train labels, held-out images, held-out labels) as float32 NHWC / int32."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if name != "digits":
        raise ValueError(f"no real dataset named {name!r}")
    digits = load_digits()
    images = (digits.images / 16.0).astype("float32")[..., None]  # [N, 8, 8, 1] in [0, 1]
    x_train, x_test, y_train, y_test = train_test_split(
        images, digits.target.astype("int32"), test_size=HELD_OUT, random_state=SPLIT_SEED,
        stratify=digits.target)
    return _resized(x_train, image_size), y_train, _resized(x_test, image_size), y_test


def _resized(images, image_size: int):
    import numpy as np

    from tfbench.framework.tf_import import tf

    with tf.init_scope():  # eagerly, even when first called while a dataset function is traced
        out = tf.image.resize(images, [image_size, image_size], method="bilinear") \
            if images.shape[1] != image_size else tf.constant(images)
        return np.ascontiguousarray(tf.tile(out, [1, 1, 1, 3]).numpy())


def train_dataset(config, shard: int, num_shards: int, batch_size: int):
    """An endless tf.data pipeline of shard `shard` (of `num_shards`), reshuffled every epoch, in full batches of `batch_size` (a batch may span two epochs)."""
    from tfbench.framework.tf_import import tf

    x, y, _, _ = arrays(config.dataset, config.image_size)
    data = tf.data.Dataset.from_tensor_slices((x, y)).shard(num_shards, shard)  # shard: an int or a tensor
    # config_checks: every shard holds a batch; the shards' images differ, so one seed serves all
    return (data.cache().shuffle(len(x) // num_shards + 1, seed=config.seed, reshuffle_each_iteration=True)
            .repeat().batch(batch_size, drop_remainder=True).prefetch(2))


def shard_size(name: str, num_shards: int) -> int:
    """Training images of the smallest shard, without loading anything (for flag validation)."""
    total = {"digits": 1797}[name]
    train = total - int(-(-total * HELD_OUT // 1))  # train_test_split rounds the held-out count up
    return train // num_shards
