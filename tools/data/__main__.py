"""`python -m tools.data`: tools/data/cli.py."""
from tools.data import cli

cli.run()
