"""tfbench tools: reports, sweeps, exports and benchmarks of tfbench itself."""
