"""`python -m tfbench.usage --markdown`: README's flag reference, generated from the flag groups
that `--help` prints (tfbench.config.helptext), so the two cannot drift apart."""
import sys

from tfbench.config import helptext

if __name__ == "__main__":
    if len(sys.argv) == 2 and (helptext.wants_help(sys.argv) or sys.argv[1] == helptext.HELPFULL):
        print(__doc__.strip() + "\n\nusage: python -m tfbench.usage --markdown")
        sys.exit(0)
    if sys.argv[1:] != ["--markdown"]:
        print("usage: python -m tfbench.usage --markdown", file=sys.stderr)
        sys.exit(2)
    sys.stdout.write(helptext.markdown(helptext.tfbench_groups()))
