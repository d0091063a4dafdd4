"""`python -m tfbench`: see tfbench.app.cli (`--help` lists the flags by purpose)."""
from tfbench.app.cli import run_main

if __name__ == "__main__":
    run_main()
