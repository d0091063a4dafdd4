"""`python -m tfbench`: see tfbench.cli (`--help` lists the flags by purpose)."""
from tfbench.cli import run_main

if __name__ == "__main__":
    run_main()
