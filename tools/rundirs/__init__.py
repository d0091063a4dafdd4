"""Run and sweep directories on disk, as every tool reads them: runs.py (a run directory -> Run)
and sweep_state.py (a sweep's grid and attempts, kept so that it can resume)."""
