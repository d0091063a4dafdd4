"""The price flags every tools.model verb takes, and the cost columns they add to its rows
(tfbench.perfmodel.cost: $ per million units and joules per unit, intervals carried through)."""
from __future__ import annotations

from typing import List, Sequence

from absl import flags

from tfbench.config.errors import ConfigError
from tfbench.perfmodel import cost
from tfbench.perfmodel.render import INTERVAL, Column

FLAGS = flags.FLAGS
NAMES = ["price_per_node_hour", "watts_per_node"]


def define_flags() -> None:
    if "price_per_node_hour" in FLAGS:
        return
    flags.DEFINE_float("price_per_node_hour", None, "Dollars one node costs an hour: adds $ per million images to "
                       "every predicted and measured rate (a node is every host a worker or a ps of its own uses).")
    flags.DEFINE_float("watts_per_node", None, "Watts one node draws: adds joules per image.")


def prices() -> cost.Prices:
    """The prices given; ConfigError (one line) for one that is not a positive number."""
    try:
        return cost.Prices(FLAGS.price_per_node_hour, FLAGS.watts_per_node)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def columns(p: cost.Prices, measured: bool = False, unit: cost.Unit = cost.IMAGES) -> List[Column]:
    """The cost columns of the prices given: the prediction's (an interval), then the measured
    rate's (`measured_...`) when rows have one."""
    names = p.columns(unit)
    return [Column(n, INTERVAL, 2) for n in names] + ([Column(f"measured_{n}", decimals=2) for n in names]
                                                      if measured else [])


def add(rows: Sequence[dict], p: cost.Prices, rate: str, measured: str = "", unit: cost.Unit = cost.IMAGES) -> None:
    """Adds to each row (with a `nodes` value) the cost of its `rate` column (an interval) and of
    its `measured` column (a number), when prices are given."""
    if not p.given:
        return
    for r in rows:
        r.update(cost.per_unit(r.get(rate), r["nodes"], p, unit))
        if measured and isinstance(r.get(measured), float):
            r.update({f"measured_{k}": v for k, v in cost.per_unit(r[measured], r["nodes"], p, unit).items()})


def line(p: cost.Prices) -> str:
    """What the cost columns assume, for the facts."""
    parts = ([f"${p.usd_per_node_hour:g} per node-hour"] if p.usd_per_node_hour is not None else []) + (
        [f"{p.watts_per_node:g} W per node"] if p.watts_per_node is not None else [])
    return (f"cost: {' and '.join(parts)} (given) x the nodes a point occupies (its worker nodes and any ps on hosts "
            "of their own), over its rate; the interval of a cost comes from its rate's")
