"""Per-process TCP traffic: known transfers between two child processes over loopback."""
import subprocess
import sys
import textwrap
import time

import pytest

from cluster.plan.topology import make_plan
from tfbench.config import RunConfig
from tfbench.monitor import Monitor
from tfbench.monitor.netstat import SocketTraffic
from tfbench.results import rundir

UP = 8 * 2 ** 20  # client -> server
DOWN = 3 * 2 ** 20  # server -> client

# Each side reports progress on stdout and waits for a line on stdin before its next phase,
# so the test can sample while the connection is open and again after it is closed.
SERVER = textwrap.dedent(f"""
    import socket, sys

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    print(srv.getsockname()[1], flush=True)
    conn, _ = srv.accept()
    got = 0
    while got < {UP}:
        got += len(conn.recv(1 << 20))
    conn.sendall(b"s" * {DOWN})
    while conn.recv(1 << 16):
        pass
    conn.close()
    srv.close()
    print("closed", flush=True)
    sys.stdin.readline()
""")

CLIENT = textwrap.dedent(f"""
    import socket, sys

    c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    print("connected", flush=True)
    sys.stdin.readline()
    c.sendall(b"c" * {UP})
    got = 0
    while got < {DOWN}:
        got += len(c.recv(1 << 20))
    print("done", flush=True)
    sys.stdin.readline()
    c.close()
    print("closed", flush=True)
    sys.stdin.readline()
""")


def _spawn(code, *args):
    return subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def _tell(proc):
    proc.stdin.write("go\n")
    proc.stdin.flush()


def _within(value, expected, tolerance=0.05):
    return abs(value - expected) <= tolerance * expected


def _sample_until_settled(source, pids, expected, timeout=5.0):
    """Samples until every count is within tolerance (the last ACKs may trail the data)."""
    end = time.monotonic() + timeout
    while True:
        totals = source.sample(pids)
        ok = all(_within(totals[pid][i], expected[pid][i]) for pid in pids for i in (0, 1))
        if ok or time.monotonic() > end:
            return totals
        time.sleep(0.05)


@pytest.fixture
def pair():
    server = _spawn(SERVER)
    port = server.stdout.readline().strip()
    client = _spawn(CLIENT, port)
    yield server, client
    for proc in (client, server):
        proc.kill()
        proc.wait(timeout=10)


def test_traffic_is_attributed_to_each_process(pair):
    server, client = pair
    source = SocketTraffic()
    try:
        pids = (server.pid, client.pid)
        assert client.stdout.readline().strip() == "connected"
        before = source.sample(pids)
        assert all(tx < 100 and rx < 100 for tx, rx in before.values()), before
        _tell(client)
        assert client.stdout.readline().strip() == "done"
        expected = {client.pid: (UP, DOWN), server.pid: (DOWN, UP)}
        open_totals = _sample_until_settled(source, pids, expected)
        for pid in pids:
            assert _within(open_totals[pid][0], expected[pid][0]), (pid, open_totals)
            assert _within(open_totals[pid][1], expected[pid][1]), (pid, open_totals)

        _tell(client)
        assert client.stdout.readline().strip() == "closed"
        assert server.stdout.readline().strip() == "closed"
        closed_totals = source.sample(pids)
        for pid in pids:  # closed sockets keep their last-seen counts
            assert closed_totals[pid][0] >= open_totals[pid][0]
            assert closed_totals[pid][1] >= open_totals[pid][1]
            assert _within(closed_totals[pid][0], expected[pid][0])
            assert _within(closed_totals[pid][1], expected[pid][1])
    finally:
        source.close()


def test_totals_never_go_backwards():
    """Closed sockets and a reused inode keep earlier counts in their owner's total."""
    counters = {}
    inodes = {1: {10, 11}, 2: {20}}
    source = SocketTraffic(counters=lambda: dict(counters), inodes_of=lambda pid: inodes.get(pid, set()))

    counters.update({10: (100, 5), 11: (50, 50), 20: (7, 9), 99: (1000, 1000)})
    assert source.sample([1, 2]) == {1: (150, 55), 2: (7, 9)}

    del counters[11]  # socket 11 closed
    counters[10] = (300, 5)
    inodes[1] = {10}
    assert source.sample([1, 2]) == {1: (350, 55), 2: (7, 9)}

    counters[20] = (2, 1)  # inode 20 now names a new, younger socket
    assert source.sample([1, 2]) == {1: (350, 55), 2: (9, 10)}

    inodes.pop(1)  # process 1 exited: its sockets are gone
    counters.pop(10)
    assert source.sample([1, 2]) == {1: (350, 55), 2: (9, 10)}


def test_sockets_of_other_processes_are_ignored():
    source = SocketTraffic(counters=lambda: {5: (10, 10)}, inodes_of=lambda pid: set())
    assert source.sample([123]) == {123: (0, 0)}


def test_monitor_reports_each_task_traffic(pair, tmp_path):
    """End to end: the monitor's summary carries each task's cumulative traffic."""
    server, client = pair
    config = RunConfig(strategy="multi_worker_mirrored", num_workers=2, logdir=str(tmp_path),
                       monitor_interval=0.2)
    monitor = Monitor(rundir.create(str(tmp_path), "run"), make_plan(config), config)
    monitor.add("worker_0", server.pid)
    monitor.add("worker_1", client.pid)
    monitor.start()
    try:
        assert client.stdout.readline().strip() == "connected"
        _tell(client)
        assert client.stdout.readline().strip() == "done"
        time.sleep(0.5)
    finally:
        summary = monitor.stop()
    tasks = summary["tasks"]
    assert _within(tasks["worker_0"]["net_tx_bytes"], DOWN) and _within(tasks["worker_0"]["net_rx_bytes"], UP)
    assert _within(tasks["worker_1"]["net_tx_bytes"], UP) and _within(tasks["worker_1"]["net_rx_bytes"], DOWN)
    assert summary["network_source"] == "SocketTraffic"
