"""The records of a parameter-server run: one Measurement per worker (its closures' own times,
stamped on the worker) and the coordinator's, which is the cluster's step series (one sample
per global step, or per round of N asynchronous updates), from what the step loop returned."""
from __future__ import annotations

import collections
import dataclasses
from typing import Dict, List, Optional

from strategies import step_graph
from strategies.measurement import Checkpointing, Measurement, absent, flat
from strategies.parameter_server import split as ps_split
from strategies.parameter_server import staleness
from strategies.parameter_server import variables as ps_placement
from strategies.parameter_server.ops import PsLog, reads_beside_batch
from tfbench.config import knobs
from tfbench.loop.step_loop import StepLoop, StepTiming
from tfbench.measure import comm
from tfbench.models.tables import dense_variables, embedding_tables

IDLENESS = ("share of the coordinator's measured window this worker ran no closure of its own: waiting for "
            "the coordinator's dispatch and, synchronous, for the slowest worker and the update (1 - busy / window)")


@dataclasses.dataclass
class PsRun:
    """What the coordinator's loop measured: its own steps (rounds), the measured closures, the
    warm-up's updates (clocks count from the first), the run's PsLog, the pull probe and the
    updates applied in the measured window; synchronous, each measured GlobalStep
    (strategies.parameter_server.sync)."""

    first_step: int
    first_measured: int
    rounds: List[StepTiming]
    closures: List[dict]
    warmup_updates: List[dict]
    log: PsLog
    pulls: List[dict]
    updates: int
    sync: bool
    global_steps: list = dataclasses.field(default_factory=list)

    @classmethod
    def of(cls, loop: StepLoop, log: PsLog, pulls: List[dict], iterations: int, sync: bool) -> "PsRun":
        """From the step loop: each step kept a round's closures (asynchronous) or a GlobalStep."""
        measured = loop.kept(measured=True)
        if sync:
            closures = [c for step in measured for c in step.closures]
            warmup = []
        else:
            closures = [c for step in measured for c in step]
            warmup = [c for step in loop.kept(measured=False) for c in step]
        return cls(loop.first_step, loop.first_measured, loop.timings, closures, warmup, log, pulls,
                   iterations - log.updates_before, sync, measured if sync else [])

    @property
    def apply_s(self) -> List[float]:
        """Synchronous: the update on the ps of each measured global step."""
        return [g.apply_s for g in self.global_steps]

    @property
    def skipped(self) -> int:
        """Synchronous: closures that landed on a worker that had already contributed."""
        return sum(g.skipped for g in self.global_steps)

    def waits(self) -> Dict[int, List[float]]:
        """Synchronous: each worker's wait from its gradient push to its global step's end."""
        out: Dict[int, List[float]] = collections.defaultdict(list)
        for g in self.global_steps:
            end = g.start_wall + g.duration_s
            for c in g.closures:
                out[c["worker"]].append(max(0.0, end - c["end"]))
        return out


@dataclasses.dataclass
class PsFields:
    """Every parameter-server record's own part: sync or not, the ps tasks, the bound, the
    bytes each ps holds, the knobs and (training) the communication plan (tfbench.measure.comm)."""

    ps_sync: bool
    num_ps: int
    ps_staleness_bound: int
    ps_shards: Dict
    knobs: Dict = flat()
    comm_plan: Optional[Dict] = absent()
    ps_rows: Optional[Dict] = absent()  # embedding tables: the rows each ps serves per step
    ps_row_skew: Optional[float] = absent()  # the busiest ps's rows per global step over the mean (ps_rows)
    num_ps_source: Optional[str] = absent()  # why this many ps, when --num_ps left it to the workload

    def __post_init__(self):
        if self.ps_rows and self.ps_row_skew is None:
            self.ps_row_skew = ps_placement.row_skew(self.ps_rows)


@dataclasses.dataclass
class PsWorker:
    """A worker's record, written by the coordinator from its closures' own times: idleness;
    synchronous, its waits for the rest of each global step and where its window ends (its
    images count once the update is applied); training, the staleness of its updates (in the
    order of its timings, and summarised) and where an update's time goes."""

    idleness: Optional[float]
    idleness_definition: str = IDLENESS
    wait_s: Optional[List[float]] = absent()
    window_end: Optional[float] = absent()
    staleness: Optional[Dict] = absent()
    staleness_per_update: Optional[List[int]] = absent()
    clock_staleness_per_update: Optional[List[int]] = absent()
    time_split: Optional[Dict] = absent()


@dataclasses.dataclass
class PsCoordinator:
    """The coordinator's record: the cluster's step series (not counted toward the cluster's
    images), the updates of the measured window, each worker's closures, the results lost, the
    staleness over all workers, each global step's split; synchronous, the update on the ps."""

    updates: int
    updates_per_sec_of_rounds: Optional[float]
    closures_per_worker: Dict[str, int]
    closure_results_lost: int
    step_split: Dict
    counts_toward_cluster: bool = False
    cluster_steps: bool = True
    # over the coordinator's own rounds; the cluster record's updates_per_sec uses the cluster's
    # measured window, as images/sec does
    updates_counted: str = "measured window only"
    staleness: Optional[Dict] = absent()
    staleness_definition: Optional[str] = absent()
    clock_staleness_note: Optional[str] = absent()
    clock_staleness: Optional[Dict] = absent()
    clock_staleness_definition: Optional[str] = absent()
    bound_waits: Optional[int] = absent()
    late_updates: Optional[int] = absent()
    apply_step_s: Optional[List[float]] = absent()
    skipped_closures: Optional[int] = absent()
    update_location: Optional[str] = absent()
    closure_records: Optional[str] = absent()  # asynchronous: where each closure's record went (rounds.py)
    step_graph: Optional[Dict] = absent()  # embedding tables: the traced worker step's rows (strategies.step_graph)
    apply_graph: Optional[Dict] = absent()  # and the synchronous update's on the ps


def num_ps_source(config) -> str:
    """Why a run has its ps when --num_ps is 0: the workload's default."""
    n = config.effective_num_ps
    if n == 1:
        return "--num_ps=0: one ps"
    return (f"{config.model}'s default for --num_ps=0: one ps per worker, at least 2, so that every table larger "
            f"than a shard (--ps_partitioner) is split over them and each host serves its share of the rows")


def measurements(adapter, run: PsRun) -> List[Measurement]:
    """One Measurement per worker (worker-side times) plus the coordinator's own, which is
    the cluster's step series (one sample per global step, or per round of N updates)."""
    config, n = adapter.config, adapter.num_workers
    closures, coordinator_steps, log = run.closures, run.rounds, run.log
    sync, train = run.sync, config.mode == "train"
    beside = reads_beside_batch(sync, config.ps_staleness_bound)
    by_worker: Dict[int, List[dict]] = collections.defaultdict(list)
    for c in sorted(closures, key=lambda c: c["start"]):
        by_worker[c["worker"]].append(c)
    if train and not sync:
        clocks = staleness.clock_staleness(run.warmup_updates + closures + log.late_updates)
        for c in closures:
            c["staleness"] = c["applied"] - 1 - c["read"]
            c["clock_staleness"] = clocks.get(c["applied"])
    stale = staleness.by_worker((c["worker"], c["staleness"]) for c in closures if c.get("staleness") is not None)
    common = PsFields(sync, len(adapter.plan.cluster_spec.get("ps", [])), config.ps_staleness_bound,
                      ps_placement.bytes_per_ps(adapter.model.variables), knobs.knobs_of(config),
                      comm.plan_parameter_server([int(c.shape.num_elements()) * c.dtype.size
                                                  for v in dense_variables(adapter.model)
                                                  for c in (getattr(v, "variables", None) or [v])])
                      if train else None, ps_placement.rows_per_ps(adapter.model, config, n) or None,
                      num_ps_source=None if config.num_ps else num_ps_source(config))
    checkpoint = Checkpointing(config.checkpoint_every, run.first_step) if config.checkpoint_every else None
    last_global_end = coordinator_steps[-1].start_wall + coordinator_steps[-1].duration_s
    window_s = last_global_end - coordinator_steps[0].start_wall
    waits = run.waits()
    out = []
    for worker, mine in sorted(by_worker.items()):
        timings = [StepTiming(c["start"], c["end"] - c["start"]) for c in mine]
        if sync:
            summary = dataclasses.replace(
                adapter.summary(), step_label="gradient push",
                step_definition="this worker's gradient closure (tf.timestamp on the worker): "
                                "pull weights, compute, add the gradient into the ps accumulators")
        else:
            summary = dataclasses.replace(
                adapter.summary(), step_label="update" if train else "forward",
                step_definition="one asynchronous update of this worker (tf.timestamp on the worker): pull "
                                "weights, compute, push the update" if train else
                                "one forward pass of this worker (tf.timestamp on the worker)")
        busy = sum(t.duration_s for t in timings)
        own = PsWorker(min(1.0, max(0.0, 1.0 - busy / window_s)) if window_s > 0 else None)
        if sync:
            own.wait_s, own.window_end = waits.get(worker, []), last_global_end
        if train:
            own.staleness = stale.get(f"worker_{worker}", {"updates": 0})
            own.staleness_per_update = [c["staleness"] for c in mine]
            if not sync:
                own.clock_staleness_per_update = [c["clock_staleness"] for c in mine]
            own.time_split = ps_split.split(mine, [p for p in run.pulls if p["worker"] == worker], window_s, beside)
        out.append(Measurement("worker", worker, config.batch_size, timings, summary,
                               adapter.placement_report("worker", worker), checkpoint=checkpoint,
                               parts=(common, own)))
    measured_s = sum(t.duration_s for t in coordinator_steps)
    summary = dataclasses.replace(
        adapter.summary(), step_label="global step" if sync else f"{n} updates",
        step_definition="global step (coordinator): one gradient from every worker accumulated on the ps, then "
                        "the update applied on the ps; from scheduling to the update applied" if sync else
                        f"{n} {'updates' if train else 'forward passes'} (coordinator): one round of {n} scheduled "
                        "steps, from the previous round's end to its own (closure_records says which closures make "
                        "a round and where their end is seen)")
    chief = PsCoordinator(
        run.updates, run.updates / measured_s if measured_s > 0 else None,
        {str(w): len(t) for w, t in sorted(by_worker.items())}, log.lost,
        ps_split.global_steps(closures, coordinator_steps, run.first_measured, ps_split.pull_medians(run.pulls),
                              run.apply_s if sync else None, n, beside))
    if train:
        chief.staleness, chief.staleness_definition = stale, staleness.DEFINITION
    if train and not sync:
        if log.lost:  # their updates landed unseen: later clocks count one short
            chief.clock_staleness_note = (f"approximate: {log.lost} closure result(s) were lost with a "
                                          "killed worker, and their updates are missing from the clocks")
        chief.clock_staleness = staleness.summary(c["clock_staleness"] for c in closures)
        chief.clock_staleness_definition = staleness.CLOCK_DEFINITION
        chief.bound_waits, chief.late_updates = log.bound_waits, len(log.late_updates)
    if not sync:
        chief.closure_records = adapter.closure_records
    if sync:
        chief.apply_step_s, chief.skipped_closures = run.apply_s, run.skipped
        chief.update_location = "ps (accumulators, a table's row slots and the update on the ps tasks)"
    tables = [p for t in embedding_tables(adapter.model) for p in [t, *getattr(t, "variables", [])]]
    if tables and train:
        chief.step_graph = step_graph.summary(adapter.worker_step._list_all_concrete_functions(), tables)  # noqa: SLF001
        if sync:
            chief.apply_graph = step_graph.summary(adapter.sync_step.apply._list_all_concrete_functions(),  # noqa: SLF001
                                                   tables)
    convergence = adapter.evaluator.summary() if adapter.evaluator is not None else None
    out.append(Measurement("chief", 0, config.batch_size * n, coordinator_steps, summary,
                           adapter.placement_report("chief", 0), convergence, checkpoint, (common, chief)))
    return out
