"""ParameterServerStrategy through TF2's ClusterCoordinator.

Workers and ps are tf.distribute.Server processes (serve()); the chief is the coordinator and
schedules every step onto whichever worker is free. Variables live on the ps tasks (sharded
across them with more than one ps).

- asynchronous (--ps_sync=false, TF2's native mode): every scheduled step applies its own
  gradients. A cluster step is one round of N scheduled steps (N updates, docs/definitions.md); each
  worker's record holds its own update times, labelled as such.
- synchronous (--ps_sync=true, train only): one update per global step, aggregated and applied
  on the ps tasks (strategies.ps_sync); each worker's record holds its gradient closures and
  its wait for the rest of the global step.

Timing: inside each scheduled function (tf.timestamp on the worker, the same wall clock as the
rest of tfbench) and on the coordinator, whose series is the cluster's (one sample per global
step). The coordinator writes one task record per worker from the worker-side times, plus its own.
"""
from __future__ import annotations

import collections
import contextlib
from typing import Dict, List

from strategies import placement, ps_placement, staleness
from strategies.base import Measurement, StrategyAdapter
from tfbench.config import knobs
from tfbench.loop.benchmark import StepTiming
from tfbench.measure import comm
from tfbench.tensorboard.events import EventWriter


def serve(task, intra_threads: int, inter_threads: int, on_ready) -> None:
    """A ps or worker task: a gRPC server that the coordinator drives; returns never."""
    from tfbench.framework.tf_import import tf

    placement.line_buffered_c_stdout()  # its placer's lines are the coordinator's evidence
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    session_config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra_threads,
                                              inter_op_parallelism_threads=inter_threads)
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=task.role, task_index=task.index,
                                  protocol="grpc", config=session_config, start=True)
    on_ready()
    server.join()


IDLENESS = ("share of the coordinator's measured window this worker ran no closure of its own: waiting for "
            "the coordinator's dispatch and, synchronous, for the slowest worker and the update (1 - busy / window)")


class ParameterServerAdapter(StrategyAdapter):
    """The coordinator's side (the chief task)."""

    def make_strategy(self):
        from tfbench.framework.tf_import import tf

        # The remote contexts the strategy creates on workers and ps take this context's config:
        # their placers then log where every op of every function landed, into each task's log:
        # the runtime placement (placement.placer_log_devices), not the requested devices.
        tf.debugging.set_log_device_placement(True)
        num_ps = len(self.plan.cluster_spec.get("ps", []))
        strategy = tf.distribute.ParameterServerStrategy(
            tf.distribute.cluster_resolver.TFConfigClusterResolver(),
            variable_partitioner=ps_placement.variable_partitioner(self.config, num_ps))
        self.coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        self.num_workers = len(self.plan.cluster_spec.get("worker", []))
        self.shards_used: List[List[int]] = []
        return strategy

    @property
    def replicas(self) -> int:
        return self.num_workers  # one replica per worker

    @property
    def local_replicas(self) -> int:
        return 1

    def device_scope(self):
        return contextlib.nullcontext()  # variables go to ps, computation to workers

    @contextlib.contextmanager
    def scope(self):
        """The strategy's scope, with the greedy placer (--ps_placer) around variable creation."""
        num_ps = len(self.plan.cluster_spec.get("ps", []))
        placer = ps_placement.greedy(self.strategy, num_ps) if self.config.ps_placer == "greedy" and num_ps > 1 \
            else contextlib.nullcontext()
        with self.strategy.scope(), placer:
            yield

    def data_shards(self) -> List[int]:
        return self.shards_used[0] if self.shards_used else []

    # -- set-up -------------------------------------------------------------------------------
    def _dataset(self):
        from tfbench.data.synthetic import batch_for
        from tfbench.framework.tf_import import tf

        config, strategy = self.config, self.strategy

        num_workers = self.num_workers

        def dataset_fn(_context):
            shard = tf.distribute.coordinator.experimental_get_current_worker_index()
            if config.dataset != "synthetic":  # this worker's shard of the real data, read on
                from tfbench.data import datasets

                return datasets.train_dataset(config, shard, num_workers, config.batch_size).map(
                    lambda x, y: (x, y, tf.cast(shard, tf.int32)))
            return (tf.data.Dataset.from_tensors(shard)
                    .map(lambda s: batch_for(config, config.batch_size, s) + (tf.cast(s, tf.int32),))
                    .cache().repeat())

        @tf.function
        def per_worker_dataset_fn():
            return strategy.distribute_datasets_from_function(dataset_fn)

        return iter(self.coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    def _measuring(self) -> None:
        """Between warm-up and the measured steps: count updates from here; the coordinator's
        own op logging stops (the remote placers logged their placements while warming up)."""
        from tfbench.framework.tf_import import tf

        self.updates_before = self._iterations()
        tf.debugging.set_log_device_placement(self.config.log_device_placement)

    def _iterations(self) -> int:
        return int(self.optimizer.iterations.numpy()) if self.config.mode == "train" else 0

    # -- the run ------------------------------------------------------------------------------
    def run(self, reporter=None, profiler=None) -> List[Measurement]:
        from strategies import checkpoints, ps_async
        from tfbench.loop import benchmark

        self.build_model()
        self.initial_weights = self.weights()
        iterator = self.iterator = self._dataset()  # held: freeing it on the coordinator is slow (tfbench.task)
        self.reporter, self.bound_waits, self.late_updates, self.warmup_updates = reporter, 0, [], []
        self.lost = 0  # closure results lost with a killed worker (ps_async.fetched)
        saver = checkpoints.make(self, self.run_dir)
        self.first_step = saver.restore() if saver else 0  # after a restart: the step the checkpoint holds
        self.first_measured = benchmark.first_measured_step(self.config, self.first_step)
        hooks = benchmark.StepHooks(profiler, self._evaluation_hook(), saver)
        if self.sync:
            from strategies.ps_sync import SyncOnPs

            self.sync_step = SyncOnPs(self.strategy, self.coordinator, self.model, self.optimizer,
                                      self.config, self.num_workers, self.device)
            self.worker_step = self.sync_step.worker_step
            closures, coordinator_steps = self._run_sync(iterator, reporter, hooks)
        else:
            self.worker_step = ps_async.worker_step(self)
            loop = ps_async.run_bounded if self.config.ps_staleness_bound >= 0 else ps_async.run_rounds
            first, warm, last = self.first_step, self.first_measured, self.config.total_steps
            self.warmup_updates, _ = loop(self, iterator, self.worker_step, hooks, first, warm)
            self._measuring()
            closures, coordinator_steps = loop(self, iterator, self.worker_step, hooks, warm, last)
        self.pulls = self._pull_probe(iterator)
        if self.evaluator is not None:
            self.evaluator.close()
        return self._measurements(closures, coordinator_steps)

    def _evaluation_hook(self):
        """Held-out evaluation on the coordinator (real data; None otherwise): it reads the
        weights from the ps between rounds while asynchronous workers keep training."""
        from tfbench.loop import convergence

        self.evaluator = convergence.make(self.config, self.model, self.run_dir, self.task.name,
                                          "/job:chief/replica:0/task:0/device:CPU:0", pauses_training=self.sync)
        if self.evaluator is None:
            return None
        return convergence.Hook(self.evaluator, self._iterations,
                                self.config.batch_size * (self.num_workers if self.sync else 1))

    def round_done(self, i: int, timing: StepTiming, results: List[dict]) -> None:
        """A round of N closures (a global step, or N asynchronous updates) was fetched."""
        self.shards_used.append(sorted(r["worker"] for r in results))
        for r in results:  # which global step each closure belongs to (ps_split.global_steps)
            r["round"] = i
        if self.reporter:
            self.reporter.step_done(i, timing, i >= self.first_measured)

    def _pull_probe(self, iterator, per_worker: int = 3) -> List[dict]:
        """After the measured window: closures that only pull the weights (3 per worker)."""
        from strategies import ps_async

        step = self.pull_fn = ps_async.pull_step(self)  # held, as the iterator
        values = [self.coordinator.schedule(step, args=(iterator,)) for _ in range(per_worker * self.num_workers)]
        self.coordinator.join()
        return [p for p in (ps_async.fetched(v, self) for v in values) if p is not None]

    @property
    def sync(self) -> bool:
        return self.config.ps_sync and self.config.mode == "train"

    def _run_sync(self, iterator, reporter, hooks):
        """Global step = one gradient from every worker accumulated on the ps, then the update
        applied on the ps (strategies.ps_sync); timed end to end by the coordinator."""
        from strategies.ps_sync import worker_waits

        config = self.config
        closures, coordinator_steps = [], []
        self.waits: Dict[int, List[float]] = collections.defaultdict(list)
        self.skipped, self.apply_s = 0, []
        for i in range(self.first_step, config.total_steps):
            if i == self.first_measured:
                self._measuring()
            if hooks:
                hooks.before(i)
            step = self.sync_step.run_step(iterator, i)
            timing = StepTiming(step.start_wall, step.duration_s)
            measured = i >= self.first_measured
            if measured:
                closures += step.closures
                coordinator_steps.append(timing)
                self.skipped += step.skipped
                self.apply_s.append(step.apply_s)
                for worker, wait in worker_waits(step):
                    self.waits[worker].append(wait)
            self.round_done(i, timing, step.closures)
            if hooks:
                hooks.after(i)
        return closures, coordinator_steps

    def _measurements(self, closures, coordinator_steps) -> List[Measurement]:
        """One Measurement per worker (worker-side times) plus the coordinator's own, which is
        the cluster's step series (one sample per global step, or per round of N updates)."""
        from strategies import ps_split

        sync, train = self.sync, self.config.mode == "train"
        by_worker: Dict[int, List[dict]] = collections.defaultdict(list)
        for c in sorted(closures, key=lambda c: c["start"]):
            by_worker[c["worker"]].append(c)
        if train and not sync:
            clocks = staleness.clock_staleness(self.warmup_updates + closures + self.late_updates)
            for c in closures:
                c["staleness"] = c["applied"] - 1 - c["read"]
                c["clock_staleness"] = clocks.get(c["applied"])
        stale = staleness.by_worker((c["worker"], c["staleness"]) for c in closures if c.get("staleness") is not None)
        shards = ps_placement.bytes_per_ps(self.model.variables)
        base = dict(self.summary(), ps_sync=sync, num_ps=len(self.plan.cluster_spec.get("ps", [])),
                    ps_staleness_bound=self.config.ps_staleness_bound, ps_shards=shards,
                    **knobs.knobs_of(self.config))
        if train:
            base["comm_plan"] = comm.plan_parameter_server(
                [int(c.shape.num_elements()) * c.dtype.size for v in self.model.trainable_variables
                 for c in (getattr(v, "variables", None) or [v])])
        if self.config.checkpoint_every:
            base.update(checkpoint_every=self.config.checkpoint_every, restored_from_step=self.first_step)
        last_global_end = coordinator_steps[-1].start_wall + coordinator_steps[-1].duration_s
        window_s = last_global_end - coordinator_steps[0].start_wall
        out = []
        for worker, mine in sorted(by_worker.items()):
            timings = [StepTiming(c["start"], c["end"] - c["start"]) for c in mine]
            if sync:
                extra = dict(base, step_label="gradient push",
                             step_definition="this worker's gradient closure (tf.timestamp on the worker): "
                                             "pull weights, compute, add the gradient into the ps accumulators",
                             wait_s=self.waits.get(worker, []),
                             window_end=last_global_end)  # its images count once the update is applied
            else:
                extra = dict(base, step_label="update" if train else "forward",
                             step_definition="one asynchronous update of this worker (tf.timestamp on the "
                                             "worker): pull weights, compute, push the update"
                             if train else "one forward pass of this worker (tf.timestamp on the worker)")
            extra["placement"] = self._placement("worker", worker)
            busy = sum(t.duration_s for t in timings)
            extra["idleness"] = min(1.0, max(0.0, 1.0 - busy / window_s)) if window_s > 0 else None
            extra["idleness_definition"] = IDLENESS
            if train:  # per update in the order of its timings, and summarised
                extra["staleness"] = stale.get(f"worker_{worker}", {"updates": 0})
                extra["staleness_per_update"] = [c["staleness"] for c in mine]
                if not sync:
                    extra["clock_staleness_per_update"] = [c["clock_staleness"] for c in mine]
                extra["time_split"] = ps_split.split(mine, [p for p in self.pulls if p["worker"] == worker],
                                                     window_s)
            out.append(Measurement("worker", worker, self.config.batch_size, timings, extra))
        updates = self._iterations() - getattr(self, "updates_before", 0)
        measured_s = sum(t.duration_s for t in coordinator_steps)
        chief = dict(base, counts_toward_cluster=False, cluster_steps=True,
                     step_label="global step" if sync else f"{self.num_workers} updates",
                     step_definition=(
                         "global step (coordinator): one gradient from every worker accumulated on the ps, "
                         "then the update applied on the ps; from scheduling to the update applied" if sync else
                         f"{self.num_workers} {'updates' if train else 'forward passes'} (coordinator): one round "
                         f"of {self.num_workers} scheduled steps, from the previous round's completion to its own"),
                     updates=updates, updates_counted="measured window only",
                     # over the coordinator's own rounds; the cluster record's updates_per_sec uses the
                     # cluster's measured window, as images/sec does
                     updates_per_sec_of_rounds=updates / measured_s if measured_s > 0 else None,
                     closures_per_worker={str(w): len(t) for w, t in sorted(by_worker.items())},
                     closure_results_lost=self.lost + getattr(getattr(self, "sync_step", None), "lost", 0),
                     placement=self._placement("chief", 0))
        if train:
            chief.update(staleness=stale, staleness_definition=staleness.DEFINITION)
        if train and not sync:
            if self.lost:  # their updates landed unseen: later clocks count one short
                chief["clock_staleness_note"] = (f"approximate: {self.lost} closure result(s) were lost with a "
                                                 "killed worker, and their updates are missing from the clocks")
            chief.update(clock_staleness=staleness.summary(c["clock_staleness"] for c in closures),
                         clock_staleness_definition=staleness.CLOCK_DEFINITION, bound_waits=self.bound_waits,
                         late_updates=len(self.late_updates))
        chief["step_split"] = ps_split.global_steps(closures, coordinator_steps, self.first_measured,
                                                    ps_split.pull_medians(self.pulls), self.apply_s if sync else None)
        if sync:
            chief.update(apply_step_s=self.apply_s, skipped_closures=self.skipped,
                         update_location="ps (accumulators and update on the ps tasks)")
        if self.evaluator is not None:
            chief["convergence"] = self.evaluator.summary()
        out.append(Measurement("chief", 0, self.config.batch_size * self.num_workers, coordinator_steps, chief))
        return out

    def _placement(self, role: str, index: int) -> dict:
        """Where the ops of `role`_`index` ran, from its runtime's placer log; the coordinator's
        record also holds each ps's (the sync update runs there) and the requested devices."""
        name = f"{role}_{index}"
        if role == "chief":
            placement.flush_c_stdout()
        logs = self.run_dir
        log = logs.task_log(name) if logs is not None else ""
        report = placement.report(
            self.config, self.device if role == "worker" else "strategy-placed",
            placement.placer_log_devices(log) if log else {},
            placement.variable_devices(self.model.variables), f"placer log of {name} (runtime placement)",
            None if log else "no run directory: the placer logs could not be read")
        report["requested_op_devices"] = self._step_op_devices()
        if role == "chief" and logs is not None:
            report["ps_op_devices"] = {
                t.name: placement.placer_log_devices(logs.task_log(t.name))
                for t in self.plan.tasks if t.role == "ps"}
        return report

    def _step_op_devices(self) -> Dict[str, int]:
        """Ops of the traced worker step per requested device (what the code asked for; the
        placer logs say where they ran)."""
        counts: Dict[str, int] = collections.Counter()
        for function in self.worker_step._list_all_concrete_functions():  # noqa: SLF001 - no public lister
            for device, n in placement.requested_op_devices(function).items():
                counts["worker" if device == "unplaced" else device] += n
        return dict(counts)

    def write_worker_events(self, run, measurements: List[Measurement]) -> None:
        """The workers run no Python loop of their own: the coordinator writes their perf series
        (their own update or gradient-push times), on the run's shared step axis."""
        from tfbench.tensorboard import timeline

        origin = timeline.origin(run.path)
        for m in measurements:
            if m.role != "worker":
                continue
            stale = m.extra.get("staleness_per_update") or [None] * len(m.timings)
            with EventWriter(run.task_tb(f"worker_{m.index}"), suffix=".perf") as events:
                for t, value in zip(m.timings, stale):
                    end = t.start_wall + t.duration_s
                    scalars = {"perf/step_time_ms": t.duration_s * 1e3,
                               "perf/images_per_sec": m.images_per_step / t.duration_s}
                    if value is not None:
                        scalars["perf/staleness"] = value
                    events.scalars(scalars, step=timeline.step_ms(origin, end), wall_time=end)
