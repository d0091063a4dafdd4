"""Sets of images in the layout of ImageNet's TFRecords, written as ImageNet's conversion script
(build_imagenet_data.py of the TensorFlow models repository) writes them, with nothing of tfbench:
files train-00000-of-0000N of tf.train.Example protos holding image/encoded (a JPEG),
image/format, image/filename, image/height, image/width, image/colorspace, image/channels,
image/class/label (1..1000: 0 is the background), image/class/synset, image/class/text and the
bounding boxes image/object/bbox/xmin, ymin, xmax, ymax and label.

`python tests/imagenet_records.py DIR --shards=N --examples=N --labels=FIRST:LAST` (written(DIR,
flags...) from a test) writes one such set, in a child process of the tests (it imports
TensorFlow; `written_sets` writes several in one, TensorFlow imported once), its labels spread over FIRST..LAST with both ends included; --bad_labels=K:LABEL
labels every example from the K-th on LABEL, --garbage_after=K writes random bytes after the K-th
record of each shard, --random_shard adds one file named like a shard that holds random bytes only.
"""
import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def written(path, *flags) -> str:
    """`path`, holding the set these flags describe, written by this script in a child process."""
    return written_sets([(path, *flags)])[0]


def written_sets(sets) -> list:
    """The paths of several sets, each (path, flags...), written by one child process."""
    argv = [json.dumps([[str(path), *flags] for path, *flags in sets])]
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--sets", *argv], capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"tests/imagenet_records.py {argv[0]} failed: {proc.stderr[-2000:]}")
    return [str(path) for path, *_ in sets]


def example(tf, encoded: bytes, label: int, size: int, name: str):
    def bytes_(*values):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=list(values)))

    def int_(*values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    def float_(*values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))

    synset = f"n{label:08d}".encode()
    return tf.train.Example(features=tf.train.Features(feature={
        "image/height": int_(size), "image/width": int_(size), "image/colorspace": bytes_(b"RGB"),
        "image/channels": int_(3), "image/class/label": int_(label), "image/class/synset": bytes_(synset),
        "image/class/text": bytes_(b"class " + synset), "image/object/bbox/xmin": float_(0.1),
        "image/object/bbox/xmax": float_(0.9), "image/object/bbox/ymin": float_(0.2),
        "image/object/bbox/ymax": float_(0.8), "image/object/bbox/label": int_(label),
        "image/format": bytes_(b"JPEG"), "image/filename": bytes_(name.encode()), "image/encoded": bytes_(encoded)}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--examples", type=int, default=64)
    p.add_argument("--size", type=int, default=40)
    p.add_argument("--labels", default="1:1000", help="FIRST:LAST, spread evenly over the examples, both ends included")
    p.add_argument("--bad_labels", default="", help="K:LABEL: examples K, K+1, ... labelled LABEL")
    p.add_argument("--garbage_after", type=int, default=0, help="random bytes after record K of each shard")
    p.add_argument("--random_shard", action="store_true", help="and a file train-random of random bytes")
    sets = json.loads(sys.argv[2]) if sys.argv[1:2] == ["--sets"] else [sys.argv[1:]]
    for argv in sets:
        write(p.parse_args(argv))


def write(a):
    import numpy as np
    import tensorflow as tf

    first, last = (int(x) for x in a.labels.split(":"))
    bad_from, bad_label = (int(x) for x in a.bad_labels.split(":")) if a.bad_labels else (a.examples, 0)
    rng = np.random.default_rng(0)
    os.makedirs(a.dir, exist_ok=True)
    for shard in range(a.shards):
        path = os.path.join(a.dir, f"train-{shard:05d}-of-{a.shards:05d}")
        with tf.io.TFRecordWriter(path) as writer:
            for k, index in enumerate(range(shard, a.examples, a.shards)):
                pixels = rng.integers(0, 256, (a.size, a.size, 3), dtype=np.uint8)
                encoded = tf.io.encode_jpeg(pixels, quality=90).numpy()
                spread = first + round(index * (last - first) / max(1, a.examples - 1))
                label = bad_label if index >= bad_from else spread
                writer.write(example(tf, encoded, label, a.size, f"img_{index}.JPEG").SerializeToString())
                if a.garbage_after and k + 1 == a.garbage_after:
                    break
        if a.garbage_after:
            with open(path, "ab") as f:
                f.write(rng.bytes(4096))
    if a.random_shard:
        with open(os.path.join(a.dir, "train-random"), "wb") as f:
            f.write(rng.bytes(4096))


if __name__ == "__main__":
    main()
