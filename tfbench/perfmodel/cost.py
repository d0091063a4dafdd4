"""Cost and energy per unit of work from a rate and what the user pays: dollars per million units
and joules per unit, with the rate's interval carried through (the cheapest end of a cost comes
from the fastest end of the rate), and the cheapest setting that reaches a rate.

    $ per million units = price per node-hour x nodes / 3600 / rate x 1e6
    joules per unit     = watts per node x nodes / rate

A unit is what the workload counts (images by default; examples, tokens): it names the rate
(`images_per_sec`) and the columns (`usd_per_million_images`, `joules_per_image`). Nodes are every
host the setting occupies: ceil(N / devices per node) worker nodes, plus a host per ps placed on
hosts of their own.
"""
from __future__ import annotations

import dataclasses
import math
from typing import List, Optional, Sequence, Tuple

from tfbench.perfmodel.intervals import Interval

SECONDS_PER_HOUR = 3600.0


@dataclasses.dataclass(frozen=True)
class Unit:
    plural: str = "images"
    singular: str = "image"

    @property
    def rate(self) -> str:
        return f"{self.plural}_per_sec"

    @property
    def usd(self) -> str:
        return f"usd_per_million_{self.plural}"

    @property
    def joules(self) -> str:
        return f"joules_per_{self.singular}"


IMAGES = Unit()


@dataclasses.dataclass(frozen=True)
class Prices:
    """What one node costs an hour and draws (None: not given)."""

    usd_per_node_hour: Optional[float] = None
    watts_per_node: Optional[float] = None

    def __post_init__(self):
        for name, value in (("--price_per_node_hour", self.usd_per_node_hour),
                            ("--watts_per_node", self.watts_per_node)):
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value}")

    @property
    def given(self) -> bool:
        return self.usd_per_node_hour is not None or self.watts_per_node is not None

    def columns(self, unit: Unit = IMAGES) -> List[str]:
        return ([unit.usd] if self.usd_per_node_hour is not None else []) + (
            [unit.joules] if self.watts_per_node is not None else [])


def nodes(workers: int, devices_per_node: int = 1, separate_ps: int = 0) -> int:
    """Hosts a setting occupies: ceil(N/d) worker nodes plus the ps on hosts of their own."""
    return -(-workers // devices_per_node) + separate_ps


def usd_per_million(rate: float, node_count: int, usd_per_node_hour: float) -> float:
    return usd_per_node_hour * node_count / SECONDS_PER_HOUR / rate * 1e6


def joules_per_unit(rate: float, node_count: int, watts_per_node: float) -> float:
    return watts_per_node * node_count / rate


def per_unit(rate, node_count: int, prices: Prices, unit: Unit = IMAGES) -> dict:
    """{column: value} of the prices given, for a rate (a number or an Interval)."""
    out = {}
    for name, price, f in ((unit.usd, prices.usd_per_node_hour, usd_per_million),
                           (unit.joules, prices.watts_per_node, joules_per_unit)):
        if price is None or rate is None:
            continue
        at = lambda r, f=f, price=price: f(r, node_count, price) if r > 0 else math.inf  # noqa: E731
        out[name] = rate.map(at) if isinstance(rate, Interval) else at(rate)
    return out


@dataclasses.dataclass(frozen=True)
class Option:
    """One way to run the work: a label (the strategy), its workers and nodes, its rate."""

    label: str
    workers: int
    nodes: int
    rate: Interval


def cheapest(options: Sequence[Option], target: float, usd_per_node_hour: float,
             sure: bool = False) -> Optional[Tuple[Option, Interval]]:
    """The option reaching `target` units/sec (its predicted rate; with `sure`, the low end of its
    interval) at the least $ per million units, fewer nodes first on a tie; None if none does."""
    reaching = [o for o in options if (o.rate.low if sure else o.rate.point) >= target]
    if not reaching:
        return None
    best = min(reaching, key=lambda o: (usd_per_million(o.rate.point, o.nodes, usd_per_node_hour), o.nodes))
    return best, best.rate.map(lambda r: usd_per_million(r, best.nodes, usd_per_node_hour))
