"""What a strategy measured, as typed values: the Measurement an adapter returns, the fields
every adapter reports (TaskSummary) and the strategy-specific parts (dataclasses of their own
modules), which become the task record's fields (docs/results.md) only when the record is
written (Measurement.fields).

A part's field named in the record is its name; `absent()` marks a field the record leaves
out when it is None (the record lacks the field rather than holding null), `flat()` a dict
whose entries are fields of their own (the strategy's knobs, each under its flag's name).
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Type, TypeVar

from tfbench.loop.step_loop import StepTiming

OWN_STEP = ("this task's step, start to result on the host (a synchronous rank's view of the global step)")
Part = TypeVar("Part")


def absent(default=None):
    """A field left out of the record while it is None."""
    return dataclasses.field(default=default, metadata={"absent_if_none": True})


def flat():
    """A dict whose entries are record fields themselves."""
    return dataclasses.field(default_factory=dict, metadata={"flat": True})


def fields_of(part) -> Dict:
    """A part's record fields (see the module's docstring); its values as they are (a nested
    dict stays a dict)."""
    out: Dict = {}
    for f in dataclasses.fields(part):
        value = getattr(part, f.name)
        if f.metadata.get("flat"):
            out.update(value)
        elif value is not None or not f.metadata.get("absent_if_none"):
            out[f.name] = value
    return out


@dataclasses.dataclass
class TaskSummary:
    """Task-record fields every adapter reports."""

    strategy: str
    batch_size: int
    replicas: int
    local_replicas: int
    global_batch_size: int
    model: str
    mode: str
    precision: str
    step_label: str = "own step"
    step_definition: str = OWN_STEP


@dataclasses.dataclass
class Checkpointing:
    """--checkpoint_every: how often, and the step this attempt restored (0: none)."""

    checkpoint_every: int
    restored_from_step: int


@dataclasses.dataclass
class Measurement:
    """What one task (or, for parameter servers, one worker) measured: its measured steps, the
    summary, where its ops ran, held-out evaluation and checkpoints when the run had them, and
    the strategy's own parts."""

    role: str
    index: int
    examples_per_step: int
    timings: List[StepTiming]
    summary: TaskSummary
    placement: Optional[dict] = None
    convergence: Optional[dict] = None
    checkpoint: Optional[Checkpointing] = None
    parts: Sequence = ()
    started_with_launch: bool = True  # False: the process joined the run later (a rejoining elastic rank)

    def part(self, kind: Type[Part]) -> Optional[Part]:
        """The strategy's part of this type, None if it has none."""
        return next((p for p in self.parts if isinstance(p, kind)), None)

    def fields(self) -> Dict:
        """The task record's fields (tfbench.results.records.task_record's extra)."""
        out = fields_of(self.summary)
        for part in self.parts:
            out.update(fields_of(part))
        if self.checkpoint is not None:
            out.update(fields_of(self.checkpoint))
        if self.convergence is not None:
            out["convergence"] = self.convergence
        if self.placement is not None:
            out["placement"] = self.placement
        return out
