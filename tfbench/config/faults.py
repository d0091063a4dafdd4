"""--fault: failures injected on purpose, parsed and checked before anything starts.

`TASK:kill@STEP` sends SIGKILL to the task once the run has finished STEP measured steps;
`TASK:hang@STEP` sends SIGSTOP (the task stays stopped until the run ends). Several faults are
separated by commas, one per task. The launcher applies them (cluster.faults.injector) and the
cluster record keeps what was done and what the run did about it.
"""
from __future__ import annotations

import dataclasses
import re
from typing import List

KINDS = ("kill", "hang")
_FAULT = re.compile(r"^(?P<task>[a-z]+_\d+):(?P<kind>[a-z]+)@(?P<step>\d+)$")


@dataclasses.dataclass(frozen=True)
class Fault:
    task: str
    kind: str  # kill (SIGKILL) or hang (SIGSTOP)
    step: int  # measured steps the run has finished when the fault is applied

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def parse(spec: str) -> List[Fault]:
    """Faults of a --fault value; ValueError with the reason on a malformed one."""
    faults = []
    for item in (part.strip() for part in spec.split(",")):
        match = _FAULT.match(item)
        if not match or match.group("kind") not in KINDS:
            raise ValueError(f"--fault={item!r}: expected TASK:kill@STEP or TASK:hang@STEP, e.g. worker_1:kill@5")
        faults.append(Fault(match.group("task"), match.group("kind"), int(match.group("step"))))
    return faults
