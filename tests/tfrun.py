"""Helpers for tests that launch real TensorFlow runs: run the CLI, read a run's records (each
field checked against docs/results.md) and its TensorBoard events back with tensorboard's own
reader."""
from __future__ import annotations

import json
import os
from typing import Dict, List

from results_doc import undocumented_in_run

from conftest import TINY, run_cli


def run_tiny(logdir: str, run_id: str, *args, env=None, timeout=300):
    """The CLI on the tiny model; asserts success and returns (stdout, run directory)."""
    proc = run_cli(*TINY, f"--logdir={logdir}", f"--run_id={run_id}", "--stall_timeout=120", *args,
                   env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout, os.path.join(logdir, run_id)


def records(run_dir: str) -> List[dict]:
    """The run's records; fails when one holds a field docs/results.md does not document."""
    with open(os.path.join(run_dir, "results.jsonl")) as f:
        found = [json.loads(line) for line in f if line.strip()]
    missing = undocumented_in_run(run_dir)
    assert not missing, "written but not in docs/results.md (add a row each): " + "; ".join(missing)
    return found


def task_records(run_dir: str) -> Dict[str, dict]:
    return {f"{r['role']}_{r['index']}": r for r in records(run_dir) if r["kind"] == "task"}


def cluster_record(run_dir: str) -> dict:
    (cluster,) = [r for r in records(run_dir) if r["kind"] == "cluster"]
    return cluster


def scalars(event_dir: str) -> Dict[str, List]:
    """tag -> [ScalarEvent(wall_time, step, value)] as TensorBoard would show them."""
    from tensorboard.backend.event_processing import event_accumulator

    acc = event_accumulator.EventAccumulator(event_dir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return {tag: acc.Scalars(tag) for tag in acc.Tags()["scalars"]}
