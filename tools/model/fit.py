"""python -m tools.model fit|validate RUN_OR_SWEEP_DIR... : the model fitted on tfbench's own runs.

  fit       writes the parameters file (--out): compute per image for each model, mode,
            precision, image size, batch and cores seen; each link's alpha and beta from its
            runs' link probes; the ps apply; per strategy a fixed overhead and the share of the
            link its protocol gets; bytes per step against the equations; and the fit's refits
            (a bootstrap over the runs, tfbench.perfmodel.fitting.spread) that give predict its intervals.
            Every figure names the runs it came from; each fitted number's 90% range is printed.
  validate  fits on part of the runs and predicts the others (held out by worker count and by link
            rate), printing per held-out run: measured, predicted [90% interval], error; then the
            median and the largest absolute error and
            `coverage = X% of held-out points inside their 90% interval, median width Y%`.

Every run directory at or below the paths is read (a sweep's, or single runs); runs the model
cannot use (failed, forward-only, no step split) are listed with the reason.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import List, Optional, Sequence, Tuple

from absl import flags

from tfbench.config.errors import ConfigError
from tfbench.measure import memory
from tfbench.measure import variables as variables_lib
from tfbench.perfmodel import cost, intervals
from tfbench.perfmodel.dense import shards
from tfbench.perfmodel.fitting import fit as fit_lib
from tfbench.perfmodel.fitting import params as params_lib
from tfbench.perfmodel import render as render_lib
from tfbench.perfmodel.fitting import spread as spread_lib
from tfbench.perfmodel.fitting import validate as validate_lib
from tfbench.perfmodel.fitting.observations import Observation, from_run
from tfbench.perfmodel.render import ERROR, INTERVAL, NUMBER, TEXT, Column
from tools.model import pricing
from tools.rundirs.runs import find_runs

FLAGS = flags.FLAGS


def define_flags() -> None:
    if "hold_out_link" in FLAGS:
        return
    flags.DEFINE_string("out", "params.json", "fit: the parameters file to write.")
    flags.DEFINE_string("hold_out_link", "", "validate: the link whose runs are predicted from the others' fit; "
                        "default: the middle one of the runs' links by rate.")
    flags.DEFINE_string("report_format", "table", "validate, report: table, csv or json.")
    pricing.define_flags()


def help_groups():
    return [("Fit", ["out"]), ("Validate", ["hold_out_link", "report_format"]), ("Cost", pricing.NAMES)]


def observations(paths: Sequence[str]) -> Tuple[List[Observation], List[Tuple[str, str]]]:
    """(usable observations, [(run id, why not)]) of every run at or below the paths."""
    found, skipped = [], []
    for path in paths:
        if not os.path.isdir(path):
            raise ConfigError(f"{path}: no such directory")
        for run in find_runs(path):
            config, cluster = run.config, run.cluster or {}
            counted = memory.counts(config) if cluster.get("status") == "ok" else {}
            obs, why = from_run(run.run_id, config, cluster, 4.0 * counted.get("params", 0))
            if obs is not None and obs.strategy == "parameter_server" and obs.num_ps > 1:
                placed = placement(config, obs.num_ps)
                obs = dataclasses.replace(obs, shard_bytes=tuple(float(b) for b in placed.shard_bytes),
                                          shard_variables=placed.shard_variables)
            (found.append(obs) if obs else skipped.append((run.run_id, why)))
    if not found:
        raise ConfigError(f"no run the model can use below {', '.join(paths)}"
                          + (f" ({skipped[0][0]}: {skipped[0][1]})" if skipped else ""))
    return found, skipped


def placement(config: dict, num_ps: int) -> shards.Placement:
    """The run's variables on its k ps as its placer and partitioner put them: a step waits for
    the busiest shard, not |w|/k (LeNet's dense kernel alone is most of |w|)."""
    records = variables_lib.variables(config["model"], int(config["image_size"]), int(config["num_classes"]))
    return shards.place(shards.from_records(records), num_ps, config.get("ps_partitioner", "min_size"),
                        int(config.get("ps_min_shard_bytes", shards.MIN_SHARD_BYTES)),
                        config.get("ps_placer", "round_robin"))


def _paths(argv: List[str]) -> List[str]:
    if len(argv) < 2:
        raise ConfigError("give one or more run or sweep directories")
    return argv[1:]


def fit_main(argv) -> int:
    try:
        found, skipped = observations(_paths(argv))
        data, _ = fit_lib.with_spread(found)
        params_lib.save(FLAGS.out, data)
    except (ConfigError, params_lib.ParamsError) as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    print(describe(data))
    for run_id, why in skipped:
        print(f"not used: {run_id}: {why}")
    print(f"parameters written to {FLAGS.out} (fitted on {len(found)} runs)")
    return 0


def describe(data: dict) -> str:
    lines = [f"compute: {params_lib.describe(e)}: {e['ms_per_image']:.3f} ms per image ({len(e['from_runs'])} runs)"
             for e in data["compute"]]
    lines += [f"link {name}: alpha {e['alpha_s'] * 1e3:.3f} ms, beta {e['beta_bps'] / 1e6:.1f} Mbit/s "
              f"({len(e['from_runs'])} runs' link probes)" for name, e in data["links"].items()]
    lines += [f"ps apply ({key}): {e['value_s'] * 1e3:.1f} ms per update of |w|" for key, e in data["ps_apply_s"].items()]
    lines += [strategy_line(key, data) for key in data["overhead_s"]]
    for c in data["bytes_per_step"]:
        lines.append(f"bytes per step, {c['strategy']} N={c['num_workers']} {c['host']} host: measured "
                     f"{c['measured_bytes'] / 1e6:.2f} MB, equations {c['predicted_bytes'] / 1e6:.2f} MB "
                     f"({c['from_runs'][0]})")
    ranges = spread_lib.parameter_ranges(data)
    if ranges:
        lines.append(f"each fitted number's {intervals.LEVEL:.0%} range over the fit's {len(data['spread']['replicates'])} "
                     "refits (a bootstrap over the runs): " + "; ".join(
                         f"{'.'.join(str(k) for k in path)} {_number(low)}-{_number(high)}" for path, low, high in ranges))
    return "\n".join(lines)


def _number(value: float) -> str:
    """4 significant digits; a fitted value at its bound of 0 within rounding is 0."""
    return "0" if abs(value) < 1e-12 else f"{value:.4g}"


def strategy_line(key: str, data: dict, named: bool = True) -> str:
    """One strategy's fitted overhead and the second parameter its runs fixed (link share or chi)."""
    e, eff, chi = data["overhead_s"][key], data["link_efficiency"].get(key), data.get("duplex_chi", {}).get(key)
    second = (f"duplex chi {chi['value']:.2f} (link share 1)" if chi else f"link share {eff['value']:.2f}" if eff
              else "link share 1 and duplex chi 0 (not fitted: too few runs)")
    return (f"{key}: " if named else "") + (f"overhead {e['value_s'] * 1e3:.1f} ms per step, {second} "
                                            f"({len(e['from_runs'])} run{'s' if len(e['from_runs']) > 1 else ''})")


def validate_main(argv) -> int:
    try:
        fmt = report_format()
        found, skipped = observations(_paths(argv))
        rows = validate_lib.validate(found, FLAGS.hold_out_link)
        if not rows:
            raise ConfigError("nothing to hold out: the runs need more than one worker count or link rate")
        prices = pricing.prices()
    except (ConfigError, ValueError, params_lib.ParamsError) as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    summary = validate_lib.summary(rows)
    notes = [f"not used: {run_id}: {why}" for run_id, why in skipped]
    print(render(rows, fmt, prices, summary_lines(summary) + notes))
    if fmt != "json":
        print("\n".join(notes + summary_lines(summary)), file=sys.stdout if fmt == "table" else sys.stderr)
    return 0


def report_format() -> str:
    if FLAGS.report_format not in render_lib.FORMATS:
        raise ConfigError(f"--report_format={FLAGS.report_format!r} is unknown; choose one of "
                          f"{', '.join(render_lib.FORMATS)}")
    return FLAGS.report_format


COLUMNS = (Column("split", TEXT), Column("run_id", TEXT), Column("strategy", TEXT), Column("num_workers", NUMBER, 0),
           Column("link", TEXT), Column("measured_images_per_sec", NUMBER, 2),
           Column("predicted_images_per_sec", INTERVAL, 2), Column("error", ERROR), Column("bottleneck", TEXT))


def hosts(o: Observation) -> int:
    """The hosts a run used: one per worker, one per ps on a host of its own."""
    separate = o.strategy == "parameter_server" and o.ps_placement == "separate"
    return cost.nodes(o.num_workers, 1, max(1, o.num_ps) if separate else 0)


def row_values(row: validate_lib.Row) -> dict:
    o = row.observation
    strategy = o.strategy + (f" ({'sync' if o.ps_sync else 'async'}, {o.ps_placement})"
                             if o.strategy == "parameter_server" else "")
    return {"split": row.split, "run_id": o.run_id, "strategy": strategy, "num_workers": o.num_workers, "link": o.link,
            "measured_images_per_sec": o.images_per_sec,
            "predicted_images_per_sec": row.interval or row.predicted_images_per_sec,
            "error": row.note if row.error is None else row.error, "bottleneck": row.bottleneck, "nodes": hosts(o)}


def render(rows: Sequence[validate_lib.Row], fmt: str = "table", prices: Optional[cost.Prices] = None,
           facts: Sequence[str] = ()) -> str:
    values = [row_values(r) for r in rows]
    columns = list(COLUMNS)
    if prices is not None and prices.given:
        pricing.add(values, prices, "predicted_images_per_sec", "measured_images_per_sec")
        columns += [Column("nodes", NUMBER, 0)] + pricing.columns(prices, measured=True)
    return render_lib.render(values, columns, fmt, facts if fmt == "json" else (),
                             summary=summary_json(validate_lib.summary(rows)) if fmt == "json" else None)


def summary_json(s: dict) -> dict:
    return {"median_abs_error": s["median_abs_error"], "max_abs_error": s["max_abs_error"], "points": s["points"],
            "coverage": s["coverage"]}


def summary_lines(s: dict) -> List[str]:
    if not s["points"]:
        return ["median abs error = n/a (no held-out run could be predicted)"]
    return [f"median abs error = {s['median_abs_error']:.1%}, max abs error = {s['max_abs_error']:.1%} over "
            f"{s['points']} held-out runs" + (f" ({s['unpredicted']} could not be predicted)" if s["unpredicted"] else ""),
            intervals.coverage_line(s["coverage"])]
