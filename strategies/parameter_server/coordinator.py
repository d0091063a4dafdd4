"""ParameterServerStrategy through TF2's ClusterCoordinator: the coordinator's adapter.

Workers and ps are tf.distribute.Server processes (strategies.parameter_server.server); the chief is the coordinator and
schedules every step onto whichever worker is free. Variables live on the ps tasks (sharded
across them with more than one ps).

- asynchronous (--ps_sync=false, TF2's native mode): every scheduled step applies its own
  gradients. A cluster step is one round of N scheduled steps (N updates, docs/definitions.md); each
  worker's record holds its own update times, labelled as such.
- synchronous (--ps_sync=true, train only): one update per global step, aggregated and applied
  on the ps tasks (strategies.parameter_server.sync); each worker's record holds its gradient closures and
  its wait for the rest of the global step.

Timing: inside each scheduled function (tf.timestamp on the worker, the same wall clock as the
rest of tfbench) and on the coordinator, whose series is the cluster's (one sample per global
step). The coordinator writes one task record per worker from the worker-side times, plus its own.
"""
from __future__ import annotations

import collections
import contextlib
import os
import re
from typing import Dict, List

from strategies import placement
from strategies.base import StrategyAdapter
from strategies.measurement import Measurement
from strategies.parameter_server import variables as ps_placement
from strategies.parameter_server.ops import PsLog
from strategies.parameter_server.records import PsWorker
from tfbench.loop import benchmark
from tfbench.loop.step_loop import StepLoop, StepTiming, Timed
from tfbench.tensorboard.events import EventWriter


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
        self.log = PsLog()
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

    def input_cores(self) -> int:
        """The workers read the input (the coordinator only traces their pipeline): their cores."""
        return min((len(t.cores) for t in self.plan.tasks if t.role == "worker" and t.cores),
                   default=os.cpu_count() or 1)

    def data_shards(self) -> List[int]:
        return self.log.shards_used[0] if self.log.shards_used else []

    def weights(self):
        """Whole variables: a partitioned variable's shards ('<name>/part_<k>', consecutive in the
        model's variables) joined along their first axis, as a single device holds it."""
        import numpy as np

        whole, names = [], []
        for v in self.model.trainable_variables:
            base = re.sub(r"/part_\d+(:\d+)?$", "", v.name)
            if whole and "/part_" in v.name and names[-1] == base:
                whole[-1] = np.concatenate([whole[-1], v.numpy()])
                continue
            whole.append(v.numpy())
            names.append(base)
        return whole

    # -- set-up -------------------------------------------------------------------------------
    def _dataset(self):
        from tfbench.framework.tf_import import tf

        config, strategy = self.config, self.strategy

        num_workers, cores = self.num_workers, self.input_cores()

        def dataset_fn(_context):
            shard = tf.distribute.coordinator.experimental_get_current_worker_index()
            workload = config.workload
            if config.reads_input or workload.streams:  # this worker's shard of the real input (or stream), read on
                return workload.dataset(config, shard, num_workers, config.batch_size, cores).map(
                    lambda x, y: (x, y, tf.cast(shard, tf.int32)))
            return (tf.data.Dataset.from_tensors(shard)
                    .map(lambda s: tuple(workload.batch(config, config.batch_size, s)) + (tf.cast(s, tf.int32),))
                    .cache().repeat())

        @tf.function
        def per_worker_dataset_fn():
            return strategy.distribute_datasets_from_function(dataset_fn)

        return iter(self.coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    def _measuring(self) -> None:
        """Between warm-up and the measured steps: count updates from here; the coordinator's
        own op logging stops (the remote placers logged their placements while warming up)."""
        from tfbench.framework.tf_import import tf

        self.log.updates_before = self._iterations()
        tf.debugging.set_log_device_placement(self.config.log_device_placement)

    def _iterations(self) -> int:
        return int(self.optimizer.iterations.numpy()) if self.config.mode == "train" else 0

    # -- the run ------------------------------------------------------------------------------
    def run(self, reporter=None, profiler=None) -> List[Measurement]:
        from strategies import checkpoints
        from strategies.parameter_server import asynchronous as ps_async
        from strategies.parameter_server import records as ps_records
        from strategies.parameter_server import rounds as ps_rounds

        self.build_model()
        self.keep_initial_weights()
        iterator = self.iterator = self._dataset()  # held: freeing it on the coordinator is slow (tfbench.task)
        log = self.log = PsLog()
        saver = checkpoints.make(self, self.run_dir)
        first = saver.restore() if saver else 0  # after a restart: the step the checkpoint holds
        hooks = benchmark.StepHooks(profiler, self._evaluation_hook(), saver)
        if self.sync:
            from strategies.parameter_server.sync import SyncOnPs

            sync_step = self.sync_step = SyncOnPs(self.strategy, self.coordinator, self.model, self.optimizer,
                                                  self.config, self.num_workers, self.device, log)
            self.worker_step = sync_step.worker_step
            loop = StepLoop(self.config, first, reporter, hooks, on_measure_start=self._measuring)

            def step(i: int) -> Timed:
                """Global step i, timed by the coordinator; its GlobalStep is kept."""
                done = sync_step.run_step(iterator, i)
                log.round_done(i, done.closures)
                return Timed(StepTiming(done.start_wall, done.duration_s), done)
        else:
            from strategies.parameter_server.book import Book

            kind = ps_rounds.kind_for(self.config, hooks)
            self.closure_records = kind.RECORDS
            book = Book(self.strategy, self.num_workers, ps_async.RECORD) \
                if kind is ps_rounds.KeptRounds else None
            self.worker_step = ps_async.worker_step(self, book)

            def measuring() -> None:  # the warm-up's closures all done before the window starts
                step.drain()
                self._measuring()

            loop = StepLoop(self.config, first, reporter, hooks, on_measure_start=measuring)
            step = kind(self.coordinator, self.num_workers, iterator, self.worker_step, log, loop, book)
        loop.run(step)
        if not self.sync:
            step.drain()
        pulls = self._pull_probe(iterator)
        if self.evaluator is not None:
            self.evaluator.close()
        return ps_records.measurements(self, ps_records.PsRun.of(loop, log, pulls, self._iterations(), self.sync))

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

    def _pull_probe(self, iterator, per_worker: int = 5) -> List[dict]:
        """After the measured window: closures that only pull the weights, 5 per worker scheduled
        (whichever worker is free takes one), so that one slow read does not set a worker's median."""
        from strategies.parameter_server import asynchronous as ps_async
        from strategies.parameter_server import rounds as ps_rounds

        step = self.pull_fn = ps_async.pull_step(self)  # held, as the iterator
        values = [self.coordinator.schedule(step, args=(iterator,)) for _ in range(per_worker * self.num_workers)]
        self.coordinator.join()
        return [p for p in (ps_rounds.fetched(v, self.log) for v in values) if p is not None]

    @property
    def sync(self) -> bool:
        return self.config.ps_sync and self.config.mode == "train"

    @property
    def update_applied_by(self) -> str:
        if self.sync:
            return ("the ps, once per global step (strategies.parameter_server.sync: w -= learning rate x the workers' "
                    "summed gradients, a table's touched rows scattered), not the optimizer")
        return "the optimizer's apply_gradients in each worker's closure, its ops on the ps holding each variable"

    def placement_report(self, role: str, index: int) -> dict:
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

        origin, workload = timeline.origin(run.path), self.config.workload
        for m in measurements:
            if m.role != "worker":
                continue
            stale = m.part(PsWorker).staleness_per_update or [None] * len(m.timings)
            with EventWriter(run.task_tb(f"worker_{m.index}"), suffix=".perf") as events:
                for t, value in zip(m.timings, stale):
                    end = t.start_wall + t.duration_s
                    scalars = {"perf/step_time_ms": t.duration_s * 1e3,
                               f"perf/{workload.unit}_per_sec": workload.per_unit(self.config,
                                                                                  m.examples_per_step / t.duration_s)}
                    if value is not None:
                        scalars["perf/staleness"] = value
                    events.scalars(scalars, step=timeline.step_ms(origin, end), wall_time=end)
