"""python -m tools.model predict [--flag=value ...]: the model's prediction at larger clusters.

  e.g. python -m tools.model predict --strategy=parameter_server --num_ps=1 \\
           --num_workers=1,16,64,256 --link_bandwidth=1gbe --model=resnet50 --batch_size=32 \\
           --compute_ms_per_image=100

Prints a header (the model, |w|, the link's alpha and beta, the compute per image, and where
each came from; the assumptions; how the intervals were made), then one row per worker count:
step_ms, its parts (compute_ms, communication_ms, apply_ms, overhead_ms), images_per_sec as
`predicted [low, high]`, scaling_efficiency = images/s at N / (N x images/s at 1) and the
bottleneck; parameter servers add updates_per_sec, all-reduce strategies nccl-tests' algbw and
busbw; --price_per_node_hour and --watts_per_node add $ per million images and joules per image.
The interval: with --params, 90% from the fit's refits and its runs' scatter; without, the range
over the protocol shares tfbench has measured (tfbench/perfmodel/fitting/measured.py). --format=csv
prints the rows as plain CSV (header first; the interval as images_per_sec_low and _high) and
the header to standard error; --format=json one JSON document.
|w| is counted from the model's own graph (cached in ~/.cache/tfbench/model_memory.json).
A recommender (--model=dlrm, dlrm_criteo) is predicted by its own step model, fitted on the
recommender runs of --runs=DIR: each strategy's examples/sec and the crossover N
(tools/model/predict_sparse.py).
"""
from __future__ import annotations

import dataclasses
import sys
from typing import List, Optional

from absl import flags

import tfbench.config as config_lib
from tfbench.config.errors import ConfigError
from tfbench.framework.precision import PRECISIONS
from tfbench.measure import memory
from tfbench.measure import variables as variables_lib
from tfbench.workloads.images import MODELS
from tfbench.perfmodel import cost, render
from tfbench.perfmodel.dense import prediction, shards, terms
from tfbench.perfmodel.dense import equations as eq
from tfbench.perfmodel.fitting import params as params_lib
from tfbench.perfmodel.dense.equations import PLACEMENTS
from tfbench.perfmodel.dense.links import resolve as resolve_link
from tfbench.perfmodel.dense.links import runs_text
from tfbench.workloads import WORKLOADS
from tools.model import predict_rows, predict_sparse, pricing

FLAGS = flags.FLAGS
MAX_WORKERS = 1024


def define_flags() -> None:
    predict_sparse.define_flags()
    if "compute_ms_per_image" in FLAGS:
        return
    flags.DEFINE_string("strategy", "parameter_server", f"One of {', '.join(prediction.STRATEGIES)} "
                        "(multi_worker_mirrored and horovod: ring all-reduce; tree: binomial tree, a reference).")
    flags.DEFINE_integer("num_ps", 0, "Parameter servers k, as tfbench's --num_ps (0: one); see --ps_per_worker.")
    flags.DEFINE_boolean("ps_per_worker", False, "One ps per worker node, k = nodes (tf_cnn_benchmarks' layout at "
                         "scale); overrides --num_ps.")
    flags.DEFINE_string("ps_placement", "collocated", "As tfbench's: collocated (ps j on worker node j's host) or "
                        "separate (each ps on a host of its own).")
    flags.DEFINE_string("ps_partitioner", "min_size", "How variables are split over the ps, as tfbench places them: "
                        "none (whole variables, round-robin), min_size (MinSizePartitioner(--ps_min_shard_bytes, k)), "
                        "fixed (FixedShardsPartitioner(k)).")
    flags.DEFINE_integer("ps_min_shard_bytes", shards.MIN_SHARD_BYTES, "min_size: the least bytes of a part.")
    flags.DEFINE_string("ps_placer", "round_robin", "As tfbench's: round_robin (variable after variable over the ps) "
                        "or greedy (each variable from the least-loaded ps on).")
    flags.DEFINE_boolean("ps_sync", False, "Synchronous parameter server (default: asynchronous, as tfbench).")
    flags.DEFINE_list("num_workers", ["1", "2", "4", "8", "16", "32", "64"], f"Worker counts N (replicas), each "
                      f"1-{MAX_WORKERS}.")
    flags.DEFINE_integer("devices_per_node", 1, "Workers (devices) per node: they aggregate inside the node "
                         "(--intra_node_link) and the network sees ceil(N/d) nodes.")
    flags.DEFINE_string("intra_node_link", "pcie", "How a node's devices aggregate: pcie (through the host, 12 GB/s) "
                        "or nvlink (a ring, 25 GB/s).")
    flags.DEFINE_string("link_bandwidth", "", "As tfbench's: every host's link, each direction: a class "
                        f"({', '.join(config_lib.LINK_PRESETS)}) or a rate such as 100mbit; empty: unshaped, "
                        "which only a link measured in --params (key unshaped) can describe.")
    flags.DEFINE_float("link_latency", 0.0, "As tfbench's: one-way delay in ms added between any two hosts, on top "
                       "of the link's own alpha.")
    flags.DEFINE_float("link_alpha_ms", None, "The link's own per-message latency alpha in ms; default: the class's "
                       "stated alpha, a fitted one from --params, or 0.05 for a plain rate.")
    flags.DEFINE_float("fabric_capacity", 0.0, "Aggregate Gbit/s the network's core carries; 0: full bisection "
                       "(see --oversubscription).")
    flags.DEFINE_float("oversubscription", 0.0, "The core's oversubscription ratio r >= 1: capacity = nodes x link / r; "
                       "0: full bisection.")
    flags.DEFINE_string("model", "resnet50", f"One of {', '.join(WORKLOADS)} (a transformer preset: its |w| at "
                                             "the preset's sizes).")
    flags.DEFINE_integer("image_size", 224, "Square image side in pixels.")
    flags.DEFINE_integer("num_classes", 1000, "Classes of the classifier.")
    flags.DEFINE_string("precision", "fp32", f"One of {', '.join(PRECISIONS)} (selects the fitted compute; "
                        "|w| stays 4 bytes per parameter).")
    flags.DEFINE_integer("batch_size", 32, "Images per worker per step.")
    flags.DEFINE_integer("global_batch_size", 0, "Strong scaling: images per global step, split over the N workers "
                         "(each gets G/N); 0: --batch_size per worker (weak scaling).")
    flags.DEFINE_float("compute_ms_per_step", 0.0, "The part of compute that does not grow with the batch (c0 of "
                       "c0 + c x batch), ms; used with --global_batch_size.")
    flags.DEFINE_string("mode", "train", "train (the model predicts training steps).")
    flags.DEFINE_float("compute_ms_per_image", None, "One worker's compute per image in ms (e.g. a GPU's figure).")
    flags.DEFINE_string("params", "", "Parameters file fitted on tfbench runs (compute, links, apply, overhead).")
    flags.DEFINE_integer("cores_per_worker", 0, "With --params: the compute measured on this many cores; "
                         "0: the only entry that fits.")
    flags.DEFINE_float("ps_apply_ms", None, "ms one ps takes to apply one update of |w|; default: --params, else 0.")
    flags.DEFINE_float("overhead_ms", None, "Fixed ms per step (e.g. dispatch); default: --params, else 0.")
    flags.DEFINE_float("duplex_chi", 0.0, "Synchronous steps: share of the two directions of a link that does not "
                       "overlap across workers (0: pulls and pushes of different workers interleave; 1: in turn).")
    flags.DEFINE_float("overlap_phi", 1.0, "Share of the shorter of compute and communication that does not overlap "
                       "the longer (1: none overlaps, as tfbench's steps; tf_cnn_benchmarks' TF1 graphs: ~0.1).")
    flags.DEFINE_float("per_message_us", 0.0, "Cost of one message (a variable's pull or push) in microseconds.")
    flags.DEFINE_float("compute_cv", 0.0, "Stragglers: coefficient of variation of one worker's compute per step "
                       "(0: none); a synchronous step waits for the slowest of N.")
    flags.DEFINE_string("format", "table", "table, csv or json.")
    pricing.define_flags()


def help_groups():
    return [("Cluster", ["strategy", "num_workers", "num_ps", "ps_per_worker", "ps_placement", "ps_partitioner",
                         "ps_min_shard_bytes", "ps_placer", "ps_sync", "devices_per_node", "intra_node_link"]),
            ("Link", ["link_bandwidth", "link_latency", "link_alpha_ms", "fabric_capacity", "oversubscription"]),
            ("Model and compute", ["model", "image_size", "num_classes", "precision", "batch_size", "global_batch_size",
                                   "mode", "compute_ms_per_image", "compute_ms_per_step", "params", "cores_per_worker",
                                   "ps_apply_ms", "overhead_ms"]),
            ("Terms", ["duplex_chi", "overlap_phi", "per_message_us", "compute_cv"]),
            ("Cost", pricing.NAMES), ("Output", ["format"])] + predict_sparse.help_groups()


def need(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def worker_counts(values: List[str]) -> List[int]:
    counts = []
    for value in values:
        need(value.strip().isdigit() and 1 <= int(value) <= MAX_WORKERS,
             f"--num_workers={value!r}: each worker count must be a whole number from 1 to {MAX_WORKERS}")
        counts.append(int(value))
    need(bool(counts), "--num_workers needs at least one worker count")
    return counts


def check_flags() -> None:
    """Every flag alone and in combination; nothing here imports TensorFlow."""
    f = FLAGS
    need(f.strategy in prediction.STRATEGIES,
         f"--strategy={f.strategy!r} is unknown; choose one of {', '.join(prediction.STRATEGIES)}")
    need(f.num_ps >= 0, f"--num_ps must be 0 (one ps) or more, got {f.num_ps}")
    need(f.ps_placement in PLACEMENTS, f"--ps_placement={f.ps_placement!r} is unknown; choose separate or collocated")
    need(f.ps_partitioner in shards.PARTITIONERS,
         f"--ps_partitioner={f.ps_partitioner!r} is unknown; choose one of {', '.join(shards.PARTITIONERS)}")
    need(f.ps_placer in shards.PLACERS, f"--ps_placer={f.ps_placer!r} is unknown; choose one of {', '.join(shards.PLACERS)}")
    need(f.ps_min_shard_bytes >= 1, f"--ps_min_shard_bytes must be positive, got {f.ps_min_shard_bytes}")
    need(f.devices_per_node >= 1, f"--devices_per_node must be at least 1, got {f.devices_per_node}")
    need(f.intra_node_link in terms.INTRA_NODE,
         f"--intra_node_link={f.intra_node_link!r} is unknown; choose one of {', '.join(terms.INTRA_NODE)}")
    config_lib.link_rate_bps(f.link_bandwidth)
    need(f.link_latency >= 0, f"--link_latency must be 0 or more milliseconds, got {f.link_latency}")
    need(f.link_alpha_ms is None or f.link_alpha_ms >= 0, "--link_alpha_ms must be 0 or more")
    need(f.fabric_capacity >= 0, f"--fabric_capacity must be 0 or more Gbit/s, got {f.fabric_capacity}")
    need(f.oversubscription == 0 or f.oversubscription >= 1, f"--oversubscription must be 0 or at least 1, got "
         f"{f.oversubscription}")
    need(not (f.fabric_capacity and f.oversubscription), "give --fabric_capacity or --oversubscription, not both")
    need(f.global_batch_size >= 0, f"--global_batch_size must be 0 or more, got {f.global_batch_size}")
    need(f.compute_ms_per_step >= 0, f"--compute_ms_per_step must be 0 or more, got {f.compute_ms_per_step}")
    need(0 <= f.duplex_chi <= 1 and 0 <= f.overlap_phi <= 1, "--duplex_chi and --overlap_phi are shares in [0, 1]")
    need(f.per_message_us >= 0 and f.compute_cv >= 0, "--per_message_us and --compute_cv must be 0 or more")
    need(f.model in WORKLOADS, f"--model={f.model!r} is unknown; choose one of {', '.join(WORKLOADS)}")
    smallest = MODELS[f.model].min_image_size if f.model in MODELS else 1  # a transformer reads no images
    need(f.image_size >= smallest, f"--image_size={f.image_size} is too small for {f.model} (at least {smallest})")
    need(f.num_classes >= 2, f"--num_classes must be at least 2, got {f.num_classes}")
    need(f.precision in PRECISIONS, f"--precision={f.precision!r} is unknown; choose one of {', '.join(PRECISIONS)}")
    need(f.batch_size >= 1, f"--batch_size must be positive, got {f.batch_size}")
    need(f.mode == "train", f"--mode={f.mode!r}: the model predicts training steps only (--mode=train)")
    given, fitted = f.compute_ms_per_image is not None, bool(f.params)
    need(given or fitted, "give the compute: --compute_ms_per_image=MS or --params=FILE (fitted on tfbench runs)")
    need(not (given and fitted), "give --compute_ms_per_image or --params, not both")
    need(not given or f.compute_ms_per_image > 0,
         f"--compute_ms_per_image must be positive, got {f.compute_ms_per_image}")
    need(f.cores_per_worker >= 0 and (fitted or not f["cores_per_worker"].present),
         "--cores_per_worker picks a compute entry of --params (>= 0)")
    for name in ("ps_apply_ms", "overhead_ms"):
        need(f[name].value is None or f[name].value >= 0, f"--{name} must be 0 or more, got {f[name].value}")
    need(f.format in render.FORMATS, f"--format={f.format!r} is unknown; choose one of {', '.join(render.FORMATS)}")
    need(bool(f.link_bandwidth.strip()) or bool(f.params),
         "--link_bandwidth is empty (unshaped): give a class or a rate such as 100mbit, or --params with the "
         "unshaped link measured")


def _seconds(flag: str, data: Optional[dict], table: str, key: str):
    """(seconds, where from) of --ps_apply_ms / --overhead_ms, else the params file, else 0."""
    if FLAGS[flag].value is not None:
        return FLAGS[flag].value / 1e3, f"given (--{flag})"
    entry = params_lib.strategy_value(data, table, key) if data else None
    if entry:
        return entry["value_s"], runs_text(entry["from_runs"])
    return 0.0, f"not given (--{flag} or a params file sets it)"


def request():
    """(worker counts, the parameters file or None, the prices): every flag checked."""
    check_flags()
    f = FLAGS
    counts = worker_counts(f.num_workers)
    need(not f.global_batch_size or f.global_batch_size >= max(counts),
         f"--global_batch_size={f.global_batch_size} gives less than one image to each of {max(counts)} workers")
    prices = pricing.prices()
    return counts, params_lib.load(f.params) if f.params else None, prices


def resolve(data: Optional[dict]) -> dict:
    """The facts of a prediction from the flags and a parameters document (the fit or one of its
    refits): compute, link, apply, overhead, share and chi, each with where it came from; the
    names in `assumed` were neither given nor fitted."""
    f = FLAGS
    if data is None:
        ms, compute_source = f.compute_ms_per_image, "given (--compute_ms_per_image)"
    else:
        entry = params_lib.compute_entry(data, f.model, f.mode, f.precision, f.image_size, f.num_classes, f.batch_size,
                                         f.cores_per_worker or None)
        ms, compute_source = entry["ms_per_image"], f"{runs_text(entry['from_runs'])} ({params_lib.describe(entry)})"
    rate = config_lib.link_rate_bps(f.link_bandwidth)
    name = f.link_bandwidth.strip().lower() or "unshaped"
    measured = (params_lib.link_entry(data, name) or (params_lib.link_entry(data, "local") if name == "unshaped"
                                                      else None)) if data else None
    if rate == 0 and measured is None:
        raise ConfigError("--link_bandwidth is empty (unshaped) and --params measured no unshaped link: give a class "
                          "or a rate such as 100mbit")
    link = resolve_link(name, rate, f.link_alpha_ms, measured)
    if f.link_latency:
        link = dataclasses.replace(link, link=eq.Link(link.link.alpha_s + f.link_latency / 1e3, link.link.beta),
                                   alpha_source=f"{link.alpha_source}, plus --link_latency={f.link_latency:g} ms")
    key = params_lib.strategy_key(f.strategy, f.ps_sync)
    apply_s, apply_source = _seconds("ps_apply_ms", data, "ps_apply_s", key)
    overhead_s, overhead_source = _seconds("overhead_ms", data, "overhead_s", key)
    share = params_lib.strategy_value(data, "link_efficiency", key) if data else None
    chi = params_lib.strategy_value(data, "duplex_chi", key) if data else None
    phi = ((f.overlap_phi, "given (--overlap_phi)") if f["overlap_phi"].present else
           (1.0, "the fit's runs (tfbench's steps overlap none of their communication with compute)") if data else None)
    known = {"share": share, "chi": chi or f["duplex_chi"].present, "phi": phi,
             "apply_s": f["ps_apply_ms"].present or (data and params_lib.strategy_value(data, "ps_apply_s", key)),
             "overhead_s": f["overhead_ms"].present or (data and params_lib.strategy_value(data, "overhead_s", key))}
    assumed = {name for name, value in known.items() if not value}
    return {"ms": ms, "compute_source": compute_source, "link": link, "link_measured": measured is not None,
            "apply_s": (apply_s, apply_source), "overhead_s": (overhead_s, overhead_source), "assumed": assumed,
            "share": (share["value"], runs_text(share["from_runs"])) if share else (1.0, "none fitted: all of beta"),
            "phi": phi or (f.overlap_phi, "the default (--overlap_phi)"),
            "chi": ((FLAGS.duplex_chi, "given (--duplex_chi)") if FLAGS["duplex_chi"].present else
                    (chi["value"], runs_text(chi["from_runs"])) if chi else
                    (FLAGS.duplex_chi, "the default (--duplex_chi; a params file fitted on synchronous ps runs sets it)"))}


def counted_memory() -> dict:
    """The model's counted bytes (weights, gradients, slots) for the flags' model, as runs count them."""
    return memory.counts(config_lib.RunConfig(model=FLAGS.model, image_size=FLAGS.image_size,
                                              num_classes=FLAGS.num_classes))


def main(argv) -> int:
    if len(argv) > 1:
        print(f"tfbench: error: unexpected arguments: {' '.join(argv[1:])}", file=sys.stderr)
        return 2
    try:
        if predict_sparse.applies(FLAGS.model):
            predict_sparse.main(worker_counts(FLAGS.num_workers))
            return 0
        counts, data, prices = request()
        facts = resolve(data)
        refits = [resolve(doc) for doc in params_lib.refits(data)] if data else []
        counted = counted_memory()
        variables = (shards.from_records(variables_lib.variables(FLAGS.model, FLAGS.image_size, FLAGS.num_classes))
                     if FLAGS.strategy == "parameter_server" else None)
    except (ConfigError, params_lib.ParamsError) as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    model = predict_rows.Model(counted, variables)
    unit = cost.IMAGES if WORKLOADS[FLAGS.model].unit == "images" else cost.Unit("examples", "example")
    lines, rows, columns = model.rows(counts, facts, refits, data, prices, unit)
    assumptions = f"assumptions: {'; '.join(predict_rows.ASSUMPTIONS)}"
    if FLAGS.format == "csv":
        print("\n".join(lines + [assumptions]), file=sys.stderr)
    print(render.render(rows, columns, FLAGS.format, lines + ([assumptions] if FLAGS.format == "json" else [])))
    if FLAGS.format == "table":
        print(assumptions, file=sys.stderr)
    return 0
