"""RunConfig: every setting of a run in one frozen value (validated by tfbench.config.validate).

Its fields are what every run has. The arguments a workload kind alone reads (--image_size,
--embedding_rows, --seq_length, ...) are declared by that kind (tfbench.workloads.arguments) and
held in `args`; they read as attributes all the same (config.embedding_rows), are given as
keywords (RunConfig(embedding_rows=1000), replace(embedding_rows=1000)) and sit flat beside the
fields in config.json (to_dict, from_dict), so that a new one is one line of its kind's declaration.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Tuple

from tfbench import workloads
from tfbench.config import choices, strategy_traits
from tfbench.workloads.arguments import Values


@dataclasses.dataclass(frozen=True, init=False)
class RunConfig:
    """One benchmark run. `batch_size` is per replica, as in tf_cnn_benchmarks."""

    model: str = "resnet50"
    mode: str = "train"
    batch_size: int = 32
    num_warmup_steps: int = 5
    num_steps: int = 10
    learning_rate: float = 0.1
    optimizer: str = "sgd"  # tfbench.config.choices.OPTIMIZERS: the legacy SGD (sparse updates scatter rows) or sgd_v2
    logdir: str = "runs"
    run_id: str = ""
    cores_per_worker: int = 0  # 0: this machine's cores split evenly among the local workers
    num_intra_threads: int = 0  # 0: the cores the task is given
    num_inter_threads: int = 0  # 0: chosen from the cores the task is given
    xla: bool = False
    seed: int = 0
    display_every: int = 10
    # Distribution.
    strategy: str = "default"
    num_workers: int = 1
    num_ps: int = 0  # 0 with parameter_server: the workload's default (Workload.default_num_ps)
    ps_placement: str = "collocated"
    knob_source: str = ""  # where the knob values came from (a saved tuning, for sweeps' tuning: best); "": flags
    ps_partitioner: str = "min_size"  # none, min_size or fixed (tfbench.config.knobs)
    ps_min_shard_bytes: int = 256 << 10  # min_size: no shard smaller than this
    ps_placer: str = "round_robin"  # round_robin (TensorFlow's) or greedy: each variable on the least-loaded ps
    ps_sync: bool = False
    hosts: Tuple[str, ...] = ("localhost",)
    base_port: int = 0  # 0: free ports picked on this machine; else ports from here up per host
    all_reduce: str = "auto"
    num_local_devices: int = 0  # mirrored/default on CPU: split the CPU into this many devices
    mwms_bytes_per_pack: int = 0  # multi_worker_mirrored: CommunicationOptions.bytes_per_pack; 0: one pack
    mwms_timeout: float = 0.0  # multi_worker_mirrored: CommunicationOptions.timeout_seconds; 0: none
    horovod_compression: str = "none"  # none or fp16 gradients on the wire (tfbench.config.knobs)
    horovod_fusion_threshold_mb: int = -1  # HOROVOD_FUSION_THRESHOLD in MiB; -1: Horovod's default; 0: no fusion
    horovod_cycle_time_ms: float = -1.0  # HOROVOD_CYCLE_TIME; -1: Horovod's default
    horovod_autotune: bool = False  # HOROVOD_AUTOTUNE, its log in the run's tasks/ directory
    horovod_sparse_as_dense: bool = False  # Horovod: all-reduce sparse gradients dense instead of all-gathering rows
    horovod_elastic: bool = False  # horovodrun's elastic driver: ranks may leave and rejoin (strategies.horovod_elastic)
    horovod_min_workers: int = 0  # elastic: fewest ranks the run goes on with; 0: 1
    hybrid_shard_rule: str = "rotated"  # hybrid: rotated or aligned placement of table shards on the ps
    # Placement.
    placement: str = "soft"
    device: str = "cpu"
    log_device_placement: bool = False
    # Run control and monitoring.
    deadline: float = 0.0  # seconds for the whole run; 0: none
    stall_timeout: float = 600.0  # seconds without step progress from any worker
    monitor: bool = True
    monitor_interval: float = 1.0
    profile: bool = False  # a TensorFlow profile of the measured window, one step marker per step
    profile_steps: Tuple[int, ...] = ()
    # Launch: where the tasks start.
    launcher: str = "local"  # local: processes on this machine; slurm: srun steps / an sbatch job
    slurm_nodes: int = 1
    slurm_partition: str = ""
    slurm_time: str = ""
    slurm_account: str = ""
    # Network: emulated hosts (a network namespace each) joined by shaped links.
    network: str = "local"
    link_bandwidth: str = ""  # "": unshaped; a rate (100mbit) or a preset (1gbe, 10gbe, fdr_ib)
    link_latency: float = 0.0  # ms one way between two hosts (cluster.net.delay_line); 0: none
    link_jitter: float = 0.0  # ms, uniform around link_latency
    # Performance.
    precision: str = "fp32"  # fp32, bf16 or fp16 (Keras mixed precision; tfbench.framework.precision)
    compute: str = "real"  # real, or emulated: each worker's forward and backward a wait (tfbench.loop.emulated)
    compute_ms: float = 0.0  # emulated: the wait per worker step; 0: measured by a real run (tfbench.app.compute_time)
    straggler: str = ""  # "worker_1:2.0": that task runs 1/2.0 of the time (cluster.faults.straggler)
    fault: str = ""  # "worker_1:kill@5,worker_0:hang@8": applied by the launcher (tfbench.config.faults)
    checkpoint_every: int = 0  # multi_worker_mirrored: save every K steps; a killed worker restarts all from it
    ps_staleness_bound: int = -1  # parameter_server async: -1 unbounded; s: bounded (strategies.parameter_server.rounds)
    input_threads: int = 0  # --data_dir: threads of a task's input pipeline; 0: the task's cores
    # The workload kinds' own arguments (tfbench.workloads.ARGUMENTS), by name.
    args: Values = Values.of(workloads.ARGUMENTS)

    def __init__(self, **values: Any) -> None:
        """Fields and workload arguments, as keywords; TypeError for a name that is neither."""
        given = values.pop("args", None)
        arguments = {name: values.pop(name) for name in list(values) if name in _ARGUMENT_NAMES}
        unknown = set(values) - _FIELD_NAMES
        if unknown:
            raise TypeError(f"RunConfig got unexpected keyword argument(s): {', '.join(sorted(unknown))}")
        for field in dataclasses.fields(self):
            if field.name != "args":
                object.__setattr__(self, field.name, values.get(field.name, field.default))
        object.__setattr__(self, "args", Values.of(workloads.ARGUMENTS, {**(given.as_dict() if given else {}),
                                                                         **arguments}))

    def __getattr__(self, name: str) -> Any:
        """A workload argument (config.embedding_rows); called only for a name that is no field."""
        args = self.__dict__.get("args")
        if not name.startswith("__") and args is not None and name in args:
            return args[name]
        raise AttributeError(f"RunConfig has no field or workload argument {name!r}")

    @classmethod
    def names(cls) -> Tuple[str, ...]:
        """Every setting by name, as config.json and results.csv hold them: the fields, then the
        workload kinds' arguments in their registry's order."""
        return _FIELD_NAMES_ORDERED + _ARGUMENT_NAMES

    # ---- derived values -------------------------------------------------------------------
    @property
    def workload(self):
        """What --model names (tfbench.workloads): its model, batches, loss and unit."""
        from tfbench import workloads

        return workloads.of(self.model)

    @property
    def reads_input(self) -> bool:
        """Whether steps read their batches from an input pipeline (a real dataset, --data_dir)
        rather than one synthetic batch made before timing."""
        return self.dataset != "synthetic" or bool(self.data_dir)

    @property
    def traits(self) -> strategy_traits.Traits:
        """What the strategy is (tfbench.config.strategy_traits); ConfigError for an unknown one."""
        return strategy_traits.of(self.strategy)

    @property
    def effective_source_image_size(self) -> int:
        return self.source_image_size or max(self.image_size, round(self.image_size * 300 / 224))

    @property
    def emulated_compute(self) -> bool:
        """--compute=emulated: each worker's forward and backward pass is a wait (tfbench.loop.emulated)."""
        return self.compute == choices.EMULATED_COMPUTE

    @property
    def straggler_task(self) -> str:
        return self.straggler.partition(":")[0]

    @property
    def straggler_slowdown(self) -> float:
        try:
            return float(self.straggler.partition(":")[2])
        except ValueError:
            return 0.0

    @property
    def effective_eval_every(self) -> int:
        """Steps between held-out evaluations: --eval_every, or 10 evaluations per run."""
        return self.eval_every or max(1, self.total_steps // 10)

    @property
    def effective_num_ps(self) -> int:
        """--num_ps, or with 0 the workload's default (one ps; a recommender's tables sharded over several)."""
        if self.num_ps or not strategy_traits.get(self.strategy).ps_tasks:
            return choices.effective_num_ps(self.strategy, self.num_ps)
        return self.workload.default_num_ps(self.num_workers)

    @property
    def effective_num_local_devices(self) -> int:
        return choices.effective_num_local_devices(self.strategy, self.num_local_devices)

    @property
    def effective_slurm_nodes(self) -> int:
        """--slurm_nodes, or with 0 one node per worker and, for separate ps, one per ps and one
        for the coordinator (cluster.slurm.layout)."""
        if self.slurm_nodes:
            return self.slurm_nodes
        separate = self.effective_num_ps > 0 and self.ps_placement == "separate"
        coordinator = 1 if strategy_traits.get(self.strategy).coordinated else 0
        return self.num_workers + (self.effective_num_ps + coordinator if separate else 0)

    @property
    def link_rate_bps(self) -> int:
        return choices.link_rate_bps(self.link_bandwidth)

    @property
    def profiled_steps(self) -> Tuple[int, ...]:
        """The first and last step profiled: --profile_steps, or with --profile the measured window."""
        if self.profile:
            return (self.num_warmup_steps, self.total_steps - 1)
        return self.profile_steps

    @property
    def total_steps(self) -> int:
        return self.num_warmup_steps + self.num_steps

    def to_dict(self) -> dict:
        """Every setting flat by name (names()): config.json."""
        d = {name: getattr(self, name) for name in self.names()}
        d["hosts"] = list(self.hosts)
        d["profile_steps"] = list(self.profile_steps)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        known = set(cls.names())
        d = {k: v for k, v in d.items() if k in known}
        for key in ("hosts", "profile_steps"):
            if key in d:
                d[key] = tuple(d[key])
        return cls(**d)

    def replace(self, **changes) -> "RunConfig":
        return dataclasses.replace(self, **changes)


_FIELD_NAMES_ORDERED = tuple(f.name for f in dataclasses.fields(RunConfig) if f.name != "args")
_FIELD_NAMES = frozenset(_FIELD_NAMES_ORDERED)
_ARGUMENT_NAMES = tuple(a.name for group in workloads.ARGUMENTS for a in group.args)
