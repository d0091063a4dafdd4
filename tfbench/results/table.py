"""The result table a run prints: one row per task, then the cluster.

Every row says which step its times are: a task row its own step (a synchronous rank's view
of the global step; a parameter-server worker's update or gradient push), the cluster row one
sample per global step (or per N asynchronous updates), as the records define them.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from tfbench.config import knobs
from tfbench.config.choices import EMULATED_COMPUTE
from tfbench.measure import breakdown, comm, sparse
from tfbench.results import records


def _row(name: str, step: str, rate: float, stats: dict) -> str:
    ms = lambda key: stats[key] * 1e3  # noqa: E731
    ci = stats["ci95_s"] * 1e3
    return (f"{name:<12} {step:<14} {rate:>10.1f} {ms('mean_s'):>9.1f} {ms('median_s'):>9.1f} {ms('p90_s'):>9.1f} "
            f"{ms('std_s'):>8.1f} {ci:>8.1f} {ms('jitter_s'):>8.1f}")


def _cores(t: dict) -> str:
    shares = t.get("shares_cores_with") or []
    return (f"{t['role']}_{t['index']} cores {','.join(map(str, t.get('cores') or [])) or 'unpinned'}"
            + (f" (shared with {', '.join(shares)})" if shares else ""))


def render(config, cluster: dict, tasks: List[dict]) -> str:
    """Per-replica and global batch both appear, as docs/definitions.md asks."""
    first = tasks[0] if tasks else {}
    replicas = first.get("replicas", config.num_workers)
    workload, unit = config.workload, records.unit_of(cluster)
    lines = [
        f"tfbench {config.model} {config.mode}  strategy={config.strategy}  workers={config.num_workers}"
        + (f"  ps={config.effective_num_ps} ({config.ps_placement}"
           + (f", {'sync' if config.ps_sync else 'async'}" if config.traits.coordinated else "")
           + (f"; {first['num_ps_source'].split(':')[0]}" if first.get("num_ps_source") and config.effective_num_ps > 1
              else "")
           + ")" if config.traits.ps_tasks else "")
        + f"  placement={config.placement}  device={config.device}",
        f"batch/replica={config.batch_size}  replicas={replicas}  global batch={config.batch_size * replicas}  "
        f"{workload.describe(config)}  warm-up={config.num_warmup_steps}  measured={config.num_steps}"
        + (f"  optimizer={cluster['optimizer']['name']}" if cluster.get("optimizer") else ""),
    ]
    if knobs.knobs_for(config.strategy):
        lines.append(f"knobs: {knobs.describe(config)}")
    lines += [
        f"{'task':<12} {'step is':<14} {unit + '/s':>10} {'mean ms':>9} {'median':>9} {'p90':>9} {'std':>8} "
        f"{'±95%CI':>8} {'jitter':>8}",
    ]
    for t in sorted(tasks, key=lambda r: (r["role"], r["index"])):
        name = f"{t['role']}_{t['index']}" + ("*" if t.get("counts_toward_cluster") is False else "")
        lines.append(_row(name, t.get("step_label", "own step"), records.unit_rate(t), t["stats"]))
    lines.append(_row("cluster", cluster.get("step_label", "global step"), records.unit_rate(cluster),
                      cluster["stats"]))
    lines.append(f"cluster step: {cluster.get('step_definition', 'global step')}; "
                 f"{cluster['stats']['count']} samples")
    window = f"{cluster['window_s']:.4g} s"  # enough digits to check both divisions below
    lines.append(rate_line(cluster, window))
    split = breakdown.line(cluster.get("step_breakdown"))
    if split:
        lines.append(split)
    lines += [line for line in (input_line(cluster.get("input_pipeline")), comm.line(cluster.get("communication")),
                                shards_line(tasks), sparse.line(cluster.get("sparse")), memory_line(cluster)) if line]
    lines += performance_lines(config, cluster, tasks)
    coordinator = next((t for t in tasks if t.get("cluster_steps")), {})
    updates = cluster.get("updates", coordinator.get("updates"))
    if updates and cluster.get("window_s"):
        lines.append(f"updates: {updates} parameter-server updates applied in the same measured window = "
                     f"{updates} / {window} = {updates / cluster['window_s']:.1f} per second")
    if coordinator.get("staleness"):
        lines.append(staleness_line(coordinator["staleness"]))
    if coordinator.get("clock_staleness", {}).get("updates"):
        clock = coordinator["clock_staleness"]
        bound = coordinator.get("ps_staleness_bound", -1)
        lines.append(f"clock staleness (another worker's updates among its first c missing from the read of an update "
                     f"made after c of its own worker's): "
                     f"max {clock['max']}, mean {clock['mean']:.2f}; bound "
                     + (f"{bound}, {coordinator.get('bound_waits', 0)} closures waited" if bound >= 0 else "none"))
    split_line = time_split_line([t for t in tasks if t.get("time_split")])
    if split_line:
        lines.append(split_line)
    rows_line = rows_and_ring_line([t for t in tasks if t.get("hybrid_split_ms")])
    if rows_line:
        lines.append(rows_line)
    idle = [f"{t['role']}_{t['index']} {t['idleness']:.2f}" for t in sorted(tasks, key=lambda r: r["index"])
            if t.get("idleness") is not None]
    if idle:
        lines.append("idleness (share of the measured window with no closure running on the worker): " + ", ".join(idle))
    if cluster.get("convergence"):
        lines.append(convergence_line(cluster["convergence"]))
    for fault in cluster.get("faults") or []:
        lines.append(f"fault: {fault['task']} {fault['kind']} ({fault['signal']}) after measured step "
                     f"{fault['applied_at_measured_step']}" + (f": {fault['error']}" if fault.get("error") else ""))
    lines += [recovery_line(entry) for entry in cluster.get("recovery") or []]
    if config.straggler:
        lines.append(f"straggler: {config.straggler_task} ran 1/{config.straggler_slowdown:g} of the time "
                     "(stopped and continued by the launcher)")
    if any(t.get("counts_toward_cluster") is False for t in tasks):
        lines.append("* coordinator view; not counted in the cluster rate")
    shared = [t for t in tasks if t.get("shares_cores_with")]
    if shared:
        lines.append("cores shared: " + "; ".join(_cores(t) for t in shared))
    placed = [t.get("placement") or {} for t in tasks]
    if any(p and p.get("hard_and_soft_can_differ") is False for p in placed):
        lines.append("placement: CPU-only (no GPU visible): hard and soft placement cannot differ here")
    fell_back = [f"{t['role']}_{t['index']}" for t in tasks if (t.get("placement") or {}).get("fallback_to_cpu")]
    if fell_back:
        lines.append(f"soft placement ran {', '.join(fell_back)} on CPU: no GPU was visible")
    return "\n".join(lines)


def rate_line(cluster: dict, window: str) -> str:
    """How the cluster's rate was computed, in the workload's unit (examples x units per example)."""
    unit, per_example, examples = records.unit_of(cluster), cluster.get("units_per_example", 1), cluster["examples"]
    count = f"{examples} {unit}" if per_example == 1 else f"{examples} examples x {per_example} {unit}"
    line = f"cluster {unit}/sec = {count} / {window} measured window = {records.unit_rate(cluster):.1f}"
    if unit != "examples":
        line += f" ({cluster['examples_per_sec']:.1f} examples/sec)" if per_example != 1 else ""
    return line


def memory_line(cluster: dict) -> Optional[str]:
    """Each task's peak resident memory in the measured window, as the monitor sampled it."""
    tasks = ((cluster.get("resources") or {}).get("tasks") or {}) if isinstance(cluster.get("resources"), dict) else {}
    peaks = sorted((name, t.get("rss_mb_peak")) for name, t in tasks.items() if isinstance(t, dict))
    peaks = [(name, mb) for name, mb in peaks if mb]
    if not peaks:
        return None
    return "memory per task (peak RSS): " + ", ".join(f"{name} {mb / 1024:.2f} GiB" for name, mb in peaks)


def input_line(pipeline: Optional[dict]) -> Optional[str]:
    """What a --data_dir run read, how its workers shared the files, and the pipeline's threads."""
    if not pipeline:
        return None
    shared = (f"each of {pipeline['readers']} reader(s) its own files ({'/'.join(map(str, pipeline['files_per_reader']))})"
              if pipeline["policy"] == "file" else f"every reader all files, every {pipeline['readers']}-th example")
    return (f"input: {pipeline['files']} TFRecord file(s) of {pipeline['data_dir']}, {shared}; tf.data with "
            f"{pipeline['threads']} thread(s) ({pipeline['threads_source']}), {pipeline['prefetch_batches']} batches "
            f"prefetched")


def shards_line(tasks: List[dict]) -> Optional[str]:
    """What each parameter server holds, and how far the busiest is above the mean."""
    shards = next((t["ps_shards"] for t in tasks if t.get("ps_shards")), None)
    if not shards:
        return None
    held = {name: entry["bytes"] for name, entry in shards.items()}
    mean = sum(held.values()) / len(held)
    parts = ", ".join(f"{name} {b / 1e6:.1f} MB ({shards[name]['shards']} variables)" for name, b in held.items())
    line = f"bytes per ps: {parts}; busiest {max(held.values()) / mean:.2f}x the mean" if mean else None
    rows = next((t["ps_rows"] for t in tasks if t.get("ps_rows")), None)
    if rows and line:
        per_step = {name: entry["rows_per_global_step"] for name, entry in rows.items()}
        average = sum(per_step.values()) / len(per_step)
        line += ("; embedding rows served per global step (every worker's): "
                 + ", ".join(f"{name} {count:.1f}" for name, count in per_step.items())
                 + (f"; busiest {max(per_step.values()) / average:.2f}x the mean (ps_row_skew)" if average else ""))
    return line


def staleness_line(stats: dict) -> str:
    """Parameter-server updates: the staleness summary the coordinator recorded."""
    every = stats.get("all", {})
    if not every.get("updates"):
        return "staleness: no updates measured"
    workers = ", ".join(f"{name} max {s['max']}" for name, s in sorted(stats.items())
                        if name != "all" and s.get("updates"))
    return (f"staleness (updates the ps applied between a worker's read and its own update): "
            f"max {every['max']}, mean {every['mean']:.2f} over {every['updates']} updates ({workers})")


def time_split_line(tasks: List[Dict]) -> Optional[str]:
    """The run table's line: each worker's mean update split, in milliseconds."""
    parts = []
    for t in sorted(tasks, key=lambda r: r["index"]):
        s = t.get("time_split") or {}
        if not s.get("updates"):
            continue
        ms = lambda key: f"{s[key] * 1e3:.1f}" if s.get(key) is not None else "?"  # noqa: E731
        if s.get("pull_s") is not None and s["pull_s"] >= s.get("pull_and_compute_s", 0.0):
            # the pull alone took longer than pull and compute inside the update: no compute to tell apart
            head = f"pull+compute {ms('pull_and_compute_s')} (the pull alone took {ms('pull_s')})"
        else:
            head = f"pull {ms('pull_s')} + compute {ms('compute_s')}"
        head = f"input {ms('input_s')} + {head}" if s.get("input_s") is not None else head
        parts.append(f"worker_{t['index']} {head} + push {ms('push_s')} + wait {ms('wait_s')}")
    if not parts:
        return None
    return "time per update, ms (pull measured alone; compute = the rest up to the gradients): " + "; ".join(parts)


def rows_and_ring_line(tasks: List[Dict]) -> Optional[str]:
    """The run table's line for ranks whose tables are on the ps: each rank's mean step split
    (the wait for every rank to start it, rows pulled, compute, dense all-reduce, rows pushed, the
    dense update), and the all-reduce's bytes and bus bandwidth."""
    parts = []
    for t in sorted(tasks, key=lambda r: r["index"]):
        split, told = t["hybrid_split_ms"], t.get("hybrid_split_definition", "")
        names = sorted(split, key=lambda name: told.find(f"{name} ("))  # in the step's order, as defined
        parts.append(f"worker_{t['index']} " + " + ".join(f"{name} {split[name]:.1f}" for name in names))
    if not parts:
        return None
    first = tasks[0]
    ring = first.get("allreduce_plan") or {}
    busbw = first.get("allreduce_busbw_gbit_s")
    tail = (f"; dense all-reduce {ring['bytes_per_step'] / 1e6:.3f} MB per step"
            + (f", busbw {busbw:.3f} Gbit/s" if busbw else "")) if ring else ""
    return "step split, ms per step of each rank (tables on the ps): " + "; ".join(parts) + tail


def recovery_line(entry: Dict) -> str:
    """The run table's line about one recovery (cluster.faults.recovery)."""
    if entry.get("recovered_by"):
        resumed = entry.get("time_to_resume_s")
        return (f"recovery of {entry['task']} ({entry['kind']}): {entry['recovered_by']} (step "
                f"{entry['restored_from_step']}), {entry['steps_redone']} step(s) done again, measuring again "
                + (f"{resumed:.1f} s after the fault" if resumed is not None else "never"))
    def fmt(key, unit="", digits=1):
        value = entry.get(key)
        return f"{value:.{digits}f}{unit}" if isinstance(value, (int, float)) else "n/a"

    if entry.get("rejoined_by"):
        return (f"recovery of {entry['task']} ({entry['kind']}, Horovod elastic): the others went on with "
                f"{entry.get('fewest_ranks', 'n/a')} rank(s) after {fmt('time_to_continue_s', ' s')} "
                f"({entry.get('steps_with_fewer_ranks', 0)} step(s)); "
                + (f"it rejoined after {fmt('time_to_ready_s', ' s')}, every rank in a step again after "
                   f"{fmt('time_to_first_update_s', ' s')}" if entry.get("time_to_ready_s") is not None else
                   "it had not rejoined when the run ended")
                + f"; no step ran for "
                f"{fmt('time_without_steps_s', ' s')}; examples/sec before {fmt('examples_per_sec_before')}, while out "
                f"{fmt('examples_per_sec_during')}, after {fmt('examples_per_sec_after')}")
    text = (f"recovery of {entry['task']} ({entry['kind']}): ready again after {fmt('time_to_ready_s', ' s')}, "
            f"its first update after {fmt('time_to_first_update_s', ' s')}; examples/sec before "
            f"{fmt('examples_per_sec_before')}, while down {fmt('examples_per_sec_during')}, after "
            f"{fmt('examples_per_sec_after')}")
    if entry.get("closure_results_lost") is not None:
        text += f"; {entry['closure_results_lost']} closure result(s) lost with the worker"
    if entry.get("updates_without_result") is not None:
        text += f", {entry['updates_without_result']} update(s) applied without a result back"
    return text


def performance_lines(config, cluster: dict, tasks: List[dict]) -> List[str]:
    """Achieved FLOP/s against the peak (or the emulated compute's wait), and the slowest task's
    start-up by phase."""
    from tfbench.measure import flops, startup

    compute = cluster.get("compute") or {}
    if compute.get("mode") == EMULATED_COMPUTE:  # no FLOP was computed: the step waited instead
        lines = [f"compute: emulated, a wait of {compute['ms_per_worker_step']:.1f} ms per worker step in place of the "
                 f"forward and backward pass, {compute['source']}; no FLOP/s"]
    else:
        lines = [flops.render(flops.cluster_summary(cluster, tasks), config.mode)]
    started = [t["startup"] for t in tasks if t.get("startup") and not t.get("joined_at_step")]
    if started:  # a Horovod elastic rank that joined late started late: not a start-up figure
        lines.append(startup.render(max(started, key=lambda s: s["total_s"])) + " (slowest task)")
    return lines

def convergence_line(summary: Dict) -> str:
    """The run table's line about convergence."""
    points = summary.get("points") or []
    if not points:
        return "convergence: no evaluation"
    m = summary.get("metric", "accuracy")
    examples = next(k for k in ("images", "examples", "tokens") if k in points[-1])
    out = (f"held-out {m.replace('auc', 'AUC')} ({summary['dataset']}): {points[0][m]:.3f} -> "
           f"{summary[f'final_{m}']:.3f} after {points[-1]['updates']} updates ({points[-1][examples]} {examples}), "
           f"{points[-1]['train_s']:.1f} s of training")
    if summary.get(f"target_{m}"):
        if summary.get("reached"):
            out += (f"; {summary[f'target_{m}']:.2f} reached in {summary[f'time_to_{m}_s']:.1f} s, "
                    f"{summary[f'updates_to_{m}']} updates, {summary[f'{examples}_to_{m}']} {examples}")
        else:
            out += f"; {summary[f'target_{m}']:.2f} not reached"
    if summary.get("evaluation_pauses_training") and summary.get("evaluation_pauses_s"):
        out += f" (evaluation pauses of {summary['evaluation_pauses_s']:.2f} s lie inside the measured window)"
    return out
