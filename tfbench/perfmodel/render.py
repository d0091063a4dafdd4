"""Predicted points as the text table or the CSV that `python -m tools.model predict` prints.

Both carry the same rows and columns. The CSV starts with the header facts (the model, |w|, the
link and compute and where each came from, the assumptions) as `#` comment lines, so that a
CSV file keeps its provenance; read it with e.g. pandas.read_csv(path, comment="#").
"""
from __future__ import annotations

import csv
import io
from typing import List, Sequence

from tfbench.perfmodel.prediction import Point

COLUMNS = ("num_workers", "step_ms", "compute_ms", "communication_ms", "apply_ms", "overhead_ms",
           "images_per_sec", "scaling_efficiency", "bottleneck")
PS_COLUMNS = ("updates_per_sec",)  # parameter server: updates applied per second
ALLREDUCE_COLUMNS = ("algbw_GBps", "busbw_GBps")  # all-reduce, as nccl-tests reports it (1e9 bytes/s)


def columns(strategy: str) -> tuple:
    return COLUMNS + (PS_COLUMNS if strategy == "parameter_server" else ALLREDUCE_COLUMNS)


def _values(p: Point) -> dict:
    gb = lambda v: None if v is None else v / 1e9  # noqa: E731
    return {"num_workers": p.num_workers, "step_ms": p.step_s * 1e3, "compute_ms": p.compute_s * 1e3,
            "communication_ms": p.communication_s * 1e3, "apply_ms": p.apply_s * 1e3,
            "overhead_ms": p.overhead_s * 1e3, "images_per_sec": p.images_per_sec,
            "scaling_efficiency": p.scaling_efficiency, "bottleneck": p.bottleneck,
            "updates_per_sec": p.updates_per_sec, "algbw_GBps": gb(p.algbw), "busbw_GBps": gb(p.busbw)}


def _decimals(name: str, values: Sequence) -> int:
    """A column's decimals: 3 while its largest value is below 100 (and always for ratios and
    bandwidths), else 1."""
    numbers = [abs(v) for v in values if isinstance(v, float)]
    return 3 if name == "scaling_efficiency" or name.endswith("GBps") or max(numbers, default=0) < 100 else 1


def _table_cell(value, decimals: int) -> str:
    if value is None:
        return "-"
    return f"{value:.{decimals}f}" if isinstance(value, float) else str(value)


def table(points: Sequence[Point], strategy: str, header: Sequence[str] = ()) -> str:
    """The header lines, a blank line, then the rows, right-aligned (the bottleneck left)."""
    names = columns(strategy)
    values = [_values(p) for p in points]
    decimals = {n: _decimals(n, [v[n] for v in values]) for n in names}
    rows: List[List[str]] = [[_table_cell(v[n], decimals[n]) for n in names] for v in values]
    widths = [max(len(n), *(len(r[i]) for r in rows)) for i, n in enumerate(names)]

    def line(cells) -> str:
        return "  ".join(c.ljust(w) if n == "bottleneck" else c.rjust(w)
                         for n, c, w in zip(names, cells, widths)).rstrip()

    return "\n".join(list(header) + ([""] if header else []) + [line(names)] + [line(r) for r in rows])


def csv_text(points: Sequence[Point], strategy: str, header: Sequence[str] = ()) -> str:
    """`# ` header lines, then a CSV header row and one row per point (empty cell: not applicable)."""
    out = io.StringIO()
    for text in header:
        out.write(f"# {text}\n")
    writer = csv.writer(out, lineterminator="\n")
    names = columns(strategy)
    writer.writerow(names)
    for p in points:
        values = _values(p)
        writer.writerow(["" if values[n] is None else values[n] if isinstance(values[n], (str, int))
                         else f"{values[n]:.9g}" for n in names])
    return out.getvalue().rstrip("\n")
