"""Every distribution strategy tfbench runs, and what the rest of tfbench asks of it: one table.

A strategy is one `Traits` row here and one adapter module in strategies/. Its row says what the
strategy does, never which one it is, on three axes the plans, launchers, memory rule, dry runs,
records and reports read (docs/architecture.md, "Strategies"):

- where its variables live (`variables`): REPLICATED on every worker, ON_PS (every variable on
  parameter-server tasks), or SPLIT_BY_KIND (embedding tables on parameter-server tasks, every
  other variable replicated on the workers);
- how its tasks meet (`meet`, one or more): ONE_PROCESS (nothing to meet), TF_ROLES (tasks named
  by role and index in a TF_CONFIG cluster), LAUNCHER_RANKS (workers numbered by a launcher, that
  meet at Horovod's rendezvous: horovodrun, or tfbench's Gloo placement); a strategy whose
  ranks also join a TF cluster holding its ps tasks meets both ways;
- who drives the steps (`driver`): EACH_WORKER runs its own step loop, or a COORDINATOR task
  schedules them on workers that run servers.

The flag's choices, the adapter registry (strategies.create, strategies.serve), the plan
(cluster.plan.topology composes the tasks from these axes), validation, launchers, dry runs and
reports read the traits instead of comparing the name; tests/test_strategy_traits.py fails on a
new comparison outside this table, the adapters and the performance model, and on a trait that
names one strategy instead of saying what it does.
"""
from __future__ import annotations

import dataclasses
import types
from typing import Callable, Dict, Mapping, Tuple

from tfbench.config.errors import ConfigError

MIB = 1 << 20

# Where a strategy's variables live (Traits.variables)
REPLICATED = "replicated"  # every worker holds every variable (one task: it alone)
ON_PS = "on_ps"  # every variable on parameter-server tasks; workers pull what a step needs
SPLIT_BY_KIND = "split_by_kind"  # embedding tables on parameter-server tasks, every other variable replicated
VARIABLES = (REPLICATED, ON_PS, SPLIT_BY_KIND)

# How its tasks meet (Traits.meet: one or more)
ONE_PROCESS = "one_process"  # a single task: nothing to meet (its replicas, if any, are local devices)
TF_ROLES = "tf_roles"  # tasks named by role and index in a TF_CONFIG cluster (TensorFlow's resolvers)
LAUNCHER_RANKS = "launcher_ranks"  # workers are ranks a launcher numbers; they meet at Horovod's rendezvous
MEETINGS = (ONE_PROCESS, TF_ROLES, LAUNCHER_RANKS)

# Who drives the steps (Traits.driver)
EACH_WORKER = "each_worker"  # every worker runs its own step loop
COORDINATOR = "coordinator"  # a coordinator task ("chief") schedules every step on workers that run servers
DRIVERS = (EACH_WORKER, COORDINATOR)


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
    label: str  # short name in reports' legends and tables
    variables: str = REPLICATED  # one of VARIABLES
    meet: Tuple[str, ...] = (ONE_PROCESS,)  # of MEETINGS
    driver: str = EACH_WORKER  # one of DRIVERS
    serves: str = ""  # "module:function" its service tasks run (ps tasks, a coordinator's workers)
    local_devices: bool = False  # splits its one task over --num_local_devices devices
    checkpoints: bool = False  # --checkpoint_every: a killed task restarts the cluster from a checkpoint
    elastic: bool = False  # --horovod_elastic: ranks may leave and rejoin
    all_reduce: bool = False  # gradients all-reduced among workers (2(N-1)/N |w| per host and step)
    gather_pads: bool = False  # its all-gather of sparse rows pads every worker's to the most any worker has
    knobs: Tuple[Knob, ...] = ()
    tune_grid: Mapping[str, tuple] = dataclasses.field(default_factory=dict)  # --tune: knob -> values tried
    # launch kind -> why the strategy cannot run there
    not_on: Mapping[str, str] = dataclasses.field(default_factory=dict)

    # What the rest of tfbench asks, each a function of the three axes above only.
    @property
    def multi_task(self) -> bool:
        """It runs several tasks that talk to each other (stragglers, faults, private networks)."""
        return ONE_PROCESS not in self.meet

    @property
    def ps_tasks(self) -> bool:
        """Its embedding tables (at least) live on --num_ps parameter-server tasks, servers of their
        own: a worker holds only the rows a step touches."""
        return self.variables in (ON_PS, SPLIT_BY_KIND)

    @property
    def dense_replicated(self) -> bool:
        """Every worker holds its own copy of the variables that are not embedding tables."""
        return self.variables in (REPLICATED, SPLIT_BY_KIND)

    @property
    def tables_apart(self) -> bool:
        """Its embedding tables live apart from its other variables (on ps tasks), and each worker
        updates their rows there itself: plain SGD on fp32 rows, no optimizer slots on the ps."""
        return self.variables == SPLIT_BY_KIND

    @property
    def coordinated(self) -> bool:
        """A coordinator task schedules the steps; the workers run servers and no loop of their own."""
        return self.driver == COORDINATOR

    @property
    def tf_roles(self) -> bool:
        """Its tasks find each other by role in a TF_CONFIG cluster."""
        return TF_ROLES in self.meet

    @property
    def launcher_ranks(self) -> bool:
        """Its workers are ranks a launcher numbers, meeting at Horovod's rendezvous (Horovod installed)."""
        return LAUNCHER_RANKS in self.meet

    def num_tasks(self, num_workers: int, num_ps: int) -> int:
        """Processes of a run: the workers, a coordinator when one drives, the ps when variables live there."""
        return num_workers + (1 if self.coordinated else 0) + (num_ps if self.ps_tasks else 0)


_PS_PAIR = lambda c: c.effective_num_ps > 1  # noqa: E731 - partitioners and placers need two ps or more

TRAITS: Dict[str, Traits] = {t.name: t for t in (
    Traits("default", "strategies.default:DefaultAdapter", "single device"),
    Traits("mirrored", "strategies.mirrored:MirroredAdapter", "Mirrored", local_devices=True),
    Traits("multi_worker_mirrored", "strategies.multi_worker_mirrored:MultiWorkerMirroredAdapter", "MWMS",
           meet=(TF_ROLES,), checkpoints=True, all_reduce=True,
           gather_pads=True,  # TensorFlow's collectives: equal shapes only
           knobs=(Knob("all_reduce", "auto: TensorFlow picks the collective implementation"),
                  Knob("mwms_bytes_per_pack", "0: every gradient in one pack, one all-reduce per step"),
                  Knob("mwms_timeout", "0: collectives never time out")),
           tune_grid=types.MappingProxyType({"mwms_bytes_per_pack": (0, 4 * MIB, 32 * MIB)})),
    Traits("parameter_server", "strategies.parameter_server.coordinator:ParameterServerAdapter", "PS",
           variables=ON_PS, meet=(TF_ROLES,), driver=COORDINATOR, serves="strategies.parameter_server.server:serve",
           checkpoints=True,
           knobs=(Knob("ps_partitioner", "min_size: variables above --ps_min_shard_bytes split over the ps",
                       tunable=_PS_PAIR),
                  Knob("ps_min_shard_bytes", "262144: min_size's smallest shard",
                       shown=lambda c: c.ps_partitioner == "min_size"),
                  Knob("ps_placer", "round_robin: TensorFlow's placement, variable after variable over the ps",
                       tunable=_PS_PAIR)),
           tune_grid=types.MappingProxyType({"ps_partitioner": ("min_size", "none", "fixed"),
                                             "ps_placer": ("round_robin", "greedy")})),
    Traits("horovod", "strategies.horovod:HorovodAdapter", "Horovod", meet=(LAUNCHER_RANKS,), elastic=True,
           all_reduce=True,
           knobs=(Knob("horovod_fusion_threshold_mb", "-1: Horovod's default fusion buffer (128 MiB)"),
                  Knob("horovod_cycle_time_ms", "-1: Horovod's default cycle time (1 ms)"),
                  Knob("horovod_compression", "none: gradients all-reduced in their own precision"),
                  Knob("horovod_autotune", "false: the settings above, not Horovod's autotuner"),
                  Knob("horovod_sparse_as_dense", "false: sparse gradients all-gathered as the rows they touch")),
           tune_grid=types.MappingProxyType({"horovod_fusion_threshold_mb": (-1, 4, 16),
                                             "horovod_cycle_time_ms": (-1, 5, 20, 50)}),
           not_on=types.MappingProxyType({"kubernetes": "cluster.k8s writes TensorFlow clusters; for "
                                                        "--strategy=horovod use an MPIJob"})),
    Traits("hybrid", "strategies.hybrid.adapter:HybridAdapter", "Hybrid", variables=SPLIT_BY_KIND,
           meet=(LAUNCHER_RANKS, TF_ROLES), serves="strategies.hybrid.server:serve", all_reduce=True,
           knobs=(Knob("hybrid_shard_rule", "rotated: shard j of table t on ps (t + j) mod K, so that the tables' "
                                            "first shards spread over the ps", tunable=_PS_PAIR),),
           tune_grid=types.MappingProxyType({"hybrid_shard_rule": ("rotated", "aligned")})),
)}
STRATEGIES = tuple(TRAITS)


def well_formed(t: Traits) -> bool:
    """Each axis holds values of its vocabulary; one process meets no one and has no servers; ps
    tasks and a coordinator are reached in a TF_CONFIG cluster and run the row's server function."""
    servers = t.ps_tasks or t.coordinated
    return (t.variables in VARIABLES and t.driver in DRIVERS and bool(t.meet) and set(t.meet) <= set(MEETINGS)
            and (t.meet == (ONE_PROCESS,) or ONE_PROCESS not in t.meet)
            and (not servers or t.tf_roles) and bool(t.serves) == servers)


assert all(well_formed(t) for t in TRAITS.values())


def of(name: str) -> Traits:
    """The traits of --strategy=name; ConfigError (one line) for a name tfbench does not know."""
    try:
        return TRAITS[name]
    except KeyError:
        raise ConfigError(f"--strategy={name!r} is unknown; choose one of {', '.join(STRATEGIES)}") from None


def get(name) -> Traits:
    """The traits of `name`; a name tfbench does not know (a report of a foreign run) has none: one
    task, no parameter servers, no local devices, no knobs."""
    return TRAITS.get(name) or Traits(str(name), "", str(name))


def label(name: str) -> str:
    """A strategy's short name in reports; an unknown name as it is."""
    return get(name).label


def names(having: Callable[[Traits], bool]) -> Tuple[str, ...]:
    """The strategies whose traits satisfy `having`, in the table's order (for messages: 'applies to …')."""
    return tuple(t.name for t in TRAITS.values() if having(t))
