"""Points, comparisons and failures -> summary.md (markdown tables a person reads first)."""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple

from tfbench.config import knobs
from tfbench.config.choices import EMULATED_COMPUTE
from tools.report.aggregate import Comparison, Point, order_key, rate_label, varying
from tools.report.findings import findings

# (config key, header) of the columns every results table has.
STANDARD = (("strategy", "strategy"), ("scale", "workers"), ("num_ps", "ps"),
            ("batch_size", "batch/replica"))
SETTINGS = (("mode", "mode"), ("placement", "placement"), ("device", "device"))
# Keys stated once above the table when every point shares them.
_HEADLINE = ("model", "image_size", "num_warmup_steps", "num_steps")

DEFINITIONS = (
    "images/sec (examples/sec, tokens/sec: the workload's unit): all of them in the measured window ÷ its wall "
    "time (mean over repeats; spread: their "
    "standard deviation). Global step ms: mean ± 95% CI over one sample per global step of the cluster "
    "(synchronous: first rank's start to last rank's end; sync PS: the coordinator's global step; async PS: "
    "a round of N updates), across run means when a point was repeated; jitter: 1.4826 × median absolute "
    "deviation. Scaling efficiency: the rate at N workers ÷ (N × the rate at 1 worker) with the same "
    "strategy, per-replica batch, cores per worker, mode, placement and device (– when cores per worker "
    "differ). Mirrored runs are one task: their workers column counts its local devices (replicas).")


@dataclasses.dataclass(frozen=True)
class Failure:
    name: str  # run id, or sweep point id when the run left no results
    config: Dict
    failed_task: str
    reason: str
    retried_ok: bool = False  # a later run of the same configuration finished ok


def render(title: str, points: Sequence[Point], failures: Sequence[Failure],
           comparisons: Sequence[Tuple[str, List[Comparison]]], plots: Sequence[Tuple[str, str]],
           num_runs: int, notes: Sequence[str] = (), sections: Sequence[str] = ()) -> str:
    lines = [f"# tfbench report: {title}", "", _counts(points, failures, num_runs)]
    headline = _headline(points)
    if headline:
        lines.append(headline)
    found = findings_section(points)
    if found:
        lines += ["", "## Findings", ""] + found
    lines += ["", DEFINITIONS, "", "## Results", ""]
    lines.append(results_table(points) if points else "No run finished ok.")
    lines += list(sections)  # e.g. tools.report.convergence_section's
    for heading, pairs in comparisons:
        if pairs:
            lines += ["", f"## {heading}", "", comparison_table(pairs)]
    if failures:
        lines += ["", "## Failed runs", "", failure_table(failures)]
    if notes:
        lines += ["", "## Sweep notes", ""] + [f"- {note}" for note in notes]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{name}]({path})" for name, path in plots]
    return "\n".join(lines) + "\n"


def findings_section(points: Sequence[Point]) -> List[str]:
    """Generated sentences as bullets, under a bold panel title when there is more than one panel."""
    panels = [(title, sentences) for title, sentences in findings(points) if sentences]
    lines: List[str] = []
    for title, sentences in panels:
        if len(panels) > 1:
            lines += ([""] if lines else []) + [f"**{title}**", ""]
        lines += [f"- {s}" for s in sentences]
    return lines


def _counts(points: Sequence[Point], failures: Sequence[Failure], num_runs: int) -> str:
    ok = sum(len(p.runs) for p in points)
    retried = sum(1 for f in failures if f.retried_ok)
    later = f" ({retried} of them retried ok later)" if retried else ""
    return f"{num_runs} run(s) found: {ok} ok in {len(points)} configuration(s); {len(failures)} failed{later}."


def _headline(points: Sequence[Point]) -> str:
    if not points:
        return ""
    shared = {k: points[0].config.get(k) for k in _HEADLINE
              if len({repr(p.config.get(k)) for p in points}) == 1}
    parts = []
    if "model" in shared:
        parts.append(f"Model {shared['model']}" + (f" at {shared['image_size']} px" if "image_size" in shared else ""))
    if "num_warmup_steps" in shared and "num_steps" in shared:
        parts.append(f"{shared['num_warmup_steps']} warm-up + {shared['num_steps']} measured steps per run")
    computes = {(p.config.get("compute") or "real", p.config.get("compute_ms")) for p in points}
    if len(computes) == 1 and next(iter(computes))[0] == EMULATED_COMPUTE:
        parts.append(f"compute emulated: a wait of {next(iter(computes))[1]:.1f} ms per worker step in place of the "
                     f"forward and backward pass")
    commits = sorted({r.commit for p in points for r in p.runs if r.commit})
    if commits:
        parts.append(f"measured at tfbench {', '.join(commits)}")
    return "; ".join(parts) + "." if parts else ""


def _extra_keys(points: Sequence[Point], shown: Sequence[str]) -> List[str]:
    """Config keys that vary between points but no standard column shows."""
    covered = ["num_workers", "num_local_devices"] if "scale" in shown else []  # the workers column
    return varying(points, exclude=list(shown) + covered + [k for k in _HEADLINE if k not in ("model", "image_size")])


def knobs_cell(config: Dict) -> str:
    """The strategy's knobs off their defaults (tfbench.config.knobs), and where they came from (a
    saved tuning, or for a default point of `tuning: best`, that this machine has none)."""
    text = knobs.changed(config)
    return text + (f" ({config['knob_source']})" if config.get("knob_source") else "")


def results_table(points: Sequence[Point]) -> str:
    standard = [k for k, _ in STANDARD + SETTINGS] + list(knobs.FIELDS)
    extra = _extra_keys(points, standard)
    with_knobs = any(knobs_cell(p.config) != "default" for p in points)
    headers = ([h for _, h in STANDARD] + ["global batch"] + [h for _, h in SETTINGS] + extra +
               (["knobs"] if with_knobs else []) +
               [rate_label(points), "runs", "spread", "global step ms (mean ± 95% CI)", "jitter ms", "scaling eff."])
    rows = []
    for p in sorted(points, key=lambda p: order_key(p.config)):
        s = p.stats or {}
        rows.append([p.config.get(k) for k, _ in STANDARD] + [p.global_batch] +
                    [p.config.get(k) for k, _ in SETTINGS] + [p.config.get(k) for k in extra] +
                    ([knobs_cell(p.config)] if with_knobs else []) +
                    [fmt(p.rate, 1), len(p.runs), fmt(p.spread, 1),
                     f"{fmt(ms(s.get('mean_s')), 1)} ± {fmt(ms(s.get('ci95_s')), 1)}",
                     fmt(ms(s.get("jitter_s")), 1), percent(p.efficiency)])
    return table(headers, rows)


def comparison_table(pairs: Sequence[Comparison]) -> str:
    column = pairs[0].column
    a_value, b_value = pairs[0].a.config[column], pairs[0].b.config[column]
    points = [c.a for c in pairs]
    shown = [k for k, _ in STANDARD + SETTINGS if k != column]
    extra = _extra_keys(points, shown + [column])
    headers = ([h for k, h in STANDARD + SETTINGS if k != column] + extra +
               [f"{a_value} {rate_label(points)}", f"{b_value} {rate_label(points)}", f"{b_value} / {a_value}"])
    rows = [[c.a.config.get(k) for k in shown] + [c.a.config.get(k) for k in extra] +
            [fmt(c.a.rate, 1), fmt(c.b.rate, 1), fmt(c.ratio, 2)]
            for c in sorted(pairs, key=lambda c: order_key(c.a.config))]
    return table(headers, rows)


def failure_table(failures: Sequence[Failure]) -> str:
    headers = ["run", "strategy", "workers", "batch/replica", "mode", "placement", "device", "failed task", "reason",
               "retried"]
    rows = [[f.name, f.config.get("strategy", ""), f.config.get("num_workers", ""), f.config.get("batch_size", ""),
             f.config.get("mode", ""), f.config.get("placement", ""), f.config.get("device", ""),
             f.failed_task, f.reason, "ok later" if f.retried_ok else "–"] for f in failures]
    return table(headers, rows)


def table(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(out)


def _cell(value) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def fmt(value: Optional[float], digits: int) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:.{digits}f}"


def ms(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else seconds * 1000.0


def percent(value: float) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{100 * value:.0f}%"
