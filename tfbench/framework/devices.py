"""How many GPUs this machine has, asked of TensorFlow only where a GPU driver exists: validation
needs the count for --device=gpu with hard placement or NCHW, and most runs then never import
TensorFlow before their tasks start."""
import os


def count_gpus() -> int:
    """Number of GPUs TensorFlow can see, without initialising them."""
    if not (os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia")):
        return 0
    from tfbench.framework.tf_import import tf

    return len(tf.config.list_physical_devices("GPU"))
