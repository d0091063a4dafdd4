"""A prediction with nothing fitted on the cluster it is about (`predict` without --params, the
published clusters' no-fit path, `predict --model=dlrm` without --runs): where its point sits and
what its range spans. One rule for every such prediction, fixed from tfbench's own fits
(tfbench.perfmodel.fitting.measured) before any cluster predicted with it was looked at:

- the share of the link's configured rate the protocol gets: the point at the median of the
  strategy's fitted shares times the median goodput of the links they were fitted on (a link
  measured by a probe: the shares alone), the range from the lowest to the highest;
- a synchronous parameter server's duplex chi: the point at the median fitted, the range from the
  lowest to the highest;
- the overhead per step: the point at the median fitted, the range from 0 to the highest;
- the ps's apply of one update: the median fitted per byte times |w|, the range from 0 (a faster
  ps) to the highest per byte times |w|;
- the overlap of communication with compute (phi of terms.overlapped_s): the point at 1, none
  overlapped, as in every tfbench step; the range from 0 (all of the shorter hidden behind the
  longer: a TF1 graph that pushes each gradient as backprop makes it can do that) to 1;
- a new run's scatter about the prediction: the median of the scatters tfbench's fits found about
  themselves (measured.RUN_SCATTER), its 5% and 95% quantiles (normal), moving the range's ends
  out. A prediction is of a run, and a run scatters whatever the unknowns: the fitted path's
  intervals carry the same scatter (tfbench.perfmodel.fitting.spread), and with every unknown
  given the range is that scatter, not a point.

Strategies never fitted take the values of the protocol they share (measured.LIKE). The rate is
monotone in each unknown, so the range is spanned by the predictions at the corners of the
unknowns' ranges (the point's values among them), each end then moved by the scatter; it is a
range, with no probability attached.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from typing import Callable, Dict, List, Sequence

from tfbench.perfmodel import intervals
from tfbench.perfmodel.fitting import measured

NAMES = ("share", "chi", "overhead_s", "apply_s", "phi")
# a new run's scatter, relative: the median tfbench's fits found, and the factor the upper quantile of
# tfbench's interval level (0.95 of 0.9) moves a rate by
SCATTER = statistics.median(measured.RUN_SCATTER)
SCATTER_FACTOR = math.exp(statistics.NormalDist().inv_cdf((1 + intervals.LEVEL) / 2) * math.log1p(SCATTER))


@dataclasses.dataclass(frozen=True)
class Unknown:
    name: str
    point: float
    low: float
    high: float

    def text(self) -> str:
        return f"{measured.NAMES[self.name]} {self.point:.3g} [{self.low:.3g}, {self.high:.3g}]"


def unknowns(key: str, w_bytes: float, names: Sequence[str] = NAMES, link_measured: bool = False
             ) -> Dict[str, Unknown]:
    """The unknowns `names` of a strategy key by the rule (module docstring); a name the key has no
    value for (chi of a ring, apply of an all-reduce) is left out."""
    goodput = (1.0, 1.0, 1.0) if link_measured else (min(measured.GOODPUT), statistics.median(measured.GOODPUT),
                                                      max(measured.GOODPUT))
    out: Dict[str, Unknown] = {}
    for name in names:
        if name == "phi":
            out[name] = Unknown(name, 1.0, 0.0, 1.0)
            continue
        if name == "apply_s":
            found = measured.APPLY_S_PER_BYTE if key.startswith("parameter_server") else ()
            scale = w_bytes
        else:
            found, scale = measured.values(key, name), 1.0
        if not found:
            continue
        mid, low, high = statistics.median(found) * scale, min(found) * scale, max(found) * scale
        if name == "share":
            out[name] = Unknown(name, mid * goodput[1], low * goodput[0], min(1.0, high * goodput[2]))
        elif name == "chi":
            out[name] = Unknown(name, mid, low, high)
        else:  # overhead, apply: from nothing up to the most measured
            out[name] = Unknown(name, mid, 0.0, high)
    return out


def point(found: Dict[str, Unknown]) -> Dict[str, float]:
    return {name: u.point for name, u in found.items()}


def corners(found: Dict[str, Unknown]) -> List[Dict[str, float]]:
    """Every combination of each unknown's ends; [{}] without unknowns."""
    ends = [sorted({u.low, u.high}) for u in found.values()]
    return [dict(zip(found, values)) for values in itertools.product(*ends)]


def span(rate: Callable[[Dict[str, float]], float], found: Dict[str, Unknown], basis: str = "") -> intervals.Interval:
    """The rate at the rule's point, and its range over every corner of the unknowns, its ends
    moved out by a new run's scatter."""
    middle = rate(point(found))
    at = [rate(c) for c in corners(found)] + [middle]
    return intervals.Interval(middle, min(at) / SCATTER_FACTOR, max(at) * SCATTER_FACTOR, None,
                              basis or describe(found))


def describe(found: Dict[str, Unknown], scatter: bool = True) -> str:
    """The unknowns' points and ranges and (with `scatter`: the prediction is span's) a run's
    scatter, in a phrase."""
    parts = [u.text() for u in found.values()]
    if scatter:
        parts.append(f"a new run's scatter {SCATTER:.1%}, its 90% widening the range by {SCATTER_FACTOR - 1:.1%} "
                     "each way")
    return "no fit: " + "; ".join(parts) + " (tfbench's fits, tfbench.perfmodel.fitting.nofit)"
