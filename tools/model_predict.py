"""python -m tools.model predict [--flag=value ...]: the model's prediction at larger clusters.

  e.g. python -m tools.model predict --strategy=parameter_server --num_ps=1 \\
           --num_workers=1,16,64,256 --link_bandwidth=1gbe --model=resnet50 --batch_size=32 \\
           --compute_ms_per_image=100

Prints a header (the model, |w|, the link's alpha and beta, the compute per image, and where
each came from; the assumptions), then one row per worker count: step_ms, its parts
(compute_ms, communication_ms, apply_ms, overhead_ms), images_per_sec, scaling_efficiency =
images/s at N / (N x images/s at 1) and the bottleneck; parameter servers add updates_per_sec,
all-reduce strategies nccl-tests' algbw and busbw. --format=csv prints the same rows as CSV with
the header as `#` comment lines (pandas.read_csv(path, comment="#") reads it).
|w| is counted from the model's own graph (cached in ~/.cache/tfbench/model_memory.json).
"""
from __future__ import annotations

import sys
from typing import List, Optional

from absl import flags

import tfbench.config as config_lib
from tfbench.config.errors import ConfigError
from tfbench.framework.precision import PRECISIONS
from tfbench.measure import memory
from tfbench.models import MODELS
from tfbench.perfmodel import params as params_lib
from tfbench.perfmodel import prediction, render
from tfbench.perfmodel.equations import PLACEMENTS, SEPARATE
from tfbench.perfmodel.links import resolve, runs_text

FLAGS = flags.FLAGS
MAX_WORKERS = 1024
FORMATS = ("table", "csv")
# Accepted with every strategy, so that one command line compares strategies by --strategy alone;
# the header says when they were ignored.
PS_ONLY = ("num_ps", "ps_placement", "ps_sync", "ps_apply_ms")
ASSUMPTIONS = ("compute per worker constant in N", "full-bisection switch", "no contention beyond the named links",
               "no overlap of communication with computation", "homogeneous workers (no stragglers, so no waiting)")


def define_flags() -> None:
    if "compute_ms_per_image" in FLAGS:
        return
    flags.DEFINE_string("strategy", "parameter_server", f"One of {', '.join(prediction.STRATEGIES)} "
                        "(multi_worker_mirrored and horovod: ring all-reduce; tree: binomial tree, a reference).")
    flags.DEFINE_integer("num_ps", 1, "Parameter-server shards k (variables split evenly over them); 0: one per "
                         "worker, k = N (tf_cnn_benchmarks' parameter_server mode with a ps on every worker node).")
    flags.DEFINE_string("ps_placement", SEPARATE, "separate: each ps on a host of its own; collocated: ps j on "
                        "worker j's host (tfbench runs default to collocated).")
    flags.DEFINE_boolean("ps_sync", False, "Synchronous parameter server (default: asynchronous, as tfbench).")
    flags.DEFINE_list("num_workers", ["1", "2", "4", "8", "16", "32", "64"], f"Worker counts N, each 1-{MAX_WORKERS}.")
    flags.DEFINE_string("link_bandwidth", "1gbe", "Every host's link, each direction: a class "
                        f"({', '.join(config_lib.LINK_PRESETS)}) or a rate such as 100mbit, 2.5gbit.")
    flags.DEFINE_float("link_latency_ms", None, "Per-message latency alpha in ms; default: the class's stated "
                       "alpha, a fitted one from --params, or 0.05 for a plain rate.")
    flags.DEFINE_string("model", "resnet50", f"One of {', '.join(MODELS)}.")
    flags.DEFINE_integer("image_size", 224, "Square image side in pixels.")
    flags.DEFINE_integer("num_classes", 1000, "Classes of the classifier.")
    flags.DEFINE_string("precision", "fp32", f"One of {', '.join(PRECISIONS)} (selects the fitted compute; "
                        "|w| stays 4 bytes per parameter).")
    flags.DEFINE_integer("batch_size", 32, "Images per worker per step.")
    flags.DEFINE_string("mode", "train", "train (the model predicts training steps).")
    flags.DEFINE_float("compute_ms_per_image", None, "One worker's compute per image in ms (e.g. a GPU's figure).")
    flags.DEFINE_string("params", "", "Parameters file fitted on tfbench runs (compute, links, apply, overhead).")
    flags.DEFINE_integer("cores_per_worker", 0, "With --params: the compute measured on this many cores; "
                         "0: the only entry that fits.")
    flags.DEFINE_float("ps_apply_ms", None, "ms one ps takes to apply one update of |w|; default: --params, else 0.")
    flags.DEFINE_float("overhead_ms", None, "Fixed ms per step (e.g. dispatch); default: --params, else 0.")
    flags.DEFINE_string("format", "table", "table or csv.")


def help_groups():
    return [("Cluster", ["strategy", "num_workers", "num_ps", "ps_placement", "ps_sync"]),
            ("Link", ["link_bandwidth", "link_latency_ms"]),
            ("Model and compute", ["model", "image_size", "num_classes", "precision", "batch_size", "mode",
                                   "compute_ms_per_image", "params", "cores_per_worker", "ps_apply_ms", "overhead_ms"]),
            ("Output", ["format"])]


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
    need(f.num_ps >= 0, f"--num_ps must be 0 (one per worker) or more, got {f.num_ps}")
    need(f.ps_placement in PLACEMENTS, f"--ps_placement={f.ps_placement!r} is unknown; choose separate or collocated")
    need(bool(f.link_bandwidth.strip()), "--link_bandwidth is empty; give a class or a rate such as 100mbit")
    config_lib.link_rate_bps(f.link_bandwidth)
    need(f.link_latency_ms is None or f.link_latency_ms >= 0, "--link_latency_ms must be 0 or more")
    need(f.model in MODELS, f"--model={f.model!r} is unknown; choose one of {', '.join(MODELS)}")
    need(f.image_size >= MODELS[f.model].min_image_size,
         f"--image_size={f.image_size} is too small for {f.model} (at least {MODELS[f.model].min_image_size})")
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
    need(f.format in FORMATS, f"--format={f.format!r} is unknown; choose table or csv")


def _seconds(flag: str, data: Optional[dict], table: str, key: str):
    """(seconds, where from) of --ps_apply_ms / --overhead_ms, else the params file, else 0."""
    if FLAGS[flag].value is not None:
        return FLAGS[flag].value / 1e3, f"given (--{flag})"
    entry = params_lib.strategy_value(data, table, key) if data else None
    if entry:
        return entry["value_s"], runs_text(entry["from_runs"])
    return 0.0, f"not given (--{flag} or a params file sets it)"


def request():
    """(worker counts, facts): every flag checked, compute, link, apply and overhead resolved."""
    check_flags()
    f = FLAGS
    counts = worker_counts(f.num_workers)
    data = params_lib.load(f.params) if f.params else None
    if data is None:
        ms, compute_source = f.compute_ms_per_image, "given (--compute_ms_per_image)"
    else:
        entry = params_lib.compute_entry(data, f.model, f.mode, f.precision, f.image_size, f.num_classes, f.batch_size,
                                         f.cores_per_worker or None)
        ms, compute_source = entry["ms_per_image"], f"{runs_text(entry['from_runs'])} ({params_lib.describe(entry)})"
    rate = config_lib.link_rate_bps(f.link_bandwidth)
    link = resolve(f.link_bandwidth, rate, f.link_latency_ms,
                   params_lib.link_entry(data, f.link_bandwidth) if data else None)
    key = params_lib.strategy_key(f.strategy, f.ps_sync)
    apply_s, apply_source = _seconds("ps_apply_ms", data, "ps_apply_s", key)
    overhead_s, overhead_source = _seconds("overhead_ms", data, "overhead_s", key)
    share = params_lib.strategy_value(data, "link_efficiency", key) if data else None
    facts = {"ms": ms, "compute_source": compute_source, "link": link, "apply": (apply_s, apply_source),
             "overhead": (overhead_s, overhead_source),
             "share": (share["value"], runs_text(share["from_runs"])) if share else (1.0, "none fitted: all of beta")}
    return counts, facts


def header(setting: prediction.Setting, counted: dict, facts: dict) -> List[str]:
    f, s, link = FLAGS, setting, facts["link"]
    if s.strategy == "parameter_server":
        where = "on hosts of their own" if s.ps_placement == SEPARATE else "collocated: ps j on worker j's host"
        shards = "one ps shard per worker (k = N)" if FLAGS.num_ps == 0 else (
            f"{int(s.num_ps)} ps shard{'s' if s.num_ps > 1 else ''}")
        what = f"parameter_server, {'sync' if s.ps_sync else 'async'}, {shards} {where}"
        step = ("one global step = one update from every worker's gradient; communication = pull + push"
                if s.ps_sync else "one global step = N updates, one per worker on average; communication = "
                "pull + push, with the queueing at saturated ps links (queueing at a saturated ps apply is in "
                "apply_ms)")
    else:
        what = f"{s.strategy} ({'binomial-tree' if s.strategy == 'tree' else 'ring'} all-reduce)"
        ignored = [f"--{name}" for name in PS_ONLY if f[name].present]
        what += f"; {', '.join(ignored)} ignored (parameter_server only)" if ignored else ""
        step = "one global step = compute, then one all-reduce of |w|; communication = the all-reduce"
    lines = [
        f"tfbench performance model: {what}; {f.model} {f.mode} {f.precision} {f.image_size}px "
        f"{f.num_classes} classes, batch {f.batch_size} per worker",
        f"|w| = {s.w_bytes / 1e6:.1f} MB: {counted['params']:,} trainable parameters in {counted['variables']} "
        f"variables x 4 bytes (variables stay fp32 under every --precision; counted from the model's graph)",
        f"link alpha = {link.link.alpha_s * 1e3:.3f} ms per message, {link.alpha_source}",
        f"link beta = {link.link.beta / 1e6:.1f} MB/s each direction, {link.beta_source}",
        f"share of beta the strategy's protocol gets = {facts['share'][0]:.3f}, {facts['share'][1]}",
        f"compute = {facts['ms']:g} ms per image x batch {s.batch_size} = {s.compute_s * 1e3:.1f} ms per worker step, "
        f"{facts['compute_source']}",
    ]
    if s.strategy == "parameter_server":
        lines.append(f"ps apply = {s.ps_apply_s * 1e3:g} ms per update of |w| (each shard 1/k of it), "
                     f"{facts['apply'][1]}")
    lines += [f"overhead = {s.overhead_s * 1e3:g} ms per step, {facts['overhead'][1]}", f"step: {step}",
              f"assumptions: {'; '.join(ASSUMPTIONS)}"]
    return lines


def main(argv) -> int:
    if len(argv) > 1:
        print(f"tfbench: error: unexpected arguments: {' '.join(argv[1:])}", file=sys.stderr)
        return 2
    try:
        counts, facts = request()
        counted = memory.counts(FLAGS.model, FLAGS.image_size, FLAGS.num_classes)
    except (ConfigError, params_lib.ParamsError) as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    setting = prediction.Setting(
        strategy=FLAGS.strategy, w_bytes=4.0 * counted["params"], compute_s=FLAGS.batch_size * facts["ms"] / 1e3,
        batch_size=FLAGS.batch_size, link=facts["link"].link.with_beta_share(facts["share"][0]),
        num_ps=FLAGS.num_ps or 1, ps_placement=FLAGS.ps_placement,
        ps_sync=FLAGS.ps_sync, ps_apply_s=facts["apply"][0], overhead_s=facts["overhead"][0])
    points = prediction.predict(setting, counts) if FLAGS.num_ps else prediction.predict_shard_per_worker(setting, counts)
    out = render.csv_text if FLAGS.format == "csv" else render.table
    print(out(points, setting.strategy, header(setting, counted, facts)))
    return 0
