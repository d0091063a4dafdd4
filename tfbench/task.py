"""`python -m tfbench.task --run_dir D --task NAME`: one task process of a run, the command every
launcher, batch script, manifest and by-hand instruction spells; tfbench.app.task runs it."""
import sys

from tfbench.app.task import main

if __name__ == "__main__":
    sys.exit(main())
