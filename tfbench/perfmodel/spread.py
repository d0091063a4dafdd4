"""How sure a fit on tfbench runs is: a parametric bootstrap over the fitted runs, generic over
whatever the fit fits (the fit is a function of runs; its parameters are never looked at here,
so a parameter a new term adds gets its spread with the others).

1. Each fitted run is predicted by a fit without it: e = log(measured / predicted rate), the error
   on a run the fit has not seen (leave-one-out; a run whose absence takes away what its own
   prediction needs, such as its link's only probe, gives none). Every refit, here and below,
   fits the parameters the fit on all runs fitted (`fit(runs, like=that fit)`): fewer runs
   change the values, not which parameters there are.
2. Their scatter: the median m0 and the robust scale s of those errors (intervals.robust_scale),
   k errors.
3. REPLICATES copies of the sweep, each run's measured times multiplied by exp(sigma_i Z),
   sigma_i = max(s, the run's own relative standard error of its mean step), Z standard normal;
   each copy refitted.
4. A prediction's samples: each refit's predicted rate times exp(m0 + s T), T Student t with
   k - 1 degrees of freedom, DRAWS per refit: a new run scatters about a fit as the fitted runs
   did about fits that had not seen them.
5. The interval: the samples' (1 - L)/2 and (1 + L)/2 quantiles (intervals.from_samples).

With fewer than MIN_ERRORS errors there is no scale: each run is spread by its own standard error
only and a new run adds nothing, which the interval's basis says.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from tfbench.perfmodel import intervals
from tfbench.perfmodel.observations import Observation

METHOD = ("parametric bootstrap over the fitted runs (tfbench.perfmodel.spread): leave-one-out errors, their "
          "robust scale, refits of perturbed runs, a new run's Student t scatter")
REPLICATES = 200
DRAWS = 20
MIN_ERRORS = 3


@dataclasses.dataclass(frozen=True)
class Scatter:
    """How fitted runs scatter about fits that had not seen them (log rate errors)."""

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
    def of(cls, errors: Sequence[float], runs: Sequence[str]) -> "Scatter":
        if len(errors) < MIN_ERRORS:
            return cls(0.0, 0.0, math.inf, tuple(errors), tuple(runs))
        middle, scale = intervals.robust_scale(errors)
        return cls(middle, scale, len(errors) - 1.0, tuple(errors), tuple(runs))


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
        return (f"{refits}; a new run's scatter {math.expm1(self.scatter.scale):.1%} about them "
                f"(robust, leave-one-out over {len(self.scatter.errors)} runs)")

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


def leave_one_out(observations: Sequence[Observation], fit: Callable, rate: Callable,
                  like: Any) -> Tuple[List[float], List[str]]:
    """([log(measured / predicted) of each predicted run by a fit without it], [its run id])."""
    errors, runs = [], []
    for i, o in enumerate(observations):
        if not o.predicted:
            continue
        predicted = rate(fit([p for j, p in enumerate(observations) if j != i], like=like), o)
        if predicted is not None and predicted > 0:
            errors.append(math.log(o.images_per_sec / predicted))
            runs.append(o.run_id)
    return errors, runs


def perturbed(observations: Sequence[Observation], scale: float, rng: np.random.Generator) -> List[Observation]:
    """A copy of the runs, each run's times multiplied by exp(sigma Z), sigma = max(scale, its own
    relative standard error)."""
    return [o.scaled(math.exp(max(scale, o.step_rel_se) * rng.standard_normal())) for o in observations]


def fit_spread(observations: Sequence[Observation], fit: Callable[..., Any],
               rate: Callable[[Any, Observation], Optional[float]], replicates: Optional[int] = None,
               seed: int = intervals.SEED) -> Spread:
    """fit(observations) with its refits and scatter; fit(runs, like=a fit) fits the parameters
    `like` has; rate(fit, run) is the fit's predicted rate of a run (None when it cannot predict
    it), used for the leave-one-out errors."""
    point = fit(observations)
    errors, runs = leave_one_out(observations, fit, rate, point)
    scatter = Scatter.of(errors, runs)
    rng = np.random.default_rng(seed)
    copies = tuple(fit(perturbed(observations, scatter.scale, rng), like=point)
                   for _ in range(replicates or REPLICATES))
    return Spread(point, copies, scatter, runs=len(observations))


def parameter_ranges(data: dict, level: float = intervals.LEVEL) -> List[Tuple[tuple, float, float]]:
    """[(path, low, high)]: the (1 - L)/2 and (1 + L)/2 quantiles of every number a parameters
    document's refits vary (params.with_spread), whatever parameter it is."""
    spread = data.get("spread") or {}
    values = np.asarray(spread.get("replicates") or [], dtype=float)
    if values.size == 0:
        return []
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return [(tuple(p), float(lo), float(hi)) for p, lo, hi in zip(spread["paths"], low, high)]
