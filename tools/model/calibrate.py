"""python -m tools.model calibrate [--sigma=0.05 --sweeps=40]: how well the intervals of a fit on
tfbench runs are calibrated where the truth is known.

Makes --sweeps synthetic sweeps shaped like `make model` from known parameters
(tfbench/perfmodel/fitting/synthetic.py), each run's rate scattered log-normally by --sigma; fits each on
its 1- and 2-worker runs with its intervals (tfbench.perfmodel.fitting.spread) and predicts fresh
3-worker runs. Prints `coverage = X% of held-out points inside their 90% interval, median width
Y%`, the scatter the fits found against the true one, and how often each fitted parameter's 90%
range over the refits held its true value. About 1 s per sweep on one core.
"""
from __future__ import annotations

import math
import sys

from absl import flags

from tfbench.perfmodel.fitting import synthetic

FLAGS = flags.FLAGS


def define_flags() -> None:
    if "sigma" in FLAGS:
        return
    flags.DEFINE_float("sigma", 0.05, "Each synthetic run's scatter: the standard deviation of its log rate.")
    flags.DEFINE_integer("sweeps", 40, "Synthetic sweeps to fit (6 held-out runs each).")
    flags.DEFINE_integer("refits", 100, "Refits per fit (tfbench's fits use 200).")


def help_groups():
    return [("Calibrate", ["sigma", "sweeps", "refits"])]


def main(argv) -> int:
    if len(argv) > 1 or not (math.isfinite(FLAGS.sigma) and 0 < FLAGS.sigma < 1) or not (
            1 <= FLAGS.sweeps <= 1000) or not 2 <= FLAGS.refits <= 1000:
        print("tfbench: error: calibrate takes --sigma in (0, 1), --sweeps from 1 to 1000 and --refits from 2 to 1000",
              file=sys.stderr, flush=True)
        return 2
    found = synthetic.calibrate(FLAGS.sigma, FLAGS.sweeps, FLAGS.refits)
    print("\n".join(synthetic.lines(found, FLAGS.sigma)))
    return 0
