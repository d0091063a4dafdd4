"""Each global step's split (tfbench.measure.breakdown) in TensorBoard, under tb/cluster: one
series per part, and the parts stacked (compute, + communication, + apply, + waiting = the
step) so that the bands between the lines of one chart show where each step's time went."""
from __future__ import annotations

from typing import Optional

from tfbench.measure.breakdown import PARTS
from tfbench.results.rundir import RunDir
from tfbench.tensorboard import timeline
from tfbench.tensorboard.events import EventWriter

TB_NAME = "cluster"


def tags(breakdown: dict) -> list:
    """The parts a run has (apply only where the ps applies updates apart)."""
    return [p for p in PARTS if p != "apply" or any(breakdown["per_step_s"]["apply"])]


def write(run: RunDir, record: Optional[dict]) -> int:
    """Writes every global step's parts; returns how many steps were written (0: no split)."""
    breakdown = (record or {}).get("step_breakdown") or {}
    starts = breakdown.get("step_start_wall") or []
    if not starts:
        return 0
    origin, parts = timeline.origin(run.path), tags(breakdown)
    with EventWriter(run.task_tb(TB_NAME), suffix=".split") as writer:
        for i, (start, total) in enumerate(zip(starts, breakdown["step_s"])):
            values, stacked = {}, 0.0
            for n, part in enumerate(parts, 1):
                ms = breakdown["per_step_s"][part][i] * 1e3
                stacked += ms
                values[f"split/{part}_ms"] = ms
                values[f"split_stacked/{n}_{'+'.join(parts[:n])}_ms"] = stacked
            values["split_stacked/step_ms"] = total * 1e3
            end = start + total
            writer.scalars(values, step=timeline.step_ms(origin, end), wall_time=end)
    return len(starts)
