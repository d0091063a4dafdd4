"""python -m tools.model report SWEEP_DIR: the model's report over a sweep (`make model`).

Validates the model on the sweep's own runs (held out by worker count and by link rate), fits it
on all of them, and writes SWEEP_DIR/model/: params.json, summary.md and one plot per link of
images/sec against workers (1 to 1024, log axis) with the measured points and the predicted
curves; then, per link: where one parameter server stops gaining (w*), how many ps shards keep
up at each N, and the bandwidth at which a parameter server matches ring all-reduce. Every
assumption of the extrapolation is stated next to the numbers, and every prediction carries its
90% interval (tfbench.perfmodel.fitting.spread: the fit's refits and its runs' scatter). Prints the
validation table (--report_format: table, csv or json), `median abs error = X%` and
`coverage = X% of held-out points inside their 90% interval, median width Y%`;
--price_per_node_hour and --watts_per_node add the cost of every rate.
"""
from __future__ import annotations

import os
import sys
from typing import Dict, List, Sequence

from absl import flags

from tfbench.config.errors import ConfigError
from tfbench.perfmodel import cost, intervals
from tfbench.perfmodel.dense import prediction, whatif
from tfbench.perfmodel.fitting import fit as fit_lib
from tfbench.perfmodel.fitting import params as params_lib
from tfbench.perfmodel.fitting import spread as spread_lib
from tfbench.perfmodel.fitting import validate as validate_lib
from tfbench.perfmodel.dense.links import rate_text
from tfbench.perfmodel.fitting.observations import Observation
from tools.model import fit, pricing

FLAGS = flags.FLAGS
WORKERS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
ASSUMPTIONS = (
    "compute per worker is what one worker measured alone on its own core, whatever N (in the sweep's runs "
    "with more workers than cores, the core share, i.e. workers pinned to one core, slowed it and is accounted for; "
    "beyond the sweep every worker has cores of its own)",
    "every host has its own link of the sweep's rate to a full-bisection switch: no contention beyond the named "
    "links, no oversubscribed core",
    "no overlap of communication with computation beyond what the measured compute already holds",
    "homogeneous workers, no stragglers: waiting is only the fitted fixed overhead per step",
    "alpha, beta, the protocol's share of the link and the share chi of a synchronous ps link's two directions "
    "that does not overlap stay what the sweep measured and fitted at N <= 3",
    "the fitted overhead per step does not grow with N or with latency",
)


def define_flags() -> None:
    fit.define_flags()


def help_groups():
    return [("Validate", ["hold_out_link", "report_format"]), ("Cost", pricing.NAMES)]


def curve_runs(observations: Sequence[Observation], data: dict) -> Dict[str, Dict[str, Observation]]:
    """{link: {strategy label: run}}: one predicted curve per strategy the sweep ran on each link,
    set as its run with the fewest workers."""
    curves: Dict[str, Dict[str, Observation]] = {}
    for o in sorted(observations, key=lambda o: (o.link_rate_bps, o.num_workers)):
        if o.predicted and fit_lib.setting(o, data) is not None:
            curves.setdefault(o.link, {}).setdefault(label(o), o)
    return curves


def rate_interval(found: spread_lib.Spread, o: Observation, n: int) -> intervals.Interval:
    """Images/sec of run o's setting at N workers, with its interval over the fit's refits."""
    return found.interval(lambda d: prediction.point(fit_lib.setting(o, d), n).images_per_sec)


def label(o: Observation) -> str:
    if o.strategy == "parameter_server":
        return f"parameter_server ({'sync' if o.ps_sync else 'async'}, {o.ps_placement})"
    return o.strategy


def plot(link: str, runs: Dict[str, Observation], found: spread_lib.Spread, measured: Sequence[Observation],
         path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    counts = sorted(set(WORKERS) | set(range(1, 9)))
    for i, (name, o) in enumerate(sorted(runs.items())):
        found_at = [rate_interval(found, o, n) for n in counts]
        color = f"C{i}"
        ax.plot(counts, [r.point for r in found_at], color=color, label=f"{name}, predicted")
        ax.fill_between(counts, [r.low for r in found_at], [r.high for r in found_at], color=color, alpha=0.15,
                        label=f"{name}, {intervals.LEVEL:.0%} interval")
        mine = [m for m in measured if label(m) == name]
        ax.scatter([m.num_workers for m in mine], [m.images_per_sec for m in mine], color=color, marker="o",
                   zorder=3, label=f"{name}, measured")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("workers")
    ax.set_ylabel("images/sec")
    ax.set_title(f"link {link}: measured on emulated hosts, predicted with a core per worker", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def whatif_lines(link: str, runs: Dict[str, Observation], found: spread_lib.Spread, prices: cost.Prices) -> List[str]:
    lines = [f"### Link {link}", "", f"![images/sec vs workers, link {link}](images_per_sec_{link}.png)", ""]
    settings = {name: fit_lib.setting(o, found.point) for name, o in runs.items()}
    ps = next((s for name, s in settings.items() if name.startswith("parameter_server")), None)
    headers = ["workers"] + [f"{name} images/sec [{intervals.LEVEL:.0%}] (bottleneck)" for name in sorted(settings)]
    if prices.given:
        headers += [f"{name} {', '.join(prices.columns())}" for name in sorted(settings)]
    if ps is not None:
        headers += ["ps shards that keep up", "bandwidth where ps matches ring"]
    lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    unmatched = None
    for n in WORKERS:
        row, costs = [str(n)], []
        for name in sorted(settings):
            p, rate = prediction.point(settings[name], n), rate_interval(found, runs[name], n)
            row.append(f"{rate.text()} ({p.bottleneck})")
            priced = cost.per_unit(rate, cost.nodes(n, 1, ps_hosts(runs[name], settings[name])), prices)
            costs.append("; ".join(v.text(2) for v in priced.values()))
        row += costs if prices.given else []
        if ps is not None:
            k = whatif.shards_needed(ps, n)
            match = whatif.bandwidth_match(ps, n)
            row += [str(k) if k else "more than 1024", rate_text(match.bps) if match.bps else "none up to 10 Tbit/s"]
            unmatched = unmatched or (None if match.bps else match.reason)
        lines.append("| " + " | ".join(row) + " |")
    if unmatched:
        lines += ["", f"Where no bandwidth lets the parameter server match ring all-reduce: {unmatched}."]
    if ps is not None:
        star = whatif.w_star(ps.w_bytes, ps.compute_s, ps.link, ps.num_ps, ps.ps_placement, ps.ps_sync)
        lines += ["", f"w* = {star:.2f} workers: past it one ps shard's link time per global step exceeds the compute "
                      f"time ({ps.compute_s * 1e3:.1f} ms) and the parameter server's images/sec curve bends flat "
                      f"(bytes terms; |w| = {ps.w_bytes / 1e6:.2f} MB, link beta {ps.link.beta * 8 / 1e6:.1f} "
                      f"Mbit/s after the fitted protocol share)."]
    return lines + [""]


def ps_hosts(o: Observation, s: prediction.Setting) -> int:
    """Hosts of their own the setting's ps take (0 collocated or not a parameter server)."""
    return int(s.num_ps) if o.strategy == "parameter_server" and s.ps_placement == "separate" else 0


def write(sweep_dir: str, rows: Sequence[validate_lib.Row], observations: Sequence[Observation], data: dict,
          found: spread_lib.Spread, skipped, prices: cost.Prices) -> str:
    out = os.path.join(sweep_dir, "model")
    os.makedirs(out, exist_ok=True)
    params_lib.save(os.path.join(out, "params.json"), data)
    curves = curve_runs(observations, found.point)
    summary = validate_lib.summary(rows)
    lines = ["# tfbench performance model: fitted on this sweep, validated on runs it never saw", ""]
    lines += fit.summary_lines(summary) + ["",
             "## Validation", "",
             "Each held-out run is predicted from a fit on the others only (its link's alpha and beta come from "
             "its own link probe, as a user would measure a network; never from its step times), with the "
             f"{intervals.LEVEL:.0%} interval of that fit ({found.basis}).", "",
             "```", fit.render(rows, prices=prices), "```", "",
             "## Fitted on every run of the sweep (params.json)", "", "```", fit.describe(data), "```", "",
             "## What if: larger clusters", "",
             "Assumptions of every number below:", ""] + [f"- {a}" for a in ASSUMPTIONS] + [
             f"- the intervals: {found.basis}", ""]
    for link, runs in sorted(curves.items(), key=lambda kv: fit_lib.setting(next(iter(kv[1].values())),
                                                                           found.point).link.beta):
        plot(link, runs, found, [o for o in observations if o.link == link],
             os.path.join(out, f"images_per_sec_{link}.png"))
        lines += whatif_lines(link, runs, found, prices)
    if skipped:
        lines += ["## Runs not used", ""] + [f"- {run_id}: {why}" for run_id, why in skipped]
    path = os.path.join(out, "summary.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return out


def main(argv) -> int:
    try:
        if len(argv) != 2:
            raise ConfigError("give one sweep directory: python -m tools.model report SWEEP_DIR")
        fmt = fit.report_format()
        prices = pricing.prices()
        found, skipped = fit.observations([argv[1]])
        rows = validate_lib.validate(found, FLAGS.hold_out_link)
        data, spread = fit_lib.with_spread(found)
    except (ConfigError, ValueError, params_lib.ParamsError) as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    out = write(argv[1], rows, found, data, spread, skipped, prices)
    summary = fit.summary_lines(validate_lib.summary(rows)) + [f"report written to {out}/summary.md"]
    print(fit.render(rows, fmt, prices, summary))
    if fmt != "json":
        print("\n".join(summary), file=sys.stdout if fmt == "table" else sys.stderr)
    return 0
