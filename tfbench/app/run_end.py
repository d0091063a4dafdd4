"""The end of a run, written by one function whoever launched it (python -m tfbench, or
python -m cluster.merge for tasks started by hand or as Slurm steps): the run's HParams, each
global step's split in TensorBoard, and the run table with where the records are."""
from __future__ import annotations

from typing import Optional

from tfbench.results import records, table
from tfbench.results.rundir import RunDir
from tfbench.tensorboard import hint, step_split
from tfbench.tensorboard.hparams import write_hparams


def finish(run: RunDir, config, cluster_record: Optional[dict], ok: bool = True) -> Optional[str]:
    """Writes the run's end; returns what to print (the table and where things are) when it
    succeeded, None when it failed."""
    write_hparams(run, config, cluster_record)
    step_split.write(run, cluster_record)
    return summary(run, config, cluster_record) if ok and cluster_record else None


def summary(run: RunDir, config, cluster_record: dict) -> str:
    """The run table, where the records are and how to open TensorBoard (nothing written)."""
    tasks = [r for r in records.read(run.results) if r.get("kind") == "task"]
    return f"{table.render(config, cluster_record, tasks)}\nresults: {run.results}\n{hint.text(run.tb_dir)}"
