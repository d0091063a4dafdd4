"""`python -m tools.sweep`: tools/sweep/cli.py."""
from tools.sweep import cli

cli.run()
