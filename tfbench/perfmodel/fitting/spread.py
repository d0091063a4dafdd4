"""How sure a fit on tfbench runs is: a parametric bootstrap over the fitted runs, generic over
whatever the fit fits (the fit is a function of runs; its parameters are never looked at here,
so a parameter a new term adds gets its spread with the others). Every refit fits the parameters
the fit on all runs fitted (`fit(runs, like=that fit)`): perturbed runs change the values, not
which parameters there are.

1. The fit's residuals: r = log(measured / fitted rate) of each fitted run it predicts.
2. Each run's leverage h, how much its fitted rate follows its own measurement: the slope of its
   refitted log rate on its own perturbation over PILOT refits of copies whose runs' times are
   multiplied by exp(tau Z) (tau: the residuals' robust scale, or the run's own standard error if
   larger). A run with h near 1 fits itself (the one run of a strategy, the one that alone pins a
   parameter): its residual says nothing of a new run's.
3. A new run's scatter: the median m0 and the robust scale s (intervals.robust_scale) of the
   residuals adjusted for leverage, r / sqrt(1 - h) (Davison and Hinkley's modified residuals;
   a run with h > MAX_LEVERAGE left out), with n - sum(h) degrees of freedom (n runs: what the fit
   left free).
4. REPLICATES copies of the sweep, each run's times multiplied by exp(sigma_i Z), sigma_i = max(s,
   the run's own relative standard error of its mean step), and each link's probed beta (every
   run on that link alike) by exp(sigma_l Z), sigma_l = the robust scale of the link's probes over
   its runs, at least BETA_FLOOR (what one probe's TCP stream can tell apart); each copy refitted.
5. A prediction's samples: each refit's predicted rate times exp(m0 + s T), T Student t with those
   degrees of freedom, DRAWS per refit; the interval: their (1 - L)/2 and (1 + L)/2 quantiles
   (intervals.from_samples).

With fewer than MIN_ERRORS residuals left there is no scale: each run is spread by its own
standard error only and a new run adds nothing, which the interval's basis says.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from tfbench.perfmodel import intervals
from tfbench.perfmodel.fitting.observations import Observation

METHOD = ("parametric bootstrap over the fitted runs (tfbench.perfmodel.fitting.spread): residuals adjusted for their "
          "leverage, their robust scale, refits of perturbed runs, a new run's Student t scatter")
REPLICATES = 200
PILOT = 60
DRAWS = 20
MIN_ERRORS = 3
MAX_LEVERAGE = 0.9
MIN_PERTURBATION = 0.01  # the pilot's least perturbation: enough to see a leverage
BETA_FLOOR = 0.01  # a link's beta is known to no better than this share (one probe's TCP stream)


@dataclasses.dataclass(frozen=True)
class Scatter:
    """How a new run scatters about the fit: the center and robust scale of the fitted runs'
    leverage-adjusted log residuals (`errors`, of the runs `from_runs`), Student t's dof."""

    center: float
    scale: float
    dof: float
    errors: Tuple[float, ...] = ()
    from_runs: Tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {"center": self.center, "scale": self.scale, "dof": self.dof, "errors": list(self.errors),
                "from_runs": list(self.from_runs)}

    @classmethod
    def from_dict(cls, d: dict) -> "Scatter":
        return cls(float(d["center"]), float(d["scale"]), float(d["dof"]), tuple(d["errors"]), tuple(d["from_runs"]))

    @classmethod
    def none(cls) -> "Scatter":
        """Too few runs for a scale: a new run adds no scatter."""
        return cls(0.0, 0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class Spread:
    """A fit (`point`), its refits on perturbed copies of the runs, and the runs' scatter."""

    point: Any
    replicates: Tuple[Any, ...]
    scatter: Scatter
    runs: int = 0

    @property
    def basis(self) -> str:
        refits = f"bootstrap of {self.runs} fitted runs ({len(self.replicates)} refits)"
        if not self.scatter.scale:
            return f"{refits}, each run spread by its own standard error: too few runs for a scatter"
        return (f"{refits}; a new run's scatter {math.expm1(self.scatter.scale):.1%} about them (robust, from "
                f"{len(self.scatter.errors)} runs' residuals adjusted for leverage; t with {self.scatter.dof:.1f} "
                "degrees of freedom)")

    def samples(self, rate: Callable[[Any], Optional[float]]) -> np.ndarray:
        """Predicted rates: each refit's, times its draws of a new run's scatter."""
        reps = np.array([np.nan if r is None else r for r in (rate(m) for m in self.replicates)], dtype=float)
        t = intervals.scatter_draws(self.scatter.dof, reps.size * DRAWS).reshape(reps.size, DRAWS)
        return (reps[:, None] * np.exp(self.scatter.center + self.scatter.scale * t)).ravel()

    def interval(self, rate: Callable[[Any], Optional[float]],
                 level: float = intervals.LEVEL) -> Optional[intervals.Interval]:
        """The interval of rate(fit) (None when the fit cannot predict it)."""
        point = rate(self.point)
        if point is None:
            return None
        return intervals.from_samples(point, self.samples(rate), level, self.basis)


def perturbed(observations: Sequence[Observation], scale: float, rng: np.random.Generator,
              beta_scale: Optional[dict] = None) -> Tuple[List[Observation], np.ndarray]:
    """(a copy of the runs, each run's times multiplied by exp(-z), z = sigma Z with sigma =
    max(scale, its own relative standard error), and with `beta_scale` ({link: sigma}) each
    link's probed beta by exp(sigma Z), one Z per link; the z, which raise each run's rate by exp(z))."""
    z = np.array([max(scale, o.step_rel_se) * rng.standard_normal() for o in observations])
    copies = [o.scaled(math.exp(-zi)) for o, zi in zip(observations, z)]
    if beta_scale:
        moved = {link: math.exp(sigma * rng.standard_normal()) for link, sigma in sorted(beta_scale.items())}
        copies = [dataclasses.replace(o, beta_bps=o.beta_bps * moved[o.link]) if o.link in moved else o
                  for o in copies]
    return copies, z


def beta_scatter(observations: Sequence[Observation]) -> dict:
    """{link: the relative scatter of its probed beta}: the robust scale of the log betas of its
    runs' probes, at least BETA_FLOOR."""
    by_link: dict = {}
    for o in observations:
        if o.beta_bps:
            by_link.setdefault(o.link, []).append(math.log(o.beta_bps))
    return {link: max(BETA_FLOOR, intervals.robust_scale(logs)[1] if len(logs) > 1 else 0.0)
            for link, logs in by_link.items()}


def residuals(observations: Sequence[Observation], point: Any, rate: Callable) -> dict:
    """{run index: log(measured / fitted rate)} of the fitted runs the fit predicts."""
    out = {}
    for i, o in enumerate(observations):
        fitted = rate(point, o) if o.predicted else None
        if fitted is not None and fitted > 0:
            out[i] = math.log(o.images_per_sec / fitted)
    return out


def leverages(observations: Sequence[Observation], point: Any, fit: Callable, rate: Callable, tau: float,
              rng: np.random.Generator, indices: Sequence[int]) -> dict:
    """{run index: the slope of its refitted log rate on its own perturbation} over PILOT refits."""
    base = {i: math.log(rate(point, observations[i])) for i in indices}
    moved, pushed = {i: [] for i in indices}, {i: [] for i in indices}
    for _ in range(PILOT):
        copy, z = perturbed(observations, max(tau, MIN_PERTURBATION), rng)
        refit = fit(copy, like=point)
        for i in indices:
            r = rate(refit, observations[i])
            if r is not None and r > 0:
                moved[i].append(math.log(r) - base[i])
                pushed[i].append(z[i])
    return {i: float(np.clip(np.dot(moved[i], pushed[i]) / max(np.dot(pushed[i], pushed[i]), 1e-300), 0.0, 1.0))
            for i in indices if pushed[i]}


def scatter(observations: Sequence[Observation], point: Any, fit: Callable, rate: Callable,
            rng: np.random.Generator) -> Scatter:
    """A new run's scatter about the fit: the robust scale of its runs' residuals adjusted for
    leverage, with n - sum(h) degrees of freedom."""
    found = residuals(observations, point, rate)
    if len(found) < MIN_ERRORS:
        return Scatter.none()
    tau = intervals.robust_scale(list(found.values()))[1]
    h = leverages(observations, point, fit, rate, tau, rng, list(found))
    kept = [i for i in found if i in h and h[i] <= MAX_LEVERAGE]
    adjusted = [found[i] / math.sqrt(1.0 - h[i]) for i in kept]
    runs = [observations[i].run_id for i in kept]
    if len(adjusted) < MIN_ERRORS:
        return Scatter.none()
    middle, scale = intervals.robust_scale(adjusted)
    return Scatter(middle, scale, max(1.0, len(found) - sum(h.values())), tuple(adjusted), tuple(runs))


def fit_spread(observations: Sequence[Observation], fit: Callable[..., Any],
               rate: Callable[[Any, Observation], Optional[float]], replicates: Optional[int] = None,
               seed: int = intervals.SEED) -> Spread:
    """fit(observations) with its refits and scatter; fit(runs, like=a fit) fits the parameters
    `like` has; rate(fit, run) is the fit's predicted rate of a run (None when it cannot predict
    it)."""
    point = fit(observations)
    rng = np.random.default_rng(seed)
    found = scatter(observations, point, fit, rate, rng)
    betas = beta_scatter(observations)
    copies = tuple(fit(perturbed(observations, found.scale, rng, betas)[0], like=point)
                   for _ in range(replicates or REPLICATES))
    return Spread(point, copies, found, runs=len(observations))


def parameter_ranges(data: dict, level: float = intervals.LEVEL) -> List[Tuple[tuple, float, float]]:
    """[(path, low, high)]: the (1 - L)/2 and (1 + L)/2 quantiles of every number a parameters
    document's refits vary (params.with_spread), whatever parameter it is."""
    spread = data.get("spread") or {}
    values = np.asarray(spread.get("replicates") or [], dtype=float)
    if values.size == 0:
        return []
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return [(tuple(p), float(lo), float(hi)) for p, lo, hi in zip(spread["paths"], low, high)]
