"""A stand-in for tfbench.task that needs no TensorFlow, for the launcher's tests.

It follows the task side of the launcher's protocol: reads TFBENCH_RUN_DIR / TFBENCH_TASK, binds
its TF_CONFIG port like a tf.distribute.Server would, writes progress files, and appends a task
record. FAKE_MODE (or FAKE_MODE_<task name>, which wins) makes it misbehave:
  normal            warm-up and measured steps, then a task record and exit 0
  crash             SIGKILLs itself at measured step FAKE_CRASH_STEP
  segfault          dies of SIGSEGV at measured step FAKE_CRASH_STEP, faulthandler on (as tfbench.app.task
                    runs), beside a thread that is sleeping
  hang              stops reporting progress during warm-up and sleeps forever
  bind_fail         fails to bind its port on the first start in this run directory only
  bind_fail_always  fails to bind its port on every start
  serve             reports "ready" and serves until SIGTERM (a ps or parameter-server worker)
  exit_early        reports "ready" and exits 0 at once
FAKE_IGNORE_TERM=1 ignores SIGTERM so that only SIGKILL stops it. FAKE_TEMP_FILE=1 leaves a file in
the temporary directory, as TensorFlow's autograph does until a clean exit, and prints its path.
With --group N it plays horovodrun: starts N ranks (worker_0..worker_N-1) in sessions of their
own, each logging to tasks/worker_<rank>.log, and exits with the first non-zero rank exit code.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tfbench.loop.progress import write_progress  # noqa: E402


def setting(name: str, task: str, default: str = "") -> str:
    return os.environ.get(f"{name}_{task}", os.environ.get(name, default))


def bind_own_port():
    """Holds the task's port open as a TensorFlow server would; None if it serves no port."""
    tf_config = json.loads(os.environ.get("TF_CONFIG", "null"))
    if not tf_config:
        return None
    task = tf_config["task"]
    address = tf_config["cluster"][task["type"]][task["index"]]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("0.0.0.0", int(address.rsplit(":", 1)[1])))
    except OSError as e:
        print(f"fake_task: could not bind {address}: {e}", flush=True)
        sys.exit(1)
    sock.listen()
    return sock


def fail_to_bind(run_dir: str, name: str, always: bool) -> None:
    marker = os.path.join(run_dir, "tasks", f"{name}.bind_failed_once")
    if always or not os.path.exists(marker):
        open(marker, "w").close()
        print(f"fake_task {name}: E0000 bind: Address already in use", flush=True)
        sys.exit(1)


def serve_forever(run_dir: str, name: str) -> None:
    def stop(signum, frame):
        print(f"fake_task {name}: stopped by SIGTERM", flush=True)
        sys.exit(0)

    if os.environ.get("FAKE_IGNORE_TERM") != "1":
        signal.signal(signal.SIGTERM, stop)
    write_progress(run_dir, name, "ready")
    while True:
        time.sleep(1)


def run_steps(run_dir: str, name: str, mode: str) -> None:
    warmup = int(setting("FAKE_WARMUP", name, "2"))
    steps = int(setting("FAKE_STEPS", name, "5"))
    step_s = float(setting("FAKE_STEP_S", name, "0.05"))
    crash_step = int(setting("FAKE_CRASH_STEP", name, "2"))
    for step in range(1, warmup + 1):
        if mode == "hang":
            print(f"fake_task {name}: hanging in warm-up", flush=True)
            while True:
                time.sleep(1)
        time.sleep(step_s)
        write_progress(run_dir, name, "warmup", step, warmup)
    starts, times = [], []
    for step in range(1, steps + 1):
        if mode == "crash" and step == crash_step:
            print(f"fake_task {name}: killing itself at step {step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "segfault" and step == crash_step:
            segfault_beside_a_sleeping_thread()
        starts.append(time.time())
        time.sleep(step_s)
        times.append(time.time() - starts[-1])
        write_progress(run_dir, name, "measure", step, steps)
    append_record(run_dir, name, starts, times)
    write_progress(run_dir, name, "done", steps, steps)


def segfault_beside_a_sleeping_thread():
    """A read of address 0, as a native library's bug reads freed memory, while another thread sleeps."""
    import ctypes
    import faulthandler
    import threading

    faulthandler.enable()
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    time.sleep(0.1)
    ctypes.string_at(0)


def append_record(run_dir: str, name: str, starts, times) -> None:
    from tfbench.results import records

    role, index = name.rsplit("_", 1)
    extra = {"affinity": sorted(os.sched_getaffinity(0)), "pid": os.getpid()}
    record = records.task_record(run_id=os.path.basename(run_dir), role=role, index=int(index),
                                 examples_per_step=int(os.environ.get("FAKE_BATCH", "8")),
                                 step_times_s=times, step_start_wall=starts, extra=extra)
    records.append(os.path.join(run_dir, "results.jsonl"), record)


def task_main() -> None:
    run_dir, name = os.environ["TFBENCH_RUN_DIR"], os.environ["TFBENCH_TASK"]
    write_progress(run_dir, name, "starting")
    mode = setting("FAKE_MODE", name, "normal")
    if os.environ.get("FAKE_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(f"fake_task {name}: pid {os.getpid()} mode {mode}", flush=True)
    if setting("FAKE_TEMP_FILE", name) == "1":
        import tempfile

        with tempfile.NamedTemporaryFile("w", prefix="__autograph_generated_file", delete=False) as f:
            print(f"fake_task {name}: temporary file {f.name}", flush=True)
    if mode in ("bind_fail", "bind_fail_always"):
        fail_to_bind(run_dir, name, always=mode == "bind_fail_always")
    server = bind_own_port()  # noqa: F841 - held open until exit
    if mode == "serve":
        serve_forever(run_dir, name)
    if mode == "exit_early":
        write_progress(run_dir, name, "ready")
        return
    write_progress(run_dir, name, "ready")
    run_steps(run_dir, name, mode)


def group_main(ranks: int) -> int:
    run_dir = os.environ["TFBENCH_RUN_DIR"]
    children = []
    for rank in range(ranks):
        name = f"worker_{rank}"
        env = dict(os.environ, TFBENCH_TASK=name, HOROVOD_RANK=str(rank))
        with open(os.path.join(run_dir, "tasks", f"{name}.log"), "ab") as log:
            children.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)], env=env, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True))
        print(f"fake horovodrun: started rank {rank} as pid {children[-1].pid}", flush=True)
    codes = [child.wait() for child in children]
    return next((code for code in codes if code != 0), 0)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--group":
        sys.exit(group_main(int(sys.argv[2])))
    task_main()
