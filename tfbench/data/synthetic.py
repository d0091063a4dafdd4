"""Synthetic ImageNet-like data, made before timing starts.

Images are uniform noise of `source_image_size` squared, cropped (once, untimed) to
`image_size`; labels are uniform over the classes. Each shard (replica, rank or
parameter-server worker) gets its own deterministic batch from (seed, shard), so a
distributed step and a single-device step on the concatenated global batch see the same data.
"""
from __future__ import annotations

from tfbench.framework.tf_import import tf


def synthetic_batch(batch_size: int, image_size: int, source_image_size: int, num_classes: int,
                    data_format: str = "NHWC", seed: int = 0, shard=0):
    """(images float32 [B, H, W, 3] or [B, 3, H, W], labels int32 [B]) for one shard."""
    shard = tf.cast(shard, tf.int64)
    image_seed = tf.stack([tf.constant(seed, tf.int64), 2 * shard])
    label_seed = tf.stack([tf.constant(seed, tf.int64), 2 * shard + 1])
    source = tf.random.stateless_uniform([batch_size, source_image_size, source_image_size, 3],
                                         seed=image_seed, dtype=tf.float32)
    offset = (source_image_size - image_size) // 2
    images = source[:, offset:offset + image_size, offset:offset + image_size, :]
    if data_format == "NCHW":
        images = tf.transpose(images, [0, 3, 1, 2])
    labels = tf.random.stateless_uniform([batch_size], seed=label_seed, minval=0, maxval=num_classes,
                                         dtype=tf.int32)
    return tf.identity(images), labels

