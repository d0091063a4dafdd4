"""A sweep's tuning on the spot (its `tune_budget_s`, make run's): before the points, each setting
and strategy a `tuning: best` point asks for and this machine has no saved tuning of is tuned, as
`python -m tfbench --tune` tunes it, within the budget; a tuning that ran its whole grid goes to
the user's cache of tunings (tfbench.results.tuned), for this sweep's points and every later sweep
on this machine, so the budget is spent once per machine and setting. The tunings' runs are in
<sweep_dir>/tunings/, which the sweep's report leaves out (`python -m tools.report` of that folder
reads them).

The strategies with the smallest grids go first, so that the budget completes as many tunings as
it can. A tuning whose grid would not fit in what is left (its points at the seconds the slowest
point of the tunings so far took, with its share of that tuning's own start-up and the gaps between
its runs: points of other strategies differ) is not started, nor is one
of no knobs: the strategy is measured at its defaults, labelled as not tuned on this machine, a
note says why, and the report's findings rank no strategy on defaults (tools.report.findings);
the next sweep with a budget tunes it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from typing import Callable, List, Tuple

import tfbench.config as config_lib
from tfbench.app.child_run import last_line, run_command
from tfbench.config import knobs
from tfbench.results import tuned
from tools.sweep import grid as grid_lib

GRACE_S = 60.0  # beyond its budget, a tuning's last point may still be ending


def needed(grid: grid_lib.Grid, logdir: str) -> List[grid_lib.Point]:
    """The default points of the settings and strategies to tune here (one each), smallest grid first."""
    if "best" not in grid.tuning:
        return []
    points, _ = grid_lib.expand(dataclasses.replace(grid, tuning=("default",), repeats=1), logdir)
    wanted = []
    for point in points:
        config = config_lib.RunConfig(**{**point.values, **grid.fixed, "logdir": logdir})
        if knobs.tunable(config) and tuned.best(config.to_dict(), config.strategy) is None:
            wanted.append((len(knobs.tune_points(config)), point))
    return [point for _, point in sorted(wanted, key=lambda sized: sized[0])]


def run(grid: grid_lib.Grid, sweep_dir: str, log: Callable[[str], None] = print) -> List[str]:
    """Tunes what `needed` names within grid.tune_budget_s; returns the sweep's notes about it."""
    tunings_dir = os.path.join(sweep_dir, "tunings")
    left, took, notes = grid.tune_budget_s, [], []
    for point in needed(grid, os.path.join(sweep_dir, "runs")):
        config = config_lib.RunConfig(**{**point.values, **grid.fixed})
        size = len(knobs.tune_points(config))
        estimate = size * max(took) if took else 0.0
        if left <= 0 or estimate > left:
            notes.append(f"{config.strategy} not tuned on the spot: its {size}-point grid needs about {estimate:.0f} s "
                         f"and {max(0.0, left):.0f} s of tune_budget_s ({grid.tune_budget_s:g} s) were left; the next "
                         f"sweep with a budget tunes it, or `python -m tfbench --tune` with its setting")
            continue
        log(f"tuning {config.strategy} here ({size} points, {left:.0f} s of the budget left): {tunings_dir}/{point.id}")
        seconds, saved, reason = _tune(point, grid, tunings_dir, left)
        left -= seconds
        took += _point_seconds(os.path.join(tunings_dir, point.id), seconds)
        notes.append(f"{config.strategy} tuned on the spot in {seconds:.0f} s, kept in {tuned.cache_path()}"
                     if saved else f"{config.strategy} not tuned on the spot: {reason}")
    return notes


def _tune(point: grid_lib.Point, grid: grid_lib.Grid, tunings_dir: str, budget_s: float) -> Tuple[float, bool, str]:
    """(seconds taken, whether the whole grid ran and was saved, why not) of `tfbench --tune` at the point's setting."""
    os.makedirs(tunings_dir, exist_ok=True)
    argv = [sys.executable, "-m", "tfbench", "--tune", f"--tune_budget={budget_s:.0f}",
            f"--tune_store={tuned.cache_path()}", *point.flags(grid.fixed), f"--logdir={tunings_dir}",
            f"--run_id={point.id}"]
    out, err = (os.path.join(tunings_dir, f"{point.id}.{kind}") for kind in ("stdout", "stderr"))
    started = time.monotonic()
    code = run_command(argv, out, err, budget_s + GRACE_S)
    seconds = time.monotonic() - started
    document = _document(os.path.join(tunings_dir, point.id))
    if code != 0 or document is None:
        return seconds, False, last_line(err) or f"python -m tfbench --tune exited with code {code}"
    if not document.get("whole_grid"):
        return seconds, False, f"its grid did not fit in the {budget_s:.0f} s left of tune_budget_s"
    return seconds, True, ""


def _document(run_dir: str):
    try:
        with open(os.path.join(run_dir, "tune.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _point_seconds(run_dir: str, seconds: float) -> List[float]:
    """Seconds of a tuning's slowest point (its repeats), with the point's share of the tuning's own
    overhead: the `seconds` the whole tuning took that none of its runs did."""
    points = [[r["elapsed_s"] for r in p.get("runs", []) if "elapsed_s" in r]
              for p in (_document(run_dir) or {}).get("points", [])]
    points = [runs for runs in points if runs]
    if not points:
        return []
    overhead = max(0.0, seconds - sum(sum(runs) for runs in points)) / len(points)
    return [max(sum(runs) for runs in points) + overhead]
