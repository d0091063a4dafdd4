"""The settings each strategy really has for its communication (its knobs), in one place.

A comparison of strategies is fair only when each runs as a careful user would run it, so every
knob is a flag, validated here, recorded in the run record and HParams (knobs_of), shown in the
dry run and the run table's header (describe), and searched by `python -m tfbench --tune` over
the small, stated grid TUNE_GRID. The knobs and grids themselves are rows of the strategies' traits
(tfbench.config.strategy_traits). Adding a knob: a RunConfig field and flag, a Knob in its
strategy's row, and where the strategy reads it (strategies/<name>.py).
"""
from __future__ import annotations

from typing import Dict, List, Tuple

from tfbench.config import strategy_traits
from tfbench.config.errors import ConfigError
from tfbench.config.strategy_traits import TRAITS, Knob  # noqa: F401 - Knob: the rows' type

PS_PARTITIONERS = ("none", "min_size", "fixed")
PS_PLACERS = ("round_robin", "greedy")
HOROVOD_COMPRESSIONS = ("none", "fp16")  # Horovod's all-reduce takes no bfloat16
SHARD_RULES = ("rotated", "aligned")  # hybrid: tfbench.perfmodel.sparse.ranges.RULES (a test keeps them equal)

# Every strategy's knobs, in the traits table's order (each row of tfbench.config.strategy_traits).
KNOBS: Tuple[Knob, ...] = tuple(k for t in TRAITS.values() for k in t.knobs)
OWNER: Dict[str, str] = {k.name: t.name for t in TRAITS.values() for k in t.knobs}  # knob -> its strategy
# --tune: the grid tried for each strategy, knob by knob from its default (values as flags take them).
TUNE_GRID: Dict[str, Dict[str, Tuple]] = {t.name: dict(t.tune_grid) for t in TRAITS.values() if t.tune_grid}


def knobs_for(strategy: str) -> Tuple[Knob, ...]:
    return strategy_traits.get(strategy).knobs


def knobs_of(config) -> Dict[str, object]:
    """The knob settings of the run's strategy (field -> value), for records, HParams and tables."""
    return {k.name: getattr(config, k.name) for k in knobs_for(config.strategy)}


def describe(config) -> str:
    """One line: the strategy's knobs as flags, e.g. 'mwms_bytes_per_pack=4194304 all_reduce=auto'."""
    text = " ".join(f"{k.name}={_text(getattr(config, k.name))}" for k in knobs_for(config.strategy) if k.shown(config))
    return text + (f" ({config.knob_source})" if config.knob_source else "")


def changed(config: Dict) -> str:
    """The strategy's knobs off their defaults in a config dict ('mwms_bytes_per_pack=4194304'),
    or 'default': how reports tell a tuned point from its default."""
    from tfbench.config.run_config import RunConfig

    defaults = RunConfig()
    off = [f"{k.name}={_text(config.get(k.name))}" for k in knobs_for(config.get("strategy", ""))
           if k.name in config and config.get(k.name) != getattr(defaults, k.name)]
    return " ".join(off) or "default"


FIELDS = tuple(k.name for k in KNOBS) + ("knob_source",)  # config keys a report shows as one knobs label


def _text(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def tunable(config) -> Dict[str, Tuple]:
    """The knobs --tune tries for this run: its strategy's grid, less knobs that change nothing here
    (a partitioner with one ps)."""
    grid = TUNE_GRID.get(config.strategy, {})
    return {k.name: grid[k.name] for k in knobs_for(config.strategy) if k.name in grid and k.tunable(config)}


def tune_points(config) -> List[Dict[str, object]]:
    """--tune's grid for the run's strategy: the default, then each knob's other values one at a
    time (a knob changed alone, so the grid stays small and each point says what it changed)."""
    grid = tunable(config)
    if not grid:
        raise ConfigError(f"--tune has no knobs to try for --strategy={config.strategy}"
                          + (" with one ps (the partitioner needs two or more)" if TUNE_GRID.get(config.strategy)
                             else f"; it tunes {', '.join(TUNE_GRID)}"))
    defaults = {name: getattr(config, name) for name in grid}
    points = [dict(defaults)]
    for name, values in grid.items():
        for value in values:
            if value != defaults[name]:
                points.append(dict(defaults, **{name: value}))
    return points


def check(c) -> None:
    """Knob values and the strategy they belong to; one ConfigError line for the first bad one."""
    def need(ok: bool, message: str) -> None:
        if not ok:
            raise ConfigError(message)

    defaults = type(c)()
    own = {k.name for k in knobs_for(c.strategy)}
    for knob in KNOBS:
        if knob.name not in own and getattr(c, knob.name) != getattr(defaults, knob.name):
            raise ConfigError(f"--{knob.name} applies to --strategy={OWNER[knob.name]} only")
    need(c.mwms_bytes_per_pack >= 0, f"--mwms_bytes_per_pack must be 0 (one pack) or more bytes, "
                                     f"got {c.mwms_bytes_per_pack}")
    need(c.mwms_timeout >= 0, f"--mwms_timeout must be 0 (none) or positive seconds, got {c.mwms_timeout}")
    need(c.horovod_fusion_threshold_mb >= -1,
         f"--horovod_fusion_threshold_mb must be -1 (Horovod's default), 0 (no fusion) or more MiB, "
         f"got {c.horovod_fusion_threshold_mb}")
    need(c.horovod_cycle_time_ms == -1 or c.horovod_cycle_time_ms > 0,
         f"--horovod_cycle_time_ms must be -1 (Horovod's default) or positive, got {c.horovod_cycle_time_ms:g}")
    need(c.horovod_compression in HOROVOD_COMPRESSIONS,
         f"--horovod_compression={c.horovod_compression!r} is unknown; choose {', '.join(HOROVOD_COMPRESSIONS)}")
    need(not (c.horovod_autotune and (c.horovod_fusion_threshold_mb != -1 or c.horovod_cycle_time_ms != -1)),
         "--horovod_autotune chooses the fusion threshold and cycle time itself; leave "
         "--horovod_fusion_threshold_mb and --horovod_cycle_time_ms at -1")
    need(c.ps_partitioner in PS_PARTITIONERS,
         f"--ps_partitioner={c.ps_partitioner!r} is unknown; choose {', '.join(PS_PARTITIONERS)}")
    need(c.hybrid_shard_rule in SHARD_RULES,
         f"--hybrid_shard_rule={c.hybrid_shard_rule!r} is unknown; choose {', '.join(SHARD_RULES)}")
    need(c.ps_placer in PS_PLACERS, f"--ps_placer={c.ps_placer!r} is unknown; choose {', '.join(PS_PLACERS)}")
    need(c.ps_min_shard_bytes >= 1024, f"--ps_min_shard_bytes must be at least 1024, got {c.ps_min_shard_bytes}")
    need(c.ps_partitioner == "min_size" or c.ps_min_shard_bytes == defaults.ps_min_shard_bytes,
         "--ps_min_shard_bytes applies to --ps_partitioner=min_size only")
