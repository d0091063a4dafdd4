"""MirroredStrategy over this task's devices: GPUs when asked and present, else logical CPUs
(--num_local_devices splits the CPU), as a single-machine all-reduce baseline."""
import contextlib

from strategies import devices
from strategies.base import SyncAdapter


class MirroredAdapter(SyncAdapter):
    def make_strategy(self):
        from tfbench.framework.tf_import import tf

        names = devices.local_devices(self.config, self.config.effective_num_local_devices)
        return tf.distribute.MirroredStrategy(devices=names)

    def device_scope(self):
        return contextlib.nullcontext()  # the strategy places replicas on its devices
