"""Horovod (Gloo): each rank runs the default strategy; hvd.DistributedGradientTape averages
gradients across ranks, and rank 0's initial variables are broadcast before the first step."""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, Optional

from strategies.base import SyncAdapter, on_host
from strategies.measurement import absent, flat
from strategies.multi_worker_mirrored import gradient_bytes
from tfbench.config import knobs
from tfbench.config.errors import ConfigError
from tfbench.loop import steps
from tfbench.measure import comm

HOROVOD_KNOB_ENV = ("HOROVOD_FUSION_THRESHOLD", "HOROVOD_CYCLE_TIME", "HOROVOD_AUTOTUNE", "HOROVOD_AUTOTUNE_LOG")


def import_horovod():
    try:
        import horovod.tensorflow as hvd
    except ImportError as e:
        raise ConfigError(f"Horovod is not installed ({e}); build it with `make horovod`, see BUILD.md") from None
    return hvd


class HorovodAdapter(SyncAdapter):
    compressor = None  # make_step: Horovod's gradient compression

    def make_strategy(self):
        from tfbench.framework.tf_import import tf

        self.hvd = import_horovod()
        os.environ.update(horovod_environment(self.config, self.run_dir, self.task))
        self.hvd.init()
        return tf.distribute.get_strategy()

    @property
    def replicas(self) -> int:
        return self.hvd.size()

    @property
    def local_replicas(self) -> int:
        return 1

    def before_exit(self) -> None:
        """Horovod's own shutdown (its atexit hook, which the task's exit skips): the ranks leave
        together, and its timeline and autotune log are complete."""
        self.hvd.shutdown()

    def after_build(self) -> None:
        if self.config.horovod_elastic:
            return  # hvd.elastic.run broadcasts rank 0's state before its first step (a rank joining late too)
        variables = list(self.model.variables)
        if self.config.mode == "train":
            variables += list(self.optimizer.variables())
        self.hvd.broadcast_variables(variables, root_rank=0)

    def make_step(self) -> Callable[[], object]:
        from tfbench.framework.tf_import import tf

        hvd, config, model, optimizer = self.hvd, self.config, self.model, self.optimizer
        batches = self._rank_batches()
        compression = self.compressor = compressor(hvd, config.horovod_compression)
        marks = []  # the gradients-done timestamp of the trace being built

        def wrap(tape):
            reducing = hvd.DistributedGradientTape(tape, compression=compression,
                                                   sparse_as_dense=config.horovod_sparse_as_dense)
            return reducing if config.xla else marked_tape(reducing, marks, tf)  # XLA: no timestamp inside

        device = self.device

        @tf.function(jit_compile=config.xla or None)
        def step(batch):
            features, labels = batch
            with tf.device(device):  # inside the traced function, where it pins every op
                # Horovod averages gradients over ranks, so each rank's loss is its own batch mean.
                value, mark, _ = steps.shaped(config, model, optimizer, features, labels, config.batch_size,
                                              tape_wrapper=wrap, marks=marks)
                return value, mark

        sample = batches()
        self.step_function = lambda: step.get_concrete_function(sample)
        return on_host(step, batches)

    def _rank_batches(self):
        """This rank's data: its fixed synthetic batch, or its shards of real input read on
        (the workload's dataset: tfbench.data)."""
        if not self.config.reads_input:
            batch = self._replica_batch(self.hvd.rank())
            return lambda: batch
        dataset = self.config.workload.dataset(self.config, self.hvd.rank(), self.hvd.size(), self.config.batch_size,
                                               self.input_cores())
        iterator = iter(dataset)
        return lambda: next(iterator)

    @property
    def evaluates(self) -> bool:
        return self.hvd.rank() == 0

    def run(self, reporter=None, profiler=None):
        if not self.config.horovod_elastic:
            return super().run(reporter, profiler)
        from strategies import horovod_elastic
        from strategies.measurement import Measurement

        step = self.setup()
        log = horovod_elastic.run_steps(self, step, reporter, profiler)
        most = max(log.rank_counts, default=self.hvd.size())  # ranks vary: the most that stepped together
        summary = dataclasses.replace(
            self.summary(), replicas=most, global_batch_size=most * self.config.batch_size,
            step_definition="this rank's step: train step and the elastic state's commit (model, optimizer "
                            "and step number copied, host changes checked), start to commit done")
        return [Measurement(self.task.role, self.task.index, self.config.batch_size, log.timings, summary,
                            parts=(*self.summary_parts(), log.steps()), started_with_launch=not log.joined_at)]

    def summary_parts(self) -> list:
        train = self.config.mode == "train"
        return [HorovodFields(
            knobs.knobs_of(self.config), self.compressor.__name__ if self.compressor is not None else None,
            {k: os.environ[k] for k in sorted(os.environ) if k in HOROVOD_KNOB_ENV},
            comm.plan_horovod(gradient_bytes(self.model, self.config.horovod_sparse_as_dense),
                              self.config.horovod_fusion_threshold_mb,
                              0.5 if self.config.horovod_compression != "none" else 1.0) if train else None,
            self.config.horovod_elastic, self.hvd.rank())]


@dataclasses.dataclass
class HorovodFields:
    """Its records' own part: the knobs, the compressor and environment Horovod read them from,
    the all-reduce's communication plan (training), whether elastic, and this rank."""

    knobs: Dict = flat()
    horovod_compressor: Optional[str] = None
    horovod_environment: Dict = dataclasses.field(default_factory=dict)
    comm_plan: Optional[Dict] = absent()
    horovod_elastic: bool = False
    horovod_rank: int = 0


def horovod_environment(config, run_dir: Optional[str], task) -> Dict[str, str]:
    """The environment Horovod reads its knobs from at hvd.init() (tfbench.config.knobs)."""
    env = {}
    if config.horovod_fusion_threshold_mb >= 0:
        env["HOROVOD_FUSION_THRESHOLD"] = str(config.horovod_fusion_threshold_mb << 20)
    if config.horovod_cycle_time_ms > 0:
        env["HOROVOD_CYCLE_TIME"] = f"{config.horovod_cycle_time_ms:g}"
    if config.horovod_autotune:
        env["HOROVOD_AUTOTUNE"] = "1"
        if run_dir:
            env["HOROVOD_AUTOTUNE_LOG"] = os.path.join(run_dir.tasks_dir, f"horovod_autotune_{task.name}.csv")
    return env


def compressor(hvd, name: str):
    """Horovod's gradient compression (its all-reduce takes no bfloat16, so fp16 is the one it has)."""
    return hvd.Compression.fp16 if name == "fp16" else hvd.Compression.none


def marked_tape(tape, marks: list, tf):
    """A DistributedGradientTape that appends, to `marks`, a timestamp taken once every local
    gradient exists and before Horovod's all-reduce starts: where a rank's compute ends. The
    all-reduce does not wait for the timestamp. Horovod 0.28 (its last release) reduces in
    `_allreduce_grads`, which this wraps."""
    allreduce = tape._allreduce_grads  # noqa: SLF001 - no public hook between local gradients and the reduce

    def reduce_marked(grads, sources, *args, **kwargs):
        with tf.control_dependencies([g for g in grads if g is not None]):
            marks.append(tf.timestamp())
        return allreduce(grads, sources, *args, **kwargs)

    tape._allreduce_grads = reduce_marked  # noqa: SLF001
    return tape
