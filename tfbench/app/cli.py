"""`python -m tfbench`: validate flags, plan the cluster, launch its tasks, print the table.

The launcher process never imports TensorFlow (unless a GPU check needs it): every task runs in
a process of its own, so the same code path serves one process and a cluster.
"""
from __future__ import annotations

import os
import sys
import time

from absl import app, flags

import tfbench.config as config_lib
from cluster.launchers import registry
from tfbench.config import flags as tfbench_flags
from tfbench.config import helptext
from tfbench.config.errors import ConfigError
from tfbench.config.helptext import fail_usage
from tfbench.measure import startup

FLAGS = flags.FLAGS

# What `python -m tfbench --help` prints above the flags.
USAGE = """Benchmark TensorFlow distribution strategies on one model, the same synthetic data and metrics.

usage: python -m tfbench [--flag=value ...]
  e.g. python -m tfbench --model=resnet50 --image_size=112 --batch_size=16 \\
           --strategy=multi_worker_mirrored --num_workers=2
--dry_run prints what would start; results go to <logdir>/<run_id>/ (see README.md)."""


def _define() -> None:
    tfbench_flags.define_flags()
    tfbench_flags.define_command_flags()


parse_flags = helptext.parser(USAGE, helptext.tfbench_groups, "tfbench", _define)


def validated_config() -> config_lib.RunConfig:
    from tfbench.measure import shards

    config = config_lib.validate(tfbench_flags.config_from_flags())
    shards.check_config(config)  # --data_dir's files read, after every check that reads none
    paths = [p for p in config.workload.import_paths() if p not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    if paths:  # every task inherits them (a user's module: the directory it is imported from)
        os.environ["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [os.environ.get("PYTHONPATH")] if p])
    for warning in registry.check_machine(config, dry_run=FLAGS.dry_run):
        print(f"tfbench: warning: {warning}", flush=True)
    if not config.run_id:
        from tfbench.results.rundir import default_run_id

        config = config.replace(run_id=default_run_id(config.model, config.strategy, config.num_workers))
    return config


def check_memory(config, plan, count: bool) -> dict:
    """Every task of a local or emulated run lives on this machine: refuse a run whose estimated
    memory exceeds what is available (Slurm's nodes are not this machine, unless they are emulated
    hosts of it: then checked too). A dry run counts no model (count=False): it starts no process
    and stays as fast as the real run's checks."""
    from tfbench.measure import memory

    return memory.check(config, [t.role for t in plan.tasks], count=count)


def main(argv) -> int:
    os.environ.setdefault(startup.LAUNCHED_ENV, repr(time.time()))  # tasks' start-up starts here
    if len(argv) > 1:
        fail_usage(f"unexpected arguments: {' '.join(argv[1:])} (flags are --name=value)")
    from tfbench.config.kinds import kind_of

    memory_estimate = None
    try:
        config = validated_config()
        plan = registry.plan(config)
        if kind_of(config).tasks_here:  # every task on this machine: its memory is the one that counts
            memory_estimate = check_memory(config, plan, count=not FLAGS.dry_run)
        if FLAGS.tune:
            tune_grid = check_tune(config)
    except ConfigError as e:
        fail_usage(str(e))
    if FLAGS.dry_run:
        code = dry_run(config, plan, memory_estimate)
        if FLAGS.tune:
            print(f"--tune would run {len(tune_grid)} points (each a run as above, with): "
                  + "; ".join(" ".join(f"{k}={v}" for k, v in p.items()) for p in tune_grid))
        return code
    if FLAGS.tune:
        from tfbench.app import tune

        return tune.tune(config, FLAGS.tune_budget, FLAGS.tune_store)
    from tfbench.app import compute_time

    try:
        config = compute_time.resolve(config, plan)
    except compute_time.ComputeUnmeasured as e:
        print(f"tfbench: run failed: {e}", file=sys.stderr, flush=True)
        return 1
    return launch(config, plan)


def check_tune(config) -> list:
    """--tune's grid, or ConfigError: a strategy without knobs, a budget that runs nothing."""
    from tfbench.config import knobs

    if FLAGS.tune_budget <= 0:
        raise ConfigError(f"--tune_budget must be positive seconds, got {FLAGS.tune_budget:g}")
    if config.fault or config.straggler:
        raise ConfigError("--tune compares knobs on a healthy cluster: leave out --fault and --straggler")
    return knobs.tune_points(config)


def dry_run(config, plan, memory_estimate=None) -> int:
    """Prints what the chosen launcher would do (cluster.launchers.dry_run); starts nothing and
    writes nothing."""
    from tfbench.results.rundir import RunDir

    from tfbench.app import compute_time

    run = RunDir(os.path.abspath(os.path.join(config.logdir, config.run_id)))
    text = "\n".join(t for t in (registry.dry_run(config, plan, run), compute_time.describe(config, plan)) if t)
    if memory_estimate is not None:
        from tfbench.measure import memory

        text += "\n" + memory.describe(memory_estimate)
    print(text)
    return 0


def launch(config, plan) -> int:
    from cluster.launchers import launch as launcher
    from tfbench.app import run_end
    from tfbench.app.run_setup import prepare_run_dir

    try:
        run = prepare_run_dir(config, plan)
    except ConfigError as e:
        fail_usage(str(e))
    print(f"tfbench: run {run.run_id} -> {run.path}", flush=True)
    result = launcher.run(plan, run, config, monitor_factory=registry.monitor_factory(config),
                          record_hooks=registry.record_hooks(config))
    text = run_end.finish(run, config, result.cluster_record, result.ok)
    if text:
        print(text, flush=True)
    else:
        print(f"tfbench: run failed: {result.reason}", file=sys.stderr, flush=True)
    return result.exit_code


def run_main() -> None:
    app.run(main, flags_parser=parse_flags)
