"""What the points show, in a few sentences computed from them: the fastest strategy at each
worker count, the points whose steps wait mostly for their input, scaling efficiency at the
largest count, and where a strategy stops gaining.

No strategy is called fastest where one of the lines compared ran at its defaults because this
machine has no tuning of it (tfbench.results.tuned.NOT_TUNED_HERE): such an order is its
defaults', not the strategy's; the sentence says what the defaults decide instead.
The sentences compare the lines tools.report.plot_lines draws in the scaling plots (one per
strategy and other differing axis, in one panel per mode and batch), so text and figures never
disagree.
Two points whose 95% intervals across repeats overlap are not called different.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

from tfbench.measure import breakdown
from tfbench.results import tuned
from tools.report import plot_lines
from tools.report.aggregate import Point


def findings(points: Sequence[Point]) -> List[Tuple[str, List[str]]]:
    """(panel title, sentences) for every panel of the scaling plots."""
    points = [p for p in points if _finite(p.rate)]
    groups = plot_lines.panels(points, x=plot_lines.SCALE, panel_keys=plot_lines.SCALING_PANELS, primary="strategy")
    return [(g.title, panel_findings(g)) for g in groups]


def panel_findings(panel: plot_lines.Panel) -> List[str]:
    scales = panel.xs
    sentences = [fastest(panel, n) for n in scales] + input_bound(panel)
    if len(scales) == 1:
        sentences.append(f"Only {_at(panel, scales[0])} measured: scaling cannot be judged.")
        return [s for s in sentences if s]
    sentences += efficiency(panel)
    growing = [line for line in panel.lines if len(line.points) > 1]
    stalls = {line.label: stall(line) for line in growing}
    sentences += gains([line for line in growing if not stalls[line.label]])
    sentences += [stalls[line.label] for line in growing]
    return [s for s in sentences if s]


def fastest(panel: plot_lines.Panel, n) -> str:
    """Which line has the highest cluster rate at scale n, and by how much."""
    ranked = sorted(((line, line.at(n)) for line in panel.lines if line.at(n) is not None),
                    key=lambda lp: lp[1].rate, reverse=True)
    if len(ranked) < 2:
        return ""
    (best, top), (second, runner) = ranked[0], ranked[1]
    where = f"At {_at(panel, n)}"
    untuned = [line.label for line, p in ranked if p.config.get("knob_source") == tuned.NOT_TUNED_HERE]
    if untuned:  # a default against a tuning, or two defaults: the defaults decide, not the strategies
        ratios = ", ".join(f"{top.rate / p.rate:.2f}× {line.label}" for line, p in ranked[1:] if p.rate > 0)
        return (f"{where} {' and '.join(untuned)} ran at {'its' if len(untuned) == 1 else 'their'} defaults, "
                f"{tuned.NOT_TUNED_HERE}, so no strategy is called fastest: the defaults decide this order, "
                f"{best.label} first ({_rate(top)}, {ratios}).")
    if overlap(top, runner):
        return (f"{where} {best.label} ({_rate(top)}) and {second.label} ({runner.rate:.1f}) lie within "
                f"each other's 95% intervals: neither is clearly fastest.")
    if runner.rate > 0 and f"{top.rate / runner.rate:.2f}" == "1.00":
        return f"{where} {best.label} and {second.label} are level ({_rate(top)} and {runner.rate:.1f})."
    ratios = ", ".join(f"{top.rate / p.rate:.2f}× {line.label}" for line, p in ranked[1:]
                       if p.rate > 0)
    return f"{where} {best.label} is fastest ({_rate(top)}, {ratios})."


def input_bound(panel: plot_lines.Panel) -> List[str]:
    """The points whose runs wait for their input longer than for any other part of the step."""
    sentences = []
    for line in panel.lines:
        for p in line.points:
            splits = [(r.cluster or {}).get("step_breakdown") for r in p.runs]
            if splits and all(breakdown.input_dominates(s) for s in splits):
                share = sum(s["share"]["input"] for s in splits) / len(splits)
                sentences.append(f"{line.label} at {_count(p.config[plot_lines.SCALE], [p.config])} is input-bound: "
                                 f"waiting for its batches is {share:.0%} of the global step, more than any other "
                                 f"part.")
    return sentences


def efficiency(panel: plot_lines.Panel) -> List[str]:
    """Scaling efficiency of each line at its largest scale, grouped by that scale."""
    by_scale: Dict[int, List[Point]] = {}
    for line in panel.lines:
        largest = line.points[-1]
        if largest.config[plot_lines.SCALE] != 1:
            by_scale.setdefault(largest.config[plot_lines.SCALE], []).append(largest)
    labels = {id(line.points[-1]): line.label for line in panel.lines}
    sentences = []
    for n in sorted(by_scale):
        at = _count(n, [p.config for p in by_scale[n]])
        known = sorted((p for p in by_scale[n] if _finite(p.efficiency)), key=lambda p: -p.efficiency)
        missing = [labels[id(p)] for p in by_scale[n] if not _finite(p.efficiency)]
        if known:
            sentences.append(f"Scaling efficiency at {at}: "
                             + ", ".join(f"{labels[id(p)]} {100 * p.efficiency:.0f}%" for p in known) + ".")
        if missing:
            sentences.append(f"Scaling efficiency at {at} cannot be computed for {', '.join(missing)}: "
                             f"no comparable 1-worker point.")
    return sentences


def stall(line: plot_lines.Line) -> str:
    """Where the line first stops gaining throughput as workers are added; '' when it never does."""
    points = line.points
    for cur, nxt in zip(points, points[1:]):
        a, b = cur.config[plot_lines.SCALE], nxt.config[plot_lines.SCALE]
        unit = plot_lines.scale_unit(cur.config)
        versus = f"({b} {unit}: {nxt.rate:.1f} vs {_rate(cur)})"
        if nxt.rate <= cur.rate:
            return (f"{line.label} stops gaining after {a} {plot_lines.scale_unit(cur.config, a)} {versus}"
                    + _regains(line, cur) + ".")
        if overlap(cur, nxt):
            return (f"{line.label} gains nothing beyond its 95% intervals from {a} to {b} {unit} {versus}"
                    + _regains(line, nxt) + ".")
    return ""


def gains(lines: Sequence[plot_lines.Line]) -> List[str]:
    """One sentence per last step shared by lines that gain at every step, with each line's
    ratio over that last step."""
    steps: Dict[Tuple, List[plot_lines.Line]] = {}
    for line in lines:
        before, last = line.points[-2], line.points[-1]
        key = (before.config[plot_lines.SCALE], last.config[plot_lines.SCALE], plot_lines.scale_unit(last.config))
        steps.setdefault(key, []).append(line)
    sentences = []
    for (a, b, unit), members in steps.items():
        ratios = [(line.label, line.points[-1].rate / line.points[-2].rate) for line in members]
        rate = f"{members[0].points[-1].unit}/sec"
        if len(ratios) == 1:
            label, ratio = ratios[0]
            sentences.append(f"{label} gains at every step up to {b} {unit} ({a} → {b}: {ratio:.2f}× the {rate}).")
        else:
            names = ", ".join(label for label, _ in ratios[:-1]) + f" and {ratios[-1][0]}"
            each = ", ".join(f"{label} {ratio:.2f}×" for label, ratio in ratios)
            sentences.append(f"{names} gain at every step up to {b} {unit} ({a} → {b}: {each} the {rate}).")
    return sentences


def _regains(line: plot_lines.Line, stall: Point) -> str:
    """A later point beyond the stall, so that 'stops gaining' never hides a later rise."""
    later = [p for p in line.points if p.config[plot_lines.SCALE] > stall.config[plot_lines.SCALE]
             and p.rate > stall.rate and not overlap(p, stall)]
    if not later:
        return ""
    p = later[0]
    return f", but is faster again at {p.config[plot_lines.SCALE]} ({_rate(p)})"


def overlap(a: Point, b: Point) -> bool:
    """True when both points have repeats and their 95% intervals across them overlap."""
    ia, ib = _interval(a), _interval(b)
    if ia is None or ib is None:
        return False
    return ia[0] <= ib[1] and ib[0] <= ia[1]


def _interval(p: Point) -> Optional[Tuple[float, float]]:
    if len(p.runs) < 2:
        return None
    low, high = p.interval
    return (low, high) if _finite(low) and not math.isnan(high) else None


def _at(panel: plot_lines.Panel, n) -> str:
    return _count(n, [line.at(n).config for line in panel.lines if line.at(n) is not None])


def _count(n, configs: Sequence[Dict]) -> str:
    """'2 workers', or '2 local devices' when every config counted is mirrored."""
    units = {plot_lines.scale_unit(c, n) for c in configs}
    return f"{n} {units.pop() if len(units) == 1 else plot_lines.scale_unit({}, n)}"


def _rate(p: Point) -> str:
    return f"{p.rate:.1f} {p.unit}/sec"


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
