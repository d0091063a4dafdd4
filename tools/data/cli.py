"""`python -m tools.data --data_dir=DIR --num_examples=N --image_size=S`: a set of images for
`python -m tfbench --data_dir=DIR`, in the layout of ImageNet's TFRecords (tfbench.data.records).

Writes --num_shards files `train-00000-of-0000K` ... of tf.Example protos, each an RGB image of
--image_size squared, JPEG-encoded at --quality, under `image/encoded` (with `image/format`,
`image/height`, `image/width` beside it, as ImageNet's build script writes) and its class, uniform
over --num_classes, under `image/class/label` (0-based: tfbench reads labels below --num_classes;
ImageNet's own are 1..1000, read with --num_classes=1001 as tf_cnn_benchmarks did). Each image is
smooth noise (a few random colours, bilinearly enlarged, plus fine grain), so that JPEG encodes
and decodes it at the sizes and costs of a photograph rather than of flat colour; deterministic
per --seed. Files are written under temporary names and renamed when complete, with a progress
bar; DIR must not hold train-* files already. Exit code 2 for bad input, before anything is written.
"""
from __future__ import annotations

import os
import sys

from absl import app, flags

from tfbench.config import helptext
from tfbench.data import records

flags.DEFINE_string("data_dir", "", "Directory to write the TFRecord shards into (created if missing).")
flags.DEFINE_integer("num_examples", 1024, "Images to write.")
flags.DEFINE_integer("image_size", 256, "Side of the square JPEG images, in pixels (tfbench crops and resizes "
                                        "them to its --image_size).")
flags.DEFINE_integer("num_shards", 8, "Files to spread the images over (ImageNet's training set: 1024).")
flags.DEFINE_integer("num_classes", 1000, "Classes of the labels, uniform over 0..num_classes-1.")
flags.DEFINE_integer("quality", 90, "JPEG quality, 1-100.")
flags.DEFINE_integer("seed", 0, "Seed of the images and labels.")
FLAGS = flags.FLAGS
PROG = "tools.data"
GROUPS = [("Data set", ["data_dir", "num_examples", "image_size", "num_shards", "num_classes", "quality", "seed"])]
MAX_IMAGE_SIZE = 4096


def check() -> None:
    f = FLAGS
    need = _need
    need(bool(f.data_dir), "--data_dir is required: the directory to write the shards into")
    need(f.num_examples >= 1, f"--num_examples must be positive, got {f.num_examples}")
    need(8 <= f.image_size <= MAX_IMAGE_SIZE, f"--image_size must be 8..{MAX_IMAGE_SIZE} pixels, got {f.image_size}")
    need(1 <= f.num_shards <= f.num_examples, f"--num_shards must be 1..--num_examples ({f.num_examples}), got "
                                              f"{f.num_shards}")
    need(f.num_classes >= 2, f"--num_classes must be at least 2, got {f.num_classes}")
    need(1 <= f.quality <= 100, f"--quality must be 1..100, got {f.quality}")
    path = os.path.abspath(f.data_dir)
    need(not os.path.exists(path) or os.path.isdir(path), f"--data_dir={f.data_dir} exists and is not a directory")
    need(not records.files(path), f"--data_dir={f.data_dir} holds {records.PATTERN} files already; give an empty "
                                  f"or new directory")
    probe = path
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    need(os.access(probe, os.W_OK), f"--data_dir={f.data_dir} cannot be written ({probe} is not writable)")


def _need(ok: bool, message: str) -> None:
    if not ok:
        helptext.fail_usage(message, PROG)


def main(argv) -> int:
    if len(argv) > 1:
        helptext.fail_usage(f"unexpected arguments: {' '.join(argv[1:])} (flags are --name=value)", PROG)
    check()
    from tools.data import write

    f = FLAGS
    written = write.write_set(os.path.abspath(f.data_dir), f.num_examples, f.image_size, f.num_shards, f.num_classes,
                              f.quality, f.seed)
    print(f"{PROG}: {written['examples']} images of {f.image_size}x{f.image_size} in {f.num_shards} shards, "
          f"{written['bytes'] / 1e6:.1f} MB ({written['bytes'] / written['examples'] / 1e3:.1f} kB per image) in "
          f"{os.path.abspath(f.data_dir)}; read it with python -m tfbench --data_dir={f.data_dir}", flush=True)
    return 0


def run() -> None:
    app.run(main, flags_parser=helptext.parser(__doc__, lambda: GROUPS, PROG))


if __name__ == "__main__":
    sys.exit(run())
