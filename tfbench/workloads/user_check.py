"""python -m tfbench.workloads.user_check PACKAGE.MODULE:FUNCTION: the user's model checked in a
process of its own (tfbench.workloads.user.check: import, call, return value, declaration, a
forward pass and loss); prints what the launcher needs as one JSON line, or one error line and
exit code 2."""
from __future__ import annotations

import json
import sys

from tfbench.workloads.base import WorkloadError
from tfbench.workloads.user import check


def main(argv) -> int:
    try:
        facts = check(argv[1])
    except WorkloadError as e:
        print(f"tfbench: error: {e}", file=sys.stderr, flush=True)
        return 2
    print(json.dumps(facts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
