"""tfbench tools, by job: sweep/ (grids of runs), report/ (tables, plots and findings over run
directories), model/ (the performance model's command line), bench/ (benchmarks of tfbench itself
and of this machine); rundirs/ is what they all read (run and sweep directories on disk); scripts/
holds the set-up scripts and sweeps/ the sweep configurations."""
