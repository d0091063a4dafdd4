"""One task process of a run (`python -m tfbench.task --run_dir D --task NAME` runs main).

It reads its TaskSpec from the run's plan.json (Horovod ranks: `--task horovod`, and the rank
from horovodrun's environment), pins its cores and threads before TensorFlow starts, builds its
strategy adapter, runs warm-up and measured steps, and appends its own result records.
"""
from __future__ import annotations

import argparse
import faulthandler
import os
import shutil
import sys
import tempfile
import traceback

import strategies
from cluster.launchers import resolved_task
from cluster.plan.spec import ClusterPlan, TaskSpec
from strategies import devices
from tfbench.app import compute_time
from tfbench.config import RunConfig
from tfbench.config.errors import ConfigError
from tfbench.framework import error_line
from tfbench.loop import progress
from tfbench.measure import compute_cache, startup
from tfbench.results import records
from tfbench.results.rundir import RunDir

DUMP_WEIGHTS_ENV = "TFBENCH_DUMP_WEIGHTS"  # path: save initial/final weights (aggregation tests)


def resolve_task(plan: ClusterPlan, name: str) -> TaskSpec:
    if name in resolved_task.ENTRIES:  # the role comes from Slurm, TF_CONFIG or Horovod at start-up
        return resolved_task.resolve(plan, name)
    return plan.task(name)


def redirect_output(path: str) -> None:
    """Horovod ranks share horovodrun's output; each also keeps its own log."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def die_with_parent() -> None:
    """Ask the kernel for SIGTERM when the launcher (or horovodrun) dies, even by SIGKILL."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    except OSError:
        pass


def prepare_process(config: RunConfig, task: TaskSpec) -> None:
    """Everything that must happen before TensorFlow is imported."""
    die_with_parent()
    if task.cores:
        os.sched_setaffinity(0, task.cores)
    os.environ.update(task.full_env())  # TF_CONFIG, the GPU this task sees
    devices.configure_environment(config)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run_dir", required=True)
    parser.add_argument("--task", required=True)
    args = parser.parse_args(argv)
    run = RunDir(args.run_dir)
    config = RunConfig.from_dict(run.read_json("config.json"))
    plan = ClusterPlan.from_dict(run.read_json("plan.json"))
    task = resolve_task(plan, args.task)
    if args.task in resolved_task.ENTRIES:
        redirect_output(run.task_log(task.name))
    faulthandler.enable()  # a fatal signal (a crash inside TensorFlow) leaves every thread's Python stack in the log
    progress.write_progress(run.path, task.name, "starting", 0, config.total_steps)
    prepare_process(config, task)
    temporary = own_temporary_directory(task.name)
    try:
        kept = run_task(run, config, plan, task)
    except ConfigError as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    except Exception as e:  # noqa: BLE001 - the task's log gets the traceback, the launcher its last line
        traceback.print_exc()
        print(error_line.task_line(task.name, e), file=sys.stderr, flush=True)
        return 1
    finally:
        shutil.rmtree(temporary, ignore_errors=True)  # before os._exit below, which skips TensorFlow's own removal
    if kept is not None:
        kept.before_exit()
        end_without_teardown()
    return 0


def own_temporary_directory(name: str) -> str:
    """A temporary directory of this task's own, inside the one it was given (its run's scratch
    directory where a tfbench launcher started it; the user's where they started it by hand):
    TensorFlow writes its autograph sources there and deletes them only when the interpreter exits,
    which end_without_teardown skips. main removes it; a task killed by a signal leaves it, inside
    its run's scratch directory where a launcher started it."""
    path = tempfile.mkdtemp(prefix=f"tfbench-{name}-")
    os.environ["TMPDIR"] = tempfile.tempdir = path
    return path


def end_without_teardown() -> None:
    """Exits a task whose records are written without the interpreter's teardown of TensorFlow,
    which is on every run's critical path (the launcher waits for each task to end). A
    parameter-server coordinator frees its functions and iterators one remote worker at a time
    (Context.remove_function): over a minute for ResNet50 after a run that measured for 38 s.
    MWMS, Horovod and one-task runs spent 1.4-2.2 s more from their last progress to the end of
    the run with it (tiny model, 2026-11-25). The ps and workers are stopped by the launcher."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_task(run: RunDir, config: RunConfig, plan: ClusterPlan, task: TaskSpec) -> None:
    from tfbench.framework.tf_import import tf  # noqa: F401  (after the environment is prepared)

    startup.mark("tf_imported")

    local_devices = config.effective_num_local_devices
    devices.configure_runtime(config, task.intra_threads, task.inter_threads, local_devices)

    def ready():
        progress.write_progress(run.path, task.name, "ready", 0, config.total_steps)

    if task.service:  # ps tasks, a coordinator's workers: servers that other tasks drive or read
        strategies.serve(config, task, ready)
        return None
    return run_benchmark(run, config, plan, task, ready)


def run_benchmark(run: RunDir, config: RunConfig, plan: ClusterPlan, task: TaskSpec, ready):
    """Runs the benchmark and writes this task's records; returns the adapter, still holding its
    TensorFlow objects."""
    from tfbench.loop.benchmark import Profiler, Reporter

    adapter = strategies.create(config, task, plan, run)  # run: where the other tasks' logs (placement evidence) are
    adapter.keeps_initial_weights = bool(os.environ.get(DUMP_WEIGHTS_ENV))  # a copy of every weight: only if asked
    startup.mark("strategy_ready")
    ready()
    reporter = Reporter(run.path, task.name, run.task_tb(task.name), config,
                        examples_per_step=config.batch_size * adapter.local_replicas
                        if task.role != "chief" else config.batch_size * adapter.replicas)
    startup.watch(reporter, config.num_warmup_steps)
    profiler = Profiler(config.profiled_steps, run.task_tb(task.name)) if config.profiled_steps else None
    try:
        measurements = adapter.run(reporter, profiler)
    finally:
        reporter.close()
    adapter.write_worker_events(run, measurements)
    workload = config.workload
    sparse = workload.step_facts(config)
    if sparse:
        from tfbench.measure import sparse as sparse_wire

        sparse["wire_by_rule"] = sparse_wire.wire(sparse, config.traits, config.horovod_sparse_as_dense)
    compute = compute_cache.record(config, compute_time.worker_cores(config, plan))
    for m in measurements:
        extra = dict(m.fields(), num_warmup_steps=config.num_warmup_steps, workload=workload.summary(config),
                     compute=compute, **task_facts(run, plan, task, m))
        if config.data_dir and m.role == "worker":  # the workers read; a coordinator only traces their pipeline
            extra["input_pipeline"] = input_pipeline(config, extra["cores"])
        extra.update({"sparse": sparse} if sparse else {})
        extra.update(performance_fields(run, config, plan, task, m))
        records.append(run.results, records.task_record(
            run_id=run.run_id, role=m.role, index=m.index,
            examples_per_step=m.examples_per_step, step_times_s=[t.duration_s for t in m.timings],
            step_start_wall=[t.start_wall for t in m.timings], unit=workload.unit,
            units_per_example=workload.units_per_example(config), extra=extra))
    dump_weights(adapter, task)
    progress.write_progress(run.path, task.name, "done", config.total_steps, config.total_steps)
    return adapter


def input_pipeline(config: RunConfig, cores) -> dict:
    """What a --data_dir task's input pipeline was (tfbench.data.records): files, sharding, threads."""
    from tfbench.data import records as image_records

    return image_records.describe(config, len(cores) or os.cpu_count())


def resolved_host(task: TaskSpec, spec: TaskSpec) -> str:
    """Where `spec` ran, as this task's TF_CONFIG says (an engine such as Slurm places tasks after
    the plan was made, so the cluster spec it resolved is the one that knows)."""
    addresses = ((task.tf_config or {}).get("cluster") or {}).get(spec.role) or []
    if spec is task or spec.index >= len(addresses):
        return spec.host
    return addresses[spec.index].rpartition(":")[0] or spec.host


def performance_fields(run: RunDir, config: RunConfig, plan: ClusterPlan, task: TaskSpec, m) -> dict:
    """Start-up phases of this process, and the FLOP/s measured against the peak of the cores
    that did the work (a parameter-server worker's own cores, not the coordinator's)."""
    from tfbench.measure import flops

    cores = task.cores
    if m.role == "worker" and task.role == "chief":
        cores = next((t.cores for t in plan.tasks if t.role == "worker" and t.index == m.index), cores)
    peak = run.read_json("environment.json").get("peak") if os.path.exists(run.file("environment.json")) else None
    return {"startup": startup.summary(from_launch=m.started_with_launch),
            "flops": flops.task_fields(config, m.examples_per_step, [t.duration_s for t in m.timings],
                                       len(cores) or os.cpu_count(), peak)}


def task_facts(run: RunDir, plan: ClusterPlan, task: TaskSpec, m) -> dict:
    """pid, host, cores and threads of the task a measurement is about, and under Slurm the node
    it ran on (slurm_node, as slurmd names it). The parameter-server coordinator writes its
    workers' records: their facts come from their own specs and their own progress files (pid,
    node), never from the coordinator's process."""
    name = f"{m.role}_{m.index}"
    spec = task if name == task.name else plan.task(name)
    if spec is task:
        pid, node = os.getpid(), os.environ.get(progress.NODE_ENV)
    else:
        record = progress.read_progress(run.path, name) or {}
        pid, node = record.get("pid"), record.get("node")
    return {"pid": pid, "host": resolved_host(task, spec), "cores": list(spec.cores),
            "shares_cores_with": list(spec.shares_cores_with),
            "intra_threads": spec.intra_threads, "inter_threads": spec.inter_threads,
            **({"slurm_node": node} if node else {})}


def dump_weights(adapter, task: TaskSpec) -> None:
    """Saves initial and final weights and the data shards of one global step, for checks that
    a distributed step equals a single-device step on the concatenated global batch."""
    path = os.environ.get(DUMP_WEIGHTS_ENV)
    if not path or task.index != 0 or task.role not in ("worker", "chief"):  # a service task never gets here
        return
    import numpy as np

    arrays = {f"initial_{i}": w for i, w in enumerate(adapter.initial_weights)}
    arrays.update({f"final_{i}": w for i, w in enumerate(adapter.weights())})
    np.savez(path, shards=np.asarray(adapter.data_shards()), **arrays)
