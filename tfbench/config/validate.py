"""Validation of a RunConfig: here and only here, before any process is spawned or any file
written, so that every bad value or combination ends with one clear line (ConfigError) instead of
a traceback from inside TensorFlow.

validate() checks each flag's own range, then the strategy (its traits, tfbench.config.strategy_traits),
the network, the devices, the launch (what the run's kind takes, tfbench.config.kinds) and the
logdir; the rules of feature flags that combine with many others (stragglers, faults, staleness,
real data, elastic, precision) are tfbench.config.feature_rules, which it calls.
"""
from __future__ import annotations

import os
import re
from typing import Optional

from tfbench import workloads
from tfbench.config import feature_rules, knobs, strategy_traits
from tfbench.config.choices import (
    ALL_REDUCE,
    DATA_FORMATS,
    DEVICES,
    LAUNCHERS,
    MODES,
    NETWORKS,
    OPTIMIZERS,
    PLACEMENTS,
    PS_PLACEMENTS,
    TBF_MAX_BPS,
    is_this_machine,
)
from tfbench.config.errors import ConfigError
from tfbench.config.kinds import LAUNCH_FLAGS, Kind, kind_of
from tfbench.config.run_config import RunConfig
from tfbench.framework.devices import count_gpus

_SLURM_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")  # minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_DEFAULTS = RunConfig()


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _one_of(value: str, choices, flag: str, hint: str = "") -> None:
    _need(value in choices, f"--{flag}={value!r} is unknown; choose {hint or ' or '.join(choices)}")


def validate(config: RunConfig, gpu_count: Optional[int] = None, kind: Optional[Kind] = None) -> RunConfig:
    """Returns `config` if it can run; raises ConfigError with one line otherwise.

    `kind`: where the tasks start (tfbench.config.kinds); by default the kind --launcher and
    --network name. `python -m cluster.by_hand` passes the by-hand kind (the user starts the tasks,
    so --hosts may name any machine) and `python -m cluster.k8s` the Kubernetes kind (its nodes'
    cores are not this machine's, so --cores_per_worker is not checked against os.cpu_count()).

    `gpu_count` is looked up lazily (it needs TensorFlow) and only when the config asks for a
    GPU or for NCHW, so that most runs validate without importing TensorFlow.
    """
    kind = kind or kind_of(config)
    _check_ranges(config, kind)
    traits = strategy_traits.of(config.strategy)
    _check_strategy(config, traits)
    _check_features(config, kind, traits)
    _check_network(config)
    _check_devices(config, gpu_count)
    _check_launch(config, kind, traits)
    # Performance: a precision the compute device cannot run is refused (tfbench.framework.precision).
    on_gpu = config.device == "gpu" and config.precision != "fp32" and (
        gpu_count if gpu_count is not None else count_gpus()) > 0
    feature_rules.check_precision(config.precision, on_gpu)
    _check_logdir(config.logdir, config.run_id)
    return config


def _check_ranges(c: RunConfig, kind: Kind) -> None:
    """Each flag's own range and choices."""
    need = _need
    _check_workload(c)
    _one_of(c.mode, MODES, "mode")
    need(c.batch_size > 0, f"--batch_size must be positive (per replica), got {c.batch_size}")
    need(c.num_steps > 0, f"--num_steps must be positive, got {c.num_steps}")
    need(c.num_warmup_steps >= 1, f"--num_warmup_steps must be at least 1 (tracing must not land in a measured "
                                  f"step), got {c.num_warmup_steps}")
    need(c.num_classes >= 2, f"--num_classes must be at least 2, got {c.num_classes}")
    need(c.learning_rate > 0, f"--learning_rate must be positive, got {c.learning_rate}")
    _one_of(c.optimizer, OPTIMIZERS, "optimizer")
    _one_of(c.data_format, DATA_FORMATS, "data_format")
    need(c.cores_per_worker >= 0, f"--cores_per_worker must be 0 (auto) or more, got {c.cores_per_worker}")
    if _tasks_run_here(c, kind):
        need(c.cores_per_worker <= os.cpu_count(),
             f"--cores_per_worker must be between 0 (auto) and this machine's {os.cpu_count()} cores, "
             f"got {c.cores_per_worker}")
    need(c.num_intra_threads >= 0, f"--num_intra_threads must be 0 (auto) or more, got {c.num_intra_threads}")
    need(c.num_inter_threads >= 0, f"--num_inter_threads must be 0 (auto) or more, got {c.num_inter_threads}")
    need(c.display_every > 0, f"--display_every must be positive, got {c.display_every}")
    _one_of(c.placement, PLACEMENTS, "placement")
    _one_of(c.device, DEVICES, "device")
    _one_of(c.ps_placement, PS_PLACEMENTS, "ps_placement")
    _one_of(c.all_reduce, ALL_REDUCE, "all_reduce", "auto, ring or nccl")
    need(not c.run_id or bool(_RUN_ID.match(c.run_id)),
         f"--run_id={c.run_id!r} must be letters, digits, '.', '_' or '-' (at most 128)")
    need(c.deadline >= 0, f"--deadline must be 0 (none) or positive seconds, got {c.deadline}")
    need(c.stall_timeout > 0, f"--stall_timeout must be positive seconds, got {c.stall_timeout}")
    need(c.monitor_interval >= 0.1, f"--monitor_interval must be at least 0.1 s, got {c.monitor_interval}")
    need(c.num_local_devices >= 0, f"--num_local_devices must be 0 or more, got {c.num_local_devices}")
    need(0 <= c.base_port < 65536, f"--base_port must be a TCP port, got {c.base_port}")
    need(all(h.strip() for h in c.hosts) and len(c.hosts) > 0, "--hosts must be a comma-separated list of host names")
    need(not (c.profile and c.profile_steps), "--profile traces the measured window; leave out --profile_steps, "
                                             "or give --profile_steps alone for other steps")
    for step in c.profile_steps:
        need(0 <= step < c.total_steps,
             f"--profile_steps={step} is outside the run's steps 0..{c.total_steps - 1}")
    need(c.num_workers >= 1, f"--num_workers must be at least 1, got {c.num_workers}")
    need(c.num_workers <= 64, f"--num_workers={c.num_workers} is more than tfbench launches (64)")
    need(c.num_ps >= 0, f"--num_ps must be 0 or more, got {c.num_ps}")
    _one_of(c.network, NETWORKS, "network", "local or emulated")
    _one_of(c.launcher, LAUNCHERS, "launcher", "one of " + ", ".join(LAUNCHERS))


def _check_workload(c: RunConfig) -> None:
    """--model names a workload (tfbench.workloads), which checks the flags it reads; a flag only
    another kind of workload reads is refused off its default."""
    try:
        workloads.check(c, _DEFAULTS)
    except workloads.WorkloadError as e:
        raise ConfigError(str(e)) from None


def _check_strategy(c: RunConfig, traits) -> None:
    """What the strategy has: peers, parameter servers, local devices, knobs."""
    need = _need
    if not traits.multi_task:
        need(c.num_workers == 1, f"--strategy={c.strategy} runs one task; use "
             f"{' or '.join(strategy_traits.names(lambda t: t.multi_task))} for --num_workers={c.num_workers}")
    if not traits.ps_tasks:
        need(c.num_ps == 0, f"--num_ps applies to --strategy={' or '.join(strategy_traits.names(lambda t: t.ps_tasks))}"
                            f" only")
    if not traits.coordinated:
        need(not c.ps_sync, f"--ps_sync applies to --strategy="
                            f"{' or '.join(strategy_traits.names(lambda t: t.coordinated))} only")
    need(not c.ps_sync or c.mode == "train",
         "--ps_sync applies to --mode=train only: forward passes make no updates to synchronise")
    knobs.check(c)
    if not traits.local_devices:
        need(c.num_local_devices <= 1, f"--num_local_devices applies to --strategy="
             f"{' or '.join(strategy_traits.names(lambda t: t.local_devices))} only"
             + ("" if traits.multi_task else f": --strategy={c.strategy} runs on one device"))
    need(c.all_reduce != "nccl" or c.device == "gpu", "--all_reduce=nccl needs --device=gpu")
    if traits.tables_apart:  # each worker scatter-adds its rows' SGD step on the ps itself
        need(c.precision == "fp32", f"--strategy={c.strategy} updates its tables' rows on the ps with plain SGD in "
                                    f"fp32; --precision={c.precision} is not supported")
        need(not c.xla, f"--strategy={c.strategy}'s step reads and updates rows on the ps tasks, which XLA "
                        f"cannot compile into one cluster; leave out --xla")


def _check_features(c: RunConfig, kind: Kind, traits) -> None:
    if c.straggler:
        feature_rules.check_straggler(c, kind, traits)
    if c.fault:
        feature_rules.check_faults(c, kind, traits)
    feature_rules.check_checkpoints(c, traits)
    feature_rules.check_staleness_bound(c, traits)
    feature_rules.check_data(c)
    feature_rules.check_input(c)
    feature_rules.check_elastic(c, kind, traits)
    feature_rules.check_compute(c, kind)


def _check_network(c: RunConfig) -> None:
    """The links' own values (which kinds take them: _check_launch)."""
    need = _need
    need(c.link_latency >= 0, f"--link_latency must be 0 or more milliseconds, got {c.link_latency}")
    need(c.link_jitter >= 0, f"--link_jitter must be 0 or more milliseconds, got {c.link_jitter}")
    c.link_rate_bps  # raises ConfigError on a bad rate
    need(not c.link_bandwidth or c.link_rate_bps >= 10 ** 5,
         f"--link_bandwidth={c.link_bandwidth} is below what tfbench shapes (100kbit)")
    need(c.link_rate_bps <= TBF_MAX_BPS,
         f"--link_bandwidth={c.link_bandwidth} ({c.link_rate_bps / 1e9:g} Gbit/s) is above what tbf shapes "
         f"({TBF_MAX_BPS / 1e9:.1f} Gbit/s); leave --link_bandwidth empty for an unshaped link (veth, as fast as "
         f"the CPU carries it)")


def _check_devices(c: RunConfig, gpu_count: Optional[int]) -> None:
    """NCHW convolutions and GPU placement need a GPU."""
    _need(not (c.data_format == "NCHW" and c.device == "cpu"),
          "--data_format=NCHW needs --device=gpu: TensorFlow's CPU convolutions run NHWC only")
    if c.device == "gpu" and (c.placement == "hard" or c.data_format == "NCHW"):
        gpus = gpu_count if gpu_count is not None else count_gpus()
        _need(gpus > 0, f"--device=gpu with --placement={c.placement}"
              f"{' and --data_format=NCHW' if c.data_format == 'NCHW' else ''} needs a GPU, and this machine has none")


def _tasks_run_here(c: RunConfig, kind: Kind) -> bool:
    """Whether some task runs on this machine and takes its cores: not on Slurm's or Kubernetes'
    nodes, nor when every --hosts entry names another machine (tasks started by hand)."""
    return not kind.engine_nodes and any(is_this_machine(h) for h in c.hosts)


def _check_launch(c: RunConfig, kind: Kind, traits) -> None:
    """The flags the run's kind takes (tfbench.config.kinds); the local launcher starts tasks on this
    machine only; Slurm picks its own nodes."""
    for flag in sorted(LAUNCH_FLAGS):
        if getattr(c, flag) != getattr(_DEFAULTS, flag):
            refusal = kind.refusal(flag)
            _need(not refusal, refusal)
    _need(kind.name not in traits.not_on, f"--strategy={c.strategy} does not run {kind.where}: "
                                          f"{traits.not_on.get(kind.name, '')}")
    remote = [h for h in c.hosts if not is_this_machine(h)]
    if kind.hosts_here_only and remote:
        raise ConfigError(
            f"--hosts names other machines ({','.join(remote)}) and the local launcher starts tasks on this "
            f"machine only: use --launcher=slurm, or start them by hand with `python -m cluster.by_hand "
            f"--run_dir=DIR` (README: By hand)")
    nodes = c.effective_slurm_nodes
    _need(not kind.max_nodes or nodes <= kind.max_nodes,
          f"--launcher=slurm --network=emulated runs at most {kind.max_nodes} nodes (the run asks for {nodes}): "
          f"TensorFlow's SlurmClusterResolver orders nodes by name as text, h10 before h2")
    _need(c.slurm_nodes >= 0, f"--slurm_nodes must be 0 (a node per worker, and per separate ps) or more, "
                              f"got {c.slurm_nodes}")
    tasks = traits.num_tasks(c.num_workers, c.effective_num_ps)
    _need(c.slurm_nodes <= tasks, f"--slurm_nodes={c.slurm_nodes} is more nodes than the run's {tasks} tasks")
    _need(not c.slurm_time or bool(_SLURM_TIME.match(c.slurm_time)),
          f"--slurm_time={c.slurm_time!r} is not a Slurm time (minutes, MM:SS, HH:MM:SS or D-HH:MM:SS)")
    for name in ("slurm_partition", "slurm_account"):
        value = getattr(c, name)
        _need(not value or bool(re.match(r"^[A-Za-z0-9._-]+$", value)),
              f"--{name}={value!r} must be letters, digits, '.', '_' or '-'")
    _need(not traits.launcher_ranks or c.num_workers % nodes == 0,
          f"--strategy={c.strategy} on Slurm places ranks in equal blocks: --num_workers={c.num_workers} "
          f"must be a multiple of --slurm_nodes={c.slurm_nodes}")


def _check_logdir(logdir: str, run_id: str) -> None:
    """The logdir must be creatable and writable, and a named run must not exist yet.

    Permission bits do not say whether a directory takes new entries (root passes os.access on
    /proc, a read-only mount or a full disk), so a probe directory is really created in the
    deepest part of the path that exists, and removed again."""
    path = os.path.abspath(logdir)
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        raise ConfigError(f"--logdir={logdir!r} cannot be created: {probe} is not a directory")
    trial = os.path.join(probe, f".tfbench-probe-{os.getpid()}")
    try:
        os.mkdir(trial)
        os.rmdir(trial)
    except OSError as e:
        raise ConfigError(f"--logdir={logdir!r} cannot be created: {probe} takes no new directory "
                          f"({e.strerror or e})") from None
    if run_id and os.path.exists(os.path.join(path, run_id)):
        raise ConfigError(f"run {run_id!r} already exists in {logdir}; runs are never overwritten, pick another --run_id")
