"""`python -m tools.model recommender DIR`: the recommender's step model (tfbench.perfmodel.sparse.recommender)
fitted on the runs of DIR with few workers (--fit_max_workers, default 4) and judged on the runs with
more, which it never saw; then the crossover: from how many workers the parameter server is ahead.

Reads every finished run of a recommender workload on emulated hosts below DIR (their records'
`workload` and `sparse` facts, the step split's compute and the probed link rate). Prints a row per
held-out run (measured, predicted [90%], error), then the crossover per setting, `median abs error
= X%` and the coverage; --format=csv or json as every verb, --price_per_node_hour and
--watts_per_node add each rate's cost (a node per worker).
"""
from __future__ import annotations

import statistics
import sys
from typing import Dict, List, Sequence, Tuple

from absl import flags

from tfbench.config.errors import ConfigError
from tfbench.perfmodel import cost, intervals, protocols, render
from tfbench.perfmodel.render import ERROR, INTERVAL, NUMBER, TEXT, Column
from tfbench.perfmodel.sparse import recommender as rec
from tools.model import pricing
from tools.rundirs.runs import Run, find_runs

FLAGS = flags.FLAGS


def define_flags() -> None:
    if "fit_max_workers" in FLAGS:
        return
    flags.DEFINE_integer("fit_max_workers", 4, "Fit on the runs with at most this many workers; predict the others.")
    flags.DEFINE_list("crossover_workers", ["2", "4", "8", "16", "32", "64"],
                      "Worker counts the crossover is looked for at.")
    if "format" not in FLAGS:
        flags.DEFINE_string("format", "table", "table, csv or json.")
    pricing.define_flags()


UNIT = cost.Unit("examples", "example")
COLUMNS = (Column("zipf_alpha", NUMBER, 2), Column("id_layout", TEXT), Column("strategy", TEXT), Column("num_workers", NUMBER, 0),
           Column("measured_examples_per_sec", NUMBER, 1), Column("predicted_examples_per_sec", INTERVAL, 1),
           Column("error", ERROR))


def help_groups():
    return [("Recommender", ["fit_max_workers", "crossover_workers"]), ("Cost", pricing.NAMES), ("Output", ["format"])]


def setting_of(workload: dict, config: dict) -> rec.Setting:
    """The step model's Setting from a record's `workload` entry and the run's config (or a request's)."""
    return rec.Setting(tuple(workload["rows"]), int(workload["embedding_dim"]), int(workload["ids_per_feature"]),
                       float(workload["zipf_alpha"]), int(config["batch_size"]), 4.0 * float(workload["dense_params"]),
                       int(workload["dense_features"]), tuple(workload.get("bottom_mlp", (64, 32))),
                       tuple(workload.get("top_mlp", (64, 32))), str(config.get("ps_partitioner", "min_size")),
                       int(config.get("ps_min_shard_bytes") or 256 << 10),
                       id_layout=str(workload.get("id_layout", "hot_first")),
                       shard_rule=str(config.get("hybrid_shard_rule", "rotated")))


def observation(run: Run):
    """The run as the model sees it, or None with why not."""
    cluster = run.cluster or {}
    workload, link = cluster.get("workload") or {}, cluster.get("link") or {}
    split = ((cluster.get("step_breakdown") or {}).get("mean_s") or {})
    if not run.ok or not cluster.get("sparse") or not workload.get("rows"):
        return None, "not a finished recommender run"
    if not link.get("beta_bps"):
        return None, "no probed link (not on emulated hosts)"
    if "compute" not in split:
        return None, "no step split"
    config = run.config
    kind = protocols.step_kind(str(config.get("strategy")))
    if kind == rec.PS and (config.get("num_ps") != config.get("num_workers") or config.get("ps_placer") == "greedy"):
        return None, "the model's parameter server has a ps on every worker's host, placed round-robin"
    if kind == rec.HYBRID and config.get("num_ps") != config.get("num_workers"):
        return None, "the model's hybrid has a ps on every worker's host"
    setting = setting_of(workload, config)
    stats = cluster["stats"]
    return rec.Observation(run.run_id, kind, str(run.config.get("strategy")), int(run.config["num_workers"]),
                           float(stats["mean_s"]), float(split["compute"]), float(link["beta_bps"]) / 8, setting,
                           float(stats.get("ci95_s") or 0.0)), ""


def observations(path: str) -> Tuple[List[rec.Observation], List[Tuple[str, str]]]:
    found, skipped = [], []
    for run in find_runs(path):
        obs, why = observation(run)
        (found.append(obs) if obs else skipped.append((run.run_id, why)))
    if not found:
        raise ConfigError(f"{path}: no finished recommender run on emulated hosts below it")
    return found, skipped


def judged(found: Sequence[rec.Observation], max_n: int) -> List[Tuple[rec.Observation, intervals.Interval, float]]:
    """(held-out run, its predicted examples/sec with interval, relative error) of every run with more
    workers than the fit's."""
    settings: Dict[rec.Setting, List[rec.Observation]] = {}
    for o in found:
        settings.setdefault(o.setting, []).append(o)
    out = []
    for same in settings.values():
        fits = rec.fit_all(same, max_n)
        spreads = rec.spreads(same, fits, max_n)
        for o in same:
            if o.n > max_n and o.strategy in fits:
                predicted = spreads[o.strategy].interval(fits[o.strategy], o.kind, o.n, o.setting, o.link_bytes_per_s)
                out.append((o, predicted, predicted.point / o.rate - 1))
    return out


def table(found: Sequence[rec.Observation], max_n: int, workers: Sequence[int], prices: cost.Prices):
    """(rows of the held-out runs, their columns, the closing lines: crossovers, error, coverage)."""
    order = lambda r: (r[0].setting.zipf_alpha, r[0].setting.id_layout, r[0].strategy, r[0].n)  # noqa: E731
    judged_rows = sorted(judged(found, max_n), key=order)
    rows = [{"zipf_alpha": o.setting.zipf_alpha, "id_layout": o.setting.id_layout, "strategy": o.strategy,
             "num_workers": o.n, "nodes": o.n, "measured_examples_per_sec": o.rate, "predicted_examples_per_sec": predicted, "error": error}
            for o, predicted, error in judged_rows]
    columns = list(COLUMNS)
    if prices.given:
        pricing.add(rows, prices, "predicted_examples_per_sec", "measured_examples_per_sec", UNIT)
        columns += [Column("nodes", NUMBER, 0)] + pricing.columns(prices, measured=True, unit=UNIT)
    lines = []
    for setting in sorted({o.setting for o in found}, key=lambda s: (s.zipf_alpha, s.id_layout)):
        same = [o for o in found if o.setting == setting]
        fits = rec.fit_all(same, max_n)
        kinds = {o.strategy: o.kind for o in same}
        beta = statistics.median(o.link_bytes_per_s for o in same)
        if len(set(kinds.values())) < 2:
            continue  # one kind of strategy: nothing to cross
        spread = rec.spreads(same, fits, max_n)
        verdict = rec.crossover_text(*rec.crossover_interval(fits, spread, kinds, setting, beta, max(workers)),
                                     max(workers))
        lines.append(f"zipf {setting.zipf_alpha:g} {setting.id_layout}, {beta * 8 / 1e6:.0f} Mbit/s: {verdict} "
                     f"(every N of 2..{max(workers)})")
        if rec.HYBRID in kinds.values():
            lines.append(f"zipf {setting.zipf_alpha:g} {setting.id_layout}: "
                         f"{hybrid_verdict(fits, kinds, setting, beta, workers)}")
    errors = [abs(r["error"]) for r in rows]
    lines.append(f"median abs error = {statistics.median(errors):.1%} over {len(errors)} held-out runs"
                 if errors else "median abs error = n/a: no run with more workers than the fit's")
    lines.append(intervals.coverage_line(intervals.coverage(
        [(r["measured_examples_per_sec"], r["predicted_examples_per_sec"]) for r in rows])))
    return rows, columns, lines


def hybrid_verdict(fits, kinds, setting: rec.Setting, beta: float, workers: Sequence[int]) -> str:
    """Where the hybrid is predicted ahead of every other fitted strategy, from some N on."""
    n = rec.crossover(fits, kinds, setting, beta, workers, ahead=rec.HYBRID, behind=(rec.PS, rec.ALL_GATHER))
    return (f"the hybrid is predicted ahead of every other strategy from N={n} on" if n else
            "the hybrid is not predicted ahead of every other strategy at every N from some N on")


def main(argv) -> int:
    try:
        if len(argv) != 2:
            raise ConfigError("give one sweep directory: python -m tools.model recommender SWEEP_DIR")
        if FLAGS.fit_max_workers < 1:
            raise ConfigError(f"--fit_max_workers must be 1 or more, got {FLAGS.fit_max_workers}")
        try:
            workers = sorted({int(n) for n in FLAGS.crossover_workers})
        except ValueError:
            raise ConfigError(f"--crossover_workers takes worker counts, got "
                              f"{','.join(FLAGS.crossover_workers)}") from None
        if not workers or workers[0] < 2:
            raise ConfigError("--crossover_workers must be 2 or more workers each")
        if FLAGS.format not in render.FORMATS:
            raise ConfigError(f"--format={FLAGS.format!r} is unknown; choose one of {', '.join(render.FORMATS)}")
        prices = pricing.prices()
        found, skipped = observations(argv[1])
    except ConfigError as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    rows, columns, lines = table(found, FLAGS.fit_max_workers, workers, prices)
    facts = [f"recommender step model: fitted on runs with at most {FLAGS.fit_max_workers} workers, per setting and "
             f"strategy; each held-out run predicted with its {intervals.LEVEL:.0%} interval"]
    facts += [f"not used: {run_id}: {why}" for run_id, why in skipped] + ([pricing.line(prices)] if prices.given
                                                                         else [])
    print("\n".join(facts), file=sys.stdout if FLAGS.format == "table" else sys.stderr)
    print(render.render(rows, columns, FLAGS.format, facts + lines if FLAGS.format == "json" else ()))
    if FLAGS.format != "json":
        print("\n".join(lines), file=sys.stdout if FLAGS.format == "table" else sys.stderr)
    return 0
