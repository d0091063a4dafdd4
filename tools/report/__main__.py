"""`python -m tools.report`: tools/report/cli.py."""
from tools.report import cli

cli.run()
