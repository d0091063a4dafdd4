"""What every workload says of itself: what a step consumes, the unit it counts, its loss, how its
model and its synthetic batches are built, and the figures its memory and FLOP counts need.

A workload is the job a benchmark runs (an image model, a recommender, a transformer, the user's
own model). Strategies never look inside one: they build its model, feed it its batches and
differentiate its loss, so that every strategy runs every workload; records, tables, reports and
the performance model count in its unit (docs/definitions.md, "Units").
"""
from __future__ import annotations

import abc
import dataclasses
import types
from typing import Dict, Mapping, Optional, Tuple

from tfbench.workloads.arguments import Arguments

UNITS = ("images", "examples", "tokens")  # what a workload's throughput counts


class WorkloadError(ValueError):
    """A flag this workload cannot run with (validation reports it as one line, exit code 2)."""


def need(ok: bool, message: str) -> None:
    if not ok:
        raise WorkloadError(message)


@dataclasses.dataclass(frozen=True)
class Workload(abc.ABC):
    """Base of every workload; its subclasses fill in what differs."""

    name: str
    description: str
    unit: str = "examples"  # one of UNITS
    inputs: str = "examples"  # what one example is, as the table and the docs say it
    own_flags: Tuple[str, ...] = ()  # flags only this kind of workload reads (others refuse them off default)
    reads_files: bool = False  # its examples can be read from files (--data_dir: tfbench.data.records)
    kind: str = ""  # what sort of workload, as records name it: image, transformer, user
    streams: bool = False  # its synthetic examples are a stream each task makes step after step (its dataset())
    metric: str = "accuracy"  # what its held-out evaluation measures (tfbench.loop.convergence)
    labelled: bool = False  # its synthetic examples carry labels a model can learn, and a held-out set (held_out())

    @property
    def reads(self) -> Tuple[str, ...]:
        """Every flag only some workloads read that this one reads: its own, and --data_dir where it
        reads files."""
        return tuple(dict.fromkeys(self.own_flags + (("data_dir",) if self.reads_files else ())))

    # ---- what a run's config asks of it --------------------------------------------------
    def check(self, config) -> None:
        """Raises WorkloadError (one line) for flags this workload cannot run with."""

    def units_per_example(self, config) -> int:
        """Units counted per example (a sequence of 128 tokens: 128)."""
        return 1

    def per_unit(self, config, examples_per_sec: float) -> float:
        """A rate of examples in this workload's unit (images/sec, tokens/sec)."""
        return examples_per_sec * self.units_per_example(config)

    def describe(self, config) -> str:
        """The run table's words for what one example is (e.g. 'image=112px')."""
        return self.inputs

    def key(self, config) -> str:
        """What determines the model's graph, for the FLOP and memory caches."""
        return self.name

    def record(self, config) -> Dict:
        """What the records say of the workload beyond its name and unit (sizes, presets, origin)."""
        return {}

    def table_ids(self, features) -> list:
        """The ids a batch looks up in each embedding table, in the model's table order (tensors)."""
        return []

    fact_steps = 1  # steps whose examples step_facts() and touched_rows() describe (their mean)

    def touched_rows(self, config, step: int = 0) -> Optional[list]:
        """[shard][table] -> the distinct row ids that shard's batch of `step` looks up in that
        embedding table (numpy), for workloads with tables; None otherwise."""
        return None

    def step_facts(self, config) -> Dict:
        """What one step's examples touch, counted from the batches themselves (an embedding
        table's unique rows): the task record's `sparse` entry; {} when there is nothing sparse."""
        return {}

    def evaluates(self, config) -> bool:
        """Whether a run of it measures held-out `metric` on examples of its own (held_out()); real
        datasets are evaluated by tfbench.loop.convergence whatever the workload."""
        return False

    def target(self, config) -> float:
        """The held-out `metric` a run records the time to (0: none)."""
        return config.target_accuracy

    def default_num_ps(self, num_workers: int) -> int:
        """Parameter servers a run of it has when --num_ps is 0."""
        return 1

    def import_paths(self) -> Tuple[str, ...]:
        """Directories every task of a run must import from (a user's module: the one it was found
        under, tfbench.workloads.user); launchers put them on PYTHONPATH."""
        return ()

    def summary(self, config) -> Dict:
        """The records' `workload` entry: its name, kind and unit, and what record() adds."""
        return {"name": self.name, "kind": self.kind, "unit": self.unit,
                "units_per_example": self.units_per_example(config), **self.record(config)}

    # ---- TensorFlow (called inside a task, or in a child process that counts) ------------
    @abc.abstractmethod
    def build(self, config):
        """The tf_keras model whose outputs the loss reads."""

    @abc.abstractmethod
    def batch(self, config, batch_size: int, shard=0) -> Tuple:
        """(features, labels): one shard's synthetic batch, made before timing, the same for a
        shard whatever the strategy (so a distributed step equals a single-device step)."""

    def dataset(self, config, shard, num_shards: int, batch_size: int, cores: int = 1):
        """An endless tf.data pipeline of real input, batches of (features, labels): reader `shard`
        (an int, or a tensor: a parameter-server worker's index) of `num_shards`, read by a task
        of `cores` cores. Only workloads that read files or a dataset have one (validation refuses
        --data_dir and --dataset for the others)."""
        raise WorkloadError(f"--model={self.name} reads no input from files or datasets")

    def held_out(self, config) -> Tuple:
        """(features, labels) its held-out evaluation runs on, where evaluates() (tensors)."""
        raise WorkloadError(f"--model={self.name} has no held-out examples of its own")

    @abc.abstractmethod
    def example_spec(self, config) -> Tuple:
        """(features, labels) as tf.TensorSpec structures of one example (batch 1), for counting."""

    @abc.abstractmethod
    def per_example_loss(self, labels, outputs):
        """One loss per example, in fp32 (mixed precision computes the loss in fp32)."""

    # ---- memory before anything starts (tfbench.measure.memory) --------------------------
    def memory_bound(self, config) -> Optional[Dict[str, int]]:
        """Figures ('params', 'activation_floats', 'largest_floats' per example) that no run of
        this workload exceeds, so that small runs need no count; None: only a count can tell."""
        return None

    def memory_figures(self, config) -> Optional[Dict[str, int]]:
        """The figures themselves when the workload knows them without building its graph (its
        parameters are a closed form): then nothing is counted; None: count the graph."""
        return None

    def replicated_bytes(self, config) -> int:
        """Bytes of variables that strategies replicating the model hold on every worker and a
        parameter server shards (embedding tables); 0 when nothing is that large."""
        return 0

    def flops_config(self, config):
        """The config whose graph tfbench.measure.flops counts: one with this workload's FLOPs per
        example that is cheapest to build (the config itself, unless the workload says otherwise)."""
        return config


@dataclasses.dataclass(frozen=True)
class WorkloadKind:
    """One kind of workload as tfbench.workloads.KINDS registers it (one line there): the words
    --model's help gives it, the arguments only it reads (their own --help group) and the workloads
    --model names of it."""

    name: str  # as records name it (Workload.kind)
    model_help: str  # its part of --model's help
    arguments: Arguments = Arguments("")
    workloads: Mapping[str, Workload] = dataclasses.field(default_factory=lambda: types.MappingProxyType({}))
