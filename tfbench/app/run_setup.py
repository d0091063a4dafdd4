"""A run directory made ready before any task starts: the config, the plan and the environment
every task reads, and the TensorBoard layout the run opens on. Shared by `python -m tfbench` and
`python -m cluster.by_hand --run_dir` (tasks started by hand read the same files)."""
from __future__ import annotations

from cluster.plan.spec import write_plan
from tfbench.measure import environment
from tfbench.results import records, rundir
from tfbench.tensorboard.layout import write_layout


def prepare_run_dir(config, plan) -> rundir.RunDir:
    """Creates the run directory; ConfigError (one line) when it cannot be created."""
    run = rundir.create(config.logdir, config.run_id)
    run.write_json("config.json", config.to_dict())
    write_plan(run, plan)
    run.write_json("environment.json", {"schema_version": records.SCHEMA_VERSION,
                                        **environment.collect(with_horovod=config.traits.launcher_ranks)})
    write_layout(run, elastic=config.horovod_elastic)
    return run
