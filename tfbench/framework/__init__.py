"""TensorFlow itself: the one place it is imported (tf_import) with its start-up lines kept off
the console (quiet), the numeric precision a run's steps use (precision) and the one line of a
failed task's error (error_line). The lowest floor: it imports nothing else of tfbench."""
