"""Each global step's split (tfbench.measure.breakdown) in TensorBoard, under tb/cluster: one
series per part, and the parts stacked (compute, + communication, + input, + apply, + waiting =
the step) so that the bands between the lines of one chart show where each step's time went; and the
bandwidth each step's communication achieved (comm/*, tfbench.measure.comm)."""
from __future__ import annotations

from typing import Optional

from tfbench.measure.breakdown import PARTS
from tfbench.results.rundir import RunDir
from tfbench.tensorboard import timeline
from tfbench.tensorboard.events import EventWriter

TB_NAME = "cluster"


def tags(breakdown: dict) -> list:
    """The parts a run has (apply only where the ps applies updates apart, input where it was measured)."""
    return [p for p in PARTS if p not in ("apply", "input") or any(breakdown["per_step_s"].get(p) or ())]


def bandwidth(communication: Optional[dict], communication_s: float) -> dict:
    """This step's achieved bandwidth (tfbench.measure.comm): algbw, and busbw for all-reduce."""
    if not communication or communication_s <= 0:
        return {}
    algbw = communication["bytes_per_step"] * 8 / communication_s / 1e9
    out = {"comm/algbw_gbit_s": algbw, "comm/messages_per_step": float(communication["messages_per_step"])}
    if communication.get("kind") == "all-reduce" and communication.get("workers", 1) > 1:
        n = communication["workers"]
        out["comm/busbw_gbit_s"] = algbw * 2 * (n - 1) / n
    return out


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
            values.update(bandwidth(record.get("communication"), breakdown["per_step_s"]["communication"][i]))
            end = start + total
            writer.scalars(values, step=timeline.step_ms(origin, end), wall_time=end)
    return len(starts)
