"""The model judged where users extrapolate to: fitted on the small clusters of a sweep (N <= a
cut, 6 in `make model-scale`), asked for the larger ones (8-16 workers), per strategy.

What it computes from (strategy, N, measured, predicted) rows:
- the error at each N, (predicted - measured) / measured, the fitted N's too (their residuals
  are the baseline the held-out errors drift from);
- the trend of the error with N: the least-squares slope of the error against log2 N over the
  largest fitted N and every held-out N, in percentage points per doubling of N (a model whose
  bias grows with scale shows a slope, even when each error alone is small);
- the drift: the error at the largest N minus the error at the largest fitted N;
- the median and the largest absolute error over the held-out rows, and the goals of
  `make model-scale` (median <= 10%, max <= 20%, no strategy drifting by more than 10 points);
- the share of held-out rows inside their 90% interval and the intervals' median width
  (intervals.coverage), with the goals coverage >= 80% and median width <= 30%.

Only the standard library, numpy and scipy; the rows come from tools.model scale.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Dict, List, Optional, Sequence

from tfbench.perfmodel import intervals

GOAL_MEDIAN, GOAL_MAX, GOAL_DRIFT = 0.10, 0.20, 0.10
GOAL_COVERAGE, GOAL_WIDTH = 0.80, 0.30  # at the 90% level, on emulated runs


@dataclasses.dataclass(frozen=True)
class Row:
    strategy: str  # a label: the strategy with what sets it apart (sync, placement, k)
    num_workers: int
    measured: float  # images/sec
    predicted: Optional[float]  # None: the model had no parameter for it
    held_out: bool  # True: N above the cut, never seen by the fit
    run_id: str = ""
    bottleneck: str = ""
    interval: Optional[intervals.Interval] = None

    @property
    def error(self) -> Optional[float]:
        """(predicted - measured) / measured."""
        if self.predicted is None or not self.measured > 0:
            return None
        return (self.predicted - self.measured) / self.measured


@dataclasses.dataclass(frozen=True)
class Trend:
    strategy: str
    errors: Dict[int, float]  # N -> error (one per N: the mean when a point was repeated)
    per_doubling: Optional[float]  # error slope against log2 N, fraction per doubling
    drift: Optional[float]  # error at the largest N - error at the largest fitted N
    from_n: Optional[int]  # the largest fitted N the drift starts from
    to_n: Optional[int]


def errors_by_n(rows: Sequence[Row]) -> Dict[int, float]:
    """{N: error} of one strategy's predicted rows; repeats of an N are averaged."""
    by_n: Dict[int, List[float]] = {}
    for r in rows:
        if r.error is not None:
            by_n.setdefault(r.num_workers, []).append(r.error)
    return {n: statistics.fmean(v) for n, v in sorted(by_n.items())}


def per_doubling(errors: Dict[int, float]) -> Optional[float]:
    """Least-squares slope of error against log2 N (fraction per doubling); None below two N."""
    if len(errors) < 2:
        return None
    ns = sorted(errors)
    from scipy import stats  # here: scipy takes a second to import, refusals need none

    return float(stats.linregress([math.log2(n) for n in ns], [errors[n] for n in ns]).slope)


def trend(strategy: str, rows: Sequence[Row]) -> Trend:
    """Errors per N of one strategy; slope and drift from its largest fitted N on."""
    errors = errors_by_n(rows)
    fitted = [r.num_workers for r in rows if not r.held_out and r.num_workers in errors]
    held = [r.num_workers for r in rows if r.held_out and r.num_workers in errors]
    start = max(fitted) if fitted else None
    span = {n: e for n, e in errors.items() if (start is None or n >= start)}
    end = max(held) if held else None
    drift = errors[end] - errors[start] if start is not None and end is not None else None
    return Trend(strategy, errors, per_doubling(span), drift, start, end)


def trends(rows: Sequence[Row]) -> List[Trend]:
    by_strategy: Dict[str, List[Row]] = {}
    for r in rows:
        by_strategy.setdefault(r.strategy, []).append(r)
    return [trend(name, group) for name, group in sorted(by_strategy.items())]


def summary(rows: Sequence[Row]) -> dict:
    """Median and max absolute error over the held-out rows, how many could not be predicted,
    the largest drift and whether each goal is met."""
    held = [r for r in rows if r.held_out]
    errors = [abs(r.error) for r in held if r.error is not None]
    drifts = [abs(t.drift) for t in trends(rows) if t.drift is not None]
    median = statistics.median(errors) if errors else None
    largest = max(errors) if errors else None
    worst_drift = max(drifts) if drifts else None
    covered = intervals.coverage([(r.measured, r.interval) for r in held if r.interval is not None])
    return {"points": len(errors), "unpredicted": len(held) - len(errors), "median_abs_error": median,
            "max_abs_error": largest, "max_drift": worst_drift, "coverage": covered,
            "goals": {"median": median is not None and median <= GOAL_MEDIAN,
                      "max": largest is not None and largest <= GOAL_MAX,
                      "drift": worst_drift is not None and worst_drift <= GOAL_DRIFT,
                      "coverage": covered["points"] > 0 and covered["inside"] >= GOAL_COVERAGE,
                      "width": covered["points"] > 0 and covered["median_width"] <= GOAL_WIDTH}}


def points(value: Optional[float], signed: bool = True) -> str:
    """A fraction as percent ('+3.1%'), or 'n/a'."""
    if value is None:
        return "n/a"
    return f"{value:+.1%}" if signed else f"{value:.1%}"
