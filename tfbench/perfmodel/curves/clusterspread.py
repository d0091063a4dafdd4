"""How sure a cluster fit is (tfbench.perfmodel.curves.clusterfit): the link's beta over the range its
fitted points allow up to the link's line rate, the fitted points' scatter, the one rule that
makes a prediction's point, and which input would narrow the intervals most.

Beta's range, by profile likelihood: at each beta of clusterfit.BETA_GRID below the ceiling (the
link class's line rate, a stated physical bound) and at the ceiling, phi and m are refitted;
RSS(beta) is the sum of squared log rate errors of the n fitted points that communicate. The
range is every beta with n log(RSS(beta) / RSS_min) <= the chi-square(1) quantile of the level
(the likelihood-ratio bound of normal errors), its ends refined by scipy's brentq. Compute-bound
points leave the profile flat above a bound, so the range runs from the bound to the ceiling;
network-bound points pin beta on both sides.

A prediction's interval: at every beta of the range its rate times exp(+-t s), s = the fitted
points' scatter at that beta, sqrt(RSS / (n - 2)) (phi and m fitted), t Student t's quantile of the
level with n - 2 degrees of freedom; the interval spans them all. With n <= 2 the fit has no
degrees of freedom to measure its own scatter, and a prediction is still of a run: each rate then
moves by a new run's scatter as tfbench's own fits found it (tfbench.perfmodel.fitting.nofit, the
rule a prediction with no fit follows), never by nothing; like the no-fit path's, that interval is
a range with no level attached (`tools.model calibrate` checks the level of the others).

The point (POINT_RULE, fixed before any held-out point was looked at): the geometric middle of the
lowest and highest rates the range predicts (intervals.center), the prediction whose largest
relative error over what the fitted points allow is the smallest. The other rules, for a reader
to see how much the choice matters: `bound` (beta at the range's low end, the slowest link the
points allow), `best` (the least RSS: where an optimizer left free lands), `ceiling` (the line
rate), `beta_middle` (the geometric middle of the beta range).
"""
from __future__ import annotations

import dataclasses
import math
from typing import List, Optional, Sequence, Tuple

import numpy as np

from tfbench.perfmodel import intervals
from tfbench.perfmodel.dense import terms
from tfbench.perfmodel.curves.clusterfit import BETA_GRID, Cluster, Params, Point, base_params, refit
from tfbench.perfmodel.fitting import nofit

POINT_RULE = "center"
RULES = ("center", "bound", "best", "ceiling", "beta_middle")
RSS_FLOOR = 1e-8  # per point: a fit closer than 0.01% is as good as exact


@dataclasses.dataclass(frozen=True)
class Profile:
    """The betas the fitted points allow (ascending) with phi and m refitted at each."""

    cluster: Cluster
    betas: Tuple[float, ...]
    fits: Tuple[Params, ...]
    rss: Tuple[float, ...]
    n: int  # fitted points that communicate
    ceiling: float
    level: float = intervals.LEVEL
    given: bool = False  # beta given, not fitted
    fitted: Tuple[Point, ...] = ()  # the points that communicate, phi and m refitted on them

    @property
    def best(self) -> int:
        return int(np.argmin(self.rss))

    @property
    def dof(self) -> int:
        return self.n - 2

    def scatter(self, i: int) -> float:
        return math.sqrt(self.rss[i] / self.dof) if self.dof > 0 else 0.0

    def rates(self, q: Point) -> np.ndarray:
        return np.array([self.cluster.rate(q, p) for p in self.fits])

    def interval(self, q: Point, rule: str = POINT_RULE) -> intervals.Interval:
        rates = self.rates(q)
        if self.dof > 0:
            t = intervals.t_quantile(self.level, self.dof)
            spread, level = np.array([t * self.scatter(i) for i in range(len(rates))]), self.level
        else:  # no degrees of freedom: a new run's scatter by the no-fit rule, a range as the no-fit path's
            spread, level = np.full(len(rates), math.log(nofit.SCATTER_FACTOR)), None
        return intervals.Interval(self.point(q, rule, rates)[0], float(np.min(rates * np.exp(-spread))),
                                  float(np.max(rates * np.exp(spread))), level, self.basis)

    def point(self, q: Point, rule: str = POINT_RULE, rates: Optional[np.ndarray] = None) -> Tuple[float, Params]:
        """(the predicted rate, the parameters whose parts explain it) by a rule of RULES."""
        rates = self.rates(q) if rates is None else rates
        if rule == "center":
            c = intervals.center(float(rates.min()), float(rates.max()))
            return c, self.fits[int(np.argmin(np.abs(np.log(rates / c))))]
        if rule == "beta_middle":
            p = self.at_beta(intervals.center(self.betas[0], self.betas[-1]))
            return self.cluster.rate(q, p), p
        i = {"bound": 0, "best": self.best, "ceiling": len(self.fits) - 1}[rule]
        return float(rates[i]), self.fits[i]

    def at_beta(self, beta: float) -> Params:
        """phi and m refitted at `beta`."""
        return self.fits[0] if self.given else refit(self.cluster, self.fitted, self.fits[0], beta)[1]

    @property
    def scatter_text(self) -> str:
        """Whose scatter the intervals carry, in a phrase."""
        if self.dof > 0:
            return f"the fitted points' scatter ({self.n} points)"
        return (f"a new run's scatter {nofit.SCATTER:.1%} as tfbench's fits found it ({self.n} fitted points that "
                f"communicate leave no degree of freedom for their own)")

    @property
    def basis(self) -> str:
        if self.given:
            return f"beta given; {self.scatter_text}"
        return (f"beta {self.betas[0] / 1e6:.4g}-{self.betas[-1] / 1e6:.4g} MB/s (profile likelihood up to the "
                f"line rate {self.ceiling / 1e6:.4g} MB/s) and {self.scatter_text}")


def profile(cluster: Cluster, points: Sequence[Point], ceiling: float, beta: Optional[float] = None,
            fabric: Optional[float] = None, intra_node: str = "pcie", level: float = intervals.LEVEL) -> Profile:
    """The betas `points` allow up to `ceiling` (bytes/s), or the given `beta` alone."""
    base = base_params(points, fabric, intra_node)
    shared = tuple(q for q in points if q.gpus > 1)  # every point that communicates, inside a node or across
    if beta is not None:
        p = refit(cluster, shared, base, beta) if shared else (0.0, dataclasses.replace(base, beta=beta))
        return Profile(cluster, (beta,), (dataclasses.replace(p[1], beta_source="given"),),
                       (len(shared) * p[0] ** 2,), len(shared), beta, level, True, shared)
    if not any(terms.nodes(q.gpus, q.devices_per_node) > 1 for q in points):
        raise ValueError("no fitted point spans two nodes: give the link's bandwidth")
    grid = [float(b) for b in BETA_GRID if b < ceiling] + [ceiling]
    n = len(shared)
    found = [refit(cluster, shared, base, b) for b in grid]
    rss = [max(n * rms ** 2, n * RSS_FLOOR) for rms, _ in found]
    from scipy import optimize, stats  # here: scipy takes a second to import, refusals need none

    limit = float(stats.chi2.ppf(level, 1))
    excess = lambda r: n * math.log(r / min(rss)) - limit  # noqa: E731
    keep = [i for i, r in enumerate(rss) if excess(r) <= 0]
    lo, hi = keep[0], keep[-1]
    ends = []
    for inside, outside in ((lo, lo - 1), (hi, hi + 1)):
        if 0 <= outside < len(grid):
            f = lambda x: excess(max(n * refit(cluster, shared, base, 10 ** x)[0] ** 2, n * RSS_FLOOR))  # noqa: E731
            b = 10 ** optimize.brentq(f, math.log10(grid[outside]), math.log10(grid[inside]), xtol=1e-4)
            rms, p = refit(cluster, shared, base, b)
            ends.append((b, p, max(n * rms ** 2, n * RSS_FLOOR)))
    kept = [(grid[i], found[i][1], rss[i]) for i in range(lo, hi + 1)] + ends
    kept.sort(key=lambda e: e[0])
    source = (f"the range the fitted points allow by profile likelihood ({level:.0%}), up to the line rate; the "
              f"point by the rule '{POINT_RULE}'")
    return Profile(cluster, tuple(e[0] for e in kept), tuple(dataclasses.replace(e[1], beta_source=source)
                                                             for e in kept),
                   tuple(e[2] for e in kept), n, ceiling, level, False, shared)


def narrowing(prof: Profile, fitted: Sequence[Point], asked: Sequence[Point], candidates: Sequence[Point],
              fabric: Optional[float] = None, intra_node: str = "pcie") -> List[Tuple[str, float]]:
    """[(an input, the median width of the asked points' intervals had it been given)], narrowest
    first: the link's bandwidth (beta known at each prediction's point), and one more measured
    point at each candidate size (measured at its predicted point)."""
    if not asked:
        return []
    out = []
    if not prof.given:
        widths = []
        for q in asked:
            rate, p = prof.point(q)
            known = profile(prof.cluster, fitted, p.beta, beta=p.beta, fabric=fabric, intra_node=intra_node)
            widths.append(known.interval(q).width)
        out.append(("the link's bandwidth measured (--link_bandwidth)", float(np.median(widths))))
    for c in candidates:
        measured = dataclasses.replace(c, images_per_sec=prof.point(c)[0])
        more = profile(prof.cluster, list(fitted) + [measured], prof.ceiling,
                       beta=prof.betas[0] if prof.given else None, fabric=fabric, intra_node=intra_node)
        out.append((f"one measured point at {c.gpus} GPUs", float(np.median([more.interval(q).width for q in asked]))))
    return sorted(out, key=lambda e: e[1])
