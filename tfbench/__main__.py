"""`python -m tfbench --help` lists the flags; see README.md."""
from tfbench.cli import run_main

if __name__ == "__main__":
    run_main()
