"""`python -m tools.bench.overhead`: tfbench's overheads, measured side by side.

--against=minimal: ResNet50 training with the same settings through `python -m tfbench`
(launcher, monitor, reporting and all) and through tools/bench/minimal_loop.py (goal: ratio >=
0.98).
--against=monitor_off: tfbench with its system monitor on vs off (goal: ratio >= 0.99).
Runs alternate A B, B A, ... in one invocation so that machine noise hits both sides alike.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Callable, List

from absl import app, flags

from tfbench.config import helptext

flags.DEFINE_integer("image_size", 112, "Image side.")
flags.DEFINE_integer("batch_size", 16, "Batch size.")
flags.DEFINE_integer("num_warmup_steps", 5, "Warm-up steps.")
flags.DEFINE_integer("num_steps", 10, "Measured steps.")
flags.DEFINE_integer("repeats", 4, "Pairs, run A B, B A, A B, ...")
flags.DEFINE_enum("against", "minimal", ["minimal", "monitor_off"],
                  "What tfbench (monitor on) is compared with.")
FLAGS = flags.FLAGS
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository


def tfbench_rate(logdir: str, run_id: str, monitor: bool = True) -> float:
    args = [sys.executable, "-m", "tfbench", "--model=resnet50", "--mode=train",
            f"--image_size={FLAGS.image_size}", f"--batch_size={FLAGS.batch_size}",
            f"--num_warmup_steps={FLAGS.num_warmup_steps}", f"--num_steps={FLAGS.num_steps}",
            f"--logdir={logdir}", f"--run_id={run_id}", f"--monitor={str(monitor).lower()}"]
    subprocess.run(args, cwd=ROOT, check=True, capture_output=True, text=True)
    with open(os.path.join(logdir, run_id, "results.jsonl")) as f:
        task = next(r for r in map(json.loads, f) if r["kind"] == "task")
    return task["images_per_sec"]


def minimal_args(image_size: int = 0, threads: int = 0) -> list:
    return [sys.executable, os.path.join(ROOT, "tools", "bench", "minimal_loop.py"),
            f"--image_size={image_size or FLAGS.image_size}", f"--batch_size={FLAGS.batch_size}",
            f"--num_warmup_steps={FLAGS.num_warmup_steps}", f"--num_steps={FLAGS.num_steps}"] + (
        [f"--threads={threads}"] if threads else [])


def minimal_rate() -> float:
    out = subprocess.run(minimal_args(), cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["images_per_sec"]


def pinned_rates(cores, image_size: int) -> list:
    """images/sec of one minimal loop per core in `cores`, all started at once, each with one
    thread and pinned to its core: what the machine gives one-core workers that share nothing."""
    procs = [subprocess.Popen(minimal_args(image_size, threads=1), cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, preexec_fn=lambda c=c: os.sched_setaffinity(0, {c}))
             for c in cores]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"tools.bench: the minimal loop failed (exit codes {[p.returncode for p in procs]})")
    return [json.loads(out.strip().splitlines()[-1])["images_per_sec"] for out in outs]


def alternate(repeats: int, reference: Callable[[int], None], mine: Callable[[int], None],
              after: Callable[[int], None]) -> None:
    """Pairs r = 0 .. repeats-1 run A B, then B A, ...: whatever favours the first (or second) run
    of a pair cancels out; after(r) once pair r is done."""
    for r in range(repeats):
        for measure in ((reference, mine) if r % 2 == 0 else (mine, reference)):
            measure(r)
        after(r)


def ratio_text(ours: List[float], theirs: List[float]) -> str:
    """median(ours) / median(theirs), both medians, and the range of the pairs' own ratios (pairs ran
    back to back, so their ratios cancel slow drifts of the machine; their spread says how far this
    machine's noise lets the ratio be trusted)."""
    a, b = statistics.median(ours), statistics.median(theirs)
    pairs = sorted(o / t for o, t in zip(ours, theirs))
    return f"{a / b:.3f} ({a:.2f} vs {b:.2f}; pairs {pairs[0]:.3f}-{pairs[-1]:.3f})"


def main(argv) -> None:
    del argv
    if FLAGS.against == "minimal":
        label, goal = "minimal tf.function loop", 0.98
    else:
        label, goal = "tfbench, monitor off", 0.99
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as logdir:
        def reference(r):
            if FLAGS.against == "minimal":
                theirs.append(minimal_rate())
            else:
                theirs.append(tfbench_rate(logdir, f"monitor-off-{r}", monitor=False))

        def tfbench(r):
            ours.append(tfbench_rate(logdir, f"overhead-{r}"))

        def shown(r):
            print(f"pair {r}: {label} {theirs[-1]:.2f} images/sec, tfbench {ours[-1]:.2f} images/sec", flush=True)

        alternate(FLAGS.repeats, reference, tfbench, shown)
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"ResNet50 train {FLAGS.image_size}px batch {FLAGS.batch_size}, {FLAGS.repeats} pairs in alternating order (medians):")
    print(f"  {label + ':':<28}{b:8.2f} images/sec")
    print(f"  {'tfbench, monitor on:':<28}{a:8.2f} images/sec")
    print(f"  {'ratio:':<28}{a / b:8.3f}  (goal >= {goal})")
    pair_ratios = sorted(o / t for o, t in zip(ours, theirs))
    print(f"  {'ratio per pair:':<28}{statistics.median(pair_ratios):8.3f}  median "
          f"(range {pair_ratios[0]:.3f}-{pair_ratios[-1]:.3f})")


if __name__ == "__main__":
    groups = [("Benchmark", ["against", "repeats", "image_size", "batch_size", "num_warmup_steps", "num_steps"])]
    app.run(main, flags_parser=helptext.parser(__doc__, lambda: groups, "tools.bench.overhead"))
