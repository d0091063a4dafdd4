"""`python -m cluster.merge --run_dir DIR`: the cluster record and table of a run whose tasks were
started outside the local launcher (by hand from `python -m cluster.by_hand --run_dir`, or as Slurm
steps).

Every task appends its own record to DIR/results.jsonl; this computes the cluster record from
them with the same function and the same fields as the local launcher, appends it once, writes
the run's end (tfbench.app.run_end) and prints the table. Run it again and it prints the table again.
"""
from __future__ import annotations

import sys
from typing import Optional

from tfbench.app import run_end
from tfbench.config import RunConfig
from tfbench.config.helptext import argument_parser
from tfbench.results import records
from tfbench.results.rundir import RunDir


def existing(run: RunDir) -> Optional[dict]:
    """The run's successful cluster record, if one was written."""
    found = [r for r in records.read(run.results) if r.get("kind") == "cluster" and r.get("status") == "ok"]
    return found[-1] if found else None


def merge(run: RunDir, launcher: str, resources: Optional[dict] = None) -> dict:
    """Appends the cluster record of the run's task records (ValueError when no task measured)."""
    config = RunConfig.from_dict(run.read_json("config.json"))
    task_records = [r for r in records.read(run.results) if r.get("kind") == "task"]
    extra = {"config": config.to_dict(), "strategy": config.strategy, "num_workers": config.num_workers,
             "num_ps": config.effective_num_ps, "launcher": launcher, "resources": resources or {}}
    record = records.cluster_record(run.run_id, task_records, extra=extra)
    records.append(run.results, record)
    return record


def main(argv=None) -> int:
    parser = argument_parser(__doc__, "cluster.merge")
    parser.add_argument("--run_dir", required=True, help="the run directory the tasks wrote to")
    args = parser.parse_args(argv)
    run = RunDir(args.run_dir.rstrip("/"))
    try:
        run.read_json("config.json")
    except OSError:
        print(f"tfbench: error: {args.run_dir} is not a tfbench run directory (no config.json)", file=sys.stderr)
        return 2
    config, record = RunConfig.from_dict(run.read_json("config.json")), existing(run)
    if record is not None:  # merged before: its end is written
        print(run_end.summary(run, config, record), flush=True)
        return 0
    try:
        record = merge(run, "manual")
    except ValueError as e:
        print(f"tfbench: error: nothing to merge in {run.results}: {e}", file=sys.stderr)
        return 1
    print(run_end.finish(run, config, record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
