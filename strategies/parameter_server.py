"""ParameterServerStrategy through TF2's ClusterCoordinator.

Workers and ps are tf.distribute.Server processes (serve()); the chief is the coordinator and
schedules every step onto whichever worker is free. Variables live on the ps tasks (sharded
across them with more than one ps).

- asynchronous (--ps_sync=false, TF2's native mode): every scheduled step applies its own
  gradients. A "step" of the run is one round of num_workers scheduled steps, so the run performs
  workers x steps updates.
- synchronous (--ps_sync=true): one update per global step. Each worker's scheduled step adds its
  gradients, scaled for the global batch, into accumulators on the ps; after all have
  contributed, one scheduled step applies the accumulated (averaged) gradient and clears it.

Timing: inside each scheduled function (tf.timestamp on the worker, the same wall clock as the
rest of tfbench) and on the coordinator (when a round or global step completed). The coordinator
writes one task record per worker from the worker-side times, plus its own.
"""
from __future__ import annotations

import collections
import contextlib
import time
from typing import Dict, List

from strategies import placement
from strategies.base import Measurement, StrategyAdapter
from tfbench import steps
from tfbench.benchmark import StepTiming
from tfbench.events import EventWriter


def serve(task, intra_threads: int, inter_threads: int, on_ready) -> None:
    """A ps or worker task: a gRPC server that the coordinator drives; returns never."""
    from tfbench.tf_import import tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    session_config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra_threads,
                                              inter_op_parallelism_threads=inter_threads)
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=task.role, task_index=task.index,
                                  protocol="grpc", config=session_config, start=True)
    on_ready()
    server.join()


def settled(value, variables):
    """`value`, available only once every earlier write to `variables` is done.

    A step's updates are remote assignments on the ps that nothing downstream reads, so a
    timestamp would not wait for them. TensorFlow orders ops on one resource in program order:
    reading each variable afterwards (reduced to a scalar on its own ps, so nothing large
    travels) makes the value wait for the writes.
    """
    from tfbench.tf_import import tf

    marks = []
    for v in variables:
        for part in getattr(v, "variables", None) or [v]:  # shards of a ShardedVariable
            with tf.device(part.device):
                marks.append(tf.reshape(part.read_value(), [-1])[0])
    with tf.control_dependencies(marks):
        return tf.identity(value)


class ParameterServerAdapter(StrategyAdapter):
    """The coordinator's side (the chief task)."""

    def make_strategy(self):
        from tfbench.tf_import import tf

        num_ps = len(self.plan.cluster_spec.get("ps", []))
        partitioner = None
        if num_ps > 1:
            partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
                min_shard_bytes=256 << 10, max_shards=num_ps)
        strategy = tf.distribute.ParameterServerStrategy(
            tf.distribute.cluster_resolver.TFConfigClusterResolver(), variable_partitioner=partitioner)
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

    def data_shards(self) -> List[int]:
        return self.shards_used[0] if self.shards_used else []

    # -- set-up -------------------------------------------------------------------------------
    def _dataset(self):
        from tfbench.data import batch_for
        from tfbench.tf_import import tf

        config, strategy = self.config, self.strategy

        def dataset_fn(_context):
            shard = tf.distribute.coordinator.experimental_get_current_worker_index()
            return (tf.data.Dataset.from_tensors(shard)
                    .map(lambda s: batch_for(config, config.batch_size, s) + (tf.cast(s, tf.int32),))
                    .cache().repeat())

        @tf.function
        def per_worker_dataset_fn():
            return strategy.distribute_datasets_from_function(dataset_fn)

        return iter(self.coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    def _functions(self):
        """(worker_step, apply_step) tf.functions; apply_step is None unless synchronous."""
        from tfbench.tf_import import tf

        config, model, optimizer, strategy = self.config, self.model, self.optimizer, self.strategy
        sync = config.ps_sync and config.mode == "train"
        variables = model.trainable_variables
        if sync:
            with strategy.scope():
                self.accumulators = [tf.Variable(tf.zeros_like(v), trainable=False, name="grad_accumulator")
                                     for v in variables]
        global_batch = config.batch_size * (self.num_workers if sync else 1)

        def replica_fn(images, labels):
            if config.mode == "forward":
                return steps.forward(model, images)
            if not sync:
                loss = steps.train(model, optimizer, images, labels, global_batch)
                return settled(loss, variables)
            loss, grads = steps.gradients(model, images, labels, global_batch)
            for acc, g in zip(self.accumulators, grads):
                acc.assign_add(g)
            return settled(loss, self.accumulators)

        @tf.function(jit_compile=config.xla or None)
        def worker_step(iterator):
            start = tf.timestamp()
            with tf.control_dependencies([start]):  # variable reads from the ps count too
                images, labels, shard = next(iterator)
                value = strategy.run(replica_fn, args=(images, labels))
            with tf.control_dependencies([value]):
                end = tf.timestamp()
            return value, start, end, shard

        apply_step = None
        if sync:
            def apply_fn():
                optimizer.apply_gradients(zip([tf.identity(a) for a in self.accumulators], variables))
                for acc in self.accumulators:  # ordered after the reads above (same resource)
                    acc.assign(tf.zeros_like(acc))
                return settled(tf.identity(optimizer.iterations), variables + self.accumulators)

            @tf.function
            def apply_step():
                start = tf.timestamp()
                with tf.control_dependencies([start]):
                    iterations = strategy.run(apply_fn)  # the optimizer needs a replica context
                with tf.control_dependencies([iterations]):
                    end = tf.timestamp()
                return start, end

        return worker_step, apply_step

    # -- the run ------------------------------------------------------------------------------
    def run(self, reporter=None, profiler=None) -> List[Measurement]:
        self.build_model()
        self.initial_weights = self.weights()
        iterator = self._dataset()
        worker_step, apply_step = self._functions()
        self.worker_step = worker_step
        rounds = self._run_sync if apply_step is not None else self._run_async
        closures, applies, coordinator_steps = rounds(iterator, worker_step, apply_step, reporter, profiler)
        return self._measurements(closures, applies, coordinator_steps)

    def _run_sync(self, iterator, worker_step, apply_step, reporter, profiler):
        """Global step = every worker's gradients accumulated, then one apply; timed end to end."""
        config, n, schedule = self.config, self.num_workers, self.coordinator.schedule
        closures, applies, coordinator_steps = [], [], []
        for i in range(config.total_steps):
            if profiler:
                profiler.before(i)
            start_wall, t0 = time.time(), time.perf_counter()
            grads = [schedule(worker_step, args=(iterator,)) for _ in range(n)]
            self.coordinator.join()
            applied = schedule(apply_step)
            self.coordinator.join()
            results, apply_times = [rv.fetch() for rv in grads], applied.fetch()
            timing = StepTiming(start_wall, time.perf_counter() - t0)
            if profiler:
                profiler.after(i)
            self.shards_used.append([int(r[3]) for r in results])
            measured = i >= config.num_warmup_steps
            if measured:
                closures += results
                applies.append(apply_times)
                coordinator_steps.append(timing)
            if reporter:
                reporter.step_done(i, timing, measured)
        return closures, applies, coordinator_steps

    def _run_async(self, iterator, worker_step, apply_step, reporter, profiler):
        """Warm-up rounds, then all measured rounds queued at once so no worker waits for another;
        a round's coordinator time runs from the previous round's completion to its own."""
        config, n, schedule = self.config, self.num_workers, self.coordinator.schedule
        for phase_start, phase_end in ((0, config.num_warmup_steps), (config.num_warmup_steps, config.total_steps)):
            start_wall, t0 = time.time(), time.perf_counter()
            queued = [[schedule(worker_step, args=(iterator,)) for _ in range(n)]
                      for _ in range(phase_start, phase_end)]
            closures, coordinator_steps = [], []
            for i, round_rvs in zip(range(phase_start, phase_end), queued):
                if profiler:
                    profiler.before(i)
                results = [rv.fetch() for rv in round_rvs]
                now_wall, t1 = time.time(), time.perf_counter()
                timing = StepTiming(start_wall, t1 - t0)
                start_wall, t0 = now_wall, t1
                if profiler:
                    profiler.after(i)
                self.shards_used.append([int(r[3]) for r in results])
                measured = i >= config.num_warmup_steps
                if measured:
                    closures += results
                    coordinator_steps.append(timing)
                if reporter:
                    reporter.step_done(i, timing, measured)
            self.coordinator.join()
        return closures, [], coordinator_steps

    def _measurements(self, closures, applies, coordinator_steps) -> List[Measurement]:
        """One Measurement per worker (worker-side times) plus the coordinator's own."""
        by_worker: Dict[int, List[StepTiming]] = collections.defaultdict(list)
        for _, start, end, shard in closures:
            by_worker[int(shard)].append(StepTiming(float(start), float(end) - float(start)))
        apply_end = max((float(e) for _, e in applies), default=0.0)
        base = dict(self.summary())
        base["ps_sync"] = self.config.ps_sync
        base["num_ps"] = len(self.plan.cluster_spec.get("ps", []))
        out = []
        for worker, timings in sorted(by_worker.items()):
            timings.sort(key=lambda t: t.start_wall)
            extra = dict(base, step_time_source="worker tf.timestamp inside the scheduled function")
            last_end = timings[-1].start_wall + timings[-1].duration_s
            extra["window_end"] = max(last_end, apply_end)  # a sync step ends when applied
            out.append(Measurement("worker", worker, self.config.batch_size, timings, extra))
        chief = dict(base, counts_toward_cluster=False,
                     step_time_source="coordinator: schedule to completion of each round/global step",
                     updates=int(self.optimizer.iterations.numpy()) if self.config.mode == "train" else 0,
                     closures_per_worker={str(w): len(t) for w, t in sorted(by_worker.items())},
                     apply_step_s=[float(e) - float(s) for s, e in applies],
                     placement=placement.report(
                         self.config, "strategy-placed", self._step_op_devices(),
                         placement.variable_devices(self.model.variables), "function graph (requested devices)",
                         "steps run on whichever worker the coordinator picks: 'worker' counts the ops "
                         "left to it, ps entries the variable ops pinned to the ps tasks"))
        out.append(Measurement("chief", 0, self.config.batch_size * self.num_workers, coordinator_steps, chief))
        return out

    def _step_op_devices(self) -> Dict[str, int]:
        """Ops of the traced worker step per requested device; run metadata cannot see remote
        execution, so the function graph is what the coordinator can report."""
        counts: Dict[str, int] = collections.Counter()
        for function in self.worker_step._list_all_concrete_functions():  # noqa: SLF001 - no public lister
            for device, n in placement.requested_op_devices(function).items():
                counts["worker" if device == "unplaced" else device] += n
        return dict(counts)

    def write_worker_events(self, run, measurements: List[Measurement]) -> None:
        """The workers run no Python loop of their own: the coordinator writes their perf series."""
        for m in measurements:
            if m.role != "worker":
                continue
            with EventWriter(run.task_tb(f"worker_{m.index}"), suffix=".perf") as events:
                for k, t in enumerate(m.timings):
                    events.scalars({"perf/step_time_ms": t.duration_s * 1e3,
                                    "perf/images_per_sec": m.images_per_step / t.duration_s},
                                   step=k, wall_time=t.start_wall + t.duration_s)
