"""`python -m tfbench --tune`: the strategy's knobs tried on the run's own setting, the best kept.

The grid is tfbench.config.knobs.TUNE_GRID for the strategy: its default first, then each knob's
other values one at a time. Every point is a whole `python -m tfbench` run (a fresh process, as a
sweep point), in <logdir>/<run_id>/points/. A point's rate is its cluster images/sec with an
interval from its own step-time 95% CI, widened to at least NOISE of the rate (run-to-run noise
on a shared machine); repeats average. Where the best and the runner-up overlap and time is
left, both run again, alternating. The best must beat the default beyond both intervals to
replace it; otherwise the default stays best and the record says so. No point (or repeat) is
started that the budget left would not see to its end, at the mean time of a point so far. tune.json
holds the grid, tune.md its table; the winner of a whole grid goes to the store sweeps read
(tfbench.results.tuned), under this machine's key; a grid the budget cut short saves nothing, as
a best of part of it is no tuning.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import statistics
import sys
import time
from typing import Dict, List, Optional

from tfbench.app.child_run import command_flags, last_line, run_command
from tfbench.config import RunConfig, knobs
from tfbench.measure import environment, startup
from tfbench.results import records, rundir, tuned

NOISE = 0.05  # the least relative half-width of a point's interval
POINT_TIMEOUT_S = 900.0


@dataclasses.dataclass
class Point:
    index: int
    knobs: Dict[str, object]
    runs: List[dict] = dataclasses.field(default_factory=list)

    @property
    def rates(self) -> List[float]:
        return [r["images_per_sec"] for r in self.runs if r.get("status") == "ok"]

    @property
    def rate(self) -> Optional[float]:
        return statistics.fmean(self.rates) if self.rates else None

    @property
    def half_width(self) -> float:
        """Half-width of the rate's interval: the spread of repeats, or one run's own CI, at least NOISE."""
        rate = self.rate or 0.0
        if len(self.rates) >= 2:
            spread = statistics.stdev(self.rates) / len(self.rates) ** 0.5 * 2
        else:
            spread = max((r.get("ci_share", 0.0) for r in self.runs if r.get("status") == "ok"), default=0.0) * rate
        return max(spread, NOISE * rate)

    def beats(self, other: "Point") -> bool:
        return (self.rate or 0) - self.half_width > (other.rate or 0) + other.half_width

    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.knobs.items())


def run_point(config: RunConfig, point: Point, points_dir: str) -> dict:
    run_id = f"p{point.index}-r{len(point.runs)}"
    point_config = config.replace(logdir=points_dir, run_id=run_id, **point.knobs)
    argv = [sys.executable, "-m", "tfbench", *command_flags(point_config)]
    out, err = (os.path.join(points_dir, f"{run_id}.{kind}") for kind in ("out", "err"))
    started = time.time()
    env = {k: v for k, v in os.environ.items() if k != startup.LAUNCHED_ENV}  # each point's start-up is its own
    code = run_command(argv, out, err, POINT_TIMEOUT_S, env)
    result = {"run_id": run_id, "elapsed_s": round(time.time() - started, 1), "status": "failed"}
    path = os.path.join(points_dir, run_id, "results.jsonl")
    cluster = next((r for r in records.read(path) if r.get("kind") == "cluster"), None) if os.path.exists(path) else None
    if code != 0 or not cluster or cluster.get("status") == "failed":
        result["reason"] = last_line(err) or f"exit code {code}"
        return result
    st = cluster["stats"]
    result.update(status="ok", images_per_sec=records.unit_rate(cluster), step_ms=st["mean_s"] * 1e3,
                  ci_share=st["ci95_s"] / st["mean_s"] if st.get("mean_s") else 0.0,
                  communication_ms=((cluster.get("step_breakdown") or {}).get("mean_s") or {}).get("communication", 0)
                  * 1e3)
    return result


def tune(config: RunConfig, budget_s: float, store: str) -> int:
    """Runs the grid; prints and writes its table; returns 0 when some point ran."""
    grid = [Point(i, k) for i, k in enumerate(knobs.tune_points(config))]
    run = rundir.create(config.logdir, config.run_id)
    points_dir = os.path.join(run.path, "points")
    os.makedirs(points_dir)
    print(f"tfbench: tuning {config.strategy}: {len(grid)} points, budget {budget_s:g} s -> {run.path}", flush=True)
    started = time.time()

    def time_for(points: int) -> bool:  # the budget left covers `points` more, at the mean time of one so far
        took = [r["elapsed_s"] for p in grid for r in p.runs]
        return budget_s - (time.time() - started) > points * (statistics.fmean(took) if took else 0.0)

    for point in grid:
        if not time_for(1):
            break
        _run(config, point, points_dir)
    ran = [p for p in grid if p.rate is not None]
    if not ran:
        print("tfbench: tuning ran no point to the end (see the points' .err files)", file=sys.stderr)
        _write(run, config, grid, None, budget_s, store=None)
        return 1
    for _ in range(2):  # repeats where the two best overlap
        ranked = sorted(ran, key=lambda p: -p.rate)
        if len(ranked) < 2 or ranked[0].beats(ranked[1]) or not time_for(2):
            break
        for point in ranked[:2]:
            _run(config, point, points_dir)
    best = max(ran, key=lambda p: p.rate)
    default = grid[0]
    if best is not default and default.rate is not None and not best.beats(default):
        best = default  # not better beyond the noise: the default stays
    _write(run, config, grid, best, budget_s, store if all(p.runs for p in grid) else None)
    return 0


def _run(config: RunConfig, point: Point, points_dir: str) -> None:
    result = run_point(config, point, points_dir)
    point.runs.append(result)
    rate = f"{result['images_per_sec']:.1f} images/sec" if result["status"] == "ok" else f"FAILED: {result['reason']}"
    print(f"  [{point.index}] {point.label()}: {rate} ({result['elapsed_s']:.0f} s)", flush=True)


def table(grid: List[Point], best: Optional[Point]) -> str:
    rows = ["| point | knobs | runs | images/sec | ± | communication ms | best |", "|---|---|---|---|---|---|---|"]
    for p in grid:
        comm_ms = [r["communication_ms"] for r in p.runs if r.get("status") == "ok"]
        rows.append(f"| {p.index} | {p.label()} | {len(p.runs)} | "
                    + (f"{p.rate:.1f} | {p.half_width:.1f} | {statistics.fmean(comm_ms):.1f}" if p.rate else "– | – | –")
                    + f" | {'**best**' if p is best else ''} |")
    return "\n".join(rows)


def _write(run, config: RunConfig, grid: List[Point], best: Optional[Point], budget_s: float,
           store: Optional[str]) -> None:
    env = environment.collect()
    default = grid[0]
    entry = None
    if best is not None:
        entry = {"knobs": best.knobs, "images_per_sec": best.rate, "default_images_per_sec": default.rate,
                 "beyond_noise": best is not default, "tune_run": run.run_id,
                 "measured": datetime.date.today().isoformat(), "tfbench_commit": env.get("tfbench_commit")}
    document = {"setting": tuned.setting_key(config.to_dict()), "strategy": config.strategy,
                "noise": NOISE, "budget_s": budget_s, "grid": knobs.TUNE_GRID[config.strategy],
                "whole_grid": all(p.runs for p in grid),
                "points": [{"index": p.index, "knobs": p.knobs, "runs": p.runs, "images_per_sec": p.rate,
                            "half_width": p.half_width if p.rate else None} for p in grid],
                "best": entry, "environment": env}
    with open(os.path.join(run.path, "tune.json"), "w") as f:
        json.dump(document, f, indent=2, default=str)
    text = table(grid, best)
    verdict = ("no point finished" if best is None else
               f"best: {best.label()} ({best.rate:.1f} images/sec"
               + (f", default {default.rate:.1f})" if best is not default and default.rate else ")")
               + ("" if best is not default else "; the default: nothing beat it beyond the noise"))
    with open(os.path.join(run.path, "tune.md"), "w") as f:
        f.write(f"# Tuning of {config.strategy}\n\n{document['setting']}\n\n{text}\n\n{verdict}\n")
    print(text + "\n" + verdict, flush=True)
    if entry is not None and store is None:
        print(f"not saved: the budget of {budget_s:g} s ended before points "
              f"{', '.join(str(p.index) for p in grid if not p.runs)} ran", flush=True)
    if entry is not None and store is not None and store != "none":
        path = tuned.store_path(store)
        where = tuned.save(config.to_dict(), config.strategy, entry, path)
        print(f"saved to {path} for this machine ({where})", flush=True)
