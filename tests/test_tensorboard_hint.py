"""The end of a run points at a TensorBoard command that works as printed in a fresh clone (the
environment's own tensorboard, not one assumed on PATH) and at the custom-scalars page; the
machine's idle interfaces stay out of TensorBoard's first screen."""
import os
import shlex
import subprocess
import sys
import time
import urllib.request

import portpicker
import pytest

from tfbench.monitor import output
from tfbench.results.rundir import RunDir
from tfbench.tensorboard import hint


def test_the_command_is_this_environments_tensorboard_and_the_page_is_custom_scalars():
    argv = hint.command("/runs/r/tb")
    assert argv[0] == os.path.join(os.path.dirname(sys.executable), "tensorboard") and os.access(argv[0], os.X_OK)
    assert argv[1:] == ["--logdir", "/runs/r/tb"]
    text = hint.text("/runs/r/tb")
    assert text.splitlines()[0] == f"tensorboard: {shlex.join(argv)}"
    assert "then open http://localhost:6006/#custom_scalars" in text


def nic(kbps, total=1000):
    return {"tx_bytes": total, "rx_bytes": total, "tx_kbps": kbps, "rx_kbps": 0.0}


def host(**nics):
    return {"cpu_percent": 5.0, "mem_used_mb": 100.0, "net": nics}


def test_idle_interfaces_are_not_charted_and_busy_ones_stay_charted(tmp_path):
    written = []

    class Writer:
        def scalars(self, values, step, now):
            written.append(values)

        def close(self):
            pass

    run = RunDir(str(tmp_path / "run"))
    os.makedirs(run.path)
    out = output.MonitorOutput(run)
    out._writer = lambda name: Writer()
    out.write(1, 1.0, [], host(eth0=nic(0.4), lo=nic(900.0)))
    out.write(2, 2.0, [], host(eth0=nic(0.3), lo=nic(0.0)))  # lo idle now: its series goes on
    out.close()
    assert all(not any("eth0" in tag for tag in values) for values in written)
    assert all("host/net_lo_tx_kbps" in values for values in written)
    quiet = output.MonitorOutput(run, host_interfaces=False)  # tasks inside namespaces of their own
    quiet._writer = lambda name: Writer()
    quiet.write(3, 3.0, [], host(lo=nic(900.0)))
    quiet.close()
    assert set(written[-1]) == {"host/cpu_percent", "host/mem_used_mb"}


@pytest.mark.slow
def test_the_printed_command_starts_tensorboard_on_the_runs_layout(tmp_path):
    from tfbench.tensorboard.layout import write_layout

    run = RunDir(str(tmp_path / "run"))
    os.makedirs(run.tb_dir)
    write_layout(run)
    port = portpicker.pick_unused_port()
    argv = shlex.split(hint.text(run.tb_dir).splitlines()[0].split(": ", 1)[1])
    proc = subprocess.Popen(argv + ["--port", str(port), "--host", "127.0.0.1"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline, listing = time.monotonic() + 120, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugins_listing", timeout=5) as r:
                    listing = r.read().decode()
                break
            except OSError:
                time.sleep(1)
        assert listing is not None, proc.stderr.read() if proc.poll() is not None else "no answer"
        assert '"custom_scalars": {' in listing and '"enabled": true' in listing.split('"custom_scalars"')[1][:300]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
