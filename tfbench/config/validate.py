"""Validation of a RunConfig: here and only here, before any process is spawned or any file
written, so that every bad value or combination ends with one clear line (ConfigError) instead of
a traceback from inside TensorFlow.

validate() checks each flag's own range, then the strategy, the network, the devices, the launch
and the logdir; the rules of feature flags that combine with many others (stragglers, faults,
staleness, real data, elastic, precision) are tfbench.config.feature_rules, which it calls.
"""
from __future__ import annotations

import os
import re
from typing import Optional

from tfbench.config import feature_rules, knobs
from tfbench.config.choices import (
    ALL_REDUCE,
    DATA_FORMATS,
    DEVICES,
    LAUNCHERS,
    MODES,
    MULTI_TASK_STRATEGIES,
    NETWORKS,
    PLACEMENTS,
    PS_PLACEMENTS,
    STRATEGIES,
    TBF_MAX_BPS,
    is_this_machine,
)
from tfbench.config.errors import ConfigError
from tfbench.config.run_config import RunConfig
from tfbench.models import MODELS

_SLURM_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")  # minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def validate(config: RunConfig, gpu_count: Optional[int] = None, by_hand: bool = False,
             engine_nodes: bool = False) -> RunConfig:
    """Returns `config` if it can run; raises ConfigError with one line otherwise.

    `by_hand`: the user starts the tasks (python -m cluster.by_hand), so --hosts may name any machine.
    `engine_nodes`: an engine places the tasks on nodes of its own (python -m cluster.k8s), as
    --launcher=slurm does: their cores are the nodes', not this machine's, so --cores_per_worker
    is not checked against os.cpu_count() (cluster.slurm.nodes asks Slurm; Kubernetes refuses a
    pod that no node can hold).

    `gpu_count` is looked up lazily (it needs TensorFlow) and only when the config asks for a
    GPU or for NCHW, so that most runs validate without importing TensorFlow.
    """
    c = config

    need = _need
    need(c.model in MODELS, f"--model={c.model!r} is unknown; choose one of {', '.join(sorted(MODELS))}")
    need(c.mode in MODES, f"--mode={c.mode!r} is unknown; choose train or forward")
    need(c.strategy in STRATEGIES, f"--strategy={c.strategy!r} is unknown; choose one of {', '.join(STRATEGIES)}")
    need(c.batch_size > 0, f"--batch_size must be positive (per replica), got {c.batch_size}")
    need(c.num_steps > 0, f"--num_steps must be positive, got {c.num_steps}")
    need(c.num_warmup_steps >= 1, f"--num_warmup_steps must be at least 1 (tracing must not land in a measured "
                                  f"step), got {c.num_warmup_steps}")
    need(c.num_classes >= 2, f"--num_classes must be at least 2, got {c.num_classes}")
    need(c.learning_rate > 0, f"--learning_rate must be positive, got {c.learning_rate}")
    spec = MODELS[c.model]
    need(c.image_size >= spec.min_image_size,
         f"--image_size={c.image_size} is too small for {c.model}; it needs at least {spec.min_image_size}")
    need(c.image_size <= 2048, f"--image_size={c.image_size} is larger than tfbench supports (2048)")
    need(c.source_image_size == 0 or c.source_image_size >= c.image_size,
         f"--source_image_size={c.source_image_size} is smaller than --image_size={c.image_size}; images are cropped, not enlarged")
    need(c.data_format in DATA_FORMATS, f"--data_format={c.data_format!r} is unknown; choose NHWC or NCHW")
    need(c.cores_per_worker >= 0, f"--cores_per_worker must be 0 (auto) or more, got {c.cores_per_worker}")
    if _tasks_run_here(c, engine_nodes):
        need(c.cores_per_worker <= os.cpu_count(),
             f"--cores_per_worker must be between 0 (auto) and this machine's {os.cpu_count()} cores, "
             f"got {c.cores_per_worker}")
    need(c.num_intra_threads >= 0, f"--num_intra_threads must be 0 (auto) or more, got {c.num_intra_threads}")
    need(c.num_inter_threads >= 0, f"--num_inter_threads must be 0 (auto) or more, got {c.num_inter_threads}")
    need(c.display_every > 0, f"--display_every must be positive, got {c.display_every}")
    need(c.placement in PLACEMENTS, f"--placement={c.placement!r} is unknown; choose soft or hard")
    need(c.device in DEVICES, f"--device={c.device!r} is unknown; choose cpu or gpu")
    need(c.ps_placement in PS_PLACEMENTS, f"--ps_placement={c.ps_placement!r} is unknown; choose collocated or separate")
    need(c.all_reduce in ALL_REDUCE, f"--all_reduce={c.all_reduce!r} is unknown; choose auto, ring or nccl")
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

    # Distribution.
    need(c.num_workers >= 1, f"--num_workers must be at least 1, got {c.num_workers}")
    need(c.num_workers <= 64, f"--num_workers={c.num_workers} is more than tfbench launches (64)")
    if c.strategy not in MULTI_TASK_STRATEGIES:
        need(c.num_workers == 1, f"--strategy={c.strategy} runs one task; use multi_worker_mirrored, parameter_server or horovod for --num_workers={c.num_workers}")
    need(c.num_ps >= 0, f"--num_ps must be 0 or more, got {c.num_ps}")
    if c.strategy != "parameter_server":
        need(c.num_ps == 0, "--num_ps applies to --strategy=parameter_server only")
        need(not c.ps_sync, "--ps_sync applies to --strategy=parameter_server only")
    need(not c.ps_sync or c.mode == "train",
         "--ps_sync applies to --mode=train only: forward passes make no updates to synchronise")
    knobs.check(c)
    need(c.num_local_devices <= 1 or c.strategy in ("default", "mirrored"),
         "--num_local_devices applies to --strategy=mirrored or default only")
    need(c.strategy != "default" or c.num_local_devices <= 1,
         "--strategy=default runs on one device; use --strategy=mirrored with --num_local_devices")
    need(c.all_reduce != "nccl" or c.device == "gpu", "--all_reduce=nccl needs --device=gpu")

    if c.straggler:
        feature_rules.check_straggler(c)
    if c.fault:
        feature_rules.check_faults(c)
    feature_rules.check_checkpoints(c)
    feature_rules.check_staleness_bound(c)
    feature_rules.check_data(c)
    feature_rules.check_elastic(c)

    # Network.
    need(c.network in NETWORKS, f"--network={c.network!r} is unknown; choose local or emulated")
    emulated = c.network == "emulated"
    need(emulated or not c.link_bandwidth, "--link_bandwidth applies to --network=emulated only")
    need(emulated or c.link_latency == 0, "--link_latency applies to --network=emulated only")
    need(c.link_latency >= 0, f"--link_latency must be 0 or more milliseconds, got {c.link_latency}")
    need(emulated or c.link_jitter == 0, "--link_jitter applies to --network=emulated only")
    need(c.link_jitter >= 0, f"--link_jitter must be 0 or more milliseconds, got {c.link_jitter}")
    need(not emulated or c.hosts == ("localhost",),
         "--hosts does not apply to --network=emulated: its hosts are network namespaces of this machine")
    c.link_rate_bps  # raises ConfigError on a bad rate
    need(not c.link_bandwidth or c.link_rate_bps >= 10 ** 5,
         f"--link_bandwidth={c.link_bandwidth} is below what tfbench shapes (100kbit)")
    need(c.link_rate_bps <= TBF_MAX_BPS,
         f"--link_bandwidth={c.link_bandwidth} ({c.link_rate_bps / 1e9:g} Gbit/s) is above what tbf shapes "
         f"({TBF_MAX_BPS / 1e9:.1f} Gbit/s); leave --link_bandwidth empty for an unshaped link (veth, as fast as "
         f"the CPU carries it)")

    # Devices: NCHW convolutions and GPU placement need a GPU.
    need(not (c.data_format == "NCHW" and c.device == "cpu"),
         "--data_format=NCHW needs --device=gpu: TensorFlow's CPU convolutions run NHWC only")
    if c.device == "gpu" and (c.placement == "hard" or c.data_format == "NCHW"):
        gpus = gpu_count if gpu_count is not None else count_gpus()
        need(gpus > 0, f"--device=gpu with --placement={c.placement}"
             f"{' and --data_format=NCHW' if c.data_format == 'NCHW' else ''} needs a GPU, and this machine has none")

    need(not (by_hand and c.horovod_elastic), "--horovod_elastic needs tfbench's launcher: horovodrun's elastic "
                                               "driver starts the ranks, not a user by hand")
    if not by_hand:
        _check_launch(c)

    # Performance: a precision the compute device cannot run is refused (tfbench.framework.precision).
    on_gpu = c.device == "gpu" and c.precision != "fp32" and (
        gpu_count if gpu_count is not None else count_gpus()) > 0
    feature_rules.check_precision(c.precision, on_gpu)

    _check_logdir(c.logdir, c.run_id)
    return c


def _tasks_run_here(c: RunConfig, engine_nodes: bool) -> bool:
    """Whether some task runs on this machine and takes its cores: not on Slurm's or Kubernetes'
    nodes, nor when every --hosts entry names another machine (tasks started by hand)."""
    if engine_nodes or c.launcher == "slurm":
        return False
    return any(is_this_machine(h) for h in c.hosts)


def _check_launch(c: RunConfig) -> None:
    """Launch: the local launcher starts tasks on this machine only; Slurm picks its own nodes."""
    if c.launcher not in LAUNCHERS:
        raise ConfigError(f"--launcher={c.launcher!r} is unknown; choose one of {', '.join(LAUNCHERS)}")
    if c.launcher == "local":
        remote = [h for h in c.hosts if not is_this_machine(h)]
        if remote:
            raise ConfigError(
                f"--hosts names other machines ({','.join(remote)}) and the local launcher starts tasks on this "
                f"machine only: use --launcher=slurm, or start them by hand with `python -m cluster.by_hand "
                f"--run_dir=DIR` (README: By hand)")
        slurm_flags = [f"--{name}" for name in ("slurm_partition", "slurm_time", "slurm_account")
                       if getattr(c, name)] + (["--slurm_nodes"] if c.slurm_nodes != 1 else [])
        if slurm_flags:
            raise ConfigError(f"{', '.join(slurm_flags)} applies to --launcher=slurm only")
        return
    if c.hosts != ("localhost",):
        raise ConfigError("--hosts does not apply to --launcher=slurm: Slurm picks the nodes; use --slurm_nodes")
    feature_rules.check_slurm_network(c)
    if c.slurm_nodes < 0:
        raise ConfigError(f"--slurm_nodes must be 0 (a node per worker, and per separate ps) or more, "
                          f"got {c.slurm_nodes}")
    tasks = 1 + c.num_workers + c.effective_num_ps if c.strategy == "parameter_server" else c.num_workers
    if c.slurm_nodes > tasks:
        raise ConfigError(f"--slurm_nodes={c.slurm_nodes} is more nodes than the run's {tasks} tasks")
    if c.slurm_time and not _SLURM_TIME.match(c.slurm_time):
        raise ConfigError(f"--slurm_time={c.slurm_time!r} is not a Slurm time (minutes, MM:SS, HH:MM:SS or D-HH:MM:SS)")
    for name in ("slurm_partition", "slurm_account"):
        value = getattr(c, name)
        if value and not re.match(r"^[A-Za-z0-9._-]+$", value):
            raise ConfigError(f"--{name}={value!r} must be letters, digits, '.', '_' or '-'")
    if c.strategy == "horovod" and c.num_workers % c.effective_slurm_nodes:
        raise ConfigError(f"--strategy=horovod on Slurm places ranks in equal blocks: --num_workers={c.num_workers} "
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


def count_gpus() -> int:
    """Number of GPUs TensorFlow can see, without initialising them."""
    if not (os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia")):
        return 0
    from tfbench.framework.tf_import import tf

    return len(tf.config.list_physical_devices("GPU"))
