"""The global steps of a Horovod elastic run, merged by step number.

In an elastic run ranks leave and join: a killed rank's record is lost with it, and a rank that
joins late records only the steps from its joining on. Each rank therefore records, beside every
measured step, the step's number (`step_index`) and how many ranks took part (`step_ranks`).
Global step k runs from the first rank's start to the last rank's end of step k, as in a fixed
synchronous cluster, and holds `ranks x batch` examples; a step that failed when a rank died was
never completed, is not in any record, and its time is in the window, not in a step.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Sequence

DEFINITION = ("global step by step number: first rank's start to last rank's end of step k, examples = ranks "
              "in the step x batch per rank (Horovod elastic: the number of ranks changes)")


@dataclasses.dataclass(frozen=True)
class GlobalStep:
    index: int
    start: float
    end: float
    rank_count: int  # ranks that took part in it
    examples: int

    @property
    def duration(self) -> float:
        return self.end - self.start


def applies(task_records: Sequence[dict]) -> bool:
    return any(r.get("kind") == "task" and r.get("step_ranks") is not None for r in task_records)


def merged(task_records: Sequence[dict]) -> List[GlobalStep]:
    """Every measured global step any rank recorded, in step order."""
    by_index: Dict[int, dict] = {}
    for r in task_records:
        if r.get("kind") != "task" or r.get("step_ranks") is None:
            continue
        # A rank may record step k twice: done, then undone by a reset that synchronised an older
        # state from rank 0, and done again. Only its last time counts.
        last = {int(k): (start, duration, ranks) for k, start, duration, ranks in
                zip(r["step_index"], r["step_start_wall"], r["step_times_s"], r["step_ranks"])}
        for k, (start, duration, ranks) in last.items():
            step = by_index.setdefault(k, {"start": start, "end": start + duration, "ranks": int(ranks),
                                           "batch": int(r["examples_per_step"])})
            step["start"], step["end"] = min(step["start"], start), max(step["end"], start + duration)
            step["ranks"] = max(step["ranks"], int(ranks))
    return [GlobalStep(k, s["start"], s["end"], s["ranks"], s["ranks"] * s["batch"])
            for k, s in sorted(by_index.items())]
