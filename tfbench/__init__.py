"""tfbench: a TensorFlow distribution-strategy benchmark suite."""

__version__ = "0.1.0"
