"""`python -m tools.bench_overhead`: tfbench's harness overhead, measured side by side.

Runs ResNet50 training with the same settings through `python -m tfbench` (launcher, monitor,
reporting and all) and through tools/minimal_loop.py, alternating A/B/A/B in one run so that
machine noise hits both, and prints both rates and their ratio (goal: >= 0.98).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

from absl import app, flags

flags.DEFINE_integer("image_size", 112, "Image side.")
flags.DEFINE_integer("batch_size", 16, "Batch size.")
flags.DEFINE_integer("num_warmup_steps", 5, "Warm-up steps.")
flags.DEFINE_integer("num_steps", 10, "Measured steps.")
flags.DEFINE_integer("repeats", 2, "A/B pairs.")
flags.DEFINE_boolean("monitor", True, "Run tfbench with its system monitor on.")
FLAGS = flags.FLAGS
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tfbench_rate(logdir: str, run_id: str) -> float:
    args = [sys.executable, "-m", "tfbench", "--model=resnet50", "--mode=train",
            f"--image_size={FLAGS.image_size}", f"--batch_size={FLAGS.batch_size}",
            f"--num_warmup_steps={FLAGS.num_warmup_steps}", f"--num_steps={FLAGS.num_steps}",
            f"--logdir={logdir}", f"--run_id={run_id}", f"--monitor={str(FLAGS.monitor).lower()}"]
    subprocess.run(args, cwd=ROOT, check=True, capture_output=True, text=True)
    with open(os.path.join(logdir, run_id, "results.jsonl")) as f:
        task = next(r for r in map(json.loads, f) if r["kind"] == "task")
    return task["images_per_sec"]


def minimal_rate() -> float:
    args = [sys.executable, os.path.join(ROOT, "tools", "minimal_loop.py"), f"--image_size={FLAGS.image_size}",
            f"--batch_size={FLAGS.batch_size}", f"--num_warmup_steps={FLAGS.num_warmup_steps}",
            f"--num_steps={FLAGS.num_steps}"]
    out = subprocess.run(args, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["images_per_sec"]


def main(argv) -> None:
    del argv
    tfbench, minimal = [], []
    with tempfile.TemporaryDirectory() as logdir:
        for r in range(FLAGS.repeats):
            minimal.append(minimal_rate())
            tfbench.append(tfbench_rate(logdir, f"overhead-{r}"))
            print(f"pair {r}: minimal {minimal[-1]:.2f} images/sec, tfbench {tfbench[-1]:.2f} images/sec", flush=True)
    a, b = statistics.median(tfbench), statistics.median(minimal)
    print(f"ResNet50 train {FLAGS.image_size}px batch {FLAGS.batch_size}, {FLAGS.repeats} A/B pairs (medians):")
    print(f"  minimal tf.function loop: {b:8.2f} images/sec")
    print(f"  tfbench:                  {a:8.2f} images/sec")
    print(f"  ratio tfbench/minimal:    {a / b:8.3f}  (goal >= 0.98)")


if __name__ == "__main__":
    app.run(main)
