"""The front door: every way into a run, and the only part of tfbench/ that imports cluster/ and
strategies/.

`python -m tfbench` (cli: flags -> RunConfig -> plan -> run directory -> launch -> end of run),
`--tune` (tune: the strategy's knobs tried as child runs), one task process (task: its spec, its
strategy's adapter or server, its records), the run directory before any task starts
(run_setup), the end of a run (run_end) and a `python -m tfbench` child as sweeps and `--tune`
start one (child_run). docs/architecture.md states the hops of a run's path through them.
"""
