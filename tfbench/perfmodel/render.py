"""Rows of predictions as the text table, the plain CSV or the JSON that `python -m tools.model`
prints: every verb's rows go through here, so that every format carries the intervals.

A row is a dict of column name -> value (text, number, None for not applicable, or an
intervals.Interval). An interval column prints as `point [low, high]` in the table (its header
names the level), as three CSV columns NAME, NAME_low, NAME_high (with `interval_level` once),
and as {"point", "low", "high", "level", "basis"} in JSON. The CSV is plain: a header row first,
then one row per point; the facts behind the numbers go to standard error (`header`).
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from typing import List, Optional, Sequence

from tfbench.perfmodel.intervals import Interval

FORMATS = ("table", "csv", "json")
TEXT, NUMBER, ERROR, INTERVAL = "text", "number", "error", "interval"


@dataclasses.dataclass(frozen=True)
class Column:
    name: str
    kind: str = NUMBER  # text, number, error (a signed fraction, printed in percent) or interval
    decimals: Optional[int] = None  # None: 3 while the column's largest value is below 100, else 1


def _numbers(column: Column, rows: Sequence[dict]) -> List[float]:
    out = []
    for r in rows:
        v = r.get(column.name)
        out += [v.point, v.low, v.high] if isinstance(v, Interval) else [v] if isinstance(v, float) else []
    return [abs(x) for x in out if math.isfinite(x)]


def _decimals(column: Column, rows: Sequence[dict]) -> int:
    if column.decimals is not None:
        return column.decimals
    return 3 if max(_numbers(column, rows), default=0) < 100 else 1


def _cell(value, column: Column, decimals: int) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, Interval):
        return value.text(decimals)
    if column.kind == ERROR:
        return f"{value:+.1%}"
    return f"{value:.{decimals}f}" if isinstance(value, float) else str(value)


def _heading(column: Column, rows: Sequence[dict]) -> str:
    levels = {r[column.name].level_text for r in rows if isinstance(r.get(column.name), Interval)}
    return f"{column.name} [{'/'.join(sorted(levels))}]" if column.kind == INTERVAL and levels else column.name


def table(rows: Sequence[dict], columns: Sequence[Column], header: Sequence[str] = ()) -> str:
    """The header lines, a blank line, then the rows: numbers right-aligned, text left."""
    decimals = [_decimals(c, rows) for c in columns]
    names = [_heading(c, rows) for c in columns]
    cells = [[_cell(r.get(c.name), c, d) for c, d in zip(columns, decimals)] for r in rows]
    widths = [max(len(n), *(len(r[i]) for r in cells)) if cells else len(n) for i, n in enumerate(names)]

    def line(values) -> str:
        return "  ".join(v.ljust(w) if c.kind == TEXT else v.rjust(w)
                         for c, v, w in zip(columns, values, widths)).rstrip()

    return "\n".join(list(header) + ([""] if header else []) + [line(names)] + [line(r) for r in cells])


def _plain(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.9g}" if math.isfinite(value) else ""
    return str(value)


def csv_text(rows: Sequence[dict], columns: Sequence[Column]) -> str:
    """A header row, then one row per point (empty cell: not applicable)."""
    names, level = [], any(c.kind == INTERVAL for c in columns)
    for c in columns:
        names += [c.name, f"{c.name}_low", f"{c.name}_high"] if c.kind == INTERVAL else [c.name]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names + (["interval_level"] if level else []))
    for r in rows:
        values, levels = [], set()
        for c in columns:
            v = r.get(c.name)
            if c.kind != INTERVAL:
                values.append(_plain(v))
            elif isinstance(v, Interval):
                values += [_plain(v.point), _plain(v.low), _plain(v.high)]
                levels.add(v.level_text)
            else:
                values += [_plain(v), "", ""]
        writer.writerow(values + (["/".join(sorted(levels))] if level else []))
    return out.getvalue().rstrip("\n")


def _json_value(value):
    if isinstance(value, Interval):
        return value.as_dict()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_text(rows: Sequence[dict], columns: Sequence[Column], facts: Sequence[str] = (), **extra) -> str:
    """{"columns", "rows" (one object each), "facts" and any `extra` (e.g. the summary)}."""
    doc = {"columns": [c.name for c in columns],
           "rows": [{c.name: _json_value(r.get(c.name)) for c in columns} for r in rows], "facts": list(facts)}
    doc.update(extra)
    return json.dumps(doc, indent=1, default=_json_value)


def render(rows: Sequence[dict], columns: Sequence[Column], fmt: str, facts: Sequence[str] = (), **extra) -> str:
    """The rows in `fmt` (table, csv or json); the table and JSON carry `facts` (the CSV leaves
    them to the caller, who prints them to standard error)."""
    if fmt == "csv":
        return csv_text(rows, columns)
    if fmt == "json":
        return json_text(rows, columns, facts, **extra)
    return table(rows, columns, facts)
