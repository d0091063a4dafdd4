"""What the user-space delay line itself can carry: one TCP stream through two delayed hosts.

    python -m tools.bench.delay_line_ceiling [--links=unshaped:1,unshaped:20,100mbit:20] [--seconds=3]

For each link (rate:one-way delay in ms) it builds two emulated hosts exactly as a run does
(cluster.net.links: TAP pairs, tbf, the delay line in the switch namespace), streams TCP from h0 to
h1 for --seconds after the start-up the link probe skips, and prints the stream's Mbit/s, the
packets per second the delay line moved (the switch ports' packet counters; TSO packets carry up
to 64 KB each) and the share of one core the delay line used. An unshaped link shows the delay
line's ceiling; a shaped one that it keeps the configured rate. Needs root; removes everything
it built.
"""
from __future__ import annotations

import time
from typing import List, Tuple

import psutil
from absl import app, flags

from cluster.net import delay_line, link_probe, links, netns
from tfbench.config import ConfigError, helptext, link_rate_bps

FLAGS = flags.FLAGS
PROG = "tools.bench.delay_line_ceiling"
flags.DEFINE_list("links", ["unshaped:1", "unshaped:20", "100mbit:20"], "rate:one-way delay ms of each link to measure")
flags.DEFINE_float("seconds", 3.0, "how long each stream is counted")


def parse(items: List[str]) -> List[Tuple[str, int, float]]:
    """[(rate as given, bits/s or 0, delay ms)]; ConfigError (one line) for a link the delay line refuses."""
    out = []
    for item in items:
        rate, _, delay = item.partition(":")
        try:
            bps, ms = (0 if rate == "unshaped" else link_rate_bps(rate)), float(delay)
        except ValueError:  # ConfigError is one too
            raise ConfigError(f"--links: {item!r} is not rate:delay_ms (e.g. 100mbit:20 or unshaped:1)") from None
        refused = delay_line.refusal(ms, 0.0, bps) if ms > 0 else "a delay of 0 ms starts no delay line"
        if refused:
            raise ConfigError(f"--links: {item}: {refused}")
        out.append((rate, bps, ms))
    return out


def measure(rate_bps: int, delay_ms: float, seconds: float) -> dict:
    key = netns.run_key("delay-ceiling")
    netns.claim(key, "delay-ceiling")
    net = links.plan_network(key, 2, rate_bps, delay_ms)
    running = None
    try:
        running = links.build(net)
        (h0, h1), proc = net.hosts, psutil.Process(running.delay_line.pid)
        skip = max(link_probe.STREAM_SKIP_S, link_probe.STARTUP_RTTS * 2 * delay_ms / 1000)
        before, cpu0, t0 = links.counters(net, "packets"), proc.cpu_times(), time.monotonic()
        got = link_probe.stream((h0.netns, h0.address), (h1.netns, h1.address), seconds, skip)
        after, cpu1, wall = links.counters(net, "packets"), proc.cpu_times(), time.monotonic() - t0
    finally:
        if running is not None:
            running.stop()
        netns.remove_run(key)
    moved = sum(after[h][0] - before[h][0] for h in after)  # what each host sent into the delay line
    return {"mbit_s": got["bps"] / 1e6, "packets_s": moved / wall,
            "cpu": (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / wall}


def main(argv) -> int:
    del argv
    try:
        wanted = parse(FLAGS.links)
    except ConfigError as e:
        helptext.fail_usage(str(e), PROG)
    print("| link | one-way delay ms | TCP Mbit/s (one stream) | packets/s through the delay line | delay line CPU (cores) |")
    print("|---|---|---|---|---|")
    for rate, bps, ms in wanted:
        m = measure(bps, ms, FLAGS.seconds)
        print(f"| {rate} | {ms:g} | {m['mbit_s']:.1f} | {m['packets_s']:,.0f} | {m['cpu']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    app.run(main, flags_parser=helptext.parser(__doc__, lambda: [("Links", ["links", "seconds"])], PROG))
