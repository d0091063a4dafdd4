"""Writes the shards of `python -m tools.data` (see its cli): synthetic photographs-like images,
JPEG-encoded by TensorFlow, as tf.Example protos in TFRecord files, with tf_keras' progress bar."""
from __future__ import annotations

import os
from typing import Dict

COLOURS = 8  # the coarse grid of random colours an image is enlarged from, per side


def image(size: int, seed: int, index: int):
    """One uint8 [size, size, 3] image: a coarse grid of random colours bilinearly enlarged, plus grain."""
    from tfbench.framework.tf_import import tf

    key = tf.constant([seed, index], tf.int64)
    coarse = tf.random.stateless_uniform([1, COLOURS, COLOURS, 3], seed=key, maxval=255.0)
    smooth = tf.image.resize(coarse, [size, size], method="bilinear")[0]
    grain = tf.random.stateless_normal([size, size, 3], seed=key + [0, 1 << 40], stddev=12.0)
    return tf.cast(tf.clip_by_value(smooth + grain, 0.0, 255.0), tf.uint8)


def example(encoded: bytes, label: int, size: int):
    """A tf.train.Example with the features ImageNet's TFRecords carry (tfbench reads two of them)."""
    from tfbench.framework.tf_import import tf

    def bytes_(value):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    def int_(value):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    return tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": bytes_(encoded), "image/format": bytes_(b"JPEG"), "image/class/label": int_(label),
        "image/height": int_(size), "image/width": int_(size), "image/channels": int_(3)}))


def write_set(data_dir: str, num_examples: int, size: int, num_shards: int, num_classes: int, quality: int,
              seed: int) -> Dict[str, int]:
    """Writes the shards; {'examples', 'bytes'}. Shard k holds examples k, k + num_shards, ..."""
    from tfbench.framework.tf_import import keras, tf

    os.makedirs(data_dir, exist_ok=True)
    labels = tf.random.stateless_uniform([num_examples], seed=[seed, -1], maxval=num_classes, dtype=tf.int64).numpy()
    bar = keras.utils.Progbar(num_examples, unit_name="image")
    total = 0
    for shard in range(num_shards):
        name = os.path.join(data_dir, f"train-{shard:05d}-of-{num_shards:05d}")
        partial = name + ".partial"
        with tf.io.TFRecordWriter(partial) as writer:
            for index in range(shard, num_examples, num_shards):
                encoded = tf.io.encode_jpeg(image(size, seed, index), quality=quality).numpy()
                writer.write(example(encoded, int(labels[index]), size).SerializeToString())
                bar.add(1)
        os.replace(partial, name)
        total += os.path.getsize(name)
    return {"examples": num_examples, "bytes": total}
