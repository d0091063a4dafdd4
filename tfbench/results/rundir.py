"""The run directory: one per run, never overwritten.

<logdir>/<run_id>/ config.json, environment.json, plan.json, results.jsonl,
tasks/<role>_<index>.log, tb/<role>_<index>/ (TensorBoard events), tb/ (HParams).
"""
from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import tempfile

from tfbench.config.errors import ConfigError


SCRATCH_PREFIX = "tfbench-scratch-"


@dataclasses.dataclass(frozen=True)
class RunDir:
    path: str

    @property
    def run_id(self) -> str:
        return os.path.basename(self.path)

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    @property
    def results(self) -> str:
        return self.file("results.jsonl")

    @property
    def tasks_dir(self) -> str:
        return self.file("tasks")

    def task_log(self, task_name: str) -> str:
        return os.path.join(self.tasks_dir, f"{task_name}.log")

    @property
    def tb_dir(self) -> str:
        return self.file("tb")

    def task_tb(self, task_name: str) -> str:
        return os.path.join(self.tb_dir, task_name)

    @property
    def scratch(self) -> str:
        """The run's temporary directory (its tasks' TMPDIR), outside the run directory and removed
        when the run ends: TensorFlow writes autograph sources there and deletes them only at a clean
        exit, which a task ended by a signal (every parameter server) never reaches."""
        digest = hashlib.sha1(self.path.encode()).hexdigest()[:8]
        return os.path.join(tempfile.gettempdir(), f"{SCRATCH_PREFIX}{self.run_id[-40:]}-{digest}")

    def write_json(self, name: str, value) -> None:
        tmp = self.file(name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2, sort_keys=True, default=str)
            f.write("\n")
        os.replace(tmp, self.file(name))

    def read_json(self, name: str):
        with open(self.file(name), encoding="utf-8") as f:
            return json.load(f)


def default_run_id(model: str, strategy: str, num_workers: int) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    return f"{stamp}-{model}-{strategy}-w{num_workers}"


def create(logdir: str, run_id: str) -> RunDir:
    """Creates the run directory; an existing one is never reused."""
    path = os.path.abspath(os.path.join(logdir, run_id))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        os.mkdir(path)
    except FileExistsError:
        raise ConfigError(f"run {run_id!r} already exists in {logdir}; runs are never overwritten") from None
    run = RunDir(path)
    os.makedirs(run.tasks_dir)
    os.makedirs(run.tb_dir)
    return run
