"""horovodrun, as local runs start it: Horovod's own launcher without its Gloo-build check.

`horovodrun --gloo` first asks whether Gloo was built by importing horovod.tensorflow, and so
TensorFlow, in a forked child (horovod.common.util.gloo_built): 6-7 s of CPU before any rank of
any run starts (7.8 s for `horovodrun --gloo -np 2 -H localhost:2 true` on 2 cores, 1.4 s
without it). tfbench's Horovod is built with HOROVOD_WITH_GLOO=1, a build that fails without
Gloo, and its install asks `horovodrun --check-build` once (tools/scripts/build_horovod.sh), so
this answers that question with yes; everything else is horovodrun's run_commandline: rank
placement, rendezvous, elastic driver, output and signals.

It dies by SIGKILL when the launcher dies (PR_SET_PDEATHSIG), not by the SIGTERM that
cluster.net.netns_exec asks for: horovodrun's SIGTERM handler only sets an event, which its main
thread sees once it wakes, and the kernel may hand the signal to another of its threads, leaving
the main thread asleep in the elastic driver's wait. horovodrun and both ranks then outlived a
SIGKILLed launcher (1 time in 9 on 2 busy cores, 2026-11-26). Killed outright, its per-rank
middlemen see their pipe close and stop the ranks (horovod.runner.common.util.safe_shell_exec).

    python -m cluster.horovod.horovodrun --gloo -np 2 -H localhost:2 python -m tfbench.task ...
"""
from __future__ import annotations

import os
import signal
import sys
from typing import List


def command() -> List[str]:
    """The argv prefix that starts horovodrun from this Python's environment."""
    return [sys.executable, "-m", "cluster.horovod.horovodrun"]


def main() -> int:
    from cluster.net.netns_exec import die_with_parent

    die_with_parent(os.getppid(), signal.SIGKILL)
    from horovod.runner import launch

    launch.gloo_built = lambda verbose=False: True
    sys.argv[0] = "horovodrun"
    return launch.run_commandline()


if __name__ == "__main__":  # horovodrun's per-rank helpers re-import this module ('spawn')
    sys.exit(main())
