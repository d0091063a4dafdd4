"""A measured scaling curve predicted with nothing fitted on it (`tools.model published` and
`cluster` print it beside the fit): compute from its smallest point (one GPU), its nominal link,
and what the model cannot know by the no-fit rule of tfbench.perfmodel.fitting.nofit, never by its points.

The unknowns are the protocol's share of the nominal link, a parameter server's duplex chi and
the overlap of communication with compute (phi, from none to all). The ps's apply and the
overhead per step are inside the smallest point's step, which sets the compute; they are not
counted again. The step is clusterfit.Cluster's (the run's placement of its variables, the busiest
host link, intra-node aggregation), with no per-message cost (nothing measured it).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from tfbench.perfmodel import intervals
from tfbench.perfmodel.curves.clusterfit import Cluster, Params, Point, base_params
from tfbench.perfmodel.fitting import nofit

# the strategy whose fits a cluster mode's protocol is like (tfbench.perfmodel.fitting.measured)
KEY = {"parameter_server": "parameter_server_sync", "distributed_replicated": "parameter_server_sync",
       "tfbench_ps": "parameter_server_sync", "allreduce": "allreduce"}
UNKNOWN = ("share", "chi", "phi")


@dataclasses.dataclass(frozen=True)
class NoFit:
    """A cluster's compute (its smallest point's) and nominal line rate (bytes/s each way)."""

    cluster: Cluster
    base: Params
    line_rate: float

    def interval(self, q: Point) -> intervals.Interval:
        found = nofit.unknowns(KEY[q.mode], self.cluster.w, UNKNOWN)

        def rate(values: dict) -> float:
            p = dataclasses.replace(self.base, beta=values["share"] * self.line_rate, chi=values.get("chi", 0.0),
                                    phi=values["phi"])
            return self.cluster.rate(q, p)

        return nofit.span(rate, found, f"no fit: compute from the smallest point, the nominal link "
                                       f"{self.line_rate * 8 / 1e9:.3g} Gbit/s; {nofit.describe(found)}")


def of(cluster: Cluster, points: Sequence[Point], line_rate: float, fabric=None, intra_node: str = "pcie") -> NoFit:
    """The no-fit prediction of a cluster from its smallest point (one GPU) and nominal link."""
    smallest = min(q.gpus for q in points)
    return NoFit(cluster, base_params([q for q in points if q.gpus == smallest], fabric, intra_node), line_rate)
