"""What `python -m tfbench --dry_run` prints: every process the plan would start, and how.

Nothing is started and nothing is written: the commands name the run directory the real run
would create.
"""
from __future__ import annotations

import json
import shlex
from typing import Callable, List

from cluster.spec import ClusterPlan, TaskSpec

# How each launcher would start the commands below.
WHERE = {
    "local": "as processes of this machine",
    "emulated": "each inside its host's network namespace (created at start, removed at the end)",
    "slurm": "as Slurm tasks (srun steps, or an sbatch job from outside an allocation)",
}


def render(plan: ClusterPlan, run_path: str, command_for: Callable[[TaskSpec], List[str]],
           group_command: Callable[[ClusterPlan], List[str]], where: str = "local") -> str:
    lines = [f"tfbench: dry run: {len(plan.tasks)} task(s) of {plan.strategy} would start {WHERE[where]}; "
             f"run directory {run_path} (not created)"]
    lines += [f"tfbench: warning: {w}" for w in plan.warnings]
    for t in plan.tasks:
        cores = ",".join(map(str, t.cores)) if t.cores else "not pinned"
        port = str(t.port) if t.port else "none"
        role = "serves until stopped" if t.service else ("measures" if t.measures else "side task")
        lines.append(f"{t.name}: host={t.host} cores={cores} threads={t.intra_threads} intra / "
                     f"{t.inter_threads} inter port={port} ({role})")
        if t.tf_config is not None:
            lines.append(f"    TF_CONFIG={json.dumps(t.tf_config, sort_keys=True)}")
        if plan.strategy == "horovod":
            lines.append(f"    Horovod rank {t.horovod_rank}")
        else:
            lines.append(f"    command: {shlex.join(command_for(t))}")
    if plan.strategy == "horovod":
        lines.append(f"horovodrun (one process for all ranks): {shlex.join(group_command(plan))}")
    return "\n".join(lines)
