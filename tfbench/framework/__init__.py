"""TensorFlow itself: the one place it is imported (tf_import) and the numeric precision a run's
steps use (precision). The lowest floor: it imports nothing else of tfbench."""
