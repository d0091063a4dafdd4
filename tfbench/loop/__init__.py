"""Inside one task: the work of a step (steps), the timed loop of warm-up and measured steps
(benchmark), held-out evaluation (convergence), and the progress files through which a task tells
its launcher how far it got (progress; read by cluster/, written here)."""
