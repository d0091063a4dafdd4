"""The one place TensorFlow and tf_keras are imported.

Keras 3 cannot train under ParameterServerStrategy, so tfbench uses tf_keras (Keras 2); the
legacy switch must be set before TensorFlow is first imported. TensorFlow's C++ start-up chatter
is silenced unless the user asked for it.
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

__all__ = ["tf", "keras"]
