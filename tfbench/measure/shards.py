"""The shards of --data_dir, checked before anything starts (by tfbench's command line and a
sweep's expansion, after tfbench.config.validate): each
train-* file's first records must parse as the input pipeline parses them (tfbench.data.records:
image/encoded a JPEG, image/class/label an int64), and their labels must fit --num_classes.

Whoever wrote the set (python -m tools.data, ImageNet's conversion script, a script of one's
own), a file that is not such a shard is refused with one line naming it, and a label range the
model cannot hold with the --num_classes that holds it: ImageNet's TFRecords number their
classes 1..1000, leaving 0 for the background, which tf_cnn_benchmarks trained with 1001
classes; so does tfbench (--num_classes=1001). The range is read from the first records of every
shard (up to RECORDS_PER_SHARD each, RECORDS_IN_ALL in all: a label beyond it fails the run with a
line naming it). The records are read by TensorFlow's own tf.data and tf.io in a child process
(the command line imports no TensorFlow), and what it found is cached per file (its path, size
and modification time), so that a sweep's points and later runs do not read them again.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, List, Optional

from tfbench.config.errors import ConfigError
from tfbench.data import records
from tfbench.measure import json_cache

CACHE_ENV = "TFBENCH_SHARDS_CACHE"  # overrides the cache file (tests)
RECORDS_PER_SHARD = 256
RECORDS_IN_ALL = 4096


def cache_path() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "tfbench", "shards.json")


def key(path: str) -> str:
    stat = os.stat(path)
    return f"{os.path.abspath(path)}|{stat.st_size}|{stat.st_mtime_ns}"


def per_shard(num_files: int) -> int:
    """Records read from each shard for its labels."""
    return max(1, min(RECORDS_PER_SHARD, RECORDS_IN_ALL // max(1, num_files)))


def inspected(files: List[str]) -> Dict[str, dict]:
    """{file: {"labels": [...]} or {"error": one line}}: cached, or read now in a child process (and cached)."""
    cached = json_cache.read(cache_path())
    found = {f: cached[key(f)] for f in files if key(f) in cached}
    missing = [f for f in files if f not in found]
    if missing:
        proc = subprocess.run([sys.executable, "-m", "tfbench.measure.shards", str(per_shard(len(files))), *missing],
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise ConfigError(f"--data_dir: its shards could not be read: {tail}")
        for f, entry in json.loads(proc.stdout.strip().splitlines()[-1]).items():
            json_cache.write(cache_path(), key(f), entry)
            found[f] = entry
    return found


def check_config(config) -> None:
    """check() of the run's --data_dir, its labels against --num_classes where the workload reads
    it (a model of the user's own declares its classes when it is built)."""
    if config.data_dir:
        check(records.files(config.data_dir), config.num_classes if "num_classes" in config.workload.reads else None)


def check(files: List[str], num_classes: Optional[int]) -> None:
    """ConfigError (one line) naming the first file that is not a shard of labelled JPEG examples,
    or the --num_classes its labels need (None: the labels are not checked)."""
    found = inspected(files)
    for f in files:
        if "error" in found[f]:
            raise ConfigError(f"--data_dir: {f} is not a TFRecord shard of tf.Example images "
                              f"(image/encoded, image/class/label): {found[f]['error']}")
    labels = [label for f in files for label in found[f]["labels"]]
    if num_classes is None:
        return
    low, high = min(labels), max(labels)
    if low < 0:
        raise ConfigError(f"--data_dir: the first records of its shards hold label {low}; labels must be 0 or more")
    if high < num_classes:
        return
    convention = (" (ImageNet's numbering: classes from 1, 0 left for the background; tf_cnn_benchmarks trained "
                  "ImageNet's 1..1000 with 1001 classes)" if low >= 1 and high == num_classes else "")
    raise ConfigError(f"--data_dir's labels run {low}..{high} in the first records of its shards{convention}; "
                      f"--num_classes={num_classes} holds 0..{num_classes - 1}: set --num_classes={high + 1}")


def inspect(path: str, count: int) -> dict:
    """The labels of a shard's first `count` records, read as the input pipeline reads them, or
    the error of the first that does not parse (tfbench.framework.error_line's line)."""
    from tfbench.framework import error_line
    from tfbench.framework.tf_import import tf

    labels = []
    try:
        for raw in tf.data.TFRecordDataset(path).take(count):
            example = tf.io.parse_single_example(raw, records.features(tf))
            if not labels:
                tf.io.extract_jpeg_shape(example["image/encoded"])  # the pipeline decodes JPEGs
            labels.append(int(example["image/class/label"]))
    except tf.errors.OpError as e:
        return {"error": f"record {len(labels)}: {error_line.describe(e)}"}
    return {"labels": labels} if labels else {"error": "it holds no record"}


def main(argv: List[str]) -> int:
    """python -m tfbench.measure.shards COUNT FILE...: one JSON line {file: inspect(file, COUNT)}."""
    count = int(argv[1])
    print(json.dumps({path: inspect(path, count) for path in argv[2:]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
