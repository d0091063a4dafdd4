"""python -m tools.sweep --config=tools/sweeps/quick.yaml [--sweep_dir=DIR] [axis flags]

Runs a grid of tfbench configurations one after another (each point a fresh tfbench process, so
no point inherits another's threads or memory), records each point's outcome in the sweep
directory, and ends with the report over everything the sweep ran. Re-running the same command
resumes: points already done are skipped, failed or unfinished ones get a new run id.

Axis flags take comma-separated values and replace that axis of --config, e.g.
  python -m tools.sweep --strategy=multi_worker_mirrored,parameter_server --num_workers=1,2 \\
      --batch_size=16 --image_size=64 --set=num_steps=5 --sweep_dir=sweeps/mine
Exit code: 0 every point done, 1 some point failed, 2 bad input.
"""
from __future__ import annotations

import dataclasses
import os
import shlex
import sys
import time
from typing import Callable, Dict, Optional, Sequence, Tuple

import yaml
from absl import app, flags

from tfbench.app.child_run import last_line, run_command
from tfbench.config import helptext
from tfbench.config.errors import ConfigError
from tools.report import cli as report
from tools.rundirs.runs import load_run
from tools.rundirs.sweep_state import DONE, FAILED, SweepDir
from tools.sweep import grid as grid_lib

FLAGS = flags.FLAGS
PROG = "tools.sweep"
DEFAULT_COMMAND = (sys.executable, "-m", "tfbench")
# After the per-point timeout, tfbench (given the same --deadline) should have ended its own
# tasks; only then is its process group stopped from here.
KILL_GRACE_S = 20.0


@dataclasses.dataclass(frozen=True)
class SweepResult:
    done: int
    failed: int
    skipped: int
    notes: Tuple[str, ...]


def run_sweep(sweep_dir: str, grid: grid_lib.Grid, command: Sequence[str] = DEFAULT_COMMAND,
              log: Callable[[str], None] = print, kill_grace_s: float = KILL_GRACE_S) -> SweepResult:
    """Runs every point of `grid` not yet done in `sweep_dir`; a failed point never stops the sweep."""
    sweep = SweepDir(os.path.abspath(sweep_dir))
    stored = sweep.read_spec()
    if stored and not grid_lib.Grid.from_dict(stored["grid"]).same_points(grid):
        raise ConfigError(f"{sweep_dir} holds a sweep over a different grid; resume it without grid flags "
                          f"or give another --sweep_dir")
    points, notes = grid_lib.expand(grid, sweep.runs_dir)
    sweep.write_spec({"grid": grid.to_dict(), "points": [p.id for p in points], "notes": notes,
                      "command": list(command)})
    for note in notes:
        log(f"note: {note}")
    latest = sweep.latest()
    done = failed = skipped = 0
    for i, point in enumerate(points, 1):
        prefix = f"[{i}/{len(points)}] {point.id}"
        previous = latest.get(point.id)
        if previous and previous.get("status") == DONE:
            log(f"{prefix}: done earlier (run {previous.get('run_id')})")
            skipped += 1
            continue
        log(f"{prefix}: running")
        attempt = run_point(sweep, point, grid, command, kill_grace_s)
        sweep.record(attempt)
        if attempt["status"] == DONE:
            done += 1
            log(f"{prefix}: done in {attempt['elapsed_s']:.0f} s, {attempt['rate']:.1f} {attempt['unit']}/sec")
        else:
            failed += 1
            log(f"{prefix}: FAILED in {attempt['elapsed_s']:.0f} s: {attempt['reason']}")
    return SweepResult(done=done, failed=failed, skipped=skipped, notes=tuple(notes))


def run_point(sweep: SweepDir, point: grid_lib.Point, grid: grid_lib.Grid, command: Sequence[str],
              kill_grace_s: float) -> Dict:
    """Runs one attempt of `point` under a fresh run id and returns its points.jsonl record."""
    run_id = sweep.next_run_id(point.id)
    point_flags = point.flags(grid.fixed)
    if grid.timeout_s > 0 and "deadline" not in grid.fixed:
        point_flags.append(f"--deadline={grid.timeout_s:g}")
    argv = list(command) + point_flags + [f"--logdir={sweep.runs_dir}", f"--run_id={run_id}"]
    stdout_path, stderr_path = sweep.log_paths(run_id)
    limit = grid.timeout_s + kill_grace_s if grid.timeout_s > 0 else None
    start = time.time()
    returncode = run_command(argv, stdout_path, stderr_path, limit)
    elapsed = time.time() - start
    status, reason, rate, unit = _outcome(returncode, os.path.join(sweep.runs_dir, run_id), stderr_path, limit)
    attempt = {"point_id": point.id, "run_id": run_id, "status": status, "reason": reason,
               "returncode": returncode, "elapsed_s": round(elapsed, 3), "finished_at": time.time(),
               "values": {k: list(v) if isinstance(v, tuple) else v for k, v in {**point.values, **point.knobs}.items()},
               "repeat": point.repeat, "argv": argv}
    if rate is not None:
        attempt.update(rate=rate, unit=unit)  # the cluster's rate in the workload's unit
    return attempt


def _outcome(returncode: Optional[int], run_dir: str, stderr_path: str,
             limit: Optional[float]) -> Tuple[str, str, Optional[float], str]:
    """(status, reason, rate, its unit): done needs exit code 0 and an ok cluster record."""
    last = last_line(stderr_path)
    if returncode is None:
        return FAILED, f"timed out after {limit:g} s" + (f"; last output: {last}" if last else ""), None, ""
    if returncode != 0:
        return FAILED, last or f"exit code {returncode}", None, ""
    run = load_run(run_dir) if os.path.exists(os.path.join(run_dir, "results.jsonl")) else None
    if run is None or not run.ok:
        return FAILED, "exit code 0 but no ok cluster record in results.jsonl", None, ""
    return DONE, "", run.rate, run.unit


# ---- command line ----------------------------------------------------------------------------

def define_flags() -> None:
    if "sweep_dir" in FLAGS:
        return
    flags.DEFINE_string("config", "", "YAML sweep file: axes (tfbench flag: [values]), repeats, fixed, timeout_s.")
    flags.DEFINE_string("sweep_dir", "", "Directory of the sweep; default sweeps/<config file name>.")
    for name in grid_lib.AXES:
        flags.DEFINE_list(name, None, f"Values of --{name} to sweep (replaces the config's axis).")
    flags.DEFINE_list("tuning", None, "default and/or best: each strategy at its knobs' defaults, and at the knobs a "
                                      "saved tuning chose (tools/sweeps/tuned.json; a point of its own only where "
                                      "they differ). Replaces the config's tuning.")
    flags.DEFINE_integer("repeats", None, "Runs of every point (replaces the config's repeats).")
    flags.DEFINE_multi_string("set", None, "flag=value passed to every point, e.g. --set=num_steps=5.")
    flags.DEFINE_float("timeout", None, "Seconds one point may take (0: no limit); also passed as --deadline.")
    flags.DEFINE_string("command", "", "Command that runs one point, given tfbench flags; "
                                       "default: this Python with -m tfbench.")
    flags.DEFINE_boolean("dry_run", False, "List the points (and dropped combinations) without running them.")
    flags.DEFINE_boolean("report", True, "Run the report over the sweep directory at the end.")


def supplied_grid() -> Optional[grid_lib.Grid]:
    """The grid the command line describes, or None when it describes none (resume as stored)."""
    d: Dict = {}
    if FLAGS.config:
        try:
            with open(FLAGS.config, encoding="utf-8") as f:
                d = yaml.safe_load(f) or {}
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"--config={FLAGS.config}: {e}".splitlines()[0]) from None
        if not isinstance(d, dict):
            raise ConfigError(f"--config={FLAGS.config} must hold a mapping of sweep keys")
    given = bool(FLAGS.config)
    for name in grid_lib.AXES:
        if FLAGS[name].value is not None:
            d[name], given = FLAGS[name].value, True
    if FLAGS.repeats is not None:
        d["repeats"], given = FLAGS.repeats, True
    if FLAGS.tuning is not None:
        d["tuning"], given = FLAGS.tuning, True
    if FLAGS.set:
        fixed = dict(d.get("fixed") or {})
        for item in FLAGS.set:
            name, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"--set={item!r} must be flag=value")
            fixed[name.strip().lstrip("-")] = value
        d["fixed"], given = fixed, True
    return grid_lib.Grid.from_dict(d) if given else None


def resolve(sweep: SweepDir) -> grid_lib.Grid:
    grid = supplied_grid()
    if grid is None:
        stored = sweep.read_spec()
        if stored is None:
            raise ConfigError("nothing to sweep: give --config=FILE or axis flags such as --strategy=a,b")
        grid = grid_lib.Grid.from_dict(stored["grid"])
    if FLAGS.timeout is not None:
        if FLAGS.timeout < 0:
            raise ConfigError(f"--timeout must be 0 (none) or positive seconds, got {FLAGS.timeout}")
        grid = dataclasses.replace(grid, timeout_s=FLAGS.timeout)
    return grid


def main(argv) -> int:
    if len(argv) > 1:
        helptext.fail_usage(f"unexpected arguments: {' '.join(argv[1:])}", PROG)
    name = os.path.splitext(os.path.basename(FLAGS.config))[0] if FLAGS.config else "sweep"
    sweep = SweepDir(os.path.abspath(FLAGS.sweep_dir or os.path.join("sweeps", name)))
    command = shlex.split(FLAGS.command) if FLAGS.command else list(DEFAULT_COMMAND)
    try:
        grid = resolve(sweep)
        points, notes = grid_lib.expand(grid, sweep.runs_dir)  # bad values end here, before anything is written
        if FLAGS.dry_run:
            print("\n".join([f"note: {n}" for n in notes] + [f"{len(points)} point(s):"] + [f"  {p.id}" for p in points]))
            return 0
        print(f"sweep directory: {sweep.path}")
        result = run_sweep(sweep.path, grid, command)
    except ConfigError as e:
        helptext.fail_usage(str(e), PROG)
    except KeyboardInterrupt:
        print("interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    print(f"{result.done} point(s) done now, {result.skipped} done earlier, {result.failed} failed")
    if FLAGS.report:
        print(report.build(sweep.path).markdown)
    return 1 if result.failed else 0


def help_groups():
    return [("Sweep", ["config", "sweep_dir", "tuning", "repeats", "set", "timeout", "command", "dry_run", "report"]),
            ("Axes (comma-separated values; each replaces that axis of --config)", list(grid_lib.AXES))]


def run() -> None:
    """`python -m tools.sweep` (tools/sweep/__main__.py)."""
    app.run(main, flags_parser=helptext.parser(__doc__, help_groups, PROG, define_flags))
