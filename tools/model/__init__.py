"""`python -m tools.model VERB`: the performance model's command line (cli.py dispatches the verbs:
predict.py, fit.py for fit and validate, report.py, published.py for published and cluster). The
model itself, which never imports TensorFlow, is tfbench/perfmodel."""
