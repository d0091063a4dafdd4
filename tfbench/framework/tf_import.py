"""The one place TensorFlow and tf_keras are imported.

Keras 3 cannot train under ParameterServerStrategy, so tfbench uses tf_keras (Keras 2); the
legacy switch must be set before TensorFlow is first imported. TensorFlow's C++ start-up chatter
is silenced unless the user asked for it: TF_CPP_MIN_LOG_LEVEL=2, and the lines that setting does
not reach kept off stderr while TensorFlow loads and lists its devices (tfbench.framework.quiet),
so that every entry point that imports TensorFlow in its own process (python -m tools.data ...)
is as quiet as tfbench.

The `tensorflow` wheel (the one tf-keras requires) leaves oneDNN's CPU kernels off unless
TF_ENABLE_ONEDNN_OPTS=1, where the `tensorflow-cpu` wheel has them on: a ResNet50 training step
at 64 px, batch 16, on one core took 2483 ms without them and 958 ms with them (2026-11-25), so
tfbench turns them on unless the user set the variable (environment.json records it).
"""
import os

from tfbench.framework.quiet import without_startup_lines

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

with without_startup_lines():
    import tensorflow as tf  # noqa: E402
    import tf_keras as keras  # noqa: E402
    from tensorflow.python.distribute import sharded_variable  # noqa: E402 - a table of shared ranges: no public API
    from tensorflow.python.eager import context as eager_context  # noqa: E402 - run metadata: no public API
    from tensorflow.python.ops import resource_variable_ops  # noqa: E402 - a handle to a shared variable: no public API

    tf.config.list_physical_devices()  # the platforms start here (cuInit), not at a task's first op

__all__ = ["tf", "keras", "eager_context", "sharded_variable", "resource_variable_ops"]
