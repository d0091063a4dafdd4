"""Published scaling curves shipped with tfbench (tfbench/perfmodel/data/), read into points the
cluster fit (tfbench.perfmodel.curves.clusterfit) takes, and the user's own curve from a CSV.

Each table (TABLES) is a document whose `source` and `setting` fields say where its numbers come
from, with one curve per cluster; a curve may name its own model, image_size, num_classes and
batch_size (the document's otherwise):
- inception_v3 (published_inception_v3.json): tf_cnn_benchmarks, InceptionV3 on Piz Daint,
  p2.xlarge and p2.8xlarge (an ETH Zurich / CSCS report);
- tensorflow_k80 (published_tensorflow_k80.json): TensorFlow's own benchmarks, InceptionV3,
  ResNet-50 and ResNet-152 on up to 8 p2.8xlarge instances (64 K80 GPUs), shipped after tfbench's
  rules were fixed, as a blind test of them (docs/performance-model.md says which rule came after).
A user's CSV has
a header row and one row per measured point: workers (GPUs, replicas), gpus_per_node,
images_per_sec, and optionally num_ps (0 or absent: one), strategy (parameter_server,
distributed_replicated, tfbench_ps or allreduce; default: the command's --strategy) and
batch_size (default: the command's --batch_size).
"""
from __future__ import annotations

import csv
import json
import os
from typing import Dict, List, Tuple

from tfbench.perfmodel.curves.clusterfit import MODES, Point

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")  # tfbench/perfmodel/data
TABLES = {"inception_v3": os.path.join(DATA, "published_inception_v3.json"),
          "tensorflow_k80": os.path.join(DATA, "published_tensorflow_k80.json")}
TABLE = "inception_v3"  # `published`'s default
PUBLISHED = TABLES[TABLE]
FIT_UP_TO = 16  # GPUs: the points fitted on; the larger ones are predicted
WORKLOAD = ("model", "image_size", "num_classes", "batch_size")  # a curve's own, or the document's


def workload(doc: dict, name: str) -> Dict:
    """{model, image_size, num_classes, batch_size} of one curve of a document."""
    curve = doc["clusters"][name]
    return {key: curve.get(key, doc[key]) for key in WORKLOAD}


def load_published(path: str = PUBLISHED) -> Tuple[dict, Dict[str, List[Point]]]:
    """(the document, {cluster: [Point]})."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    clusters = {}
    for name, c in doc["clusters"].items():
        batch = int(workload(doc, name)["batch_size"])
        clusters[name] = [Point(gpus=int(g), devices_per_node=int(c["devices_per_node"]), num_ps=int(k), mode=mode,
                                images_per_sec=float(rate), batch_size=batch)
                          for g, k, mode, rate in c["points"]]
    return doc, clusters


class CsvError(ValueError):
    """A user's CSV that cannot be read (one line, naming the row and column)."""


REQUIRED = ("workers", "gpus_per_node", "images_per_sec")


def _number(row: dict, column: str, line: int, kind=int, low: float = 1):
    text = (row.get(column) or "").strip()
    try:
        value = kind(text)
    except ValueError:
        raise CsvError(f"line {line}: {column}={text!r} is not a {'whole ' if kind is int else ''}number") from None
    if value < low:
        raise CsvError(f"line {line}: {column} must be at least {low:g}, got {text}")
    return value


def load_csv(path: str, strategy: str, batch_size: int) -> List[Point]:
    """The user's measured points; CsvError for a missing column or a bad value."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
            header = rows and list(rows[0]) or []
    except OSError as e:
        raise CsvError(f"{path}: cannot read it ({e.strerror or e})") from None
    missing = [c for c in REQUIRED if c not in header]
    if not rows or missing:
        raise CsvError(f"{path}: needs a header with {', '.join(REQUIRED)} and one row per point"
                       + (f" (missing {', '.join(missing)})" if rows and missing else ""))
    points = []
    for line, row in enumerate(rows, start=2):
        mode = (row.get("strategy") or "").strip() or strategy
        if mode not in MODES:
            raise CsvError(f"line {line}: strategy {mode!r} is unknown; choose one of {', '.join(MODES)}")
        k = _number(row, "num_ps", line, low=0) if (row.get("num_ps") or "").strip() else 0
        points.append(Point(gpus=_number(row, "workers", line), devices_per_node=_number(row, "gpus_per_node", line),
                            num_ps=k or 1, mode=mode,
                            images_per_sec=_number(row, "images_per_sec", line, float, 1e-9),
                            batch_size=_number(row, "batch_size", line) if (row.get("batch_size") or "").strip()
                            else batch_size))
    return points
