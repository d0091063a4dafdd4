"""The interface every strategy adapter offers the per-task loop.

An adapter owns a tf.distribute strategy (or Horovod), builds the model and optimizer in its
scope, turns the shared step (tfbench.loop.steps) into a callable that returns once its result is on
the host, and runs the timed loop. Synchronous strategies share SyncAdapter; the parameter-server
adapter schedules through ClusterCoordinator instead.
"""
from __future__ import annotations

import abc
import dataclasses
import os
import time
from typing import Callable, Dict, List, Optional

from strategies import devices, placement, step_graph
from strategies.measurement import Checkpointing, Measurement, TaskSummary, absent
from tfbench.framework import precision
from tfbench.loop import benchmark, steps
from tfbench.loop.step_loop import StepLoop
from tfbench.measure import startup
from tfbench.models.tables import embedding_tables


@dataclasses.dataclass
class SyncSteps:
    """A synchronous task's own part of its record: when each measured step had its batch in
    hand and when its gradients all existed (tfbench.measure.breakdown), and the collective ops
    of its traced step."""

    step_computed_wall: List[float]
    step_input_wall: List[float]
    step_collective_ops: Optional[Dict] = absent()
    step_graph: Optional[Dict] = absent()  # embedding tables: what the traced step does with them (strategies.step_graph)

    @classmethod
    def of(cls, marks: List["Marks"]) -> "SyncSteps":
        return cls([m.computed for m in marks], [m.batch for m in marks])


@dataclasses.dataclass(frozen=True)
class Marks:
    """What a synchronous step keeps: when its batch was in hand (host clock) and when every
    local gradient existed (tf.timestamp in the step; 0.0 under XLA)."""

    batch: float
    computed: float


class StrategyAdapter(abc.ABC):
    """Base: a strategy for one task of a run."""

    def __init__(self, config, task, plan, run_dir=None):
        self.config, self.task, self.plan, self.run_dir = config, task, plan, run_dir
        self.device = devices.compute_device(config)
        self.strategy = self.make_strategy()
        self.model = None
        self.optimizer = None

    # -- what subclasses provide ------------------------------------------------------------
    @abc.abstractmethod
    def make_strategy(self):
        """The tf.distribute strategy (or the default one, for Horovod) this adapter drives."""

    @property
    def replicas(self) -> int:
        """Replicas in sync across the whole cluster."""
        return self.strategy.num_replicas_in_sync

    @property
    def local_replicas(self) -> int:
        return self.replicas

    @property
    def global_batch_size(self) -> int:
        return self.config.batch_size * self.replicas

    @abc.abstractmethod
    def run(self, reporter=None, profiler=None) -> List[Measurement]:
        """Builds everything, runs warm-up and measured steps, returns what was measured."""

    # -- shared ------------------------------------------------------------------------------
    def scope(self):
        return self.strategy.scope()

    def device_scope(self):
        """Explicit device scope, entered around variable creation and inside the traced step;
        a no-op for strategies that pin each replica to its own device themselves."""
        from tfbench.framework.tf_import import tf

        return tf.device(self.device)

    def build_model(self) -> None:
        from tfbench.framework.tf_import import keras

        keras.utils.set_random_seed(self.config.seed)
        precision.apply_policy(self.config.precision)  # --precision: before any layer exists
        with self.scope():
            self.model = self.config.workload.build(self.config)
            self.optimizer = precision.wrap_optimizer(steps.optimizer(self.config), self.config.precision)
            if self.config.mode == "train":
                steps.prepare(self.optimizer, self.model.trainable_variables)
        startup.mark("model_built")

    def weights(self):
        return [v.numpy() for v in self.model.trainable_variables]

    def input_cores(self) -> int:
        """Cores of the task that reads this adapter's input (its pipeline's threads follow them)."""
        return len(self.task.cores) or os.cpu_count() or 1

    def data_shards(self) -> List[int]:
        """The data shards one global step consumed, in global-batch order."""
        return list(range(self.replicas))

    def summary(self) -> TaskSummary:
        """Task-record fields every adapter reports."""
        c = self.config
        return TaskSummary(c.strategy, c.batch_size, self.replicas, self.local_replicas, self.global_batch_size,
                           c.model, c.mode, c.precision,
                           optimizer=steps.optimizer_record(c, self.update_applied_by) if c.mode == "train" else None)

    update_applied_by = ""  # who applies the update, if not the optimizer in every replica's step
    # initial_weights: a copy of every weight before the first step, kept only when asked (tfbench.task's
    # weight dump): under a parameter server a copy would bring every table to the coordinator
    keeps_initial_weights = False
    initial_weights = None

    def keep_initial_weights(self) -> None:
        if self.keeps_initial_weights:
            self.initial_weights = self.weights()

    def summary_parts(self) -> list:
        """The strategy's own parts of every record it writes (its knobs, its communication plan)."""
        return []

    def write_worker_events(self, run, measurements: List[Measurement]) -> None:
        """TensorBoard series of tasks that run no loop of their own (parameter-server workers)."""

    def before_exit(self) -> None:
        """What must end before the task's process does, records written, without the
        interpreter's teardown (tfbench.task.end_without_teardown): e.g. Horovod's shutdown."""


class SyncAdapter(StrategyAdapter):
    """Strategies whose every step is synchronous and driven by this task's own loop."""

    step_function = None  # make_step: the traced step's concrete function, for its ops and devices

    def make_step(self) -> Callable[[], object]:
        """A callable running one step; returns once the result is on the host, with the wall
        time at which every gradient of the step existed: where a step's compute ends and its
        all-reduce and update go on (tfbench.measure.breakdown)."""
        from tfbench.framework.tf_import import tf

        strategy, config = self.strategy, self.config
        batches = self._batches()
        global_batch = self.global_batch_size
        model, optimizer = self.model, self.optimizer

        def replica_step(batch):
            features, labels = batch
            value, mark, _ = steps.shaped(config, model, optimizer, features, labels, global_batch,
                                          forward_scale=strategy.num_replicas_in_sync)
            return value, mark

        device_scope = self.device_scope

        @tf.function(jit_compile=config.xla or None)
        def step(batch):
            # Inside the traced function: TF2 keeps no outer device scope while tracing.
            with device_scope():
                losses, marks = strategy.run(replica_step, args=(batch,))
            # This task's replicas only: no collective beyond the strategy's own gradient
            # all-reduce, so forward steps never synchronise workers (like Horovod's).
                local = strategy.experimental_local_results
                return tf.add_n(list(local(losses))), tf.reduce_max(tf.stack(list(local(marks))))

        sample, batches = peek(batches)
        self.step_function = lambda: step.get_concrete_function(sample)
        return on_host(step, batches)

    def _batches(self) -> Callable[[], object]:
        """What each step gets: synthetic data is one fixed batch per replica, made once; real
        input, and a workload whose examples are a stream (a recommender's clicks), is read on,
        each task's pipeline from its own shards (the workload's dataset: tfbench.data)."""
        strategy, config = self.strategy, self.config
        if not config.reads_input and not config.workload.streams:
            values = strategy.experimental_distribute_values_from_function(
                lambda ctx: self._replica_batch(ctx.replica_id_in_sync_group))
            return lambda: values

        cores = self.input_cores()

        def dataset_fn(ctx):  # a task's local replicas take turns at its pipeline's batches
            return config.workload.dataset(config, ctx.input_pipeline_id, ctx.num_input_pipelines,
                                           config.batch_size, cores)

        iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
        return lambda: next(iterator)

    def _replica_batch(self, shard: int):
        return self.config.workload.batch(self.config, self.config.batch_size, shard)

    def evaluation_hook(self):
        """Held-out evaluation between steps on the task that evaluates (None: no evaluation)."""
        from tfbench.loop import convergence

        self.evaluator = convergence.make(self.config, self.model, self.run_dir, self.task.name,
                                          self.device) if self.evaluates else None
        if self.evaluator is None:
            return None
        return convergence.Hook(self.evaluator, lambda: int(self.optimizer.iterations.numpy()), self.global_batch_size)

    def row_holders(self) -> list:
        """The variables that hold embedding rows (each table and its shards): no float tensor of a
        step that costs the rows it touches has one's full shape (strategies.step_graph)."""
        return [p for t in embedding_tables(self.model) for p in [t, *getattr(t, "variables", [])]]

    @property
    def evaluates(self) -> bool:
        """One task evaluates a synchronous run: worker 0 (the only task of a one-task run)."""
        return self.task.index == 0

    def setup(self) -> Callable[[], object]:
        with self.device_scope():
            self.build_model()
            self.after_build()
            self.keep_initial_weights()
            return self.make_step()

    def after_build(self) -> None:
        """Hook: e.g. Horovod broadcasts rank 0's initial variables here."""

    def run(self, reporter=None, profiler=None) -> List[Measurement]:
        from strategies import checkpoints

        step = self.setup()
        probe = placement.PlacementProbe()
        saver = checkpoints.make(self, self.run_dir)
        first = saver.restore() if saver else 0  # after a restart: the step the checkpoint holds
        loop = StepLoop(self.config, first, reporter, benchmark.StepHooks(profiler, self.evaluation_hook(), saver))
        with self.device_scope():
            loop.run(lambda i: step(), first_warmup=probe)  # each step keeps its gradients-done time
        convergence = None
        if self.evaluator is not None:
            convergence = self.evaluator.summary()
            self.evaluator.close()
        placed = probe.report(self.config, self.device, self.model.variables)
        steps = SyncSteps.of(loop.kept())
        if self.step_function is not None:
            function = self.step_function()
            placed["requested_op_devices"] = placement.requested_op_devices(function)
            steps.step_collective_ops = placement.collective_ops(function)
            tables = self.row_holders()
            if tables and self.config.mode == "train":
                steps.step_graph = step_graph.summary([function], tables)
        return [Measurement(self.task.role, self.task.index, self.config.batch_size * self.local_replicas,
                            loop.timings, self.summary(), placed, convergence,
                            Checkpointing(self.config.checkpoint_every, first) if saver else None,
                            (*self.summary_parts(), steps))]


def peek(batches: Callable[[], object]):
    """(the first batch, a `batches` that gives that batch first): a sample to trace the step with
    that the first step still trains on (a stream's first batch is step 0's)."""
    first = [batches()]
    return first[0], lambda: first.pop() if first else batches()


def on_host(step: Callable, batches: Callable[[], tuple]) -> Callable[[], Marks]:
    """Runs step(batch) -> (loss, gradients-done wall time) on the next batch until both are on
    the host; returns its Marks. The wait for the batch (the input pipeline) is timed on the
    host, before the step is called."""

    def run() -> Marks:
        batch = batches()
        in_hand = time.time()
        loss, computed = step(batch)
        loss.numpy()
        return Marks(in_hand, float(computed.numpy()))

    return run
