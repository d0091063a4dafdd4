"""`python -m tfbench.usage --markdown`: README's flag reference, generated from the flag groups
that `--help` prints (tfbench.config.helptext), so the two cannot drift apart."""
import sys

from tfbench.config import helptext

if __name__ == "__main__":
    if sys.argv[1:] != ["--markdown"]:
        print("usage: python -m tfbench.usage --markdown", file=sys.stderr)
        sys.exit(2)
    sys.stdout.write(helptext.markdown(helptext.tfbench_groups()))
