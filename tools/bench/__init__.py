"""Benchmarks of tfbench itself and of this machine: `python -m tools.bench` (cli.py: the one table
of `make bench`, with ps_peer.py: tfbench's parameter-server step against minimal_ps_loop.py),
`python -m tools.bench.overhead` (tfbench against minimal_loop.py, or monitor on against off),
`python -m tools.bench.peak` (the GEMM peak), `python -m tools.bench.soak` (what runs
leave behind) and `python -m tools.bench.delay_line_ceiling` (what the user-space delay line carries)."""
