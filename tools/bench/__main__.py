"""`python -m tools.bench`: tools/bench/cli.py."""
from tools.bench import cli

cli.run()
