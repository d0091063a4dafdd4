"""python -m tools.model calibrate [--sigma=0.05 --sweeps=40]: how well every interval tfbench
calls 90% is calibrated where the truth is known.

- a fit on tfbench runs (tfbench.perfmodel.fitting.spread): --sweeps synthetic sweeps shaped like
  `make model` from known parameters (tfbench/perfmodel/fitting/synthetic.py), each run's rate
  scattered log-normally by --sigma, each fitted on its 1- and 2-worker runs and predicting fresh
  3-worker runs; also the scatter the fits found against the true one, and how often each fitted
  parameter's 90% range over the refits held its true value (about 1 s per sweep on one core);
- the recommender's step model (tfbench.perfmodel.sparse.recommender): synthetic runs shaped like
  `make dlrm-scale`, fitted on N <= 4, predicting fresh runs at 8-16;
- a measured cluster curve (tfbench.perfmodel.curves.clusterspread, `published` and `cluster`): a
  synthetic curve fitted on 1-16 GPUs, predicting fresh points at 32-128
  (tfbench/perfmodel/curves/synthetic.py makes both).

Each prints `coverage = X% of held-out points inside their 90% interval, median width Y%`. The
no-fit ranges carry no level and are not checked here.
"""
from __future__ import annotations

import math
import sys

from absl import flags

from tfbench.perfmodel import intervals
from tfbench.perfmodel.curves import synthetic as synthetic_curves
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
    print("\n".join(["fit on tfbench runs (tfbench.perfmodel.fitting.spread):"] + synthetic.lines(found, FLAGS.sigma)))
    print(f"recommender step model, fitted on N <= 4, fresh runs at N = 8-16 scattered by {FLAGS.sigma:.1%}: "
          + intervals.coverage_line(synthetic_curves.calibrate_recommender(FLAGS.sigma, FLAGS.sweeps)))
    print(f"cluster curve, fitted on 1-16 GPUs, fresh points at 32-128 scattered by {FLAGS.sigma:.1%}: "
          + intervals.coverage_line(synthetic_curves.calibrate_curve(FLAGS.sigma, FLAGS.sweeps)))
    return 0
