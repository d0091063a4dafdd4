"""`python -m tools.model predict --model=dlrm --runs=DIR`: a recommender's step at N workers under
every strategy DIR's runs measured, and the crossover: from how many workers the parameter server
is ahead of all-gather.

The step model is tfbench.perfmodel.sparse.recommender's (bytes of the busiest host from the sparse laws,
compute, overhead and protocol share per strategy), fitted on every finished recommender run of
DIR (`make dlrm`, `make dlrm-scale`); the tables, ids and link are the request's flags. Each rate
carries its interval (the fit redone on copies of its runs and a new run's scatter about it).
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
from tfbench.workloads import recommender
from tfbench.perfmodel.sparse import recommender as rec
from tfbench.perfmodel import render
from tfbench.perfmodel.render import INTERVAL, NUMBER, Column
from tools.model import recommender as judged_runs

FLAGS = flags.FLAGS
ASSUMPTIONS = ("one worker per host, each on one core as the runs were; a parameter server has a ps on every "
               "worker's host (k = N), round-robin placed, and so has the hybrid (its tables' ranges placed by "
               "--hybrid_shard_rule=rotated, its dense gradients on a ring); compute per step as the runs "
               "measured it, a line in N; "
               "links full duplex at the given rate, no contention beyond them")


def _table_flags():
    """tfbench's recommender flags, (kind, name, help) as the recommender declares them."""
    return recommender.ARGUMENTS.entries()


def define_flags() -> None:
    if "runs" in FLAGS:
        return
    flags.DEFINE_string("runs", "", "Recommender workloads: a sweep directory of recommender runs on emulated hosts "
                                    "(make dlrm, make dlrm-scale) the step model is fitted on.")
    run_flags.define(_table_flags())


def help_groups():
    return [("Recommender", ["runs"] + [name for _, name, _ in _table_flags()])]


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


def rows_and_lines(counts: List[int]):
    if not FLAGS.runs:
        raise ConfigError("--model is a recommender: give --runs=DIR, a sweep of its runs on emulated hosts "
                          "(make dlrm or make dlrm-scale) to fit the step model on")
    config, setting = request_setting()
    found, _ = judged_runs.observations(FLAGS.runs)
    fits, spreads, kinds = fitted(found, setting)
    if FLAGS.link_bandwidth:
        beta, link = config_lib.link_rate_bps(FLAGS.link_bandwidth) / 8, f"--link_bandwidth={FLAGS.link_bandwidth}"
    else:
        beta = statistics.median(o.link_bytes_per_s for o in found)
        link = f"the runs' median probed link, {beta * 8 / 1e6:.1f} Mbit/s"
    strategies = sorted(fits)
    rows = []
    for n in counts:
        row: Dict[str, object] = {"num_workers": n}
        for kind in sorted({kinds[s] for s in strategies}):
            row[f"{kind}_MB_per_step"] = rec.busiest_host_bytes(kind, n, setting) / 1e6
        for s in strategies:
            row[f"{s}_examples_per_sec"] = spreads[s].interval(fits[s], kinds[s], n, setting, beta)
        rows.append(row)
    columns = ([Column("num_workers", NUMBER, 0)] + [Column(f"{k}_MB_per_step") for k in sorted(set(kinds.values()))]
               + [Column(f"{s}_examples_per_sec", INTERVAL, 1) for s in strategies])
    verdict = (rec.crossover_text(*rec.crossover_interval(fits, spreads, kinds, setting, beta, max(counts)),
                                  max(counts)) if len(set(kinds.values())) == 2 else
               "no crossover: the runs hold no parameter server, or no all-gather strategy, to compare")
    fitted_on = ", ".join(f"{s} N={','.join(map(str, f.fitted_on))}" for s, f in sorted(fits.items()))
    lines = [f"recommender {FLAGS.model}: {config.workload.describe(config)}, batch "
             f"{setting.batch_size} per worker; link: {link}",
             f"fitted on {len(found)} runs of {FLAGS.runs}: {fitted_on}",
             f"{verdict} (every N of 2..{max(counts)} looked at)"]
    if rec.HYBRID in kinds.values():
        lines.append(judged_runs.hybrid_verdict(fits, kinds, setting, beta, counts))
    return lines, rows, columns


def main(counts: List[int]) -> None:
    """Prints the prediction (ConfigError for bad input, before anything is printed)."""
    lines, rows, columns = rows_and_lines(counts)
    lines.append(f"assumptions: {ASSUMPTIONS}")
    if FLAGS.format == "csv":
        print("\n".join(lines), file=sys.stderr)
    print(render.render(rows, columns, FLAGS.format, [] if FLAGS.format == "csv" else lines))
