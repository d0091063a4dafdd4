"""FLOPs per example of every workload, counted from the model's own graph, and the FLOP/s a run
achieved against the machine's measured peak (tfbench.measure.peaks).

The model is built in a graph of its own (never the run's strategy or variables) and called at
batch 1; TensorFlow's profiler sums the registered flop statistics of its ops (tf.compat.v1.profiler
float_ops: convolutions, matrix products and their gradients count 2 FLOPs per multiply-add;
element-wise ops that have statistics count too; batch norm and ReLU have none), over the ops
the outputs need, as TensorFlow prunes a graph before running it. forward is
model(x, training=False); train is forward + the workload's loss + gradients of every trainable
variable, per example (an embedding lookup is a gather: no FLOPs); the SGD update adds 2 FLOPs per
parameter per step. Per unit (an image, a token) is per example / units per example. Counts are
cached per workload key (model, sizes, layout) and TensorFlow version, so only a machine's first run
pays for the count.
"""
from __future__ import annotations

import os
from typing import Dict, Optional

from tfbench.measure import elastic_steps, json_cache, peaks

CACHE_ENV = "TFBENCH_FLOPS_CACHE"  # overrides the cache file (tests)


def cache_path() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "tfbench", "flops.json")


def _key(config) -> str:
    return f"{config.workload.key(config)}|tf {peaks.tf_version()}"


def graph_flops(graph, outputs=()) -> int:
    """Sum of the registered flop statistics of the ops `outputs` depend on (all ops when none
    are given; shapes must be known). Pruning to the outputs is what TensorFlow does before it
    runs a graph: e.g. the unused gradient into the input images is not computed."""
    from tfbench.framework.tf_import import tf

    if outputs:
        needed = tf.compat.v1.graph_util.extract_sub_graph(graph.as_graph_def(), [t.op.name for t in outputs])
        graph = tf.Graph()
        with graph.as_default():
            tf.compat.v1.import_graph_def(needed, name="")
    builder = tf.compat.v1.profiler.ProfileOptionBuilder
    options = builder(builder.float_operation()).with_empty_output().build()
    return int(tf.compat.v1.profiler.profile(graph, options=options).total_float_ops)


def placeholders(spec):
    """Graph placeholders shaped like a (nested) tf.TensorSpec structure."""
    from tfbench.framework.tf_import import tf

    return tf.nest.map_structure(lambda s: tf.compat.v1.placeholder(s.dtype, s.shape), spec)


def count_model(config, workload=None) -> Dict[str, int]:
    """{'forward', 'train', 'params'}: FLOPs of one example of the config's workload (or of
    `workload`, a tfbench.workloads.Workload) through its model."""
    from tfbench.framework.tf_import import keras, tf

    workload = workload or config.workload
    counted = workload.flops_config(config)  # the same FLOPs per example, cheapest to build
    policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("float32")
    try:
        counts = {}
        for mode in ("forward", "train"):
            graph = tf.Graph()
            with graph.as_default():
                model = workload.build(counted)
                features, labels = placeholders(workload.example_spec(counted))
                if mode == "forward":
                    outputs = tf.nest.flatten(model(features, training=False))
                else:
                    loss = tf.reduce_mean(workload.per_example_loss(labels, model(features, training=True)))
                    outputs = [g.values if isinstance(g, tf.IndexedSlices) else g  # a sparse gradient's rows
                               for g in tf.gradients(loss, model.trainable_variables) if g is not None]
                    counts["params"] = int(sum(v.shape.num_elements() for v in model.trainable_variables))
                counts[mode] = graph_flops(graph, outputs)
    finally:
        keras.mixed_precision.set_global_policy(policy)
    if counted is not config:  # a smaller graph: the parameters are the workload's own closed form
        counts["params"] = workload.memory_figures(config)["params"]
    return counts


def _read_cache() -> dict:
    return json_cache.read(cache_path())


def _write_cache(key: str, value: dict) -> None:
    json_cache.write(cache_path(), key, value)


def per_example(config) -> Dict[str, int]:
    """{'forward', 'train', 'params'} of the config's workload, from the cache or counted now."""
    key = _key(config)
    cached = _read_cache().get(key)
    if cached:
        return cached
    counts = count_model(config)
    _write_cache(key, counts)
    return counts


def step_flops(counts: Dict[str, int], mode: str, examples_per_step: int) -> int:
    """FLOPs of one step processing `examples_per_step` examples (train adds the SGD update)."""
    if mode == "train":
        return counts["train"] * examples_per_step + 2 * counts["params"]
    return counts["forward"] * examples_per_step


def achieved(counts: Dict[str, int], mode: str, examples_per_step: int, examples_per_sec: float,
             peak_flops_per_s: Optional[float], units_per_example: int = 1, unit: str = "images") -> Dict:
    """What a task record carries: FLOPs per example, per unit and per step, achieved FLOP/s, fraction of peak."""
    per_step = step_flops(counts, mode, examples_per_step)
    rate = per_step * examples_per_sec / examples_per_step if examples_per_step else float("nan")
    out = {"forward_per_example": counts["forward"], "train_per_example": counts["train"],
           "unit": unit, "forward_per_unit": counts["forward"] / units_per_example,
           "train_per_unit": counts["train"] / units_per_example, "per_step": per_step, "achieved_flops_per_s": rate}
    if peak_flops_per_s:
        out["peak_flops_per_s"] = peak_flops_per_s
        out["fraction_of_peak"] = rate / peak_flops_per_s
    else:
        out["fraction_of_peak"] = None
        out["peak_note"] = peaks.UNKNOWN
    return out


def task_fields(config, examples_per_step: int, step_times_s, cores: int, peak: Optional[dict]) -> Dict:
    """The task record's `flops` entry; a count that fails costs this entry, never the record."""
    try:
        counts = per_example(config)
    except Exception as e:  # noqa: BLE001 - the measured steps matter more than their FLOPs
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0]}
    total = sum(step_times_s)
    examples_per_sec = examples_per_step * len(step_times_s) / total if total > 0 else float("nan")
    workload = config.workload
    out = achieved(counts, config.mode, examples_per_step, examples_per_sec,
                   peaks.peak_flops(peak, config.precision, cores, config.device),
                   workload.units_per_example(config), workload.unit)
    out.update(precision=config.precision, peak_cores=cores)
    if out.get("peak_flops_per_s"):  # when and under which load the divisor was measured
        out["peak_measured"] = {k: peak[k] for k in PEAK_FACTS if k in peak}
    return out


PEAK_FACTS = ("measured_at", "method", "conditions", "load_average_1m_after")


def cluster_summary(cluster: dict, tasks) -> Optional[Dict]:
    """FLOP/s of the whole measured window (every counted task's FLOPs / the window) and its
    fraction of the summed peaks of those tasks' cores; None when no task counted its FLOPs."""
    counted = [t for t in tasks if t.get("counts_toward_cluster", True)]
    entries = [t.get("flops") or {} for t in counted]
    if not counted or any("per_step" not in e for e in entries) or not cluster.get("window_s"):
        return None
    done = sum(e["per_step"] * t["num_measured_steps"] for e, t in zip(entries, counted))
    if elastic_steps.applies(counted):  # Horovod elastic: a killed rank's steps are in no record of its own
        done = entries[0]["per_step"] * cluster["examples"] / counted[0]["examples_per_step"]
    rate = done / cluster["window_s"]
    peak = sum(e.get("peak_flops_per_s") or 0.0 for e in entries)
    known = all(e.get("peak_flops_per_s") for e in entries)
    return {"achieved_flops_per_s": rate, "peak_flops_per_s": peak if known else None,
            "fraction_of_peak": rate / peak if known and peak else None,
            "precision": entries[0].get("precision"), "unit": entries[0].get("unit", "images"),
            "train_per_unit": entries[0]["train_per_unit"], "forward_per_unit": entries[0]["forward_per_unit"],
            "peak_measured": entries[0].get("peak_measured"), "run_started": cluster.get("window_start")}


def render(summary: Optional[Dict], mode: str) -> str:
    """The table's FLOP line."""
    if summary is None:
        return "FLOP/s: not counted (see the task records' 'flops' entry)"
    per_unit = summary["train_per_unit" if mode == "train" else "forward_per_unit"]
    unit = summary["unit"].rstrip("s")  # images -> image, tokens -> token
    line = (f"FLOP/s = {summary['achieved_flops_per_s'] / 1e9:.1f} GFLOP/s ({per_unit / 1e9:.3g} GFLOP/{unit} "
            f"{mode}, {summary['precision']})")
    if summary["fraction_of_peak"] is None:
        return line + "; fraction of peak unknown: no peak measured (python -m tools.bench.peak)"
    fraction = summary["fraction_of_peak"]
    line += (f" = {fraction:.2f} of the {summary['peak_flops_per_s'] / 1e9:.1f} GFLOP/s "
             f"GEMM peak of the tasks' cores" + (f", {peaks.WRONG}" if fraction > 1 else ""))
    if summary.get("peak_measured"):
        line += "\n" + peaks.describe(summary["peak_measured"], summary.get("run_started"))
    return line
