"""The delay line: one user-space process that delays every packet between emulated hosts.

This kernel has no sch_netem, so a delayed host's link is a pair of TAP devices (cluster.net.taps)
and this process moves each packet from one fd to the other. What a host sends waits
delay_ms (+ a uniform sample in [-jitter_ms, +jitter_ms]) before it enters the switch; what
the switch sends to a host passes at once. A packet between two hosts thus crosses one delay
each way (round trip 2 × delay_ms), whichever hosts they are; the switch namespace itself
(Horovod's rendezvous) is delay_ms away in one direction only. Each direction is a FIFO and a
packet is released at max(previous release, arrival + delay + jitter), so jitter never
reorders packets (TCP would read reordering as loss).

One process serves every link of a run (select over all fds, microsecond timeouts). It runs in
the switch namespace, so removing the run's namespaces kills it; PR_SET_PDEATHSIG ends it with
its launcher; it exits by itself when one of its devices is deleted.

    python -m cluster.net.delay_line --netns NS --parent PID --ready-fd FD --delay-ms D \
        [--jitter-ms J] [--seed S] HOST_FD:PORT_FD ...
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import errno
import os
import random
import select
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
READ_SIZE = 65536 + 128  # a TSO packet (64 KB) with its Ethernet and virtio-net headers
BATCH = 64  # packets read from one fd before the others get their turn
QUEUE_BYTES = 64 * 2 ** 20  # per direction; a packet beyond it is dropped, as by a full queue
START_TIMEOUT_S = 10.0
MIN_DELAY_MS = 1.0  # below it, the 0.2-0.6 ms a round trip gains in the forwarder is a large share
MAX_DELAYED_BPS = 10 ** 9  # what one forwarder carries faithfully on this machine's 2 cores
NICE = -10  # the links are the network's hardware: they should not wait behind the tasks they serve
EARLY_S = 0.0001  # a sleeping process wakes ~0.05-0.2 ms after its timeout here: wake this much sooner
PR_SET_TIMERSLACK = 29


def refusal(delay_ms: float, jitter_ms: float = 0.0, rate_bps: int = 0) -> Optional[str]:
    """One line saying why these links cannot be delayed faithfully, or None (also None when
    nothing is delayed)."""
    if jitter_ms < 0 or delay_ms < 0:
        return "link delay and jitter must be 0 or more milliseconds"
    if jitter_ms > 0 and delay_ms == 0:
        return "link jitter needs a link delay (--link_latency) to vary around"
    if delay_ms == 0:
        return None
    if delay_ms < MIN_DELAY_MS:
        return (f"a link delay of {delay_ms:g} ms is below what the user-space delay line keeps faithfully "
                f"(at least {MIN_DELAY_MS:g} ms)")
    if jitter_ms > delay_ms:
        return f"link jitter ({jitter_ms:g} ms) above the delay ({delay_ms:g} ms) would need negative delays"
    if rate_bps > MAX_DELAYED_BPS:
        return (f"a delayed link of {rate_bps / 1e9:g} Gbit/s is beyond the user-space delay line "
                f"(at most {MAX_DELAYED_BPS / 1e9:g} Gbit/s here)")
    return None


# ---- the forwarder (runs as its own process) ----------------------------------------------------

class Direction:
    """Packets read from one fd on their way to `out`: sent at once, or queued until released."""

    __slots__ = ("out", "delayed", "queue", "queued", "last")

    def __init__(self, out: int, delayed: bool):
        self.out, self.delayed = out, delayed
        self.queue: collections.deque = collections.deque()
        self.queued = 0  # bytes waiting
        self.last = 0.0  # release time of the newest packet


def serve(pairs: Sequence[Tuple[int, int]], delay_s: float, jitter_s: float = 0.0, seed: int = 0) -> None:
    """Forwards until a device goes away: host -> port after the delay, port -> host at once."""
    rng = random.Random(seed)
    route: Dict[int, Direction] = {}
    for host_fd, port_fd in pairs:
        route[host_fd] = Direction(port_fd, delayed=True)
        route[port_fd] = Direction(host_fd, delayed=False)
    fds = list(route)
    delayed = [d for d in route.values() if d.delayed]
    read, write, now_s, uniform = os.read, os.write, time.monotonic, rng.uniform
    while True:
        heads = [d.queue[0][0] for d in delayed if d.queue]
        timeout = max(0.0, min(heads) - EARLY_S - now_s()) if heads else None
        ready, _, _ = select.select(fds, [], [], timeout)
        now = now_s()
        for fd in ready:
            d = route[fd]
            for _ in range(BATCH):
                try:
                    packet = read(fd, READ_SIZE)
                except BlockingIOError:
                    break
                except OSError as e:
                    if e.errno == errno.EBADFD:
                        return  # the device is gone: the run's namespaces are being removed
                    continue  # this packet is lost, as on a faulty link
                if not d.delayed:
                    _send(write, d.out, packet)
                elif d.queued + len(packet) <= QUEUE_BYTES:  # beyond it, dropped as by a full queue
                    release = now + delay_s + (uniform(-jitter_s, jitter_s) if jitter_s else 0.0)
                    d.last = release = max(release, d.last)
                    d.queue.append((release, packet))
                    d.queued += len(packet)
        due = now_s() + EARLY_S
        for d in delayed:
            queue = d.queue
            while queue and queue[0][0] <= due:
                packet = queue.popleft()[1]
                d.queued -= len(packet)
                _send(write, d.out, packet)


def _send(write, fd: int, packet: bytes) -> None:
    try:
        write(fd, packet)
    except OSError:  # a downed device drops the packet, as a link would
        pass


def main(argv: Optional[List[str]] = None) -> int:
    from cluster.net import netns_exec

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--netns", required=True)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--ready-fd", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("pairs", nargs="+", help="HOST_FD:PORT_FD of each delayed link")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the launcher's; it stops us after its tasks
    netns_exec.enter(args.netns)
    netns_exec.die_with_parent(args.parent)
    try:
        os.nice(NICE)
    except OSError:  # not root: the same share of the CPU as the tasks
        pass
    ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0)  # timeouts to the microsecond, not 50 us
    pairs = [tuple(_below_fd_setsize(int(fd)) for fd in pair.split(":")) for pair in args.pairs]
    os.write(args.ready_fd, b"ready\n")
    os.close(args.ready_fd)
    serve(pairs, args.delay_ms / 1000.0, args.jitter_ms / 1000.0, args.seed)
    return 0


def _below_fd_setsize(fd: int) -> int:
    """select() takes fds below 1024; the launcher's numbers are kept by pass_fds, so a high one
    is moved to the lowest free number."""
    if fd < 1024:
        return fd
    low = os.dup(fd)
    os.close(fd)
    return low


# ---- the launcher's side ----------------------------------------------------------------------

class DelayLine:
    """The running forwarder of one run; stop() ends it (idempotent)."""

    def __init__(self, popen: subprocess.Popen):
        self.popen = popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stop(self, grace: float = 2.0) -> None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            if self.popen.poll() is not None:
                return
            try:
                self.popen.send_signal(sig)
                self.popen.wait(wait)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass


def start(switch_ns: str, pairs: Sequence[Tuple[int, int]], delay_ms: float, jitter_ms: float = 0.0,
          seed: int = 0) -> DelayLine:
    """Starts the forwarder inside `switch_ns` with the (host fd, port fd) of each link and waits
    until it forwards; the caller closes its own copies of the fds afterwards. Must be called
    from a thread that lives as long as the run (PR_SET_PDEATHSIG follows the calling thread)."""
    ready_r, ready_w = os.pipe()
    fds = [fd for pair in pairs for fd in pair]
    command = [sys.executable, "-m", "cluster.net.delay_line", "--netns", switch_ns, "--parent", str(os.getpid()),
               "--ready-fd", str(ready_w), "--delay-ms", repr(delay_ms), "--jitter-ms", repr(jitter_ms),
               "--seed", str(seed), *(f"{h}:{p}" for h, p in pairs)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (PROJECT_ROOT, os.environ.get("PYTHONPATH")) if p))
    try:
        popen = subprocess.Popen(command, pass_fds=[ready_w, *fds], stdin=subprocess.DEVNULL, env=env,
                                 cwd=PROJECT_ROOT, start_new_session=True)
    finally:
        os.close(ready_w)
    line = DelayLine(popen)
    try:
        ready, _, _ = select.select([ready_r], [], [], START_TIMEOUT_S)
        if not ready or not os.read(ready_r, 16).startswith(b"ready"):
            code = popen.poll()
            raise RuntimeError(f"the delay line did not start within {START_TIMEOUT_S:g} s"
                               + (f" (exit code {code})" if code is not None else ""))
    except BaseException:
        line.stop()
        raise
    finally:
        os.close(ready_r)
    return line


if __name__ == "__main__":
    sys.exit(main())
