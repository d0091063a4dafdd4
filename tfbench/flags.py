"""Every command-line flag of tfbench, in one place, with help text; flags -> RunConfig.

Flags are declared with absl but parsed by tfbench's own parser (see cli.parse_flags) so that
a bad value ends with one line and exit code 2, like every other input error.
"""
from __future__ import annotations

import dataclasses

from absl import flags

from tfbench import config as config_lib
from tfbench.models import MODELS

FLAGS = flags.FLAGS
_DEFAULTS = config_lib.RunConfig()


def define_flags() -> None:
    """Defines the flags once (cluster.plan and tools reuse them)."""
    if "model" in FLAGS:
        return
    d = _DEFAULTS
    # What runs.
    flags.DEFINE_string("model", d.model, f"Model: one of {', '.join(sorted(MODELS))}.")
    flags.DEFINE_string("mode", d.mode, "train (forward+backward+SGD update) or forward (inference only).")
    flags.DEFINE_integer("batch_size", d.batch_size, "Batch size per replica; global batch = this x replicas.")
    flags.DEFINE_integer("image_size", d.image_size, "Side of the square images the model sees (after cropping).")
    flags.DEFINE_integer("source_image_size", d.source_image_size,
                         "Side of the synthetic images before cropping; 0: image_size x 300/224.")
    flags.DEFINE_integer("num_classes", d.num_classes, "Number of classes.")
    flags.DEFINE_string("data_format", d.data_format, "NHWC or NCHW (NCHW needs a GPU).")
    flags.DEFINE_integer("num_warmup_steps", d.num_warmup_steps, "Steps run before timing starts (never timed).")
    flags.DEFINE_integer("num_steps", d.num_steps, "Measured steps.")
    flags.DEFINE_float("learning_rate", d.learning_rate, "SGD learning rate.")
    flags.DEFINE_integer("seed", d.seed, "Seed for weights and synthetic data.")
    flags.DEFINE_boolean("xla", d.xla, "Compile the step with XLA (jit_compile).")
    flags.DEFINE_integer("cores_per_worker", d.cores_per_worker,
                         "Cores given to each local worker, mirrored: to each local device (0: all cores split evenly).")
    flags.DEFINE_integer("num_intra_threads", d.num_intra_threads, "Intra-op threads per task; 0: its cores.")
    flags.DEFINE_integer("num_inter_threads", d.num_inter_threads, "Inter-op threads per task; 0: auto.")
    flags.DEFINE_integer("display_every", d.display_every, "Print a progress line every this many steps.")
    # Where results go.
    flags.DEFINE_string("logdir", d.logdir, "Directory holding one sub-directory per run.")
    flags.DEFINE_string("run_id", d.run_id, "Name of this run's directory; default: time, model, strategy.")
    # Distribution.
    flags.DEFINE_string("strategy", d.strategy, f"One of {', '.join(config_lib.STRATEGIES)}.")
    flags.DEFINE_integer("num_workers", d.num_workers, "Worker tasks (Horovod: ranks).")
    flags.DEFINE_integer("num_ps", d.num_ps, "Parameter servers (parameter_server only; 0: one).")
    flags.DEFINE_string("ps_placement", d.ps_placement,
                        "collocated: each ps shares a worker's host and cores; separate: a host of its own.")
    flags.DEFINE_boolean("ps_sync", d.ps_sync,
                         "parameter_server: one averaged update per global step instead of asynchronous updates.")
    flags.DEFINE_list("hosts", list(d.hosts), "Comma-separated hosts; tasks are spread over them round-robin.")
    flags.DEFINE_integer("base_port", d.base_port, "First port per host; 0: free ports picked on this machine.")
    flags.DEFINE_string("all_reduce", d.all_reduce, "multi_worker_mirrored collectives: auto, ring or nccl.")
    flags.DEFINE_integer("num_local_devices", d.num_local_devices,
                         "mirrored: replicas on this task; on CPU the CPU is split into that many logical devices.")
    flags.DEFINE_boolean("horovod_fp16_allreduce", d.horovod_fp16_allreduce, "Horovod: compress gradients to fp16.")
    # Placement.
    flags.DEFINE_string("placement", d.placement,
                        "hard: explicit device scopes, soft placement off; soft: TensorFlow may move ops.")
    flags.DEFINE_string("device", d.device, "cpu (hides every GPU) or gpu.")
    flags.DEFINE_boolean("log_device_placement", d.log_device_placement, "Log where every op runs.")
    # Run control and monitoring.
    flags.DEFINE_float("deadline", d.deadline, "Seconds the whole run may take; 0: no limit.")
    flags.DEFINE_float("stall_timeout", d.stall_timeout, "End the run when no worker makes step progress this long.")
    flags.DEFINE_boolean("monitor", d.monitor, "Sample CPU, memory and network of every task.")
    flags.DEFINE_float("monitor_interval", d.monitor_interval, "Seconds between system samples.")
    flags.DEFINE_list("profile_steps", [], "Steps a,b (0-based, warm-up included) to capture a TensorFlow profile of.")


def config_from_flags() -> config_lib.RunConfig:
    """The RunConfig the parsed flags describe (not yet validated)."""
    values = {}
    for field in dataclasses.fields(config_lib.RunConfig):
        if field.name not in FLAGS:
            continue
        value = FLAGS[field.name].value
        if field.name == "hosts":
            value = tuple(h.strip() for h in value)
        elif field.name == "profile_steps":
            value = tuple(_int_list("profile_steps", value))
        values[field.name] = value
    return config_lib.RunConfig(**values)


def _int_list(name: str, items) -> list:
    try:
        return [int(x) for x in items]
    except ValueError:
        raise config_lib.ConfigError(f"--{name} takes comma-separated integers, got {','.join(items)!r}") from None
