"""Every command-line flag of tfbench, grouped by purpose, with help text: here the flags of every
run, and after "What runs" each workload kind's own group, as the kind declares it
(tfbench.workloads.arguments: one --help group per kind, read through the registry).

Defaults come from RunConfig (its fields, and the kinds' declarations for their arguments), so a
flag and its config value cannot disagree. The groups are what `--help` prints
(tfbench.config.helptext) and what README's flag reference is generated from (`python -m
tfbench.usage --markdown`). Flags are declared with absl but parsed by tfbench's own parser
(tfbench.app.cli.parse_flags) so that a bad value ends with one line and exit code 2.
"""
from __future__ import annotations

from typing import Tuple

from absl import flags

import tfbench.config as config_lib
from tfbench import workloads

# Presets tbf can shape (fdr_ib, 56 Gbit/s, is refused: leave the rate empty for unshaped links).
_SHAPED_PRESETS = [name for name, bps in config_lib.LINK_PRESETS.items() if bps <= config_lib.TBF_MAX_BPS]

FLAGS = flags.FLAGS
_DEFAULTS = config_lib.RunConfig()

# (title, ((kind, name, help), ...)): kind is an absl DEFINE_<kind>; the default is RunConfig's.
GROUPS: Tuple[Tuple[str, Tuple[Tuple[str, str, str], ...]], ...] = (
    ("What runs", (
        ("string", "model", workloads.model_help()),
        ("string", "mode", "train (forward+backward+SGD update) or forward (inference only)."),
        ("integer", "batch_size", "Batch size per replica; global batch = this x replicas."),
        ("integer", "num_warmup_steps", "Steps run before timing starts (never timed)."),
        ("integer", "num_steps", "Measured steps."),
        ("float", "learning_rate", "SGD learning rate."),
        ("string", "optimizer", "The SGD every strategy trains with: " + "; ".join(
            f"{name} ({cls}; its update of an embedding table's sparse gradient costs {cost})"
            for name, (cls, cost) in config_lib.OPTIMIZERS.items()) + "."),
        ("integer", "seed", "Seed for weights and synthetic data."),
        ("boolean", "xla", "Compile the step with XLA (jit_compile)."),
    )),
    *((arguments.title, arguments.entries()) for arguments in workloads.ARGUMENTS),
    ("Distribution", (
        ("string", "strategy", f"One of {', '.join(config_lib.STRATEGIES)}."),
        ("integer", "num_workers", "Worker tasks (Horovod: ranks)."),
        ("integer", "num_ps", "Parameter servers (parameter_server and hybrid; 0: one, or for a recommender one "
                                "per worker and at least 2, so that its tables are sharded)."),
        ("string", "ps_placement", "collocated: each ps shares a worker's host; separate: a host of its own."),
        ("string", "knob_source", "Where the strategy's knob values came from, for the record (sweeps set it to the "
                                  "saved tuning they read for tuning: best); '': the flags."),
        ("string", "ps_partitioner", "parameter_server: none (whole variables round-robin over the ps), min_size "
                                     "(variables split over the ps, no shard below --ps_min_shard_bytes) or fixed "
                                     "(every variable split into one shard per ps)."),
        ("integer", "ps_min_shard_bytes", "parameter_server, min_size: the smallest shard in bytes."),
        ("string", "ps_placer", "parameter_server: round_robin (TensorFlow's: variable after variable over the ps) or "
                                "greedy (each variable, its shards from there on, on the ps holding the fewest bytes "
                                "so far, as tf_cnn_benchmarks balanced its ps)."),
        ("boolean", "ps_sync", "parameter_server: one averaged update per global step instead of asynchronous updates."),
        ("integer", "ps_staleness_bound", "parameter_server, asynchronous: no worker starts an update more than this many "
                                          "updates ahead of the slowest (stale-synchronous); -1: unbounded."),
        ("string", "all_reduce", "multi_worker_mirrored collectives: auto, ring or nccl."),
        ("integer", "num_local_devices",
         "mirrored: replicas on this task; on CPU the CPU is split into that many logical devices."),
        ("integer", "mwms_bytes_per_pack", "multi_worker_mirrored: gradients all-reduced in packs of at least this "
                                           "many bytes (CommunicationOptions.bytes_per_pack); 0: one pack."),
        ("float", "mwms_timeout", "multi_worker_mirrored: seconds a collective may take (CommunicationOptions."
                                  "timeout_seconds); 0: no limit."),
        ("string", "horovod_compression", "Horovod: gradients on the wire as none (their own precision) or fp16 (Horovod's all-reduce "
                                          "takes no bf16)."),
        ("integer", "horovod_fusion_threshold_mb", "Horovod: tensor fusion buffer in MiB (HOROVOD_FUSION_THRESHOLD); "
                                                   "-1: Horovod's default (128); 0: no fusion."),
        ("float", "horovod_cycle_time_ms", "Horovod: background cycle time in ms (HOROVOD_CYCLE_TIME); -1: Horovod's "
                                           "default (1)."),
        ("boolean", "horovod_autotune", "Horovod: its autotuner picks fusion threshold and cycle time while the run "
                                        "goes (HOROVOD_AUTOTUNE); its log lands in the run's tasks/."),
        ("boolean", "horovod_sparse_as_dense", "Horovod: all-reduce sparse gradients (embedding rows) as dense "
                                               "tensors of the whole table instead of all-gathering the touched rows."),
        ("boolean", "horovod_elastic", "Horovod, local: horovodrun's elastic mode; state is committed every step, a "
                                       "rank that dies is dropped and the rest go on, and it rejoins when restarted."),
        ("integer", "horovod_min_workers", "Horovod elastic: fewest ranks the run goes on with (0: 1)."),
        ("string", "hybrid_shard_rule", "hybrid: where each table's K row ranges live: rotated (shard j of table t "
                                        "on ps (t + j) mod K) or aligned (shard j on ps j, as the parameter server's "
                                        "fixed partitioner places them)."),
        ("list", "hosts", "Comma-separated hosts; tasks are spread over them round-robin."),
        ("integer", "base_port", "First port per host; 0: free ports picked on this machine."),
    )),
    ("Cores and threads", (
        ("integer", "cores_per_worker",
         "Cores given to each local worker, mirrored: to each local device (0: all cores split evenly)."),
        ("integer", "num_intra_threads", "Intra-op threads per task; 0: its cores."),
        ("integer", "num_inter_threads", "Inter-op threads per task; 0: auto."),
        ("integer", "input_threads", "--data_dir: threads of each task's input pipeline (its thread pool, parallel "
                                     "map and interleave); 0: one per core of the task that reads."),
    )),
    ("Placement", (
        ("string", "placement", "hard: explicit device scopes, soft placement off; soft: TensorFlow may move ops."),
        ("string", "device", "cpu (hides every GPU) or gpu."),
        ("boolean", "log_device_placement", "Log where every op runs."),
    )),
    ("Launch", (
        ("string", "launcher", "local: processes on this machine; slurm: srun steps in an allocation, or an sbatch "
                               "job submitted and followed from outside one."),
        ("integer", "slurm_nodes", "Slurm: nodes to spread the tasks over; 0: one per worker, and with separate ps "
                                   "one per ps and one for the coordinator."),
        ("string", "slurm_partition", "Slurm: partition (sbatch --partition); '': default."),
        ("string", "slurm_time", "Slurm: time limit (sbatch --time), e.g. 10 or 00:10:00."),
        ("string", "slurm_account", "Slurm: account to charge (sbatch --account)."),
    )),
    ("Network", (
        ("string", "network", "local: every task on this machine over loopback; emulated: each host a network "
                              "namespace, joined through a bridge by shaped links (with --launcher=slurm: a private "
                              "Slurm whose nodes are such hosts)."),
        ("string", "link_bandwidth", "emulated: rate of every host link in each direction, e.g. 100mbit, 1gbit, or a "
                                     f"preset ({', '.join(_SHAPED_PRESETS)}); at most "
                                     f"{config_lib.TBF_MAX_BPS / 1e9:.1f} Gbit/s (tbf); empty: unshaped."),
        ("float", "link_latency", "emulated: one-way delay in ms between any two hosts (a user-space delay line "
                                  "on TAP devices; at least 1 ms); 0: none."),
        ("float", "link_jitter", "emulated: uniform jitter in ms around --link_latency (at most the latency; "
                                 "packets stay in order)."),
    )),
    ("Performance", (
        ("string", "precision", "fp32, bf16 (CPUs with BF16 instructions, GPUs) or fp16 (GPUs, loss-scaled): "
                                "Keras mixed precision, variables kept in fp32."),
        ("string", "compute", "real: each worker computes its forward and backward pass; emulated: a wait that uses "
                              "no CPU stands in for them (then gradients of the real variables' shapes), so that "
                              "the strategy's communication and synchronisation run as in a real step while the "
                              "cores stay free for them: many workers on few cores measure the protocol, not the "
                              "machine."),
        ("float", "compute_ms", "--compute=emulated: the wait per worker step in ms (e.g. a faster machine's compute); "
                                "0: the compute a short real run of the same model, batch, mode and cores measures "
                                "on this machine (run once, then cached per machine)."),
    )),
    ("Run control and output", (
        ("string", "logdir", "Directory holding one sub-directory per run."),
        ("string", "run_id", "Name of this run's directory; default: time, model, strategy."),
        ("float", "deadline", "Seconds the whole run may take; 0: no limit."),
        ("float", "stall_timeout", "End the run when no worker makes step progress this long."),
        ("boolean", "monitor", "Sample CPU, memory and network of every task."),
        ("float", "monitor_interval", "Seconds between system samples."),
        ("integer", "display_every", "Print a progress line every this many steps."),
        ("boolean", "profile", "Capture a TensorFlow profile of the measured window, one step marker per step "
                               "(TensorBoard's Profile tab: overview, trace viewer), into tb/<task>/plugins/profile."),
        ("list", "profile_steps", "Steps a,b (0-based, warm-up included) to capture a TensorFlow profile of."),
        ("string", "fault", "Faults the launcher injects: TASK:kill@STEP (SIGKILL) or TASK:hang@STEP (SIGSTOP) once "
                            "STEP measured steps are done, comma-separated; a killed parameter-server worker is "
                            "restarted (Horovod elastic: its rank rejoins; Slurm, emulated nodes only: the job ends "
                            "or, with --checkpoint_every, is submitted again) and the recovery measured."),
        ("integer", "checkpoint_every", "multi_worker_mirrored, parameter_server: save a checkpoint every this many "
                                        "steps; a worker (PS: a ps or the chief) killed by --fault then restarts every "
                                        "task from the last one (0: never)."),
        ("string", "straggler", "TASK:FACTOR, e.g. worker_1:2.0: that task runs 1/FACTOR of the time (stopped and "
                                "continued by the launcher), a straggler that costs no other task CPU."),
    )),
)

# Flags of `python -m tfbench` itself (not RunConfig fields): what the command does.
COMMAND_GROUP = ("Command", (
    ("boolean", "dry_run", "Validate, plan and print every task that would start (host, cores, threads, "
                           "port, TF_CONFIG, command), then exit without starting or writing anything."),
    ("boolean", "tune", "Try the strategy's knobs (tfbench.config.knobs: a small stated grid, one knob at a time) "
                        "on this setting, one run each, keep the best by cluster images/sec, and write the grid "
                        "and the winner to the run directory and to --tune_store."),
    ("float", "tune_budget", "--tune: seconds the grid may take; points not started by then are listed as skipped."),
    ("string", "tune_store", "--tune: the saved tunings to add the winner to (sweeps read them for tuning: best); "
                             "'': tools/sweeps/tuned.json; 'none': save nothing."),
))
COMMAND_DEFAULTS = {"dry_run": False, "tune": False, "tune_budget": 900.0, "tune_store": ""}


def define_flags() -> None:
    """Defines the RunConfig flags once (cluster.by_hand and tools reuse them)."""
    if "model" in FLAGS:
        return
    for _, entries in GROUPS:
        define(entries)


def define(entries) -> None:
    """absl flags of (kind, name, help) entries, each with RunConfig's default."""
    for kind, name, text in entries:
        default = getattr(_DEFAULTS, name)
        if isinstance(default, tuple):
            default = list(default)
        getattr(flags, f"DEFINE_{kind}")(name, default, text)


def define_command_flags() -> None:
    if "dry_run" in FLAGS:
        return
    for kind, name, text in COMMAND_GROUP[1]:
        getattr(flags, f"DEFINE_{kind}")(name, COMMAND_DEFAULTS[name], text)


def config_from_flags() -> config_lib.RunConfig:
    """The RunConfig the parsed flags describe (not yet validated)."""
    values = {}
    for name in config_lib.RunConfig.names():
        if name not in FLAGS:
            continue
        value = FLAGS[name].value
        if name == "hosts":
            value = tuple(h.strip() for h in value)
        elif name == "profile_steps":
            value = tuple(_int_list("profile_steps", value))
        values[name] = value
    return config_lib.RunConfig(**values)


def _int_list(name: str, items) -> list:
    try:
        return [int(x) for x in items]
    except ValueError:
        raise config_lib.ConfigError(f"--{name} takes comma-separated integers, got {','.join(items)!r}") from None
