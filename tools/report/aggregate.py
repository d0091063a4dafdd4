"""From runs to points: repeats combined, scaling efficiency, and paired comparisons.

A point is one configuration; its repeats are runs whose configs differ only in bookkeeping
(run id, logdir, seed, monitoring, deadlines). Numbers follow docs/definitions.md and come from
tfbench.measure.stats, so a report can never disagree with what tfbench printed.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tfbench.config import (STRATEGIES, ConfigError, RunConfig, effective_num_local_devices, effective_num_ps,
                            strategy_traits)
from tfbench.config.kinds import kind_of
from tfbench.measure import stats
from tools.rundirs.runs import Run

# Config keys that do not change what was measured.
_BOOKKEEPING = ("run_id", "logdir", "seed", "deadline", "stall_timeout", "monitor", "monitor_interval",
                "display_every", "profile", "profile_steps", "log_device_placement", "base_port")


def ps_of(config: Dict) -> int:
    """The ps a run had: --num_ps, or with 0 its workload's default (a model tfbench cannot load here: one)."""
    try:
        return RunConfig.from_dict(config).effective_num_ps
    except (ConfigError, ValueError, TypeError, ImportError):
        return effective_num_ps(config.get("strategy"), config.get("num_ps") or 0)


def identity(config: Dict) -> Dict:
    """The config that defines a point: bookkeeping dropped, num_ps and num_local_devices made
    effective, slurm_nodes blanked off Slurm, and its `scale` added: the N of scaling efficiency (workers; mirrored: devices)."""
    ident = {k: tuple(v) if isinstance(v, list) else v for k, v in config.items() if k not in _BOOKKEEPING}
    strategy = ident.get("strategy")
    ident["num_ps"] = ps_of(ident)
    ident["num_local_devices"] = effective_num_local_devices(strategy, ident.get("num_local_devices") or 0)
    ident["scale"] = ident["num_local_devices"] or ident.get("num_workers") or 1
    if "slurm_nodes" not in kind_of(ident).accepts and "slurm_nodes" in ident:
        ident["slurm_nodes"] = None  # not a Slurm run: no node count to show
    return ident


def _at_scale_one(config: Dict) -> Dict:
    if strategy_traits.get(config.get("strategy")).local_devices:
        return {**config, "num_local_devices": 1, "scale": 1}
    return {**config, "num_workers": 1, "scale": 1}


def _key(ident: Dict) -> Tuple:
    return tuple(sorted(ident.items()))


def point_key(config: Dict) -> Tuple:
    """The key of the point a run of `config` belongs to."""
    return _key(identity(config))


def rate_interval(rate: float, step_stats: Optional[Dict]) -> Tuple[float, float]:
    """The 95% CI of the mean step time carried over to the rate (rate ∝ 1 / step time).

    The interval is asymmetric: a step-time interval [m - c, m + c] maps to
    [rate·m/(m + c), rate·m/(m - c)].
    """
    if not step_stats:
        return float("nan"), float("nan")
    mean, ci = step_stats.get("mean_s", float("nan")), step_stats.get("ci95_s", float("nan"))
    if not (math.isfinite(rate) and math.isfinite(mean) and math.isfinite(ci)) or mean <= 0:
        return float("nan"), float("nan")
    high = rate * mean / (mean - ci) if mean > ci else float("inf")
    return rate * mean / (mean + ci), high


@dataclasses.dataclass
class Point:
    config: Dict  # identity(config) of its runs
    runs: List[Run]
    efficiency: float = float("nan")  # vs the 1-worker point; set by add_scaling_efficiency
    efficiency_note: str = ""  # why no efficiency is given, when it is refused

    @property
    def key(self) -> Tuple:
        return _key(self.config)

    @property
    def rates(self) -> List[float]:
        return [r.rate for r in self.runs]

    @property
    def rate(self) -> float:
        """Mean of the repeats' cluster rates, in the point's unit (images/sec, examples/sec, tokens/sec)."""
        return float(np.mean(self.rates))

    @property
    def unit(self) -> str:
        return self.runs[0].unit if self.runs else "images"

    @property
    def spread(self) -> float:
        """Sample standard deviation of the repeats' rates (nan with one run)."""
        return float(np.std(self.rates, ddof=1)) if len(self.runs) > 1 else float("nan")

    @property
    def between_runs(self) -> bool:
        return len(self.runs) > 1

    @property
    def stats(self) -> Optional[Dict]:
        """Step-time statistics, one sample per global step (docs/definitions.md). With repeats, over the
        runs' mean global-step times, so the 95% CI is the between-run one; with one run, over
        that run's global steps."""
        if self.between_runs:
            means = [(r.step_stats or {}).get("mean_s") for r in self.runs]
            means = [m for m in means if isinstance(m, (int, float)) and math.isfinite(m)]
            if len(means) == len(self.runs):
                return dict(stats.step_time_stats(means), over="run means")
        s = self.runs[0].step_stats
        return dict(s, over="global steps of one run") if s else None

    @property
    def interval(self) -> Tuple[float, float]:
        """95% CI of the rate: between runs (Student t over the repeats' rates) when the
        point was repeated; else the one run's global-step CI carried over to a rate."""
        if self.between_runs:
            b = stats.between_runs(self.rates)
            return b["low"], b["high"]
        return rate_interval(self.rate, self.runs[0].step_stats)

    @property
    def cores_per_worker(self) -> Optional[int]:
        """Cores per worker all the point's runs had; None when unknown or not all equal."""
        values = {r.cores_per_worker for r in self.runs}
        return values.pop() if len(values) == 1 else None

    @property
    def global_batch(self) -> Optional[int]:
        return self.runs[0].global_batch


def combine(runs: Sequence[Run]) -> List[Point]:
    """One point per configuration, from the runs that finished ok, in first-seen order."""
    points: Dict[Tuple, Point] = {}
    for run in runs:
        if not run.ok:
            continue
        ident = identity(run.config)
        points.setdefault(_key(ident), Point(ident, [])).runs.append(run)
    result = list(points.values())
    add_scaling_efficiency(result)
    return result


def baseline(point: Point, by_key: Dict[Tuple, Point]) -> Optional[Point]:
    """The point at scale 1 (one worker; mirrored: one device) with everything else equal."""
    return by_key.get(_key(_at_scale_one(point.config)))


def refusal(point: Point, base: Optional[Point]) -> str:
    """Why scaling efficiency cannot compare `point` with `base` ('' when it can)."""
    if base is None:
        return "no 1-worker point with the same settings"
    if point.cores_per_worker is None or base.cores_per_worker is None:
        return "cores per worker unknown or unequal across runs"
    if point.cores_per_worker != base.cores_per_worker:
        return (f"cores per worker differ: {point.cores_per_worker} at {point.config['scale']} vs "
                f"{base.cores_per_worker} at 1")
    return ""


def add_scaling_efficiency(points: Sequence[Point]) -> None:
    """Efficiency only for the same per-replica batch (in the key) and the same cores per worker."""
    by_key = {p.key: p for p in points}
    for p in points:
        base = baseline(p, by_key)
        p.efficiency_note = refusal(p, base)
        if not p.efficiency_note:
            p.efficiency = stats.scaling_efficiency(p.rate, p.config["scale"], base.rate)


def run_efficiency(points: Sequence[Point]) -> Dict[str, float]:
    """Each ok run's own scaling efficiency (run path -> value) vs its 1-worker point's mean."""
    by_key = {p.key: p for p in points}
    result = {}
    for p in points:
        base = baseline(p, by_key)
        refused = refusal(p, base)
        for run in p.runs:
            result[run.path] = (float("nan") if refused else
                                stats.scaling_efficiency(run.rate, p.config["scale"], base.rate))
    return result


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Two points that differ only in `column`: `b` relative to `a`."""

    column: str
    a: Point
    b: Point

    @property
    def ratio(self) -> float:
        a = self.a.rate
        return self.b.rate / a if a > 0 else float("nan")


def compare(points: Sequence[Point], column: str, a_value, b_value, settled: Sequence[str] = ()) -> List[Comparison]:
    """Every pair of points equal except for column = a_value vs b_value (and the `settled` keys,
    which follow from the column's value: e.g. the wait of emulated compute)."""
    loose = lambda config: _key({k: v for k, v in config.items() if k not in settled})  # noqa: E731
    by_key = {loose(p.config): p for p in points}
    pairs = []
    for p in points:
        if p.config.get(column) != a_value:
            continue
        other = by_key.get(loose({**p.config, column: b_value}))
        if other is not None:
            pairs.append(Comparison(column, p, other))
    return pairs


def varying(points: Sequence[Point], exclude: Sequence[str] = ()) -> List[str]:
    """Config keys whose value differs between points (in a stable order)."""
    keys = sorted({k for p in points for k in p.config} - set(exclude))
    return [k for k in keys if len({repr(p.config.get(k)) for p in points}) > 1]


_ORDER = {name: i for i, name in enumerate(STRATEGIES)}  # the traits table's order; others last


def rate_label(points: Sequence[Point]) -> str:
    """The rate column's name: '<unit>/sec' when every point counts the same unit (tfbench.workloads)."""
    units = sorted({p.unit for p in points})
    return f"{units[0]}/sec" if len(units) == 1 else "rate/sec (" + ", ".join(units) + ")"


def order_key(config: Dict):
    """Tables and legends list points by model, mode, strategy, batch, then workers."""
    strategy = config.get("strategy")
    order = _ORDER.get(strategy, len(_ORDER))
    return (str(config.get("model")), config.get("image_size") or 0, str(config.get("mode")), order,
            config.get("batch_size") or 0, config.get("scale") or 0, config.get("num_ps") or 0,
            str(config.get("placement")), str(config.get("device")), repr(sorted(config.items())))
