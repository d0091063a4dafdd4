"""python -m tools.model fit|validate RUN_OR_SWEEP_DIR... : the model fitted on tfbench's own runs.

  fit       writes the parameters file (--out): compute per image for each model, mode,
            precision, image size, batch and cores seen; each link's alpha and beta from its
            runs' link probes; the ps apply; per strategy a fixed overhead and the share of the
            link its protocol gets; bytes per step against the equations. Every figure names the
            runs it came from.
  validate  fits on part of the runs and predicts the others (held out by worker count and by link
            rate), printing per held-out run: measured, predicted, error; then the median and the
            largest absolute error.

Every run directory at or below the paths is read (a sweep's, or single runs); runs the model
cannot use (failed, forward-only, no step split) are listed with the reason.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import List, Sequence, Tuple

from absl import flags

from tfbench.config.errors import ConfigError
from tfbench.measure import memory
from tfbench.measure import variables as variables_lib
from tfbench.perfmodel import fit as fit_lib
from tfbench.perfmodel import params as params_lib
from tfbench.perfmodel import shards
from tfbench.perfmodel import validate as validate_lib
from tfbench.perfmodel.observations import Observation, from_run
from tools.rundirs.runs import find_runs

FLAGS = flags.FLAGS


def define_flags() -> None:
    if "hold_out_link" in FLAGS:
        return
    flags.DEFINE_string("out", "params.json", "fit: the parameters file to write.")
    flags.DEFINE_string("hold_out_link", "", "validate: the link whose runs are predicted from the others' fit; "
                        "default: the middle one of the runs' links by rate.")
    flags.DEFINE_string("report_format", "table", "validate: table or csv.")


def help_groups():
    return [("Fit", ["out"]), ("Validate", ["hold_out_link", "report_format"])]


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
        data = fit_lib.fit(found)
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
    return "\n".join(lines)


def strategy_line(key: str, data: dict, named: bool = True) -> str:
    """One strategy's fitted overhead and the second parameter its runs fixed (link share or chi)."""
    e, eff, chi = data["overhead_s"][key], data["link_efficiency"].get(key), data.get("duplex_chi", {}).get(key)
    second = (f"duplex chi {chi['value']:.2f} (link share 1)" if chi else f"link share {eff['value']:.2f}" if eff
              else "link share 1 and duplex chi 0 (not fitted: too few runs)")
    return (f"{key}: " if named else "") + (f"overhead {e['value_s'] * 1e3:.1f} ms per step, {second} "
                                            f"({len(e['from_runs'])} run{'s' if len(e['from_runs']) > 1 else ''})")


def validate_main(argv) -> int:
    try:
        if FLAGS.report_format not in ("table", "csv"):
            raise ConfigError(f"--report_format={FLAGS.report_format!r} is unknown; choose table or csv")
        found, skipped = observations(_paths(argv))
        rows = validate_lib.validate(found, FLAGS.hold_out_link)
        if not rows:
            raise ConfigError("nothing to hold out: the runs need more than one worker count or link rate")
    except (ConfigError, ValueError, params_lib.ParamsError) as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    print(render(rows, FLAGS.report_format))
    for run_id, why in skipped:
        print(f"not used: {run_id}: {why}")
    print(summary_line(validate_lib.summary(rows)))
    return 0


COLUMNS = ("split", "run_id", "strategy", "num_workers", "link", "measured_images_per_sec",
           "predicted_images_per_sec", "error", "bottleneck")


def row_values(row: validate_lib.Row) -> List[str]:
    o = row.observation
    strategy = o.strategy + (f" ({'sync' if o.ps_sync else 'async'}, {o.ps_placement})"
                             if o.strategy == "parameter_server" else "")
    predicted = "-" if row.predicted_images_per_sec is None else f"{row.predicted_images_per_sec:.2f}"
    error = row.note if row.error is None else f"{row.error:+.1%}"
    return [row.split, o.run_id, strategy, str(o.num_workers), o.link, f"{o.images_per_sec:.2f}", predicted, error,
            row.bottleneck]


def text_table(rows: Sequence[Sequence[str]], columns: Sequence[str], fmt: str = "table") -> str:
    """Rows as plain CSV (header first) or as left-aligned text columns."""
    if fmt == "csv":
        import csv
        import io

        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
        return out.getvalue().rstrip("\n")
    widths = [max(len(c), *(len(v[i]) for v in rows)) for i, c in enumerate(columns)]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in [list(columns)] + list(rows))


def render(rows: Sequence[validate_lib.Row], fmt: str = "table") -> str:
    return text_table([row_values(r) for r in rows], COLUMNS, fmt)


def summary_line(s: dict) -> str:
    if not s["points"]:
        return "median abs error = n/a (no held-out run could be predicted)"
    return (f"median abs error = {s['median_abs_error']:.1%}, max abs error = {s['max_abs_error']:.1%} over "
            f"{s['points']} held-out runs" + (f" ({s['unpredicted']} could not be predicted)" if s["unpredicted"] else ""))
