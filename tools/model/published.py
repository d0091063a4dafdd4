"""python -m tools.model published | cluster FILE.csv: a measured scaling curve, fitted on its
small points and predicted at its large ones.

  published  the tf_cnn_benchmarks InceptionV3 tables shipped with tfbench (Piz Daint, p2.xlarge,
             p2.8xlarge; tfbench/perfmodel/data/published_inception_v3.json names the source):
             fits each cluster on its points with at most 16 GPUs, predicts 32, 64 and 128, and
             prints measured, predicted, error and bottleneck per point, then
             `median abs error = X%` over the held-out points.
  cluster    the same from a CSV you write (header: workers,gpus_per_node,images_per_sec and
             optionally num_ps, strategy, batch_size): fits on the points with at most
             --fit_up_to workers, prints the held-out error of the others, then predicts
             --num_workers (default 32-1024) with the fitted parameters.

The model's variables are counted from the model (tfbench.measure.variables; InceptionV3's
count is shipped). The fitted parameters and where each came from go to standard error with
the assumptions; standard output carries the table (--format=csv: plain CSV, header first).
"""
from __future__ import annotations

import statistics
import sys
from typing import List, Sequence

from absl import flags

from tfbench.config import choices
from tfbench.config.errors import ConfigError
from tfbench.measure import variables as variables_lib
from tfbench.models import MODELS
from tfbench.perfmodel import clusterfit, published, shards, terms
from tools.model import fit

FLAGS = flags.FLAGS
ASSUMPTIONS = (
    "compute per GPU is the one-GPU point's, whatever N (per image; with two batch sizes c0 + c*b)",
    "parameter servers collocated on worker nodes, shard j on node j mod n; variables placed as the run's placer "
    "places them (parameter_server: tf_cnn_benchmarks' greedy by bytes; distributed_replicated: round-robin "
    "shadow copies; tfbench_ps: TF2's round-robin)",
    "full-bisection switch unless --fabric_capacity is given",
    "no stragglers beyond what the fit absorbs (no per-worker compute distribution was published)",
    "devices inside a node aggregate through the host (--intra_node_link) before the network",
)


def define_flags() -> None:
    if "fit_up_to" in FLAGS:
        return
    flags.DEFINE_integer("fit_up_to", published.FIT_UP_TO, "Fit on the points with at most this many workers (GPUs); "
                         "predict the others.")
    if "format" not in FLAGS:
        flags.DEFINE_string("format", "table", "table or csv.")
    for name, default, text in (
            ("model", "resnet50", "cluster: the model the CSV measured (any tfbench --model)."),
            ("strategy", "parameter_server", f"cluster: the default strategy of the CSV's rows: one of "
                                             f"{', '.join(clusterfit.MODES)}."),
            ("link_bandwidth", "", "cluster: the nodes' link (a class or rate); empty: fitted from the points.")):
        if name not in FLAGS:
            flags.DEFINE_string(name, default, text)
    for name, default, text in (("batch_size", 32, "cluster: images per GPU per step of the CSV's rows."),
                                ("image_size", 224, "cluster: image side in pixels."),
                                ("num_classes", 1000, "cluster: classes."), ("num_ps", 0, "cluster: ps for the "
                                "predicted points (0: one), as tfbench's --num_ps; see --ps_on_every_node.")):
        if name not in FLAGS:
            flags.DEFINE_integer(name, default, text)
    if "num_workers" not in FLAGS:
        flags.DEFINE_list("num_workers", ["32", "64", "128", "256", "512", "1024"], "cluster: workers to predict.")
    flags.DEFINE_boolean("ps_on_every_node", True, "cluster: predicted points run one ps per node (as the published "
                         "runs did at scale); false: --num_ps.")
    flags.DEFINE_float("fabric_capacity", 0.0, "Aggregate capacity of the network's core in Gbit/s (0: full bisection).")
    flags.DEFINE_string("intra_node_link", "pcie", f"How a node's devices aggregate: {', '.join(terms.INTRA_NODE)}.")


def help_groups():
    return [("Fit", ["fit_up_to", "link_bandwidth", "fabric_capacity", "intra_node_link"]),
            ("Cluster CSV", ["model", "strategy", "batch_size", "image_size", "num_classes", "num_workers", "num_ps",
                             "ps_on_every_node"]),
            ("Output", ["format"])]


def _cluster(model: str, image_size: int, num_classes: int) -> clusterfit.Cluster:
    return clusterfit.Cluster(shards.from_records(variables_lib.variables(model, image_size, num_classes)))


def _params_lines(name: str, p: clusterfit.Params, fitted: Sequence[clusterfit.Point]) -> List[str]:
    runs = ", ".join(str(q.gpus) for q in fitted)
    return [f"{name}: compute {p.per_image_s * 1e3:.3f} ms per image (the one-GPU point)"
            + (f" + {p.per_step_s * 1e3:.1f} ms per step" if p.per_step_s else ""),
            f"{name}: link beta {p.beta / 1e6:.1f} MB/s ({p.beta * 8 / 1e9:.2f} Gbit/s) each way, {p.beta_source}",
            f"{name}: non-overlapped share of compute and communication phi = {p.phi:.3f}, per-message cost "
            f"m = {p.per_message_s * 1e6:.2f} us, fitted on the points with {runs} GPUs"]


def _emit(rows: List[List[str]], columns: Sequence[str]) -> str:
    return fit.text_table(rows, columns, FLAGS.format)


COLUMNS = ("cluster", "gpus", "nodes", "num_ps", "mode", "role", "measured_images_per_sec", "predicted_images_per_sec",
           "error", "bottleneck", "busiest_host_MB")


def _rows(name: str, cluster: clusterfit.Cluster, points, p, limit: int):
    rows, held = [], []
    for q, predicted, error, parts in clusterfit.errors(cluster, points, p):
        role = "fitted" if q.gpus <= limit else "held out"
        if role == "held out":
            held.append(abs(error))
        rows.append([name, str(q.gpus), str(terms.nodes(q.gpus, q.devices_per_node)), str(q.num_ps), q.mode, role,
                     f"{q.images_per_sec:.2f}", f"{predicted:.2f}", f"{error:+.1%}", parts.bottleneck,
                     f"{parts.busiest_bytes / 1e6:.1f}"])
    return rows, held


def _check_common() -> float:
    if FLAGS.format not in ("table", "csv"):
        raise ConfigError(f"--format={FLAGS.format!r} is unknown; choose table or csv")
    if FLAGS.intra_node_link not in terms.INTRA_NODE:
        raise ConfigError(f"--intra_node_link={FLAGS.intra_node_link!r} is unknown; choose one of "
                          f"{', '.join(terms.INTRA_NODE)}")
    if FLAGS.fabric_capacity < 0 or FLAGS.fit_up_to < 1:
        raise ConfigError("--fabric_capacity must be 0 or more and --fit_up_to at least 1")
    return FLAGS.fabric_capacity * 1e9 / 8 or None


def published_main(argv) -> int:
    try:
        if len(argv) > 1:
            raise ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
        fabric = _check_common()
        doc, clusters = published.load_published()
        cluster = _cluster(doc["model"], doc["image_size"], doc["num_classes"])
    except (ConfigError, OSError, ValueError) as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    print(f"source: {doc['source']}", file=sys.stderr)
    print(f"setting: {doc['setting']}", file=sys.stderr)
    big = cluster.placement(1, "parameter_server").largest.variable
    print(f"{doc['model']}: |w| = {cluster.w / 1e6:.2f} MB in {len(cluster.trainable)} trainable variables "
          f"({len(cluster.variables)} in all), counted from tf_keras.applications; the largest, {big.name} "
          f"{list(big.shape)}, is {big.nbytes / 1e6:.2f} MB", file=sys.stderr)
    all_rows, held = [], []
    for name, points in clusters.items():
        fitted = [q for q in points if q.gpus <= FLAGS.fit_up_to]
        p = clusterfit.fit(cluster, fitted, fabric=fabric, intra_node=FLAGS.intra_node_link)
        for line in _params_lines(name, p, fitted):
            print(line, file=sys.stderr)
        rows, errs = _rows(name, cluster, points, p, FLAGS.fit_up_to)
        all_rows += rows
        held += errs
    print("assumptions: " + "; ".join(ASSUMPTIONS), file=sys.stderr)
    print(_emit(all_rows, COLUMNS))
    if held and FLAGS.format == "table":
        print(f"median abs error = {statistics.median(held):.1%}, max abs error = {max(held):.1%} over "
              f"{len(held)} held-out points")
    return 0


def cluster_main(argv) -> int:
    try:
        if len(argv) != 2:
            raise ConfigError("give one CSV file: python -m tools.model cluster FILE.csv")
        fabric = _check_common()
        if FLAGS.model not in MODELS:
            raise ConfigError(f"--model={FLAGS.model!r} is unknown; choose one of {', '.join(sorted(MODELS))}")
        if FLAGS.image_size < MODELS[FLAGS.model].min_image_size:
            raise ConfigError(f"--image_size={FLAGS.image_size} is too small for {FLAGS.model} "
                              f"(at least {MODELS[FLAGS.model].min_image_size})")
        if FLAGS.strategy not in clusterfit.MODES:
            raise ConfigError(f"--strategy={FLAGS.strategy!r} is unknown; choose one of {', '.join(clusterfit.MODES)}")
        if FLAGS.batch_size < 1 or FLAGS.num_ps < 0 or FLAGS.num_classes < 2:
            raise ConfigError("--batch_size must be positive, --num_ps 0 or more, --num_classes at least 2")
        counts = [int(x) for x in FLAGS.num_workers]
        if any(n < 1 for n in counts):
            raise ValueError
        points = published.load_csv(argv[1], FLAGS.strategy, FLAGS.batch_size)
        beta = choices.link_rate_bps(FLAGS.link_bandwidth) / 8 or None
        fitted = [q for q in points if q.gpus <= FLAGS.fit_up_to]
        if not any(q.gpus == 1 for q in fitted):
            raise ConfigError(f"{argv[1]}: the fit needs a point with one worker (its compute per image)")
        cluster = _cluster(FLAGS.model, FLAGS.image_size, FLAGS.num_classes)
        p = clusterfit.fit(cluster, fitted, beta=beta, fabric=fabric, intra_node=FLAGS.intra_node_link)
    except ValueError as e:
        text = str(e) or f"--num_workers takes whole numbers >= 1, got {','.join(FLAGS.num_workers)}"
        print(f"tfbench: error: {text}", file=sys.stderr, flush=True)
        return 2
    except ConfigError as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    for line in _params_lines("your cluster", p, fitted):
        print(line, file=sys.stderr)
    print("assumptions: " + "; ".join(ASSUMPTIONS), file=sys.stderr)
    rows, held = _rows("csv", cluster, points, p, FLAGS.fit_up_to)
    template = max(points, key=lambda q: q.gpus)
    for n in counts:
        nodes = terms.nodes(n, template.devices_per_node)
        q = clusterfit.Point(n, template.devices_per_node, nodes if FLAGS.ps_on_every_node else FLAGS.num_ps or 1,
                             template.mode, 0.0, template.batch_size)
        parts = cluster.parts(q, p)
        rows.append(["csv", str(n), str(nodes), str(q.num_ps), q.mode, "predicted", "", f"{cluster.rate(q, p):.2f}", "",
                     parts.bottleneck, f"{parts.busiest_bytes / 1e6:.1f}"])
    print(_emit(rows, COLUMNS))
    if FLAGS.format == "table":
        print(f"median abs error = {statistics.median(held):.1%} over {len(held)} held-out points" if held
              else "median abs error = n/a (every measured point was fitted)")
    return 0
