"""Points grouped into panels and lines: what a scaling plot draws and what the findings compare.

A line is every point of a panel that shares one value of each series key. Series keys are the
config keys that really differ between the points, except the x axis, the keys that merely
restate it (workers: num_workers, num_local_devices) and the panel keys. So a sweep over a new
config axis (a link bandwidth, a precision, a ps count) gets lines of its own with no change here,
and the workers count can never split a strategy into one-point lines.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tfbench.config import MODES, STRATEGIES, knobs, strategy_traits
from tools.report.aggregate import Point, varying

SCALE = "scale"  # aggregate.identity's N of scaling efficiency: workers (mirrored: local devices)
ALIASES: Dict[str, Tuple[str, ...]] = {SCALE: ("num_workers", "num_local_devices")}
SCALING_PANELS = ("mode", "batch_size")  # scaling plots and findings: one panel per mode and batch

_PANEL_TITLES: Dict[str, Callable[[Any], str]] = {
    "mode": str,
    "strategy": str,
    "batch_size": lambda v: f"batch {v}/replica",
    SCALE: lambda v: f"{v} worker" + ("" if v == 1 else "s"),
}


@dataclasses.dataclass
class Line:
    label: str
    points: List[Point]  # sorted by x
    x: str

    @property
    def xs(self) -> List:
        return [p.config.get(self.x) for p in self.points]

    def at(self, value) -> Optional[Point]:
        return next((p for p in self.points if p.config.get(self.x) == value), None)


@dataclasses.dataclass
class Panel:
    title: str
    lines: List[Line]
    order: Tuple = ()  # one sort key per panel key: a grid's row and column

    @property
    def xs(self) -> List:
        return sorted({v for line in self.lines for v in line.xs})


def scale_unit(config: Dict, count: Optional[int] = None) -> str:
    """What the scale counts for this config: workers, or a mirrored run's local devices."""
    word = "local device" if strategy_traits.get(config.get("strategy")).local_devices else "worker"
    return word if count == 1 else word + "s"


def panels(points: Sequence[Point], *, x: str, panel_keys: Sequence[str], primary: str) -> List[Panel]:
    """Panels (one per combination of panel_keys) of lines along x, one per series.

    A line is labelled by its primary value (e.g. the strategy) plus each other series key whose
    value tells apart two lines of one panel with that primary value (e.g. "parameter_server
    (ps_sync=True)" next to a plain "horovod").
    """
    hidden = {k for key in (x, *panel_keys) for k in (key, *ALIASES.get(key, ()))}
    if x == SCALE and ps_per_worker(points):
        hidden.add("num_ps")  # a ps on every worker's host: the ps count restates the workers
    keys = [k for k in varying(points, exclude=sorted(hidden)) if k != primary]
    by_panel: Dict[Tuple, Dict[Tuple, List[Point]]] = {}
    for p in points:
        panel = tuple(repr(p.config.get(k)) for k in panel_keys)
        line = (repr(p.config.get(primary)),) + tuple(repr(p.config.get(k)) for k in keys)
        by_panel.setdefault(panel, {}).setdefault(line, []).append(p)
    shown = _label_keys([list(lines.values()) for lines in by_panel.values()], primary, keys)
    result = []
    for lines in by_panel.values():
        first = next(iter(lines.values()))[0].config
        drawn = []
        for members in sorted(lines.values(), key=lambda ps: tuple(_order(ps[0].config.get(k), k)
                                                                   for k in (primary, *keys))):
            members.sort(key=lambda p: _order(p.config.get(x)))
            c = members[0].config
            label_keys = shown.get(repr(c.get(primary)), ())
            extra = ", ".join(f"{k}={_value(c.get(k))}" for k in label_keys
                              if c.get(k) is not None and k not in knobs.FIELDS)  # a key that does not apply: none
            if any(k in knobs.FIELDS for k in label_keys):  # tuned or default, as one label
                extra = ", ".join(filter(None, (extra, f"knobs: {knobs.changed(c)}")))
            label = _value(c.get(primary)) + (f" ({extra})" if extra else "")
            drawn.append(Line(label, members, x))
        title = ", ".join(_PANEL_TITLES.get(k, lambda v, k=k: f"{k}={_value(v)}")(first.get(k)) for k in panel_keys)
        result.append(Panel(title, drawn, tuple(_order(first.get(k), k) for k in panel_keys)))
    return sorted(result, key=lambda panel: panel.order)


def ps_per_worker(points: Sequence[Point]) -> bool:
    """Every parameter-server point has as many ps as workers, at more than one worker count."""
    ps = [p.config for p in points if strategy_traits.get(p.config.get("strategy")).ps_tasks]
    return (len({c.get("num_workers") for c in ps}) > 1
            and all(c.get("num_ps") == c.get("num_workers") for c in ps))


def _label_keys(panel_lines: List[List[List[Point]]], primary: str, keys: Sequence[str]) -> Dict[str, List[str]]:
    """For each primary value, the series keys that tell apart two of its lines in one panel."""
    shown: Dict[str, List[str]] = {}
    for k in keys:
        for lines in panel_lines:
            seen: Dict[str, set] = {}
            for members in lines:
                c = members[0].config
                seen.setdefault(repr(c.get(primary)), set()).add(repr(c.get(k)))
            for value, values in seen.items():
                if len(values) > 1 and k not in shown.setdefault(value, []):
                    shown[value].append(k)
    return shown


def _value(v) -> str:
    if isinstance(v, (tuple, list)):
        return ",".join(str(x) for x in v)
    return str(v)


_KNOWN_ORDER = {"mode": MODES, "strategy": STRATEGIES}


def _order(value, key: str = ""):
    """Numbers in numeric order before strings, so batch 8 comes before 16; modes and strategies
    in tfbench's own order."""
    if value in _KNOWN_ORDER.get(key, ()):
        return (0, _KNOWN_ORDER[key].index(value), "")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
        return (0, value, "")
    return (1, 0, str(value))
