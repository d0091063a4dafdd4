"""`python -m cluster.k8s`: see cluster.k8s.cli (`--help` lists the flags by purpose)."""
from cluster.k8s.cli import run_main

if __name__ == "__main__":
    run_main()
