"""python -m tools.model report SWEEP_DIR: the model's report over a sweep (`make model`).

Validates the model on the sweep's own runs (held out by worker count and by link rate), fits it
on all of them, and writes SWEEP_DIR/model/: params.json, summary.md and one plot per link of
images/sec against workers (1 to 1024, log axis) with the measured points and the predicted
curves; then, per link: where one parameter server stops gaining (w*), how many ps shards keep
up at each N, and the bandwidth at which a parameter server matches ring all-reduce. Every
assumption of the extrapolation is stated next to the numbers. Prints the validation table and
`median abs error = X%`.
"""
from __future__ import annotations

import os
import sys
from typing import Dict, List, Sequence

from absl import flags

from tfbench.config.errors import ConfigError
from tfbench.perfmodel import fit as fit_lib
from tfbench.perfmodel import params as params_lib
from tfbench.perfmodel import prediction
from tfbench.perfmodel import validate as validate_lib
from tfbench.perfmodel import whatif
from tfbench.perfmodel.links import rate_text
from tfbench.perfmodel.observations import Observation
from tools.model import fit

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
    return [("Validate", ["hold_out_link"])]


def curve_settings(observations: Sequence[Observation], data: dict) -> Dict[str, Dict[str, prediction.Setting]]:
    """{link: {strategy label: setting}}: one predicted curve per strategy the sweep ran on each link."""
    curves: Dict[str, Dict[str, prediction.Setting]] = {}
    for o in sorted(observations, key=lambda o: (o.link_rate_bps, o.num_workers)):
        s = fit_lib.setting(o, data) if o.predicted else None
        if s is not None:
            curves.setdefault(o.link, {}).setdefault(label(o), s)
    return curves


def label(o: Observation) -> str:
    if o.strategy == "parameter_server":
        return f"parameter_server ({'sync' if o.ps_sync else 'async'}, {o.ps_placement})"
    return o.strategy


def plot(link: str, settings: Dict[str, prediction.Setting], measured: Sequence[Observation], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (name, s) in enumerate(sorted(settings.items())):
        points = prediction.predict(s, sorted(set(WORKERS) | set(range(1, 9))))
        color = f"C{i}"
        ax.plot([p.num_workers for p in points], [p.images_per_sec for p in points], color=color,
                label=f"{name}, predicted")
        mine = [o for o in measured if label(o) == name]
        ax.scatter([o.num_workers for o in mine], [o.images_per_sec for o in mine], color=color, marker="o",
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


def whatif_lines(link: str, settings: Dict[str, prediction.Setting]) -> List[str]:
    lines = [f"### Link {link}", "", f"![images/sec vs workers, link {link}](images_per_sec_{link}.png)", ""]
    ps = next((s for name, s in settings.items() if name.startswith("parameter_server")), None)
    headers = ["workers"] + [f"{name} images/sec (bottleneck)" for name in sorted(settings)]
    if ps is not None:
        headers += ["ps shards that keep up", "bandwidth where ps matches ring"]
    lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    unmatched = None
    for n in WORKERS:
        row = [str(n)]
        for name in sorted(settings):
            p = prediction.point(settings[name], n)
            row.append(f"{p.images_per_sec:.1f} ({p.bottleneck})")
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


def write(sweep_dir: str, rows: Sequence[validate_lib.Row], observations: Sequence[Observation], data: dict,
          skipped) -> str:
    out = os.path.join(sweep_dir, "model")
    os.makedirs(out, exist_ok=True)
    params_lib.save(os.path.join(out, "params.json"), data)
    curves = curve_settings(observations, data)
    summary = validate_lib.summary(rows)
    lines = ["# tfbench performance model: fitted on this sweep, validated on runs it never saw", "",
             fit.summary_line(summary), "",
             "## Validation", "",
             "Each held-out run is predicted from a fit on the others only (its link's alpha and beta come from "
             "its own link probe, as a user would measure a network; never from its step times).", "",
             "```", fit.render(rows), "```", "",
             "## Fitted on every run of the sweep (params.json)", "", "```", fit.describe(data), "```", "",
             "## What if: larger clusters", "",
             "Assumptions of every number below:", ""] + [f"- {a}" for a in ASSUMPTIONS] + [""]
    for link, settings in sorted(curves.items(), key=lambda kv: next(iter(kv[1].values())).link.beta):
        plot(link, settings, [o for o in observations if o.link == link], os.path.join(out, f"images_per_sec_{link}.png"))
        lines += whatif_lines(link, settings)
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
        found, skipped = fit.observations([argv[1]])
        rows = validate_lib.validate(found, FLAGS.hold_out_link)
        data = fit_lib.fit(found)
    except (ConfigError, ValueError, params_lib.ParamsError) as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    out = write(argv[1], rows, found, data, skipped)
    print(fit.render(rows))
    print(fit.summary_line(validate_lib.summary(rows)))
    print(f"report written to {out}/summary.md")
    return 0

