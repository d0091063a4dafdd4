"""python -m tools.model scale SWEEP_DIR [--fit_up_to=6]: the model at 8-16 workers (`make model-scale`).

Fits the model on the sweep's runs with at most --fit_up_to workers and predicts the larger ones,
strategy by strategy (a parameter server by its placement and shards: one ps on a host of its
own, or k = N shards collocated; MWMS; Horovod). Compute per image and the links come from every
fitted run; each strategy's overhead per step and link share from its own fitted runs; a
parameter server with several shards is charged its busiest shard as the run placed its variables.
Prints every run (fitted or held out) with measured and predicted images/sec, the prediction's
90% interval (tfbench.perfmodel.fitting.spread: a bootstrap over the fitted runs, every strategy's fit
redone on each copy) and the error; per
strategy the error at each N, its trend (points per doubling of N, least squares over the largest
fitted N and the held-out ones) and the drift from the largest fitted N to the largest N; what
each fit found and on which runs; every parameter-server run's busiest ps host, its link counter
against the shards it holds; the memory the runs needed (the machine's peak in use and the sum of
the largest run's tasks' peak resident memory, from the runs' monitor records); then
`median abs error = X%` and the largest over the held-out runs,
`coverage = X% of held-out points inside their 90% interval, median width Y%` and the goals
(median <= 10%, max <= 20%, no drift beyond 10 points, coverage >= 80%, width <= 30%).
--format=csv or json prints the runs' table as plain CSV (header first; the rest to standard
error) or one JSON document; --price_per_node_hour and --watts_per_node add each rate's cost.
"""
from __future__ import annotations

import sys
from typing import Dict, List, Optional, Sequence, Tuple

from absl import flags

from tfbench.config.choices import EMULATED_COMPUTE
from tfbench.config.errors import ConfigError
from tfbench.perfmodel import cost, intervals, render
from tfbench.perfmodel.dense import prediction
from tfbench.perfmodel.fitting import fit as fit_lib
from tfbench.perfmodel.fitting import params as params_lib
from tfbench.perfmodel.fitting import scale as scale_lib
from tfbench.perfmodel.fitting import spread as spread_lib
from tfbench.perfmodel.fitting.observations import Observation
from tfbench.perfmodel.render import ERROR, INTERVAL, NUMBER, TEXT, Column
from tools.model import fit, pricing
from tools.rundirs.runs import find_runs

FLAGS = flags.FLAGS
COLUMNS = (Column("strategy", TEXT), Column("workers", NUMBER, 0), Column("use", TEXT), Column("run_id", TEXT),
           Column("measured_images_per_sec", NUMBER, 2), Column("predicted_images_per_sec", INTERVAL, 2),
           Column("error", ERROR), Column("bottleneck", TEXT))


def define_flags() -> None:
    if "fit_up_to" in FLAGS:
        return
    flags.DEFINE_integer("fit_up_to", 6, "Fit on the runs with at most this many workers; predict the others.")
    if "format" not in FLAGS:
        flags.DEFINE_string("format", "table", "table, csv or json.")
    pricing.define_flags()


def help_groups():
    return [("Scale", ["fit_up_to"]), ("Cost", pricing.NAMES), ("Output", ["format"])]


def label(o: Observation) -> str:
    """The strategy and what sets its runs apart: a parameter server's sync, placement and shards."""
    if o.strategy != "parameter_server":
        return o.strategy
    k = "k = N" if o.ps_placement == "collocated" and o.num_ps == o.num_workers else f"{max(1, o.num_ps)} ps"
    return f"parameter_server ({'sync' if o.ps_sync else 'async'}, {o.ps_placement}, {k})"


def families(observations: Sequence[Observation]) -> Dict[str, List[Observation]]:
    """The predicted strategies' runs by label."""
    found: Dict[str, List[Observation]] = {}
    for o in observations:
        if o.predicted:
            found.setdefault(label(o), []).append(o)
    return dict(sorted(found.items()))


def fit_families(training: Sequence[Observation], like: Optional[Dict[str, dict]] = None) -> Dict[str, dict]:
    """{label: parameters fitted on that strategy's runs (compute and links from every run)};
    with `like`, each strategy fits the parameters that fit's did."""
    return {name: fit_lib.fit(group, compute_from=training, like=(like or {}).get(name))
            for name, group in families(training).items()}


def family_rate(fitted: Dict[str, dict], o: Observation) -> Optional[float]:
    data = fitted.get(label(o))
    return fit_lib.predicted_rate(data, o) if data else None


def fits(observations: Sequence[Observation], fit_up_to: int) -> spread_lib.Spread:
    """The fit of every strategy on its runs with N <= fit_up_to (compute and links from every
    such run), with its refits (a bootstrap over those runs); a strategy without such runs is
    left out."""
    if fit_up_to < 1:
        raise ConfigError(f"--fit_up_to must be 1 or more, got {fit_up_to}")
    if not any(o.num_workers > fit_up_to for o in observations if o.predicted):
        raise ConfigError(f"no run has more than --fit_up_to={fit_up_to} workers: nothing to predict")
    training = [o for o in observations if o.num_workers <= fit_up_to]
    return spread_lib.fit_spread(training, fit_families, family_rate)


def rows(observations: Sequence[Observation], fit_up_to: int,
         fitted: Optional[spread_lib.Spread] = None) -> List[scale_lib.Row]:
    """Every predicted strategy's runs, fitted (N <= fit_up_to) and held out, with the prediction
    and its interval of a fit on that strategy's fitted runs (fits())."""
    fitted = fits(observations, fit_up_to) if fitted is None else fitted
    out = []
    for name, group in families(observations).items():
        for o in sorted(group, key=lambda o: (o.num_workers, o.run_id)):
            predicted = family_rate(fitted.point, o)
            s = fit_lib.setting(o, fitted.point[name]) if name in fitted.point else None
            iv = fitted.interval(lambda d, o=o: family_rate(d, o)) if predicted else None
            out.append(scale_lib.Row(name, o.num_workers, o.images_per_sec, predicted, o.num_workers > fit_up_to,
                                     o.run_id, prediction.point(s, o.num_workers).bottleneck if s else "no fitted runs",
                                     iv))
    return out


def parameter_lines(fitted: Dict[str, dict]) -> List[str]:
    """What each strategy's fit found, and on which runs."""
    lines = []
    for name, data in fitted.items():
        for key in data["overhead_s"]:
            lines.append(f"{name}: {fit.strategy_line(key, data, named=False)}: "
                         f"{', '.join(data['overhead_s'][key]['from_runs'])}")
    first = next(iter(fitted.values()), None)
    if first:
        lines += [f"compute: {params_lib.describe(e)}: {e['ms_per_image']:.3f} ms per image, fitted on "
                  f"{', '.join(e['from_runs'])}" for e in first["compute"]]
        lines += [f"link {name}: alpha {e['alpha_s'] * 1e3:.3f} ms, beta {e['beta_bps'] / 1e6:.2f} Mbit/s, the link "
                  f"probes of {len(e['from_runs'])} runs" for name, e in first["links"].items()]
    return lines


def bytes_lines(observations: Sequence[Observation]) -> List[str]:
    """Each parameter-server run's busiest ps host: bytes per global step leaving it, measured by
    its link counter, against the shards as the run placed its variables (in TCP frames, with
    the ACKs of what comes in: tfbench.perfmodel.dense.terms.wire_bytes); the other ps hosts' range.
    Then the largest error of a busiest host."""
    lines, errors = [], []
    for o in sorted(observations, key=lambda o: (label(o), o.num_workers)):
        checks = fit_lib.ps_host_checks(o)
        if not checks:
            continue
        i, p, m = max(checks, key=lambda c: c[1])
        errors.append((m - p) / p)
        line = (f"{label(o)} N={o.num_workers}: busiest ps host (ps {i}) {m / 1e6:.3f} MB measured, "
                f"{p / 1e6:.3f} MB predicted ({(m - p) / p:+.1%})")
        rest = [c for c in checks if c[0] != i]
        if rest:
            extra = [(m - p) / 1e3 for _, p, m in rest]
            line += (f"; the other {len(rest)} {min(c[2] for c in rest) / 1e6:.3f}-{max(c[2] for c in rest) / 1e6:.3f}"
                     f" MB, {min(extra):+.0f} to {max(extra):+.0f} kB off their shards")
        lines.append(line)
    if errors:
        lines.append(f"busiest ps host, measured against the placed shards: largest error {max(errors, key=abs):+.1%} "
                     f"over {len(errors)} run{'s' if len(errors) > 1 else ''}")
    return lines


def memory_mb(paths: Sequence[str]) -> List[Tuple[str, int, float, float]]:
    """[(run id, tasks, sum of the tasks' peak resident MiB, the machine's peak MiB in use)] of
    every run with a monitor record. The sum counts pages the tasks share once per task (an upper
    bound); the machine's figure is what was in use, other users' processes included."""
    found = []
    for path in paths:
        for run in find_runs(path):
            resources = (run.cluster or {}).get("resources") or {}
            peaks = [t.get("rss_mb_peak") for t in (resources.get("tasks") or {}).values() if t.get("rss_mb_peak")]
            if peaks:
                host = float((resources.get("host") or {}).get("mem_used_mb_peak") or 0.0)
                found.append((run.run_id, len(peaks), float(sum(peaks)), host))
    return found


def memory_line(memory: Sequence[Tuple[str, int, float, float]]) -> str:
    run_id, tasks, summed, _ = max(memory, key=lambda m: (m[1], m[2]))
    host = max(m[3] for m in memory)
    return (f"memory: the machine had at most {host / 1024:.1f} GiB in use during a run; the largest run, {run_id} "
            f"({tasks} tasks), {summed / 1024:.1f} GiB summed over its tasks' peak resident memory (shared pages "
            "counted in every task)")


def compute_line(observations: Sequence[Observation]) -> str:
    """What the runs' compute was, and what that means for the cores the workers share."""
    if observations and observations[0].compute == EMULATED_COMPUTE:
        return ("compute: emulated (--compute=emulated): each worker's forward and backward pass a wait that uses no "
                "CPU, so workers sharing this machine's cores do not slow each other's compute; the cores are left "
                "to the protocol (gRPC, collectives, the ps's apply)")
    most = max((o.num_workers for o in observations), default=1)
    return (f"compute: real: up to {most} workers share this machine's cores, their compute corrected by each run's "
            "core share (the mean number of workers pinned to a worker's cores); their gRPC threads and the ps's "
            "apply queue for the same cores, which no correction removes")


def table(found: Sequence[scale_lib.Row], fmt: str = "table", prices: Optional[cost.Prices] = None,
          facts: Sequence[str] = (), hosts: Optional[Dict[str, int]] = None) -> str:
    values = [{"strategy": r.strategy, "workers": r.num_workers, "use": "held out" if r.held_out else "fitted",
               "run_id": r.run_id, "measured_images_per_sec": r.measured,
               "predicted_images_per_sec": r.interval or r.predicted, "error": r.error if r.error is not None else "n/a",
               "bottleneck": r.bottleneck, "nodes": (hosts or {}).get(r.run_id, r.num_workers)} for r in found]
    columns = list(COLUMNS)
    if prices is not None and prices.given:
        pricing.add(values, prices, "predicted_images_per_sec", "measured_images_per_sec")
        columns += [Column("nodes", NUMBER, 0)] + pricing.columns(prices, measured=True)
    return render.render(values, columns, fmt, facts)


def trend_lines(found: Sequence[scale_lib.Row]) -> List[str]:
    lines = []
    for t in scale_lib.trends(found):
        per_n = ", ".join(f"N={n} {scale_lib.points(e)}" for n, e in t.errors.items()) or "n/a"
        slope = "n/a" if t.per_doubling is None else f"{t.per_doubling * 100:+.1f} points"
        drift = ("n/a" if t.drift is None else f"{t.drift * 100:+.1f} points from N={t.from_n} to N={t.to_n}")
        lines.append(f"{t.strategy}: error {per_n}; per doubling of N {slope}; drift {drift}")
    return lines


def summary_lines(found: Sequence[scale_lib.Row], fit_up_to: int) -> List[str]:
    s = scale_lib.summary(found)
    held = sorted({r.num_workers for r in found if r.held_out})
    if not s["points"]:
        return ["median abs error = n/a (no held-out run could be predicted)"]
    span = f"N = {held[0]}-{held[-1]}" if len(held) > 1 else f"N = {held[0]}"
    goals = s["goals"]
    met = lambda name: "met" if goals[name] else "missed"  # noqa: E731
    return [f"median abs error = {s['median_abs_error']:.1%}, max abs error = {s['max_abs_error']:.1%} over "
            f"{s['points']} held-out runs ({span}, fitted on N <= {fit_up_to})"
            + (f"; {s['unpredicted']} could not be predicted" if s["unpredicted"] else ""),
            intervals.coverage_line(s["coverage"]),
            f"goals: median <= {scale_lib.GOAL_MEDIAN:.0%} {met('median')}, max <= {scale_lib.GOAL_MAX:.0%} "
            f"{met('max')}, drift <= {scale_lib.GOAL_DRIFT * 100:.0f} points {met('drift')}"
            + ("" if s["max_drift"] is None else f" (largest {s['max_drift'] * 100:.1f} points)")
            + f", coverage >= {scale_lib.GOAL_COVERAGE:.0%} {met('coverage')}, median width <= "
              f"{scale_lib.GOAL_WIDTH:.0%} {met('width')}"]


def main(argv) -> int:
    try:
        if len(argv) != 2:
            raise ConfigError("give one sweep directory: python -m tools.model scale SWEEP_DIR")
        if FLAGS.fit_up_to < 1:
            raise ConfigError(f"--fit_up_to must be 1 or more, got {FLAGS.fit_up_to}")
        if FLAGS.format not in render.FORMATS:
            raise ConfigError(f"--format={FLAGS.format!r} is unknown; choose one of {', '.join(render.FORMATS)}")
        prices = pricing.prices()
        found, skipped = fit.observations([argv[1]])
        if len({o.compute for o in found}) > 1:
            raise ConfigError(f"{argv[1]} holds runs of real and of emulated compute: fit each series apart")
        fitted = fits(found, FLAGS.fit_up_to)
        result = rows(found, FLAGS.fit_up_to, fitted)
    except (ConfigError, ValueError, params_lib.ParamsError) as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    lines = trend_lines(result) + [""] + [compute_line(found)] + parameter_lines(fitted.point)
    lines += [f"intervals: {fitted.basis}", ""]
    lines += bytes_lines(found) + [f"not used: {run_id}: {why}" for run_id, why in skipped]
    memory = memory_mb([argv[1]])
    lines += [memory_line(memory)] if memory else []
    lines += summary_lines(result, FLAGS.fit_up_to)
    hosts = {o.run_id: fit.hosts(o) for o in found}
    if FLAGS.format == "json":
        print(table(result, "json", prices, lines, hosts))
        return 0
    print(table(result, FLAGS.format, prices, hosts=hosts))
    print("\n" + "\n".join(lines), file=sys.stdout if FLAGS.format == "table" else sys.stderr)
    return 0
