"""A sweep directory's state, kept on disk so that a sweep can stop anywhere and resume.

<sweep_dir>/sweep.json    the grid (a re-run must describe the same points)
<sweep_dir>/points.jsonl  append-only: one line per finished attempt (done or failed, with reason)
<sweep_dir>/runs/         one tfbench run directory per attempt, never reused
<sweep_dir>/logs/         each attempt's stdout and stderr
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional

from tfbench.results import records

DONE = "done"
FAILED = "failed"


@dataclasses.dataclass(frozen=True)
class SweepDir:
    path: str

    @property
    def spec_file(self) -> str:
        return os.path.join(self.path, "sweep.json")

    @property
    def points_file(self) -> str:
        return os.path.join(self.path, "points.jsonl")

    @property
    def runs_dir(self) -> str:
        return os.path.join(self.path, "runs")

    @property
    def logs_dir(self) -> str:
        return os.path.join(self.path, "logs")

    def exists(self) -> bool:
        return os.path.exists(self.spec_file)

    def read_spec(self) -> Optional[dict]:
        if not self.exists():
            return None
        with open(self.spec_file, encoding="utf-8") as f:
            return json.load(f)

    def write_spec(self, spec: dict) -> None:
        os.makedirs(self.runs_dir, exist_ok=True)
        os.makedirs(self.logs_dir, exist_ok=True)
        tmp = self.spec_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(spec, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, self.spec_file)

    def attempts(self) -> List[dict]:
        return [r for r in records.read(self.points_file) if "point_id" in r]

    def latest(self) -> Dict[str, dict]:
        """The last recorded attempt of every point."""
        return {r["point_id"]: r for r in self.attempts()}

    def record(self, attempt: dict) -> None:
        records.append(self.points_file, attempt)

    def next_run_id(self, point_id: str) -> str:
        """The point id, then <id>-try2, -try3...: the first one no attempt or run dir has used."""
        used = {r.get("run_id") for r in self.attempts()}
        n = 1
        while True:
            run_id = point_id if n == 1 else f"{point_id}-try{n}"
            if run_id not in used and not os.path.exists(os.path.join(self.runs_dir, run_id)):
                return run_id
            n += 1

    def log_paths(self, run_id: str):
        return (os.path.join(self.logs_dir, f"{run_id}.stdout"), os.path.join(self.logs_dir, f"{run_id}.stderr"))


def find_sweep(path: str) -> Optional[SweepDir]:
    sweep = SweepDir(path)
    return sweep if os.path.exists(sweep.points_file) or sweep.exists() else None
