"""The rules of the flags that switch on a feature and so combine with many others (stragglers,
faults, checkpoints, bounded staleness, real data, elastic Horovod, precision, emulated compute): one function per
feature, each checking that feature against the rest of the config, the strategy's traits
(tfbench.config.strategy_traits) and the kind of launch (tfbench.config.kinds). tfbench.config.validate
calls them after each flag's own range and the strategy's rules, so that a new feature's rule is one
function here, not lines inside validate()."""
from __future__ import annotations

import math
import os

from tfbench.config import faults as faults_lib
from tfbench.config import strategy_traits
from tfbench.config.choices import COMPUTE
from tfbench.config.errors import ConfigError
from tfbench.data import datasets, records
from tfbench.framework import precision


def need(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def task_names(c, traits) -> list:
    """The tasks of the run's plan a flag may name."""
    tasks = [f"worker_{i}" for i in range(c.num_workers)]
    tasks += ["chief_0"] if traits.coordinated else []
    return tasks + [f"ps_{i}" for i in range(c.effective_num_ps if traits.ps_tasks else 0)]


def check_straggler(c, kind, traits) -> None:
    """--straggler=TASK:FACTOR: a task of this run, slowed by a sane factor, on processes we start."""
    tasks = task_names(c, traits)
    need(traits.multi_task, f"--straggler needs peers: --strategy={c.strategy} runs one task")
    need(c.straggler_task in tasks and c.straggler_slowdown > 0,
         f"--straggler={c.straggler!r}: expected TASK:FACTOR with TASK one of {', '.join(tasks)}, e.g. worker_1:2.0")
    need(1.0 < c.straggler_slowdown <= 100.0, f"--straggler slowdown must be above 1 and at most 100, got "
                                              f"{c.straggler_slowdown:g}")
    need(not kind.refusal("straggler"), kind.refusal("straggler"))
    need(not (traits.launcher_ranks and kind.ranks_in_one_group),
         f"--straggler with --strategy={c.strategy} needs --network=emulated: locally horovodrun starts every rank "
         "as one process group")


def check_faults(c, kind, traits) -> None:
    """--fault: tasks of this run, at measured steps it has, applied by the local launcher."""
    try:
        faults = faults_lib.parse(c.fault)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    tasks = task_names(c, traits)
    need(traits.multi_task, f"--fault needs a cluster: --strategy={c.strategy} runs one task")
    need(not kind.refusal("fault"), kind.refusal("fault"))
    for fault in faults:
        need(fault.task in tasks, f"--fault: {fault.task} is not a task of this run ({', '.join(tasks)})")
        need(1 <= fault.step <= c.num_steps, f"--fault: {fault.task}:{fault.kind}@{fault.step} is outside the "
                                             f"measured steps 1..{c.num_steps}")
        need(fault.task != c.straggler_task, f"--fault: {fault.task} is also the straggler, whose duty cycle "
                                             "would continue it")
    names = [f.task for f in faults]
    need(len(set(names)) == len(names), "--fault: at most one fault per task")


def check_checkpoints(c, traits) -> None:
    """--checkpoint_every: what a restarted all-reduce cluster resumes from."""
    if not c.checkpoint_every:
        return
    need(c.checkpoint_every > 0, f"--checkpoint_every must be 0 (none) or positive steps, got {c.checkpoint_every}")
    need(traits.checkpoints, f"--checkpoint_every applies to --strategy="
                             f"{' or '.join(strategy_traits.names(lambda t: t.checkpoints))} only")
    need(c.mode == "train", "--checkpoint_every applies to --mode=train only")
    need(c.checkpoint_every < c.total_steps, f"--checkpoint_every={c.checkpoint_every} saves nothing in a run of "
                                             f"{c.total_steps} steps")


def check_staleness_bound(c, traits) -> None:
    """--ps_staleness_bound: stale-synchronous parallel between async and sync parameter servers."""
    if c.ps_staleness_bound == -1:
        return
    need(c.ps_staleness_bound >= 0, f"--ps_staleness_bound must be -1 (unbounded) or 0 or more, got {c.ps_staleness_bound}")
    need(traits.coordinated, f"--ps_staleness_bound applies to --strategy="
                             f"{' or '.join(strategy_traits.names(lambda t: t.coordinated))} only")
    need(not c.ps_sync, "--ps_staleness_bound bounds asynchronous updates; it does not combine with --ps_sync")
    need(c.mode == "train", "--ps_staleness_bound applies to --mode=train only: forward passes make no updates")


def check_data(c) -> None:
    """--dataset, --eval_every and --target_accuracy: evaluation needs real labels."""
    need(c.dataset in datasets.DATASETS, f"--dataset={c.dataset!r} is unknown; choose one of "
                                         f"{', '.join(datasets.DATASETS)}")
    need(c.eval_every >= 0, f"--eval_every must be 0 (auto) or positive steps, got {c.eval_every}")
    need(0.0 <= c.target_accuracy <= 1.0, f"--target_accuracy is a fraction in (0, 1], got {c.target_accuracy:g}")
    if c.dataset == "synthetic":
        need(c.target_accuracy == 0.0, "--target_accuracy needs real labels: add --dataset=digits")
        need(c.eval_every == 0 or c.workload.labelled, "--eval_every needs real labels: add --dataset=digits")
        need(not c.workload.evaluates(c) or c.mode == "train", "held-out evaluation (--eval_every, --target_auc) "
                                                               "applies to --mode=train only")
        return
    need(c.workload.kind == "image", f"--dataset={c.dataset} holds images for tfbench's image models; "
                                     f"--model={c.model} does not read them")
    classes = datasets.NUM_CLASSES[c.dataset]
    need(c.num_classes == classes, f"--dataset={c.dataset} has {classes} classes: set --num_classes={classes}")
    need(c.mode == "train", f"--dataset={c.dataset} is for convergence: it applies to --mode=train only")
    need(c.data_format == "NHWC", f"--dataset={c.dataset} provides NHWC images; drop --data_format={c.data_format}")
    smallest = datasets.shard_size(c.dataset, c.num_workers)
    need(c.batch_size <= smallest, f"--batch_size={c.batch_size} is more than the {smallest} training images each of "
                                   f"the {c.num_workers} workers gets from {c.dataset}")


def check_compute(c, kind) -> None:
    """--compute and --compute_ms: an emulated step has no forward pass for XLA to compile and no
    real gradient to learn from; its wait is measured on this machine unless given."""
    need(c.compute in COMPUTE, f"--compute={c.compute!r} is unknown; choose {' or '.join(COMPUTE)}")
    need(math.isfinite(c.compute_ms) and c.compute_ms >= 0,
         f"--compute_ms must be 0 (measured) or positive milliseconds, got {c.compute_ms:g}")
    if not c.emulated_compute:
        need(c.compute_ms == 0, "--compute_ms applies to --compute=emulated only")
        return
    need(not c.xla, "--compute=emulated waits in a tf.data op, which XLA cannot compile: leave out --xla")
    need(c.dataset == "synthetic", f"--compute=emulated makes gradients of the variables' shapes, not the model's: "
                                   f"nothing learns, so --dataset={c.dataset} (convergence) needs --compute=real")
    need(c.compute_ms > 0 or kind.tasks_here,
         f"--compute=emulated {kind.where} needs --compute_ms: 0 measures this machine's compute, and the tasks "
         f"run elsewhere")


def check_input(c) -> None:
    """--data_dir and --input_threads: JPEG shards to read (tfbench.data.records), checked before
    anything starts; which workloads read them is the workload's rule (tfbench.workloads.check)."""
    need(c.input_threads >= 0, f"--input_threads must be 0 (one per core) or more, got {c.input_threads}")
    need(c.data_dir or not c.input_threads, "--input_threads sets the threads of --data_dir's input pipeline: "
                                            "add --data_dir")
    if not c.data_dir:
        return
    need(c.dataset == "synthetic", f"--data_dir and --dataset={c.dataset} are two inputs: give one")
    need(os.path.isdir(c.data_dir), f"--data_dir={c.data_dir} is not a directory")
    found = records.files(c.data_dir)
    need(bool(found), f"--data_dir={c.data_dir} holds no TFRecord shards named {records.PATTERN} (ImageNet's layout; "
                      f"python -m tools.data writes such a set)")
    unreadable = [f for f in found if not os.access(f, os.R_OK)]
    if unreadable:
        raise ConfigError(f"--data_dir: {unreadable[0]} cannot be read")


def check_elastic(c, kind, traits) -> None:
    """--horovod_elastic: horovodrun's elastic driver starts, drops and re-adds the ranks itself."""
    need(c.horovod_elastic or not c.horovod_min_workers, "--horovod_min_workers applies to --horovod_elastic only")
    if not c.horovod_elastic:
        return
    need(traits.elastic, f"--horovod_elastic applies to --strategy="
                         f"{' or '.join(strategy_traits.names(lambda t: t.elastic))} only")
    need(not kind.refusal("horovod_elastic"), kind.refusal("horovod_elastic"))
    need(c.num_workers >= 2, "--horovod_elastic needs --num_workers=2 or more: one rank has nothing to go on without")
    need(0 <= c.horovod_min_workers < c.num_workers,
         f"--horovod_min_workers must be 1..{c.num_workers - 1} (fewer than --num_workers), got {c.horovod_min_workers}")
    need(c.mode == "train", "--horovod_elastic applies to --mode=train only: forward passes have no state to commit")
    need(not c.reads_input, "--horovod_elastic runs on synthetic data: a dataset's or --data_dir's shards would "
                            "change with the number of ranks")


def check_precision(name: str, on_gpu: bool) -> None:
    """--precision: only what the compute device runs natively (tfbench.framework.precision)."""
    reason = precision.unsupported(name, on_gpu)
    need(reason is None, reason or "")
