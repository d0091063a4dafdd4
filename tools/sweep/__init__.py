"""`python -m tools.sweep`: a grid of tfbench runs, point after point, resumable (cli.py; the grid
and its point ids in grid.py; the sweep directory's state in tools/rundirs/sweep_state.py)."""
