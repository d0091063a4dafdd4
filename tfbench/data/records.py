"""Images read from files (--data_dir): TFRecord shards of tf.Example protos holding JPEG images
in the layout of ImageNet's TFRecords (files `train-00000-of-01024`, ...; features
`image/encoded` and `image/class/label`), as tf_cnn_benchmarks read them. `python -m tools.data`
writes such a set of any size.

Every step's batch goes through tf.data the way tf_cnn_benchmarks' training input did: the
task's files interleaved, examples shuffled, then a parallel map that decodes the JPEG inside a
random crop (tf.image.decode_and_crop_jpeg of a sample_distorted_bounding_box: 8-100% of the
area, aspect 3/4-4/3), resizes it to --image_size and flips it at random, then batches and
prefetches. The crops and flips are stateless, seeded by (--seed, reader, example), so a run
reads the same crops each time. The pipeline runs on a thread pool of its own of --input_threads
threads (0: one per core of the task that reads), which also sets the map's parallelism and the
interleave's, up to the number of files (a set of one file is read one file at a time);
PREFETCH_BATCHES batches are prefetched. tfbench.data.shards checks the files before anything
starts, whoever wrote them.

Sharding (stated in every record, `input_pipeline`): with at least as many files as readers
(workers), each reader reads its own files, file i going to reader i mod N ("file"); with fewer,
every reader reads every file and keeps every N-th example ("example"). Nothing here imports
TensorFlow until a pipeline is built, so validation and the records stay cheap.
"""
from __future__ import annotations

import glob
import os
from typing import Dict, List

PATTERN = "train-*"  # ImageNet's training shards: train-00000-of-01024 ... (validation-* are not read)
PREFETCH_BATCHES = 2
SHUFFLE_EXAMPLES = 1024
CROP_AREA = (0.08, 1.0)
CROP_ASPECT = (3 / 4, 4 / 3)


def files(data_dir: str) -> List[str]:
    """The training shards of `data_dir`, in name order."""
    return sorted(p for p in glob.glob(os.path.join(data_dir, PATTERN)) if os.path.isfile(p))


def threads(config, cores: int) -> int:
    """The input pipeline's threads: --input_threads, or one per core of the task that reads."""
    return config.input_threads or max(1, cores)


def sharding(num_files: int, readers: int) -> Dict:
    """How `readers` pipelines share `num_files` files (see the module docstring)."""
    if num_files >= readers:
        return {"policy": "file", "files": num_files, "readers": readers,
                "files_per_reader": [len(range(i, num_files, readers)) for i in range(readers)],
                "definition": "each reader (worker) reads its own files: file i goes to reader i mod readers"}
    return {"policy": "example", "files": num_files, "readers": readers,
            "definition": "fewer files than readers: every reader reads every file and keeps every readers-th "
                          "example, its own"}


def describe(config, cores: int) -> Dict:
    """The record's `input_pipeline` entry for a task of `cores` cores."""
    n = threads(config, cores)
    return {"data_dir": os.path.abspath(config.data_dir), "pattern": PATTERN,
            **sharding(len(files(config.data_dir)), config.num_workers),
            "threads": n, "parallel_calls": n, "files_read_at_once": min(n, len(files(config.data_dir))),
            "prefetch_batches": PREFETCH_BATCHES,
            "shuffle_examples": SHUFFLE_EXAMPLES, "threads_source": "--input_threads" if config.input_threads
            else "the reading task's cores",
            "preprocessing": "decode_and_crop_jpeg of a random crop (area 8-100%, aspect 3/4-4/3), bilinear "
                             "resize to --image_size, random left-right flip, scaled to [0, 1]"}


def dataset(config, shard, num_shards: int, batch_size: int, image_size: int, cores: int):
    """An endless pipeline of reader `shard` (an int, or a tensor: a parameter-server worker's
    index) of `num_shards`: batches (images float32 NHWC/NCHW in [0, 1], labels int32)."""
    from tfbench.framework.tf_import import tf

    names = files(config.data_dir)
    n = threads(config, cores)
    shard64 = tf.cast(shard, tf.int64)
    data = tf.data.Dataset.from_tensor_slices(names)
    by_file = len(names) >= num_shards
    if by_file:
        data = data.shard(num_shards, shard64)
    data = data.shuffle(len(names), seed=config.seed, reshuffle_each_iteration=True).repeat()
    cycle = min(n, len(names))  # files read at once: never more readers than files (tf.data refuses it)
    data = data.interleave(tf.data.TFRecordDataset, cycle_length=cycle, num_parallel_calls=cycle, deterministic=True)
    if not by_file:
        data = data.shard(num_shards, shard64)
    data = data.shuffle(SHUFFLE_EXAMPLES, seed=config.seed).enumerate()

    def parse(index, serialized):
        example = tf.io.parse_single_example(serialized, features(tf))
        seed = tf.stack([tf.constant(config.seed, tf.int64) * 1000003 + shard64, index])
        image = crop_and_flip(example["image/encoded"], image_size, seed)
        if config.data_format == "NCHW":
            image = tf.transpose(image, [2, 0, 1])
        return image, tf.cast(example["image/class/label"], tf.int32)

    data = data.map(parse, num_parallel_calls=n, deterministic=True)
    data = data.batch(batch_size, drop_remainder=True).prefetch(PREFETCH_BATCHES)
    options = tf.data.Options()
    options.threading.private_threadpool_size = n
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF  # sharded above
    return data.with_options(options)


def features(tf) -> Dict:
    """What each example must hold, as tf.io.parse_single_example takes it (tfbench.data.shards
    checks the shards with it before anything starts)."""
    return {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64)}


def crop_and_flip(encoded, image_size: int, seed):
    """A training crop of one JPEG, decoded inside the crop only, resized and flipped at random."""
    from tfbench.framework.tf_import import tf

    shape = tf.image.extract_jpeg_shape(encoded)
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        shape, tf.zeros([0, 0, 4], tf.float32), seed=seed, min_object_covered=0.1,
        aspect_ratio_range=CROP_ASPECT, area_range=CROP_AREA, max_attempts=10, use_image_if_no_bounding_boxes=True)
    y, x, _ = tf.unstack(begin)
    h, w, _ = tf.unstack(size)
    image = tf.image.decode_and_crop_jpeg(encoded, tf.stack([y, x, h, w]), channels=3)
    image = tf.image.resize(image, [image_size, image_size], method="bilinear") / 255.0
    image = tf.image.stateless_random_flip_left_right(image, seed=seed + 1)
    return tf.ensure_shape(image, [image_size, image_size, 3])
