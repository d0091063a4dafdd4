"""`python -m tools.model predict --model=dlrm [--runs=DIR]`: a recommender's step at N workers
under each strategy, and the crossover: from how many workers the parameter server is ahead of
all-gather, with its interval.

The step model is tfbench.perfmodel.sparse.recommender's (bytes of the busiest host from the
sparse laws, compute, overhead and protocol share per strategy). With --runs it is fitted on every
finished recommender run of DIR (`make dlrm`, `make dlrm-scale`) and each rate carries its 90%
interval (the fit redone on copies of its runs and a new run's scatter about it); the crossover's
interval is the range of the refits' crossovers. Without --runs the compute is
--compute_ms_per_example and the rest follows the no-fit rule (tfbench.perfmodel.fitting.nofit:
the protocol's share, the overhead and the overlap of communication with compute at the median of
tfbench's fits, each ranged); the crossover's interval runs from the parameter server at its fast
end against all-gather at its slow end to the reverse. The tables, ids and link are the request's
flags; --price_per_node_hour and --watts_per_node add each rate's cost (a node per worker).
"""
from __future__ import annotations

import statistics
import sys
from typing import Dict, List, Sequence, Tuple

from absl import flags

import tfbench.config as config_lib
from tfbench import workloads
from tfbench.config import flags as run_flags
from tfbench.config.errors import ConfigError
from tfbench.perfmodel import cost, intervals, protocols, render
from tfbench.perfmodel.fitting import nofit
from tfbench.perfmodel.sparse import recommender as rec
from tfbench.workloads import recommender
from tfbench.perfmodel.render import INTERVAL, NUMBER, Column
from tools.model import pricing
from tools.model import recommender as judged_runs

FLAGS = flags.FLAGS
ASSUMPTIONS = ("one worker per host (each on one core as the runs were, with --runs); a parameter server has a ps "
               "on every worker's host (k = N), round-robin placed, and so has the hybrid (its tables' ranges by "
               "--hybrid_shard_rule=rotated, its dense gradients on a ring); compute per step "
               "as the runs measured it, a line in N (without --runs: as given, constant in N); links full duplex "
               "at the given rate, no contention beyond them")
# the strategies a recommender runs and how each moves its step (tfbench.perfmodel.protocols)
STRATEGIES = {s: protocols.step_kind(s) for s in protocols.PREDICTED + (protocols.HYBRID,)}
NOFIT_KEY = {"parameter_server": "parameter_server_sync"}
UNKNOWN = ("share", "overhead_s", "phi")  # the ps's apply of rows is in its overhead


def _table_flags():
    """tfbench's recommender flags, (kind, name, help) as the recommender declares them."""
    return recommender.ARGUMENTS.entries()


def define_flags() -> None:
    if "runs" in FLAGS:
        return
    flags.DEFINE_string("runs", "", "Recommender workloads: a sweep directory of recommender runs on emulated hosts "
                                    "(make dlrm, make dlrm-scale) the step model is fitted on; empty: no fit, the "
                                    "compute from --compute_ms_per_example.")
    flags.DEFINE_float("compute_ms_per_example", None, "Recommender workloads without --runs: one worker's compute "
                                                       "per example in ms.")
    run_flags.define(_table_flags())


def help_groups():
    return [("Recommender", ["runs", "compute_ms_per_example"] + [name for _, name, _ in _table_flags()])]


def applies(model: str) -> bool:
    """Whether --model names a workload with embedding tables (predicted by this module)."""
    try:
        return isinstance(workloads.of(model), workloads.RecommenderWorkload)
    except workloads.WorkloadError:
        return False


def request_config() -> config_lib.RunConfig:
    return config_lib.RunConfig(model=FLAGS.model, batch_size=FLAGS.batch_size,
                                **{name: getattr(FLAGS, name) for _, name, _ in _table_flags()})


def request_setting() -> Tuple[config_lib.RunConfig, rec.Setting]:
    """The request's flags as a RunConfig (checked as tfbench checks them) and as the step model's Setting."""
    config = request_config()
    try:
        workloads.check(config, config_lib.RunConfig())
    except workloads.WorkloadError as e:
        raise ConfigError(str(e)) from None
    return config, judged_runs.setting_of(config.workload.record(config), {
        "batch_size": FLAGS.batch_size, "ps_partitioner": FLAGS.ps_partitioner,
        "ps_min_shard_bytes": FLAGS.ps_min_shard_bytes})


def fitted(found: Sequence[rec.Observation], setting: rec.Setting):
    """(fits, spreads, kinds) per strategy over every run of DIR; refused where the runs' compute cannot
    stand for the request's (another batch or other MLPs)."""
    batches = {o.setting.batch_size for o in found}
    mlps = {(o.setting.bottom, o.setting.top, o.setting.embedding_dim) for o in found}
    if batches != {setting.batch_size} or mlps != {(setting.bottom, setting.top, setting.embedding_dim)}:
        raise ConfigError(f"--runs measured batch {sorted(batches)} and MLPs/dims {sorted(mlps)}: the step model "
                          f"carries their compute, so predict at --batch_size={min(batches)} and their --embedding_dim")
    most = max(o.n for o in found)
    fits = rec.fit_all(found, most)
    return fits, rec.spreads(found, fits, most), {o.strategy: o.kind for o in found}


def fitted_rows(counts: List[int], setting: rec.Setting):
    """(rates per N and strategy, the crossover text, what stands behind them) from the runs' fit."""
    found, _ = judged_runs.observations(FLAGS.runs)
    fits, spreads, kinds = fitted(found, setting)
    if FLAGS.link_bandwidth:
        beta, link = config_lib.link_rate_bps(FLAGS.link_bandwidth) / 8, f"--link_bandwidth={FLAGS.link_bandwidth}"
    else:
        beta = statistics.median(o.link_bytes_per_s for o in found)
        link = f"the runs' median probed link, {beta * 8 / 1e6:.1f} Mbit/s"
    rates = {(s, n): spreads[s].interval(fits[s], kinds[s], n, setting, beta) for s in fits for n in counts}
    most = max(counts)
    if {rec.PS, rec.ALL_GATHER} <= set(kinds.values()):
        text = rec.crossover_text(*rec.crossover_interval(fits, spreads, kinds, setting, beta, most), most)
    else:
        text = "no crossover: the runs hold no parameter server, or no all-gather strategy, to compare"
    fitted_on = ", ".join(f"{s} N={','.join(map(str, f.fitted_on))}" for s, f in sorted(fits.items()))
    facts = [f"link: {link}", f"fitted on {len(found)} runs of {FLAGS.runs}: {fitted_on}",
             f"the crossover's interval: {intervals.LEVEL:.0%} of the crossovers of the refits, each scaled by a "
             "draw of its strategy's scatter, over every N of 2.." + str(most)]
    if rec.HYBRID in kinds.values():
        facts.append(judged_runs.hybrid_verdict(fits, kinds, setting, beta, list(range(2, most + 1))))
    return rates, kinds, text, facts


def unfitted_rows(counts: List[int], setting: rec.Setting):
    """(rates per N and strategy, the crossover text, what stands behind them) with no fit."""
    if FLAGS.compute_ms_per_example is None or not FLAGS.compute_ms_per_example > 0:
        raise ConfigError("--model is a recommender: give --compute_ms_per_example=MS (one worker's compute per "
                          "example) or --runs=DIR, a sweep of its runs on emulated hosts (make dlrm or make "
                          "dlrm-scale) to fit the step model on")
    if not FLAGS.link_bandwidth.strip():
        raise ConfigError("--link_bandwidth is empty: give a class or a rate such as 100mbit (nothing was fitted)")
    beta = config_lib.link_rate_bps(FLAGS.link_bandwidth) / 8
    compute = FLAGS.compute_ms_per_example * setting.batch_size / 1e3
    dense = setting.dense_bytes + sum(setting.table_rows) * setting.row_bytes
    unknowns = {s: nofit.unknowns(NOFIT_KEY.get(s, s), dense, UNKNOWN) for s in STRATEGIES}

    def rate(s: str, n: int, values: Dict[str, float]) -> float:
        return n * setting.batch_size / rec.unfitted_step_s(STRATEGIES[s], n, setting, beta, compute, values)

    rates = {(s, n): nofit.span(lambda v, s=s, n=n: rate(s, n, v), unknowns[s]) for s in STRATEGIES for n in counts}
    at = lambda which: {s: (nofit.point(u) if which == "point" else  # noqa: E731
                            min(nofit.corners(u), key=lambda v, s=s: rate(s, max(counts), v)) if which == "slow"
                            else max(nofit.corners(u), key=lambda v, s=s: rate(s, max(counts), v)))
                        for s, u in unknowns.items()}
    point, slow, fast = at("point"), at("slow"), at("fast")
    looked = list(range(2, max(counts) + 1))  # every N, as the fitted crossover looks
    cross = lambda ps, gather: rec.crossover_of(  # noqa: E731
        lambda s, n: rate(s, n, (ps if STRATEGIES[s] == rec.PS else gather)[s]), STRATEGIES, looked)
    text = rec.crossover_text(cross(point, point), cross(fast, slow), cross(slow, fast), max(counts), "range")
    ahead = lambda hybrid, others: rec.crossover_of(  # noqa: E731
        lambda s, n: rate(s, n, (hybrid if STRATEGIES[s] == rec.HYBRID else others)[s]), STRATEGIES, looked,
        ahead=rec.HYBRID, behind=(rec.PS, rec.ALL_GATHER))
    facts = [f"link: --link_bandwidth={FLAGS.link_bandwidth}, its configured rate",
             f"no fit: compute {FLAGS.compute_ms_per_example:g} ms per example x batch {setting.batch_size} = "
             f"{compute * 1e3:.1f} ms per worker step (given), constant in N",
             "no fit: " + "; ".join(f"{s}: {nofit.describe(u)}" for s, u in unknowns.items()),
             "the crossover's interval: the parameter server at the fast end of its ranges against all-gather at the "
             "slow end of theirs, and the reverse (a range)",
             hybrid_line(ahead(point, point), ahead(slow, fast), ahead(fast, slow))]
    return rates, dict(STRATEGIES), text, facts


def hybrid_line(at_point, surely, perhaps) -> str:
    """From which N the hybrid is ahead of every other strategy: at the rule's point, at its slow end
    against the others' fast ends, and at its fast end against their slow ends."""
    said = lambda n: f"from N={n} on" if n else "not from any N on"  # noqa: E731
    return (f"the hybrid (no fit: the values of Horovod's ring and the synchronous ps it runs) is predicted ahead of "
            f"every other strategy {said(at_point)}; at the slow end of its range against the fast ends of theirs "
            f"{said(surely)}; at its fast end against their slow ends {said(perhaps)}")


def rows_and_lines(counts: List[int]):
    if FLAGS.format not in render.FORMATS:
        raise ConfigError(f"--format={FLAGS.format!r} is unknown; choose one of {', '.join(render.FORMATS)}")
    config, setting = request_setting()
    prices = pricing.prices()
    unit = cost.Unit("examples", "example")
    rates, kinds, verdict, facts = (fitted_rows if FLAGS.runs else unfitted_rows)(counts, setting)
    strategies = sorted({s for s, _ in rates})
    rows = []
    for n in counts:
        row: Dict[str, object] = {"num_workers": n, "nodes": n}
        for kind in sorted({kinds[s] for s in strategies}):
            row[f"{kind}_MB_per_step"] = rec.busiest_host_bytes(kind, n, setting) / 1e6
        for s in strategies:
            row[f"{s}_examples_per_sec"] = rates[(s, n)]
            row.update({f"{s}_{k}": v for k, v in cost.per_unit(rates[(s, n)], n, prices, unit).items()})
        rows.append(row)
    columns = ([Column("num_workers", NUMBER, 0)] + [Column(f"{k}_MB_per_step") for k in sorted(set(kinds.values()))]
               + [Column(f"{s}_examples_per_sec", INTERVAL, 1) for s in strategies])
    if prices.given:
        columns += [Column("nodes", NUMBER, 0)] + [Column(f"{s}_{c.name}", INTERVAL, c.decimals)
                                                   for s in strategies for c in pricing.columns(prices, unit=unit)]
    lines = [f"recommender {FLAGS.model}: {config.workload.describe(config)}, batch {setting.batch_size} per worker",
             *facts, f"{verdict} (every N of 2..{max(counts)} looked at)"]
    if prices.given:
        lines.append(pricing.line(prices))
    return lines, rows, columns


def main(counts: List[int]) -> None:
    """Prints the prediction (ConfigError for bad input, before anything is printed)."""
    lines, rows, columns = rows_and_lines(counts)
    lines.append(f"assumptions: {ASSUMPTIONS}")
    if FLAGS.format == "csv":
        print("\n".join(lines), file=sys.stderr)
    print(render.render(rows, columns, FLAGS.format, [] if FLAGS.format == "csv" else lines))
