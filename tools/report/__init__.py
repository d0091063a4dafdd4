"""`python -m tools.report`: results.csv, summary.md and plots over run directories (cli.py puts
them together). From runs to points (aggregate.py), the lines a plot draws (plot_lines.py), the
tables (summary.py, findings.py, the *_section.py sections) and the plots (plots.py,
network_plots.py). Also `python -m tools.report.latency` (idleness against link latency) and
`python -m tools.report.tb_export` (TensorBoard scalars as CSV)."""
