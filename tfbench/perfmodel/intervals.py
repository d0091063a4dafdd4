"""An interval on a prediction, made from samples of what the fit allows, and its coverage on
held-out points. Nothing here knows what was fitted: a sample is one predicted rate, so a new
term's parameters get intervals as soon as the fit that makes the samples fits them.

An interval is `point [low, high]` with its level (0.9: the 5% and 95% quantiles of the samples)
or no level (a range: every value the stated bounds allow, e.g. the protocol shares tfbench has
measured when nothing was fitted). Its width is (high - low) / point.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Iterable, Optional, Sequence, Tuple

import numpy as np

LEVEL = 0.90  # every interval tfbench prints, unless it is a range
SEED = 20261127  # samples are drawn from a fixed seed: the same fit prints the same interval


@dataclasses.dataclass(frozen=True)
class Interval:
    point: float
    low: float
    high: float
    level: Optional[float] = LEVEL  # None: a range, every value the stated bounds allow
    basis: str = ""  # how it was made, in a phrase

    def __post_init__(self):
        if not self.low <= self.high:
            raise ValueError(f"an interval needs low <= high, got [{self.low}, {self.high}]")

    def contains(self, value: float) -> bool:
        """Inside, ends included; a value equal to an end but for floating-point rounding (a
        prediction that reproduces the point it was made from) counts as the end."""
        slack = 1e-9 * max(abs(self.low), abs(self.high))
        return self.low - slack <= value <= self.high + slack

    @property
    def width(self) -> float:
        """(high - low) / point: the share of the prediction the interval spans."""
        return (self.high - self.low) / self.point if self.point > 0 else math.inf

    @property
    def level_text(self) -> str:
        return "range" if self.level is None else f"{self.level:.0%}"

    def map(self, f) -> "Interval":
        """The interval of f(rate) for a monotone f (a decreasing f swaps the ends: a cost per
        image is lowest where the rate is highest)."""
        ends = sorted((f(self.low), f(self.high)))
        return dataclasses.replace(self, point=f(self.point), low=ends[0], high=ends[1])

    def text(self, decimals: int = 1) -> str:
        return f"{self.point:.{decimals}f} [{self.low:.{decimals}f}, {self.high:.{decimals}f}]"

    def as_dict(self) -> dict:
        return {"point": self.point, "low": self.low, "high": self.high, "level": self.level, "basis": self.basis}


def exact(value: float, basis: str) -> Interval:
    """A prediction with nothing to spread it: the interval is the point."""
    return Interval(value, value, value, None, basis)


def from_samples(point: float, samples: Iterable[float], level: float = LEVEL, basis: str = "") -> Interval:
    """The (1 - level)/2 and (1 + level)/2 quantiles of predicted rates (positive), around `point`."""
    values = np.asarray([s for s in samples if s is not None and math.isfinite(s)], dtype=float)
    if values.size == 0:
        return exact(point, basis or "no sample")
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return Interval(point, float(low), float(high), level, basis)


def span(point: float, intervals: Sequence[Interval], basis: str = "") -> Interval:
    """The union of intervals (e.g. one per value of a parameter the data do not pin)."""
    level = intervals[0].level if all(i.level == intervals[0].level for i in intervals) else None
    return Interval(point, min(i.low for i in intervals), max(i.high for i in intervals), level, basis)


def center(low: float, high: float) -> float:
    """The geometric middle of [low, high]: the value whose largest relative error over the range
    is the smallest (log |x/c| is at most log sqrt(high/low) for every x in the range)."""
    return math.sqrt(low * high)


def scatter_draws(dof: float, size: int, seed: int = SEED) -> np.ndarray:
    """Student t draws with `dof` degrees of freedom (a new run's scatter about the fit, in units of
    the fitted runs' scale; normal for dof = inf)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal(size) if math.isinf(dof) else rng.standard_t(dof, size)


def t_quantile(level: float, dof: float) -> float:
    """The two-sided Student t quantile of `level` (1.645 for 90% and dof = inf)."""
    from scipy import stats  # here: scipy takes a second to import, refusals need none

    return float(stats.t.ppf((1 + level) / 2, dof))


def robust_scale(values: Sequence[float]) -> Tuple[float, float]:
    """(median, scale) of residuals; the scale is the median absolute deviation made consistent
    with a normal's standard deviation (tfbench's jitter): a run the model misfits grossly does
    not set the scatter of every other run."""
    from scipy import stats

    v = np.asarray(values, dtype=float)
    return float(np.median(v)), float(stats.median_abs_deviation(v, scale="normal"))


def coverage(pairs: Sequence[Tuple[float, Interval]]) -> dict:
    """Over (measured, its interval) pairs: the share of measured values inside their interval and
    the median width; None where there is no pair."""
    if not pairs:
        return {"points": 0, "inside": None, "median_width": None, "level": LEVEL}
    inside = sum(1 for value, i in pairs if i.contains(value))
    levels = {i.level for _, i in pairs}
    return {"points": len(pairs), "inside": inside / len(pairs),
            "median_width": statistics.median(i.width for _, i in pairs),
            "level": levels.pop() if len(levels) == 1 else None}


def coverage_line(c: dict) -> str:
    """`coverage = X% of held-out points inside their 90% interval, median width Y%`."""
    if not c["points"]:
        return "coverage = n/a (no held-out point has an interval)"
    level = "range" if c["level"] is None else f"{c['level']:.0%} interval"
    return (f"coverage = {c['inside']:.0%} of held-out points inside their {level}, median width "
            f"{c['median_width']:.0%} ({c['points']} points)")
