"""`python -m tools.model VERB`: tools/model/cli.py."""
import sys

from tools.model import cli

cli.run(sys.argv)
