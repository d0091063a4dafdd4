"""What a built network's links really do, measured between two host namespaces.

The path is h0 -> switch -> h1, the one gRPC and Gloo traffic takes (h0 <-> the switch for a
one-host network, where the delay line delays one direction only). From one TCP connection of
small and large messages, each answered by a 1-byte reply:

    rtt_ms     median round trip of 1-byte messages
    alpha_ms   per-message latency of the Hockney model time = alpha + bytes / beta, and
    beta_bps   its bandwidth, fitted by least squares of relative residuals to the median time
               of each size, a message and its 1-byte reply taking 2 alpha + bytes / beta

and from one TCP stream each way (received bytes after the first round trips of slow start),
its sender's buffer as large as the kernel allows (2 x net.core.wmem_max), so that the link and
not the buffer sets the rate where it can. A stream whose bytes in flight (rate x RTT) fill half
its send buffer or more is window-limited: over this RTT the hosts' TCP buffers, not the link,
hold it back (the receiver's autotuned buffer, capped by net.ipv4.tcp_rmem, counts as much as the
sender's: at a 400 ms round trip this kernel's default 6 MB holds one stream near 60 Mbit/s, as it
would hold gRPC's). check() turns the measurements into a one-line refusal when the links are not what
was configured.
"""
from __future__ import annotations

import socket
import statistics
import threading
import time
from typing import List, Optional, Sequence, Tuple

import numpy as np

from cluster.net.netns_exec import run_in

RTT_SAMPLES = 20
REPEATS = 3
PROBE_BUDGET_S = 1.0  # round trips and repeated messages are cut to about this much time on long links
SMALLEST, LARGEST, STEP = 1024, 4 * 2 ** 20, 8
MESSAGE_BUDGET_S = 0.1  # the largest message takes about this long at the measured throughput
STREAM_S, STREAM_SKIP_S = 0.3, 0.1
STREAM_BYTES = 2 ** 20  # a shaped stream is counted for at least this many bytes at the link's rate
STARTUP_RTTS = 12  # a stream's first round trips (slow start, BBR's start-up) are not counted
STREAM_RTTS = 2  # ... and it is counted for at least this many round trips
TIMEOUT_S = 10.0
SEND_BUFFER = 2 ** 30  # asked for; the kernel grants at most 2 x net.core.wmem_max
WINDOW_LIMITED = 0.5  # bytes in flight over the send buffer from which a stream is window-limited
RTT_TOLERANCE, RTT_TOLERANCE_MS = 0.10, 1.0
THROUGHPUT_TOLERANCE = 0.10

Endpoint = Tuple[str, str]  # (namespace, address)


def endpoints(net) -> Tuple[Endpoint, Endpoint, int]:
    """(source, destination, delayed directions of a round trip) of a links.Network."""
    h0 = net.hosts[0]
    if len(net.hosts) > 1:
        return (h0.netns, h0.address), (net.hosts[1].netns, net.hosts[1].address), 2
    return (h0.netns, h0.address), (net.switch, net.bridge_address), 1


def probe(net) -> dict:
    """The measurements of a built links.Network, as a run record holds them."""
    src, dst, delayed = endpoints(net)
    first = statistics.median(exchange(src, dst, [1] * 3))
    samples, repeats = samples_for(first)
    rtt = statistics.median(exchange(src, dst, [1] * samples))
    skip = max(STREAM_SKIP_S, STARTUP_RTTS * rtt)
    seconds = max(STREAM_S, STREAM_RTTS * rtt, STREAM_BYTES * 8 / net.rate_bps if net.shaped else 0.0)
    forward, backward = stream(src, dst, seconds, skip), stream(dst, src, seconds, skip)
    sizes = message_sizes(min(forward["bps"], backward["bps"]) / 8)
    timed = exchange(src, dst, [s for _ in range(repeats) for s in sizes])
    medians = [statistics.median(timed[i::len(sizes)]) for i in range(len(sizes))]
    alpha_s, beta = fit_hockney(sizes, medians)
    return {
        "path": f"{src[1]} -> {dst[1]}", "delayed_directions_per_round_trip": delayed,
        "rtt_ms": round(rtt * 1000, 3),
        "alpha_ms": round(alpha_s * 1000, 3), "beta_bps": round(beta * 8),
        "throughput_bps": {"forward": round(forward["bps"]), "backward": round(backward["bps"])},
        "window_limited": {way: window_limited(got["bps"], rtt, min(got["send_buffer"], got["recv_buffer"]))
                           for way, got in (("forward", forward), ("backward", backward))},
        "send_buffer_bytes": forward["send_buffer"], "recv_buffer_bytes": forward["recv_buffer"],
        # the hosts' TCP congestion control, which every connection of the run uses: a namespace takes
        # its machine's default, and it moves a run's rate (docs/network.md)
        "tcp_congestion_control": forward["congestion"],
        "measured_with": (f"{samples} 1-byte round trips on one TCP connection (median); one TCP stream "
                          f"each way for {seconds:.2f} s after {skip:.2f} s of start-up, the largest send buffer "
                          f"the kernel grants; messages of "
                          f"{sizes[0]}..{sizes[-1]} bytes x{repeats} on one connection, each answered by 1 byte "
                          f"(median per size, fitted to 2 alpha + bytes/beta)"),
        "message_sizes": sizes, "repeats": repeats,
    }


def samples_for(rtt_s: float) -> Tuple[int, int]:
    """(round trips, repeats of each message size): all of them on short links, fewer on long
    ones so that a 200 ms link is probed in seconds, not a minute."""
    if rtt_s <= 0:
        return RTT_SAMPLES, REPEATS
    return (min(RTT_SAMPLES, max(5, int(PROBE_BUDGET_S / rtt_s))),
            min(REPEATS, max(1, int(PROBE_BUDGET_S / (4 * rtt_s)))))


def message_sizes(bytes_per_s: float) -> List[int]:
    """SMALLEST, x STEP, ... up to what takes about MESSAGE_BUDGET_S (at least 64 KB, at most
    LARGEST)."""
    top = min(LARGEST, max(64 * 1024, bytes_per_s * MESSAGE_BUDGET_S))
    sizes = [SMALLEST]
    while sizes[-1] * STEP <= top:
        sizes.append(sizes[-1] * STEP)
    return sizes


def window_limited(bps: float, rtt_s: float, send_buffer: int) -> bool:
    """Whether a stream's bytes in flight (rate x RTT, Little's law) fill WINDOW_LIMITED of its
    send buffer, which also holds unsent data and per-packet overhead."""
    return bps / 8 * rtt_s >= WINDOW_LIMITED * send_buffer


def fit_hockney(sizes: Sequence[int], seconds: Sequence[float]) -> Tuple[float, float]:
    """(alpha in s, beta in bytes/s) from times of a message of each size and its 1-byte reply,
    modelled as 2 alpha + size / beta. Relative residuals, so that small messages (which carry
    alpha) weigh as much as large ones (which carry beta); alpha is clipped at 0."""
    m = np.asarray(sizes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    design = np.column_stack([np.full_like(m, 2.0), m]) / t[:, None]
    (alpha, inverse_beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if inverse_beta <= 0:
        raise ValueError("message times do not grow with size: no bandwidth to fit")
    return max(0.0, float(alpha)), float(1.0 / inverse_beta)


def check(measured: dict, delay_ms: float, rate_bps: int = 0, shaped: bool = False) -> Optional[str]:
    """One line saying how the measured links differ from the configured ones, or None: the RTT
    off delay x the delayed directions of a round trip by more than 10% or 1 ms, or a stream that
    was not window-limited below the goodput of the shaped rate by more than 10%."""
    from cluster.net import links

    expected = delay_ms * measured.get("delayed_directions_per_round_trip", 2)
    tolerance = max(RTT_TOLERANCE * expected, RTT_TOLERANCE_MS)
    if abs(measured["rtt_ms"] - expected) > tolerance:
        return (f"measured RTT {measured['rtt_ms']:.2f} ms on {measured.get('path', 'the links')} is not "
                f"{expected:g} ± {tolerance:g} ms (link delay {delay_ms:g} ms)")
    if not shaped:
        return None
    floor = links.expected_goodput(rate_bps) * (1 - THROUGHPUT_TOLERANCE)
    for way, bps in measured["throughput_bps"].items():
        if bps < floor and not measured["window_limited"][way]:
            return (f"one TCP stream carried {bps / 1e6:.1f} Mbit/s {way} on {measured.get('path', 'the links')}, "
                    f"below the {floor / 1e6:.1f} Mbit/s a {rate_bps / 1e6:g} Mbit/s link carries")
    return None


# ---- the measurements ----------------------------------------------------------------------

def _listen(dst: Endpoint) -> socket.socket:
    def make():
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((dst[1], 0))
        s.listen(1)
        s.settimeout(TIMEOUT_S)
        return s

    return run_in(dst[0], make)


def _connect(src: Endpoint, address: Tuple[str, int], send_buffer: int = 0) -> socket.socket:
    def make():
        s = socket.socket()
        if send_buffer:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
        s.settimeout(TIMEOUT_S)
        s.bind((src[1], 0))
        s.connect(address)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    return run_in(src[0], make)


def exchange(src: Endpoint, dst: Endpoint, schedule: Sequence[int]) -> List[float]:
    """Seconds from sending each message of `schedule` (sizes in bytes) from src to receiving
    dst's 1-byte reply, after unmeasured warm-up exchanges: two of 1 byte and two of the largest
    message (so that the congestion window has grown)."""
    warmup = [1, 1, max(schedule), max(schedule)]
    server = _listen(dst)
    failure: list = []

    def serve():
        try:
            conn, _ = server.accept()
            with conn:
                conn.settimeout(TIMEOUT_S)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                buf = bytearray(1 << 20)
                for size in [*warmup, *schedule]:
                    left = size
                    while left:
                        n = conn.recv_into(buf, min(left, len(buf)))
                        if not n:
                            raise ConnectionError("the probe's sender closed early")
                        left -= n
                    conn.sendall(b"k")
        except BaseException as e:  # noqa: BLE001 - reported by the sender's side
            failure.append(e)

    thread = threading.Thread(target=serve, name="link-probe-echo", daemon=True)
    thread.start()
    try:
        client = _connect(src, server.getsockname())
        payload = memoryview(b"\0" * max(schedule))
        times = []
        with client:
            for size in [*warmup, *schedule]:
                start = time.perf_counter()
                client.sendall(payload[:size])
                if client.recv(1) != b"k":
                    raise ConnectionError(f"no reply to a {size}-byte message: {failure or 'closed'}")
                times.append(time.perf_counter() - start)
    finally:
        thread.join(TIMEOUT_S)
        server.close()
    return times[len(warmup):]


def stream(src: Endpoint, dst: Endpoint, seconds: float = STREAM_S, skip_s: float = STREAM_SKIP_S) -> dict:
    """{"bps": bits/s of one TCP stream src -> dst counted after skip_s, "send_buffer": the
    sender's buffer and "recv_buffer": the receiver's (autotuned) buffer, in bytes}."""
    server = _listen(dst)
    got: dict = {}

    def receive():
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(TIMEOUT_S)
            buf = bytearray(1 << 20)
            start = time.monotonic()
            counted, first = 0, None
            while True:
                n = conn.recv_into(buf)
                now = time.monotonic()
                if n == 0 or now - start >= skip_s + seconds:
                    break
                if now - start < skip_s:
                    continue
                if first is None:
                    first = now
                else:
                    counted += n
            if first is not None and now > first:
                got["bps"] = counted * 8 / (now - first)
            # autotuned by now: the receiver advertises at most about half of it as its window
            got["recv_buffer"] = conn.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)

    receiver = threading.Thread(target=receive, name="link-probe-stream", daemon=True)
    receiver.start()
    try:
        client = _connect(src, server.getsockname(), SEND_BUFFER)
        with client:
            send_buffer = client.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
            congestion = client.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0", 1)[0].decode()
            block = memoryview(b"\0" * (256 * 1024))
            end = time.monotonic() + skip_s + seconds + 0.05
            try:
                while time.monotonic() < end and receiver.is_alive():
                    client.sendall(block)
            except OSError:  # the receiver stopped reading and closed
                pass
    finally:
        receiver.join(TIMEOUT_S)
        server.close()
    if "bps" not in got:
        raise RuntimeError(f"no data arrived from {src[1]} at {dst[1]}")
    return {"bps": got["bps"], "send_buffer": send_buffer, "recv_buffer": got.get("recv_buffer", send_buffer),
            "congestion": congestion}
