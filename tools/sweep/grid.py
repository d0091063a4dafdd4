"""A sweep grid: axes of tfbench flags expanded into runnable points with stable ids.

Point ids are built from the point's values only (never from its position in the grid), so a
re-run of the same sweep finds the points it already ran. Combinations tfbench would reject are
dropped here, with tfbench's own one-line reason, instead of costing a process start each; a
value that every one of its combinations loses is refused (see expand).
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Dict, List, Tuple

import tfbench.config as config_lib
from cluster.launchers import preflight
from tfbench import workloads
from tfbench.config import strategy_traits
from tfbench.config.errors import ConfigError
from tfbench.config.kinds import kind_of
from tfbench.measure import machine, shards
from tfbench.results import tuned

# Axes in run order (the last varies fastest); repeats are the outermost loop, so that the
# repeats of one point are spread over the sweep rather than measured back to back.
AXES = ("model", "image_size", "mode", "strategy", "num_workers", "num_local_devices", "num_ps", "ps_placement",
        "ps_sync", "ps_staleness_bound", "batch_size", "placement", "device", "network", "link_bandwidth",
        "link_latency", "launcher", "slurm_nodes", "precision", "xla", "compute", "straggler", "zipf_alpha",
        "embedding_rows", "id_layout", "optimizer")
PER_WORKER = "per_worker"  # num_ps: one ps per worker (collocated: a shard of every table on each host)
_PS_ONLY = {"num_ps": 0, "ps_placement": "collocated", "ps_sync": False, "ps_staleness_bound": -1}
_SWEEP_OWNED = ("logdir", "run_id", "knob_source")
# tuning: default runs each strategy at its knobs' defaults; best at a saved tuning's winner
# (tfbench.results.tuned), a point of its own only where that differs from the default. A setting
# tuned only on other machines runs at its defaults, its knobs labelled NOT_TUNED_HERE.
TUNINGS = ("default", "best")
NOT_TUNED_HERE = tuned.NOT_TUNED_HERE
_DEFAULTS = config_lib.RunConfig()
_FIELDS = set(config_lib.RunConfig.names())


def coerce(name: str, value: Any) -> Any:
    """`value` (from YAML or a command line) as the type RunConfig gives flag `name`."""
    if name not in _FIELDS:
        raise ConfigError(f"{name!r} is not a tfbench flag")
    default = getattr(_DEFAULTS, name)
    try:
        if isinstance(default, bool):
            if isinstance(value, str):
                if value.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(value)
                return value.lower() in ("true", "1")
            return bool(value)
        if isinstance(default, tuple):
            items = value.split(",") if isinstance(value, str) else list(value)
            kind = int if name == "profile_steps" else str
            return tuple(kind(str(x).strip()) for x in items if str(x).strip())
        if isinstance(default, int):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
        return type(default)(value)
    except (TypeError, ValueError):
        raise ConfigError(f"--{name}={value!r} is not a valid {type(default).__name__}") from None


def flag_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    return str(value)


def same_cores_per_worker(axes: Dict[str, Tuple[Any, ...]], fixed: Dict[str, Any]) -> Dict[str, Any]:
    """A sweep over cluster sizes that does not fix --cores_per_worker gets the cores per worker of
    its widest point for every point, so its 1-worker baselines are comparable (docs/definitions.md:
    scaling efficiency needs the same cores per worker) instead of taking the whole machine."""
    if "cores_per_worker" in fixed:
        return {}
    widest = max(max(axes["num_workers"]), max(axes["num_local_devices"]))
    if widest <= 1:
        return {}
    from cluster.plan.cores import available_cores

    return {"cores_per_worker": max(1, len(available_cores()) // widest)}


@dataclasses.dataclass(frozen=True)
class Grid:
    """Axes (flag -> values to try), repeats of every point, and flags fixed for all points."""

    axes: Dict[str, Tuple[Any, ...]]
    repeats: int = 1
    fixed: Dict[str, Any] = dataclasses.field(default_factory=dict)
    timeout_s: float = 0.0  # per point; 0: none
    tuning: Tuple[str, ...] = ("default",)
    tune_budget_s: float = 0.0  # tuning: best of a setting this machine never tuned: tuned first, in this time

    @classmethod
    def from_dict(cls, d: dict) -> "Grid":
        """Validates names and types; an axis left out keeps tfbench's default."""
        d = dict(d or {})
        unknown = set(d) - set(AXES) - {"repeats", "fixed", "timeout_s", "tuning", "tune_budget_s"}
        if unknown:
            raise ConfigError(f"unknown sweep key(s) {', '.join(sorted(unknown))}; axes are {', '.join(AXES)}, "
                              f"other flags go under 'fixed'")
        axes = {}
        for name in AXES:
            values = d.get(name, [getattr(_DEFAULTS, name)])
            values = values if isinstance(values, (list, tuple)) else [values]
            if not values:
                raise ConfigError(f"sweep axis {name!r} has no values")
            axes[name] = tuple(dict.fromkeys(v if (name, v) == ("num_ps", PER_WORKER) else coerce(name, v)
                                             for v in values))
        fixed = {}
        for name, value in (d.get("fixed") or {}).items():
            if name in _SWEEP_OWNED:
                raise ConfigError(f"--{name} is set by the sweep for every point; remove it from 'fixed'")
            if name in AXES:
                raise ConfigError(f"{name!r} is a sweep axis; give it as an axis, not under 'fixed'")
            fixed[name] = coerce(name, value)
        fixed.update(same_cores_per_worker(axes, fixed))
        repeats = int(d.get("repeats", 1))
        if repeats < 1:
            raise ConfigError(f"repeats must be at least 1, got {repeats}")
        timeout_s = float(d.get("timeout_s", 0.0))
        if timeout_s < 0:
            raise ConfigError(f"timeout_s must be 0 (none) or positive, got {timeout_s}")
        tuning = d.get("tuning", ["default"])
        tuning = tuple(dict.fromkeys(tuning if isinstance(tuning, (list, tuple)) else [tuning]))
        if not tuning or any(t not in TUNINGS for t in tuning):
            raise ConfigError(f"sweep key 'tuning' takes {' and/or '.join(TUNINGS)}, got {list(tuning)}")
        tune_budget_s = float(d.get("tune_budget_s", 0.0))
        if tune_budget_s < 0:
            raise ConfigError(f"tune_budget_s must be 0 (tune nothing) or positive seconds, got {tune_budget_s:g}")
        return cls(axes=axes, repeats=repeats, fixed=fixed, timeout_s=timeout_s, tuning=tuning,
                   tune_budget_s=tune_budget_s)

    def to_dict(self) -> dict:
        d = {name: [list(v) if isinstance(v, tuple) else v for v in values] for name, values in self.axes.items()}
        d["repeats"] = self.repeats
        d["fixed"] = {k: list(v) if isinstance(v, tuple) else v for k, v in self.fixed.items()}
        d["timeout_s"] = self.timeout_s
        d["tuning"] = list(self.tuning)
        d["tune_budget_s"] = self.tune_budget_s
        return d

    def same_points(self, other: "Grid") -> bool:
        """True when both grids describe the same runs (the timeout may differ)."""
        return (self.axes, self.repeats, self.fixed, self.tuning) == (other.axes, other.repeats, other.fixed,
                                                                       other.tuning)


@dataclasses.dataclass(frozen=True)
class Point:
    id: str
    values: Dict[str, Any]  # every axis, normalised
    repeat: int
    knobs: Dict[str, Any] = dataclasses.field(default_factory=dict)  # a saved tuning's, off their defaults
    knob_source: str = ""

    def flags(self, fixed: Dict[str, Any]) -> List[str]:
        """tfbench flags for this point (the sweep adds --logdir and --run_id)."""
        merged = {**self.values, **fixed, **self.knobs}
        if self.knob_source:
            merged["knob_source"] = self.knob_source
        return [f"--{name}={flag_value(value)}" for name, value in merged.items()]


def saved_knobs(values: Dict[str, Any], fixed: Dict[str, Any], logdir: str,
                tunes_here: bool = False) -> Tuple[Dict[str, Any], str]:
    """(the knobs a saved tuning of this machine chose that differ from their defaults, where they
    came from); tuned.NotTunedHere when only other machines tuned the setting (or none did, in a
    sweep that tunes on the spot: `tunes_here`), ConfigError when none did."""
    config = config_lib.RunConfig(**{**values, **fixed, "logdir": logdir})
    try:
        saved = tuned.best_knobs(config)
    except tuned.NotTunedHere:
        raise
    except ConfigError as e:
        if not tunes_here:
            raise
        raise tuned.NotTunedHere(str(e), []) from None
    chosen = {k: v for k, v in saved.items() if getattr(_DEFAULTS, k) != v}
    if not chosen:
        return {}, ""
    entry = tuned.best(config.to_dict(), config.strategy)
    return chosen, f"tuned {entry.get('measured')} at {entry.get('tfbench_commit')}"


def point_id(values: Dict[str, Any], repeat: int, tuned_point: bool = False) -> str:
    """E.g. parameter_server-w2-ps1-b16-train-soft-cpu-resnet50-64px-r0."""
    parts = [values["strategy"], f"w{values['num_workers']}"]
    traits = strategy_traits.get(values["strategy"])
    if traits.local_devices:
        parts.append(f"d{values['num_local_devices']}")
    if traits.ps_tasks:
        parts.append(f"ps{values['num_ps']}" + ("sep" if values["ps_placement"] == "separate" else "")
                     + ("sync" if values["ps_sync"] else "")
                     + (f"ssp{values['ps_staleness_bound']}" if values.get("ps_staleness_bound", -1) >= 0 else ""))
    parts += [f"b{values['batch_size']}", values["mode"], values["placement"], values["device"], values["model"]]
    workload = workloads.WORKLOADS.get(values["model"])
    parts += [f"{values['image_size']}px"] if workload is None or "image_size" in workload.own_flags else []
    kind = kind_of(values)
    if kind.emulated_hosts:
        parts.append(f"emu-{values['link_bandwidth'] or 'unshaped'}")
        parts += [f"lat{values['link_latency']:g}ms"] if values.get("link_latency") else []
    if "slurm_nodes" in kind.accepts:
        parts.append(f"slurm-{'n' + str(values['slurm_nodes']) if values['slurm_nodes'] else 'auto'}")
    # Performance axes appear only off their defaults, so ids of sweeps without them stay stable.
    parts += [values["precision"]] if values.get("precision", "fp32") != "fp32" else []
    parts += ["xla"] if values.get("xla") else []
    parts += [f"{values['compute']}-compute"] if values.get("compute", "real") != "real" else []
    parts += [f"slow-{values['straggler'].replace(':', 'x')}"] if values.get("straggler") else []
    for axis, short in (("zipf_alpha", "zipf"), ("embedding_rows", "rows")):  # recommender axes, off default
        if values.get(axis, getattr(_DEFAULTS, axis)) != getattr(_DEFAULTS, axis):
            value = values[axis]  # an integer as it is (4000000, not 4e+06: a run id takes no '+')
            parts.append(f"{short}{value if isinstance(value, int) else format(value, 'g')}")
    for axis in ("id_layout", "optimizer"):
        if values.get(axis, getattr(_DEFAULTS, axis)) != getattr(_DEFAULTS, axis):
            parts.append(values[axis])
    parts += ["tuned"] if tuned_point else []
    parts.append(f"r{repeat}")
    return "-".join(str(p) for p in parts)


def _normalise(values: Dict[str, Any]) -> Dict[str, Any]:
    """ps-only axes take their neutral value off parameter_server (num_ps 0 means one ps; a strategy
    whose ps serve rows only keeps num_ps and ps_placement, and is synchronous by its own step),
    num_local_devices off mirrored (where 0 means one device), and slurm_nodes off Slurm."""
    values = dict(values)
    if values["num_ps"] == PER_WORKER:
        values["num_ps"] = values["num_workers"]
    if "slurm_nodes" not in kind_of(values).accepts:
        values["slurm_nodes"] = _DEFAULTS.slurm_nodes
    traits = strategy_traits.get(values["strategy"])
    if not traits.ps_tasks:
        values.update(_PS_ONLY)
    elif not traits.coordinated:  # ps that serve rows only: no synchronous or bounded mode of their own
        values.update(ps_sync=False, ps_staleness_bound=-1)
    if values["ps_sync"]:
        values["ps_staleness_bound"] = -1  # a synchronous ps has no bound to set
    values["num_ps"] = config_lib.RunConfig(**values).effective_num_ps  # 0: the workload's default
    values["num_local_devices"] = config_lib.effective_num_local_devices(values["strategy"],
                                                                         values["num_local_devices"])
    return values


def expand(grid: Grid, logdir: str) -> Tuple[List[Point], List[str]]:
    """Runnable points in run order, and one note per distinct reason a combination was dropped.

    A value of an axis that no runnable point keeps (unknown, such as --strategy=mwms, or refused
    in every combination, or needing what this machine lacks) is bad input: ConfigError names it
    with tfbench's reason, so a sweep never runs, or reports, less than it was asked for."""
    points: List[Point] = []
    verdicts: Dict[str, str] = {}  # point id -> '' (runnable) or tfbench's reason
    dropped: Dict[str, int] = {}
    kept_values = set()  # (axis, value) of combinations that run
    reasons: Dict[Tuple[str, Any], Dict[str, int]] = {}  # (axis, value) -> reasons its combinations were dropped
    collapsed = at_default = 0
    elsewhere: Dict[str, set] = {}  # strategy -> the machines that tuned its settings, where this one did not
    for repeat in range(grid.repeats):
        for combo in itertools.product(*(grid.axes[name] for name in AXES)):
            values = _normalise(dict(zip(AXES, combo)))
            for tuning in grid.tuning:
                reason = _rejection(values, grid.fixed, logdir)
                try:
                    knob_values, source = saved_knobs(values, grid.fixed, logdir, grid.tune_budget_s > 0) \
                        if tuning == "best" and not reason else ({}, "")
                except tuned.NotTunedHere as e:
                    knob_values, source = {}, NOT_TUNED_HERE
                    elsewhere.setdefault(values["strategy"], set()).update(e.machines)
                pid = point_id(values, repeat, tuned_point=bool(knob_values))
                if pid in verdicts and source == NOT_TUNED_HERE:
                    points = [dataclasses.replace(p, knob_source=NOT_TUNED_HERE) if p.id == pid else p
                              for p in points]  # the default point measures it; its knobs say so
                elif pid in verdicts and tuning == "best" and not knob_values:
                    at_default += 1  # the saved knobs are the defaults: the default point measures them
                elif pid in verdicts:
                    collapsed += 1
                else:
                    verdicts[pid] = reason
                    if reason:
                        dropped[reason] = dropped.get(reason, 0) + 1
                    else:
                        points.append(Point(pid, values, repeat, knob_values, source))
                for axis_value in zip(AXES, combo):
                    if verdicts[pid]:
                        counts = reasons.setdefault(axis_value, {})
                        counts[verdicts[pid]] = counts.get(verdicts[pid], 0) + 1
                    else:
                        kept_values.add(axis_value)
    unselected = [(axis, value, max(counts, key=counts.get)) for (axis, value), counts in reasons.items()
                  if (axis, value) not in kept_values]
    if unselected:  # name the value the reason is about, else one of an axis the sweep varies
        axis, value, reason = min(unselected, key=lambda u: (f"--{u[0]}=" not in u[2], len(grid.axes[u[0]]) == 1))
        raise ConfigError(f"sweep value --{axis}={flag_value(value)} selects no point: {reason}")
    notes = [f"dropped {n} point(s): {reason}" for reason, n in dropped.items()]
    if collapsed:
        notes.append(f"merged {collapsed} point(s) that differ only in axes that do not apply to their "
                     f"strategy (num_ps/ps_placement/ps_sync/ps_staleness_bound: parameter_server; num_local_devices: "
                     f"mirrored) or launcher (slurm_nodes: slurm)")
    if at_default:
        notes.append(f"{at_default} point(s) of tuning: best run at their defaults: the saved tuning kept them "
                     f"(or the strategy has no knob for that setting), so the default point is measured once")
    if elsewhere:
        others = sorted(set().union(*elsewhere.values()))
        notes.append(f"tuning: best of {', '.join(sorted(elsewhere))}: {NOT_TUNED_HERE} ({machine.key()}), so "
                     f"measured at the defaults; " + (f"the saved tunings of these settings were measured on "
                                                      f"{'; '.join(others)}; " if others else "")
                     + "`python -m tfbench --tune` with a setting tunes it here")
    return points, notes


def _rejection(values: Dict[str, Any], fixed: Dict[str, Any], logdir: str) -> str:
    """tfbench's own reason for refusing the combination (or this machine), or '' when it can run."""
    try:
        config = config_lib.validate(config_lib.RunConfig(**{**values, **fixed, "logdir": logdir}))
        shards.check_config(config)
        if config.traits.launcher_ranks:
            preflight.check_horovod()
    except ConfigError as e:
        return str(e)
    return ""

