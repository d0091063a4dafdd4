"""tools/data: input data sets for --data_dir (python -m tools.data)."""
