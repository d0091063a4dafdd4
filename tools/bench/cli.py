"""`python -m tools.bench` (`make bench`): how close tfbench runs to the machine, in one table.

Side by side, from one invocation: tfbench vs a minimal hand-written loop (tools/bench/minimal_loop.py;
goal >= 0.98), bf16 vs fp32 speed-up (where the CPU has BF16 instructions; otherwise the reason it
is refused), the fraction of the measured GEMM peak (python -m tools.bench.peak) tfbench's own run
reached, and 2 workers x 1 core vs 1 worker x 1 core under multi-worker mirrored and Horovod
(goal >= 1.7x) beside its ceiling: two independent one-core minimal loops at once against one
alone. The model, image size, batch and step counts are tools.bench.overhead's flags. Last,
tfbench's asynchronous parameter-server step on the recommender (--model=dlrm, 2 workers x 1 core,
1 ps) against a minimal ClusterCoordinator loop of the same model and data
(tools/bench/minimal_ps_loop.py, placed as tfbench places its processes; goal >= 0.95):
tools/bench/ps_peer.py.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import List, Optional, Tuple

from absl import app, flags

from tfbench.config import RunConfig, helptext
from tfbench.config.errors import ConfigError
from tfbench.measure import peaks
from tfbench.results import tuned
from tools.bench import overhead as overhead_lib
from tools.bench import ps_peer

flags.DEFINE_integer("scaling_image_size", 112, "Image side of the 2-vs-1-worker runs (ResNet50).")
flags.DEFINE_list("scaling_strategies", ["multi_worker_mirrored", "horovod"], "Strategies of the 2-vs-1 runs.")
flags.DEFINE_enum("scaling_knobs", "best", ["best", "default"],
                  "Knobs of the 2-worker runs: best, a saved tuning's (tools/sweeps/tuned.json) where there is one "
                  "for that setting; default: the strategies' defaults.")
FLAGS = flags.FLAGS
ROOT = overhead_lib.ROOT


def tfbench_run(logdir: str, run_id: str, *extra: str) -> Tuple[Optional[dict], List[dict], str]:
    """(cluster record, task records, '') of one `python -m tfbench` ResNet50 training run, or
    (None, [], the one-line reason) when tfbench refused or failed it."""
    args = [sys.executable, "-m", "tfbench", "--model=resnet50", "--mode=train",
            f"--image_size={FLAGS.image_size}", f"--batch_size={FLAGS.batch_size}",
            f"--num_warmup_steps={FLAGS.num_warmup_steps}", f"--num_steps={FLAGS.num_steps}",
            f"--logdir={logdir}", f"--run_id={run_id}", *extra]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.startswith("tfbench")]
        return None, [], (lines[0] if lines else f"exit code {proc.returncode}")
    with open(os.path.join(logdir, run_id, "results.jsonl"), encoding="utf-8") as f:
        recs = [json.loads(line) for line in f if line.strip()]
    cluster = next(r for r in recs if r["kind"] == "cluster")
    return cluster, [r for r in recs if r["kind"] == "task"], ""


def overhead(logdir: str) -> Tuple[List[float], List[float], Optional[float]]:
    """tfbench's and the minimal loop's images/sec over alternating pairs; tfbench's median fraction of peak."""
    ours, theirs, fractions = [], [], []

    def mine(r: int) -> None:
        cluster, tasks, reason = tfbench_run(logdir, f"fp32-{r}")
        if cluster is None:
            raise SystemExit(f"tools.bench: tfbench failed: {reason}")
        ours.append(cluster["images_per_sec"])
        fractions.append((tasks[0].get("flops") or {}).get("fraction_of_peak"))

    def reference(r: int) -> None:
        theirs.append(overhead_lib.minimal_rate())

    def shown(r: int) -> None:
        print(f"  pair {r}: minimal {theirs[-1]:.2f}, tfbench {ours[-1]:.2f} images/sec", flush=True)

    overhead_lib.alternate(FLAGS.repeats, reference, mine, shown)
    known = [f for f in fractions if f is not None]
    return ours, theirs, statistics.median(known) if known else None


def bf16_speedup(logdir: str, fp32_rate: float) -> str:
    cluster, tasks, reason = tfbench_run(logdir, "bf16", "--precision=bf16")
    if cluster is None:
        return f"n/a: {reason.replace('tfbench: error: ', '')}"
    fraction = (tasks[0].get("flops") or {}).get("fraction_of_peak")
    peak = f", {fraction:.2f} of the bf16 peak" if fraction is not None else ""
    return f"{cluster['images_per_sec'] / fp32_rate:.2f}x ({cluster['images_per_sec']:.2f} images/sec{peak})"


def scaling_knobs(strategy: str) -> Tuple[List[str], str]:
    """Flags of the 2-worker run's knobs and what they are: a saved tuning's, or the defaults."""
    if FLAGS.scaling_knobs == "default":
        return [], "default knobs"
    config = RunConfig(model="resnet50", strategy=strategy, num_workers=2, cores_per_worker=1,
                       image_size=FLAGS.scaling_image_size, batch_size=FLAGS.batch_size)
    try:
        chosen = tuned.best_knobs(config)
    except tuned.NotTunedHere:
        return [], "default knobs: this setting was tuned only on other machines"
    except ConfigError:
        return [], "default knobs: no saved tuning for this setting"
    entry = tuned.best(config.to_dict(), strategy) or {}
    flags_ = [f"--{k}={v}" for k, v in chosen.items()]
    return flags_, (f"tuned {entry.get('measured')}: {' '.join(flags_) or 'the defaults'}" if entry
                    else "default knobs")


def scaling(logdir: str, strategy: str) -> str:
    rates = {}
    knob_flags, knob_text = scaling_knobs(strategy)
    for n in (1, 2):
        cluster, _, reason = tfbench_run(logdir, f"{strategy}-w{n}", f"--strategy={strategy}", f"--num_workers={n}",
                                         "--cores_per_worker=1", f"--image_size={FLAGS.scaling_image_size}",
                                         *(knob_flags if n == 2 else []))
        if cluster is None:
            return f"n/a: {reason.replace('tfbench: error: ', '')}"
        rates[n] = cluster["images_per_sec"]
    return (f"{rates[2] / rates[1]:.2f}x ({rates[1]:.2f} -> {rates[2]:.2f} images/sec, "
            f"efficiency {rates[2] / rates[1] / 2:.2f}; {knob_text})")


def ceiling() -> str:
    """Two independent one-core minimal loops at once against one alone, at the scaling runs'
    image size: the most 2 one-core workers can give over 1 on this machine, whatever the strategy
    (cores that share a memory bus, caches or a hypervisor's thread give less than 2x)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return "n/a: fewer than 2 cores"
    (alone,) = overhead_lib.pinned_rates(cores[:1], FLAGS.scaling_image_size)
    both = overhead_lib.pinned_rates(cores[:2], FLAGS.scaling_image_size)
    return (f"{sum(both) / alone:.2f}x ({alone:.2f} alone -> {both[0]:.2f} + {both[1]:.2f} images/sec at once, "
            f"one thread each, cores {cores[0]} and {cores[1]})")


def bad_flag() -> str:
    """The first bad flag, '' when all are good: checked before anything runs."""
    for name in ("repeats", "image_size", "batch_size", "num_warmup_steps", "num_steps", "scaling_image_size"):
        if FLAGS[name].value < 1:
            return f"--{name} must be at least 1, got {FLAGS[name].value}"
    return ps_peer.check()


def main(argv) -> None:
    del argv
    bad = bad_flag()
    if bad:
        helptext.fail_usage(bad, "tools.bench")
    rows = []
    with tempfile.TemporaryDirectory() as logdir:
        print(f"tfbench vs minimal loop, {FLAGS.repeats} pairs in alternating order:", flush=True)
        ours, theirs, fraction = overhead(logdir)
        rows.append(("tfbench / minimal loop (images/sec, medians)", overhead_lib.ratio_text(ours, theirs), ">= 0.98"))
        rows.append(("fraction of the fp32 GEMM peak (tfbench)",
                     f"{fraction:.2f}" if fraction is not None else "unknown: run python -m tools.bench.peak", ""))
        rows.append(("bf16 vs fp32 speed-up (tfbench)", bf16_speedup(logdir, statistics.median(ours)), ""))
        print("two independent one-core loops at once vs one alone ...", flush=True)
        rows.append((f"ceiling: 2 independent 1-core loops / 1 alone ({FLAGS.scaling_image_size}px)", ceiling(), ""))
        for strategy in FLAGS.scaling_strategies:
            print(f"{strategy}: 1 and 2 workers x 1 core ...", flush=True)
            rows.append((f"{strategy}: 2 workers x 1 core / 1 x 1 core "
                         f"({FLAGS.scaling_image_size}px)", scaling(logdir, strategy), ">= 1.7x"))
        print(f"tfbench parameter server vs a minimal ClusterCoordinator loop (dlrm), {FLAGS.repeats} pairs in "
              "alternating order:", flush=True)
        ps_ratio, ps_setting = ps_peer.compare(logdir)
        rows.append((ps_peer.NAME, ps_ratio, ">= 0.95"))
    width = max(len(r[0]) for r in rows)
    print(f"\nResNet50 train, batch {FLAGS.batch_size}/replica, {FLAGS.image_size}px unless noted, "
          f"{FLAGS.num_warmup_steps} warm-up + {FLAGS.num_steps} measured steps")
    for name, value, goal in rows:
        print(f"  {name:<{width}}  {value}" + (f"   (goal {goal})" if goal else ""))
    print(f"  (fractions of peak: {peaks.describe(peaks.load())}"
          + (f"; {peaks.WRONG}" if fraction is not None and fraction > 1 else "") + ")")
    print(f"  ({ps_setting})")


def run() -> None:
    """`python -m tools.bench` (tools/bench/__main__.py)."""
    groups = [("Benchmark", ["repeats", "image_size", "batch_size", "num_warmup_steps", "num_steps",
                             "scaling_image_size", "scaling_strategies", "scaling_knobs"]),
              ("Parameter server (dlrm)", ["ps_batch_size", "ps_num_warmup_steps", "ps_num_steps"])]
    app.run(main, flags_parser=helptext.parser(__doc__, lambda: groups, "tools.bench"))
