"""The devices a task computes on, set up before and just after TensorFlow starts: which GPUs it
sees (--device), its thread pools, soft or hard placement (--placement), the logical CPUs a
Mirrored run splits its core into, and the device scope its steps run under.
"""
from __future__ import annotations

import os

from tfbench.config.errors import ConfigError


def configure_environment(config) -> None:
    """Before TensorFlow is imported: hide GPUs for --device=cpu."""
    if config.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"


def configure_runtime(config, intra_threads: int, inter_threads: int, num_local_devices: int = 0) -> None:
    """After import, before any op runs: threads, soft placement, placement logging, devices."""
    from tfbench.framework.tf_import import tf

    if intra_threads:
        tf.config.threading.set_intra_op_parallelism_threads(intra_threads)
    if inter_threads:
        tf.config.threading.set_inter_op_parallelism_threads(inter_threads)
    if config.device == "cpu":
        tf.config.set_visible_devices([], "GPU")
    for gpu in gpus():  # the plan gives each task its own GPU; take its memory as needed
        tf.config.experimental.set_memory_growth(gpu, True)
    tf.config.set_soft_device_placement(config.placement == "soft")
    if config.log_device_placement:
        tf.debugging.set_log_device_placement(True)
    if num_local_devices > 1 and not gpus():
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(num_local_devices)])


def gpus():
    from tfbench.framework.tf_import import tf

    return tf.config.list_physical_devices("GPU")


def compute_device(config) -> str:
    """The device scope steps and variables are placed under.

    --device=gpu without a GPU: hard placement is refused here (before any op); soft placement
    keeps the GPU scope and lets TensorFlow fall back to the CPU, which the report records.
    """
    if config.device == "gpu":
        if not gpus() and config.placement == "hard":
            raise ConfigError("--device=gpu with --placement=hard needs a GPU, and this machine has none")
        return "/device:GPU:0"
    return "/device:CPU:0"


def local_devices(config, count: int):
    """Device names for MirroredStrategy: GPUs when asked and present, else logical CPUs."""
    from tfbench.framework.tf_import import tf

    if config.device == "gpu" and gpus():
        names = [d.name for d in tf.config.list_logical_devices("GPU")]
    else:
        names = [d.name for d in tf.config.list_logical_devices("CPU")]
    return names[:max(1, count)]
