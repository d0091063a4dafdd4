"""Definitions and estimates behind every number: step statistics (stats), FLOPs and the machine's
peak (flops, peaks), memory estimates (memory), start-up phases (startup), the environment a
result depends on (environment), resources over the measured window (window), elastic steps."""
