"""python -m tools.model published | cluster FILE.csv: a measured scaling curve, fitted on its
small points and predicted at its large ones, every prediction with its interval.

  published  a table shipped with tfbench (--table: inception_v3, tf_cnn_benchmarks on Piz Daint,
             p2.xlarge and p2.8xlarge; tensorflow_k80, TensorFlow's own K80 benchmarks of three
             models; each file in tfbench/perfmodel/data/ names its source and line rates): fits
             each cluster on its points with at most 16 GPUs,
             predicts 32, 64 and 128, and prints measured, predicted [90% interval], error and
             bottleneck per point, then `median abs error = X%` and
             `coverage = X% of held-out points inside their 90% interval, median width Y%`.
  cluster    the same from a CSV you write (header: workers,gpus_per_node,images_per_sec and
             optionally num_ps, strategy, batch_size): fits on the points with at most
             --fit_up_to workers, prints the held-out error of the others, predicts --num_workers
             (default 32-1024) with intervals, and says which input would narrow them most.

The link's beta is pinned by the points only where they are network-bound; elsewhere every beta
from the bound they allow up to the line rate (--link_ceiling, or the published cluster's) is
kept, and the interval spans them (tfbench.perfmodel.curves.clusterspread). The point of a prediction
follows one rule, --point_rule=center: the geometric middle of the rates that range allows; the
other rules are there to compare. The model's variables are counted from the model
(tfbench.measure.variables; InceptionV3's count is shipped). The fitted parameters and where each
came from go to standard error with the assumptions; standard output carries the table
(--format=csv: plain CSV, header first; json: one document); --price_per_node_hour and
--watts_per_node add the cost of every rate.
"""
from __future__ import annotations

import statistics
import sys
from typing import List, Sequence

from absl import flags

from tfbench.config import choices
from tfbench.config.errors import ConfigError
from tfbench.measure import variables as variables_lib
from tfbench.workloads.images import MODELS
from tfbench.perfmodel import cost, intervals, render
from tfbench.perfmodel.curves import clusterfit, clusternofit, clusterspread, published
from tfbench.perfmodel.dense import shards, terms
from tfbench.perfmodel.render import ERROR, INTERVAL, NUMBER, TEXT, Column
from tools.model import pricing

FLAGS = flags.FLAGS
ASSUMPTIONS = (
    "compute per GPU is the one-GPU point's, whatever N (per image; with two batch sizes c0 + c*b)",
    "parameter servers collocated on worker nodes, shard j on node j mod n; variables placed as the run's placer "
    "places them (parameter_server: tf_cnn_benchmarks' greedy by bytes; distributed_replicated: round-robin "
    "shadow copies; tfbench_ps: TF2's round-robin)",
    "full-bisection switch unless --fabric_capacity is given",
    "no stragglers beyond what the fit absorbs (no per-worker compute distribution was published)",
    "devices inside a node aggregate through the host (--intra_node_link) before the network",
    "the link's beta anywhere from what the fitted points allow up to the line rate (the interval spans it)",
)
COLUMNS = (Column("cluster", TEXT), Column("gpus", NUMBER, 0), Column("nodes", NUMBER, 0), Column("num_ps", NUMBER, 0),
           Column("mode", TEXT), Column("role", TEXT), Column("measured_images_per_sec", NUMBER, 2),
           Column("predicted_images_per_sec", INTERVAL, 2), Column("error", ERROR), Column("bottleneck", TEXT),
           Column("busiest_host_MB", NUMBER, 1), Column("nofit_images_per_sec", INTERVAL, 2),
           Column("nofit_error", ERROR))


def define_flags() -> None:
    if "fit_up_to" in FLAGS:
        return
    flags.DEFINE_integer("fit_up_to", published.FIT_UP_TO, "Fit on the points with at most this many workers (GPUs); "
                         "predict the others.")
    if "format" not in FLAGS:
        flags.DEFINE_string("format", "table", "table, csv or json.")
    for name, default, text in (
            ("model", "resnet50", "cluster: the model the CSV measured (any tfbench --model)."),
            ("strategy", "parameter_server", f"cluster: the default strategy of the CSV's rows: one of "
                                             f"{', '.join(clusterfit.MODES)}."),
            ("link_bandwidth", "", "cluster: the nodes' link (a class or rate), if measured; empty: beta from the "
                                   "points, up to --link_ceiling.")):
        if name not in FLAGS:
            flags.DEFINE_string(name, default, text)
    flags.DEFINE_string("link_ceiling", "100gbe", "cluster: the nodes' link class or line rate, the most beta can be "
                        "(a class or rate, as --link_bandwidth).")
    flags.DEFINE_string("table", published.TABLE, f"published: the shipped table to fit and predict, one of "
                        f"{', '.join(published.TABLES)} (tfbench/perfmodel/curves/published.py says where each comes "
                        "from).")
    flags.DEFINE_string("point_rule", clusterspread.POINT_RULE, f"How a prediction's point is made from the betas the "
                        f"points allow: one of {', '.join(clusterspread.RULES)} (center: tfbench's rule; the others "
                        "to compare).")
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
    pricing.define_flags()


def help_groups():
    return [("Fit", ["table", "fit_up_to", "link_bandwidth", "link_ceiling", "point_rule", "fabric_capacity",
                     "intra_node_link"]),
            ("Cluster CSV", ["model", "strategy", "batch_size", "image_size", "num_classes", "num_workers", "num_ps",
                             "ps_on_every_node"]),
            ("Cost", pricing.NAMES), ("Output", ["format"])]


def _cluster(model: str, image_size: int, num_classes: int) -> clusterfit.Cluster:
    return clusterfit.Cluster(shards.from_records(variables_lib.variables(model, image_size, num_classes)))


def _params_lines(name: str, prof: clusterspread.Profile, fitted: Sequence[clusterfit.Point]) -> List[str]:
    runs = ", ".join(str(q.gpus) for q in fitted)
    p, best = prof.fits[prof.best], prof.fits[0]
    beta = (f"link beta {p.beta / 1e6:.1f} MB/s ({p.beta * 8 / 1e9:.2f} Gbit/s) each way, given" if prof.given else
            f"link beta {prof.betas[0] / 1e6:.1f}-{prof.betas[-1] / 1e6:.1f} MB/s ({prof.betas[0] * 8 / 1e9:.2f}-"
            f"{prof.betas[-1] * 8 / 1e9:.2f} Gbit/s) each way: the betas the fitted points allow "
            f"({prof.level:.0%} profile likelihood), up to the line rate {prof.ceiling * 8 / 1e9:.3g} Gbit/s")
    return [f"{name}: compute {best.per_image_s * 1e3:.3f} ms per image (the one-GPU point)"
            + (f" + {best.per_step_s * 1e3:.1f} ms per step" if best.per_step_s else ""), f"{name}: {beta}",
            f"{name}: non-overlapped share of compute and communication phi = {min(f.phi for f in prof.fits):.3f}-"
            f"{max(f.phi for f in prof.fits):.3f}, per-message cost m = {min(f.per_message_s for f in prof.fits) * 1e6:.2f}-"
            f"{max(f.per_message_s for f in prof.fits) * 1e6:.2f} us over those betas, fitted on the points with {runs} "
            f"GPUs; " + (f"the fitted points' scatter {prof.scatter(prof.best):.1%} ({prof.dof} degrees of freedom)"
                         if prof.dof > 0 else f"the intervals carry {prof.scatter_text}")]


def _row(name: str, prof: clusterspread.Profile, q: clusterfit.Point, role: str, nf: clusternofit.NoFit) -> dict:
    found = prof.interval(q, FLAGS.point_rule)
    parts = prof.cluster.parts(q, prof.point(q, FLAGS.point_rule)[1])
    measured = q.images_per_sec if role != "predicted" else None
    unfitted = nf.interval(q)
    return {"cluster": name, "gpus": q.gpus, "nodes": terms.nodes(q.gpus, q.devices_per_node), "num_ps": q.num_ps,
            "mode": q.mode, "role": role, "measured_images_per_sec": measured, "predicted_images_per_sec": found,
            "error": (found.point - measured) / measured if measured else None, "bottleneck": parts.bottleneck,
            "busiest_host_MB": parts.busiest_bytes / 1e6, "nofit_images_per_sec": unfitted,
            "nofit_error": (unfitted.point - measured) / measured if measured else None}


def _check_common() -> float:
    if FLAGS.format not in render.FORMATS:
        raise ConfigError(f"--format={FLAGS.format!r} is unknown; choose one of {', '.join(render.FORMATS)}")
    if FLAGS.intra_node_link not in terms.INTRA_NODE:
        raise ConfigError(f"--intra_node_link={FLAGS.intra_node_link!r} is unknown; choose one of "
                          f"{', '.join(terms.INTRA_NODE)}")
    if FLAGS.fabric_capacity < 0 or FLAGS.fit_up_to < 1:
        raise ConfigError("--fabric_capacity must be 0 or more and --fit_up_to at least 1")
    if FLAGS.point_rule not in clusterspread.RULES:
        raise ConfigError(f"--point_rule={FLAGS.point_rule!r} is unknown; choose one of "
                          f"{', '.join(clusterspread.RULES)}")
    return FLAGS.fabric_capacity * 1e9 / 8 or None


def _bytes_per_s(flag: str) -> float:
    """Bytes/s of a link flag (a class or a rate, as --link_bandwidth); 0 when empty."""
    try:
        return choices.link_rate_bps(FLAGS[flag].value) / 8
    except ConfigError as e:
        raise ConfigError(str(e).replace("--link_bandwidth=", f"--{flag}=", 1)) from None


def summary_lines(rows: Sequence[dict]) -> List[str]:
    """The median and largest error over the held-out rows, and their coverage; then the no-fit
    path's over every measured point and over those its compute did not come from."""
    held = [r for r in rows if r["role"] == "held out"]
    if not held:
        lines = ["median abs error = n/a (every measured point was fitted)"]
    else:
        errors = [abs(r["error"]) for r in held]
        covered = intervals.coverage([(r["measured_images_per_sec"], r["predicted_images_per_sec"]) for r in held])
        lines = [f"median abs error = {statistics.median(errors):.1%}, max abs error = {max(errors):.1%} over "
                 f"{len(errors)} held-out points (point rule: {FLAGS.point_rule})", intervals.coverage_line(covered)]
    measured = [r for r in rows if r["role"] != "predicted"]
    smallest = {r["cluster"]: min(q["gpus"] for q in measured if q["cluster"] == r["cluster"]) for r in measured}
    for scope, chosen in (("every measured point", measured),
                          ("the points its compute did not come from", [r for r in measured
                                                                       if r["gpus"] > smallest[r["cluster"]]])):
        if not chosen:
            continue
        errors = [abs(r["nofit_error"]) for r in chosen]
        covered = intervals.coverage([(r["measured_images_per_sec"], r["nofit_images_per_sec"]) for r in chosen])
        lines.append(f"no fit (compute from the smallest point, the nominal link, the rest by tfbench's no-fit rule), "
                     f"{scope}: median abs error = {statistics.median(errors):.1%}; "
                     + intervals.coverage_line(covered).replace("held-out points", "points"))
    return lines


def emit(rows: List[dict], facts: List[str], closing: List[str], prices: cost.Prices) -> None:
    """The table (or CSV, JSON) on standard output; the facts on standard error; the closing lines
    after a table (on standard error after a CSV, inside the JSON)."""
    columns = list(COLUMNS)
    if prices.given:
        pricing.add(rows, prices, "predicted_images_per_sec", "measured_images_per_sec")
        columns += pricing.columns(prices, measured=True)
        facts = facts + [pricing.line(prices)]
    print("\n".join(facts), file=sys.stderr)
    print(render.render(rows, columns, FLAGS.format, facts + closing if FLAGS.format == "json" else ()))
    if FLAGS.format != "json":
        print("\n".join(closing), file=sys.stdout if FLAGS.format == "table" else sys.stderr)


def _model_line(model: str, cluster: clusterfit.Cluster) -> str:
    big = cluster.placement(1, "parameter_server").largest.variable
    return (f"{model}: |w| = {cluster.w / 1e6:.2f} MB in {len(cluster.trainable)} trainable variables "
            f"({len(cluster.variables)} in all), counted from tf_keras.applications; the largest, {big.name} "
            f"{list(big.shape)}, is {big.nbytes / 1e6:.2f} MB")


def published_main(argv) -> int:
    try:
        if len(argv) > 1:
            raise ConfigError(f"unexpected arguments: {' '.join(argv[1:])}")
        if FLAGS.table not in published.TABLES:
            raise ConfigError(f"--table={FLAGS.table!r} is unknown; choose one of {', '.join(published.TABLES)}")
        fabric = _check_common()
        prices = pricing.prices()
        doc, clusters = published.load_published(published.TABLES[FLAGS.table])
    except (ConfigError, OSError, ValueError) as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    facts = [f"source: {doc['source']}", f"setting: {doc['setting']}"]
    models = {}  # (model, image size, classes) -> its variables, counted once
    rows = []
    for name, points in clusters.items():
        w = published.workload(doc, name)
        key = (w["model"], w["image_size"], w["num_classes"])
        if key not in models:
            models[key] = _cluster(*key)
            facts.append(_model_line(w["model"], models[key]))
        cluster = models[key]
        fitted = [q for q in points if q.gpus <= FLAGS.fit_up_to]
        line_rate = doc["clusters"][name]
        prof = clusterspread.profile(cluster, fitted, line_rate["line_rate_bps"] / 8, fabric=fabric,
                                     intra_node=FLAGS.intra_node_link)
        facts += _params_lines(name, prof, fitted) + [f"{name}: line rate: {line_rate['line_rate_source']}"]
        nf = clusternofit.of(cluster, points, line_rate["line_rate_bps"] / 8, fabric, FLAGS.intra_node_link)
        rows += [_row(name, prof, q, "fitted" if q.gpus <= FLAGS.fit_up_to else "held out", nf) for q in points]
    facts.append("assumptions: " + "; ".join(ASSUMPTIONS))
    emit(rows, facts, summary_lines(rows), prices)
    return 0


def cluster_main(argv) -> int:
    try:
        if len(argv) != 2:
            raise ConfigError("give one CSV file: python -m tools.model cluster FILE.csv")
        fabric = _check_common()
        prices = pricing.prices()
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
        beta, ceiling = _bytes_per_s("link_bandwidth") or None, _bytes_per_s("link_ceiling")
        if not ceiling:
            raise ConfigError("--link_ceiling needs a class or a rate (the most the nodes' link can carry)")
        points = published.load_csv(argv[1], FLAGS.strategy, FLAGS.batch_size)
        fitted = [q for q in points if q.gpus <= FLAGS.fit_up_to]
        if not any(q.gpus == 1 for q in fitted):
            raise ConfigError(f"{argv[1]}: the fit needs a point with one worker (its compute per image)")
        cluster = _cluster(FLAGS.model, FLAGS.image_size, FLAGS.num_classes)
        prof = clusterspread.profile(cluster, fitted, ceiling, beta=beta, fabric=fabric,
                                     intra_node=FLAGS.intra_node_link)
    except ConfigError as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    except ValueError as e:
        text = str(e) or f"--num_workers takes whole numbers >= 1, got {','.join(FLAGS.num_workers)}"
        print(f"tfbench: error: {text}", file=sys.stderr, flush=True)
        return 2
    template = max(points, key=lambda q: q.gpus)

    def at(n: int) -> clusterfit.Point:
        nodes = terms.nodes(n, template.devices_per_node)
        return clusterfit.Point(n, template.devices_per_node, nodes if FLAGS.ps_on_every_node else FLAGS.num_ps or 1,
                                template.mode, 0.0, template.batch_size)

    nf = clusternofit.of(cluster, points, beta or ceiling, fabric, FLAGS.intra_node_link)
    rows = [_row("csv", prof, q, "fitted" if q.gpus <= FLAGS.fit_up_to else "held out", nf) for q in points]
    asked = [at(n) for n in counts]
    rows += [_row("csv", prof, q, "predicted", nf) for q in asked]
    largest = max(q.gpus for q in fitted)
    candidates = [at(g) for g in (2 * largest, 4 * largest, 8 * largest) if g <= max(counts)]
    narrower = clusterspread.narrowing(prof, fitted, asked, candidates, fabric, FLAGS.intra_node_link)
    facts = _params_lines("your cluster", prof, fitted) + ["assumptions: " + "; ".join(ASSUMPTIONS)]
    width = statistics.median(r["predicted_images_per_sec"].width for r in rows if r["role"] == "predicted")
    closing = summary_lines(rows) + [f"the predicted points' intervals: median width {width:.0%}"]
    if narrower:
        closing.append("what would narrow them most (median width had it been given): "
                       + "; ".join(f"{what}: {w:.0%}" for what, w in narrower))
    emit(rows, facts, closing, prices)
    return 0
