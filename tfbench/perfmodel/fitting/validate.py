"""The model against runs it never saw: fit on one part of a sweep, predict the other.

Two hold-outs, as a user extrapolates: by worker count (fit on every run with fewer workers than
the most, predict the runs with the most) and by link rate (fit on the runs of the other links,
predict those of one link; its alpha and beta come from its own link probes, the inputs a user
measures, never from its step times). Each held-out run gives measured and predicted images/sec
and the relative error; the summary is the median and the largest absolute error over both.
"""
from __future__ import annotations

import dataclasses
import statistics
from typing import List, Optional, Sequence, Tuple

from tfbench.perfmodel.fitting import fit as fit_lib
from tfbench.perfmodel import intervals
from tfbench.perfmodel.dense import prediction
from tfbench.perfmodel.fitting import params as params_lib
from tfbench.perfmodel.fitting.observations import Observation


@dataclasses.dataclass(frozen=True)
class Row:
    split: str
    observation: Observation
    predicted_images_per_sec: Optional[float]
    bottleneck: str
    note: str = ""
    interval: Optional[intervals.Interval] = None

    @property
    def error(self) -> Optional[float]:
        """(predicted - measured) / measured, or None when it could not be predicted."""
        if self.predicted_images_per_sec is None:
            return None
        measured = self.observation.images_per_sec
        return (self.predicted_images_per_sec - measured) / measured


def splits(observations: Sequence[Observation], hold_out_link: str = "") -> List[Tuple[str, list, list]]:
    """(name, fit on, predict) for the worker-count and the link hold-outs that the runs allow."""
    predicted = [o for o in observations if o.predicted]
    out = []
    most = max((o.num_workers for o in predicted), default=0)
    if most > 1:
        out.append((f"held out: {most} workers", [o for o in observations if o.num_workers < most],
                    [o for o in predicted if o.num_workers == most]))
    rates = {o.link: o.link_rate_bps for o in predicted}
    links = sorted(rates, key=rates.get)
    if len(links) > 1:
        held = hold_out_link.lower() if hold_out_link else links[len(links) // 2]
        if held not in links:
            raise ValueError(f"--hold_out_link={hold_out_link!r} is no link of these runs ({', '.join(links)})")
        training = [o for o in observations if o.link != held]
        out.append((f"held out: link {held}", training, [o for o in predicted if o.link == held]))
    return out


def with_held_links(data: dict, held: Sequence[Observation]) -> dict:
    """The parameters with the links they lack taken from the held-out runs' own probes, as a
    user measures a network (never from its step times)."""
    missing = [o for o in held if params_lib.link_entry(data, o.link) is None]
    if not missing:
        return data
    return dict(data, links={**fit_lib.link_entries(missing), **data["links"]})


def predict_held_out(name: str, training: Sequence[Observation], held: Sequence[Observation]) -> List[Row]:
    _, found = fit_lib.with_spread(training)
    rows = []
    for o in held:
        rate = lambda d, o=o: fit_lib.predicted_rate(with_held_links(d, held), o)  # noqa: E731
        s = fit_lib.setting(o, with_held_links(found.point, held))
        if s is None:
            rows.append(Row(name, o, None, "", "no fitted compute for its model, batch and cores"))
            continue
        point = prediction.point(s, o.num_workers)
        rows.append(Row(name, o, point.images_per_sec, point.bottleneck, interval=found.interval(rate)))
    return rows


def validate(observations: Sequence[Observation], hold_out_link: str = "") -> List[Row]:
    return [row for name, training, held in splits(observations, hold_out_link)
            for row in predict_held_out(name, training, held)]


def summary(rows: Sequence[Row]) -> dict:
    errors = [abs(r.error) for r in rows if r.error is not None]
    return {"points": len(errors), "unpredicted": sum(1 for r in rows if r.error is None),
            "median_abs_error": statistics.median(errors) if errors else None,
            "max_abs_error": max(errors) if errors else None,
            "coverage": intervals.coverage([(r.observation.images_per_sec, r.interval) for r in rows if r.interval])}
