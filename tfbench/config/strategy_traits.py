"""Every distribution strategy tfbench runs, and what the rest of tfbench asks of it: one table.

A strategy is one `Traits` row here and one adapter module in strategies/. The flag's choices,
the adapter registry (strategies.create), the plan (cluster.plan.topology builds the processes
its `processes` names), validation, launchers, dry runs and reports read a strategy's traits
instead of comparing its name; tests/test_strategy_traits.py fails on a new comparison outside
this table, the adapters and the performance model.
"""
from __future__ import annotations

import dataclasses
import types
from typing import Callable, Dict, Mapping, Tuple

from tfbench.config.errors import ConfigError

MIB = 1 << 20

# How a strategy's processes are laid out (cluster.plan.topology has one builder for each):
ONE = "one"  # a single task (its replicas, if any, are local devices)
PEERS = "peers"  # N workers in a TF_CONFIG cluster, worker 0 the chief
COORDINATOR = "coordinator"  # a coordinator ("chief"), N workers and K parameter servers, in TF_CONFIG
RANKS = "ranks"  # N Horovod ranks (horovodrun, or Horovod's rendezvous), no TF_CONFIG
PROCESSES = (ONE, PEERS, COORDINATOR, RANKS)


def _always(config) -> bool:
    return True


@dataclasses.dataclass(frozen=True)
class Knob:
    """A communication setting of one strategy: a RunConfig field and flag of the same name
    (tfbench.config.knobs checks, describes and tunes them)."""

    name: str
    default_means: str  # what the default value does, for the table header and docs
    shown: Callable = _always  # (config) -> whether describe() shows it: e.g. read by one partitioner only
    tunable: Callable = _always  # (config) -> whether --tune tries it: e.g. a partitioner needs two ps


@dataclasses.dataclass(frozen=True)
class Traits:
    name: str  # the --strategy value
    adapter: str  # "module:Class" of its strategies.base.StrategyAdapter
    processes: str  # one of PROCESSES
    label: str  # short name in reports' legends and tables
    local_devices: bool = False  # splits its one task over --num_local_devices devices
    checkpoints: bool = False  # --checkpoint_every: a killed task restarts the cluster from a checkpoint
    elastic: bool = False  # --horovod_elastic: ranks may leave and rejoin
    all_reduce: bool = False  # gradients all-reduced among workers (2(N-1)/N |w| per host and step)
    gather_pads: bool = False  # its all-gather of sparse rows pads every worker's to the most any worker has
    knobs: Tuple[Knob, ...] = ()
    tune_grid: Mapping[str, tuple] = dataclasses.field(default_factory=dict)  # --tune: knob -> values tried
    # launch kind -> why the strategy cannot run there
    not_on: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def multi_task(self) -> bool:
        """It runs several tasks that talk to each other (stragglers, faults, private networks)."""
        return self.processes != ONE

    @property
    def has_ps(self) -> bool:
        """Parameter servers hold the variables and a coordinator schedules the steps."""
        return self.processes == COORDINATOR

    @property
    def ranks(self) -> bool:
        """Its processes are Horovod ranks that meet at Horovod's rendezvous, not a TF_CONFIG cluster."""
        return self.processes == RANKS

    def num_tasks(self, num_workers: int, num_ps: int) -> int:
        """Processes of a run: the workers, and a coordinator and the ps where there are ps."""
        return num_workers + (1 + num_ps if self.has_ps else 0)


_PS_PAIR = lambda c: c.effective_num_ps > 1  # noqa: E731 - partitioners and placers need two ps or more

TRAITS: Dict[str, Traits] = {t.name: t for t in (
    Traits("default", "strategies.default:DefaultAdapter", ONE, "single device"),
    Traits("mirrored", "strategies.mirrored:MirroredAdapter", ONE, "Mirrored", local_devices=True),
    Traits("multi_worker_mirrored", "strategies.multi_worker_mirrored:MultiWorkerMirroredAdapter", PEERS, "MWMS",
           checkpoints=True, all_reduce=True, gather_pads=True,  # TensorFlow's collectives: equal shapes only
           knobs=(Knob("all_reduce", "auto: TensorFlow picks the collective implementation"),
                  Knob("mwms_bytes_per_pack", "0: every gradient in one pack, one all-reduce per step"),
                  Knob("mwms_timeout", "0: collectives never time out")),
           tune_grid=types.MappingProxyType({"mwms_bytes_per_pack": (0, 4 * MIB, 32 * MIB)})),
    Traits("parameter_server", "strategies.parameter_server.coordinator:ParameterServerAdapter", COORDINATOR, "PS",
           checkpoints=True,
           knobs=(Knob("ps_partitioner", "min_size: variables above --ps_min_shard_bytes split over the ps",
                       tunable=_PS_PAIR),
                  Knob("ps_min_shard_bytes", "262144: min_size's smallest shard",
                       shown=lambda c: c.ps_partitioner == "min_size"),
                  Knob("ps_placer", "round_robin: TensorFlow's placement, variable after variable over the ps",
                       tunable=_PS_PAIR)),
           tune_grid=types.MappingProxyType({"ps_partitioner": ("min_size", "none", "fixed"),
                                             "ps_placer": ("round_robin", "greedy")})),
    Traits("horovod", "strategies.horovod:HorovodAdapter", RANKS, "Horovod", elastic=True, all_reduce=True,
           knobs=(Knob("horovod_fusion_threshold_mb", "-1: Horovod's default fusion buffer (128 MiB)"),
                  Knob("horovod_cycle_time_ms", "-1: Horovod's default cycle time (1 ms)"),
                  Knob("horovod_compression", "none: gradients all-reduced in their own precision"),
                  Knob("horovod_autotune", "false: the settings above, not Horovod's autotuner"),
                  Knob("horovod_sparse_as_dense", "false: sparse gradients all-gathered as the rows they touch")),
           tune_grid=types.MappingProxyType({"horovod_fusion_threshold_mb": (-1, 4, 16),
                                             "horovod_cycle_time_ms": (-1, 5, 20, 50)}),
           not_on=types.MappingProxyType({"kubernetes": "cluster.k8s writes TensorFlow clusters; for "
                                                        "--strategy=horovod use an MPIJob"})),
)}
STRATEGIES = tuple(TRAITS)
assert all(t.processes in PROCESSES for t in TRAITS.values())


def of(name: str) -> Traits:
    """The traits of --strategy=name; ConfigError (one line) for a name tfbench does not know."""
    try:
        return TRAITS[name]
    except KeyError:
        raise ConfigError(f"--strategy={name!r} is unknown; choose one of {', '.join(STRATEGIES)}") from None


def get(name) -> Traits:
    """The traits of `name`; a name tfbench does not know (a report of a foreign run) has none: one
    task, no parameter servers, no local devices, no knobs."""
    return TRAITS.get(name) or Traits(str(name), "", ONE, str(name))


def label(name: str) -> str:
    """A strategy's short name in reports; an unknown name as it is."""
    return get(name).label


def names(having: Callable[[Traits], bool]) -> Tuple[str, ...]:
    """The strategies whose traits satisfy `having`, in the table's order (for messages: 'applies to …')."""
    return tuple(t.name for t in TRAITS.values() if having(t))
