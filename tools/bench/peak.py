"""`python -m tools.bench.peak`: the machine's GEMM peak at fp32 and bf16 (fp16 too on a GPU).

A chain of n x n matrix products (2·n³ FLOPs each) runs in one tf.function until at least
--min_time seconds have passed; the best of --trials is kept. All cores and one core are each
measured in a process of their own (threads are fixed before TensorFlow starts), --rounds times
in turn, and the best of the rounds is kept, so that a burst of other work lowers one round, not
the peak. The result is cached (tfbench.measure.peaks, ~/.cache/tfbench/peak.json) keyed by CPU
model, core count and TensorFlow version: runs read it into environment.json and never
re-measure. --refresh measures again.

Other work on the machine lowers a peak unnoticed, and every fraction of it then comes out too
high. So the 1-minute load average is read first (a busy machine is refused before anything is
measured), the cores other processes use while measuring are counted (all CPU time of the
machine minus this process tree's), both are stored with the peak, and a peak measured while
the machine was busy is printed but not stored. --force stores it anyway, and says so.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from absl import app, flags

from tfbench.config import helptext
from tfbench.measure import machine, peaks

flags.DEFINE_integer("size", 2048, "Side n of the square matrices.")
flags.DEFINE_float("min_time", 1.0, "Seconds each timed trial runs at least.")
flags.DEFINE_integer("trials", 3, "Timed trials per dtype; the best is kept.")
flags.DEFINE_list("dtypes", ["fp32", "bf16"], "CPU dtypes to measure (fp32, bf16, fp16).")
flags.DEFINE_boolean("refresh", False, "Measure even when this machine's peak is cached.")
flags.DEFINE_integer("rounds", 2, "Rounds of the all-core and one-core measurements; the best of each is kept.")
flags.DEFINE_boolean("force", False, "Measure and store even when the machine is busy (the entry says so).")
flags.DEFINE_integer("threads", 0, "Internal: measure in this process with this many cores/threads.")
FLAGS = flags.FLAGS
PROG = "tools.bench.peak"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
CHAIN = 8  # products per call: the host round trip is amortised over these


def gemm_flops_per_s(precision: str, n: int, device: str = "/device:CPU:0", min_time: float = 1.0,
                     trials: int = 3) -> float:
    """Best FLOP/s of chained n x n products at `precision` on `device`.

    Each product feeds the next (so no two are alike and none can be merged or skipped); the
    right factor has mean 1/n so that values neither vanish nor overflow, even in fp16.
    """
    from tfbench.framework.tf_import import tf

    dtype = getattr(tf, DTYPES[precision])
    with tf.device(device):
        a = tf.cast(tf.random.stateless_uniform([n, n], seed=[1, 2]), dtype)
        b = tf.cast(tf.random.stateless_uniform([n, n], seed=[3, 4], maxval=2.0 / n), dtype)

        @tf.function
        def chain(a, b):
            for _ in range(CHAIN):
                a = tf.matmul(a, b)
            return tf.reduce_sum(tf.cast(a[0, :8], tf.float32))

        chain(a, b).numpy()  # trace and warm up
        best = 0.0
        for _ in range(max(1, trials)):
            calls, t0 = 0, time.perf_counter()
            while True:
                chain(a, b).numpy()
                calls += 1
                elapsed = time.perf_counter() - t0
                if elapsed >= min_time:
                    break
            best = max(best, 2.0 * n ** 3 * CHAIN * calls / elapsed)
    return best


def measure_here(threads: int, dtypes, n: int, min_time: float, trials: int) -> dict:
    """In this process: pin `threads` cores, then measure each dtype (and the GPU if any)."""
    cores = sorted(os.sched_getaffinity(0))[:threads]
    os.sched_setaffinity(0, cores)
    from tfbench.framework.tf_import import tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    out = {"cores": len(cores), "cpu": {p: gemm_flops_per_s(p, n, "/device:CPU:0", min_time, trials) for p in dtypes}}
    gpus = tf.config.list_physical_devices("GPU")
    if gpus and threads == len(os.sched_getaffinity(0)) and threads > 0:
        out["gpu"] = {p: gemm_flops_per_s(p, n, "/device:GPU:0", min_time, trials) for p in ("fp32", "bf16", "fp16")}
        out["gpu_name"] = gpus[0].name
    return out


def measure_in_subprocess(threads: int) -> dict:
    args = [sys.executable, "-m", "tools.bench.peak", f"--threads={threads}", f"--size={FLAGS.size}",
            f"--min_time={FLAGS.min_time}", f"--trials={FLAGS.trials}", f"--dtypes={','.join(FLAGS.dtypes)}"]
    out = subprocess.run(args, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def native_bf16() -> bool:
    from tfbench.framework import precision

    return precision.cpu_has_bf16()


def measure() -> dict:
    """The cache entry: per dtype, all-core and one-core FLOP/s (best of the rounds), and how
    and under which load it was measured."""
    total = len(os.sched_getaffinity(0))
    load_before = os.getloadavg()[0]
    other = OtherLoad()
    best: dict = {}
    for _ in range(max(1, FLAGS.rounds)):
        for threads in sorted({total, 1}, reverse=True):
            found, kept = measure_in_subprocess(threads), best.setdefault(threads, {"cpu": {}})
            for p, value in found["cpu"].items():
                kept["cpu"][p] = max(value, kept["cpu"].get(p, 0.0))
            for p, value in (found.get("gpu") or {}).items():
                kept.setdefault("gpu", {})[p] = max(value, kept["gpu"].get(p, 0.0))
                kept["gpu_name"] = found["gpu_name"]
    cpu = {}
    for p in FLAGS.dtypes:
        cpu[p] = {"cores": total, "all_cores_flops_per_s": best[total]["cpu"][p],
                  "one_core_flops_per_s": best[1]["cpu"][p]}
    conditions = {"load_average_1m_before": round(load_before, 2), "other_cpu_cores": round(other.cores(), 2),
                  "cores": total}
    entry = {"method": f"tf.matmul chain, n={FLAGS.size}, best of {FLAGS.rounds} rounds x {FLAGS.trials} x "
                       f"{FLAGS.min_time:g} s",
             "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "native_bf16": native_bf16(), "cpu": cpu, "conditions": conditions}
    if "gpu" in best[total]:
        entry["gpu"] = {p: {"flops_per_s": v} for p, v in best[total]["gpu"].items()}
        entry["gpu_name"] = best[total]["gpu_name"]
    return entry


class OtherLoad:
    """Cores' worth of CPU time other processes used since it was made: the machine's busy time
    (/proc/stat via psutil) minus this process's and its waited-for children's."""

    def __init__(self):
        self.start = (time.monotonic(), self._machine_busy_s(), self._ours_s())

    @staticmethod
    def _machine_busy_s() -> float:
        import psutil

        t = psutil.cpu_times()
        return sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)

    @staticmethod
    def _ours_s() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def cores(self) -> float:
        wall = time.monotonic() - self.start[0]
        other = (self._machine_busy_s() - self.start[1]) - (self._ours_s() - self.start[2])
        return max(0.0, other / wall) if wall > 0 else 0.0


def render(entry: dict) -> str:
    lines = [f"GEMM peak ({entry['method']}; native BF16 instructions: {'yes' if entry['native_bf16'] else 'no'}):",
             f"  {peaks.describe(entry)}"]
    for p, e in entry["cpu"].items():
        lines.append(f"  CPU {p}: {e['all_cores_flops_per_s'] / 1e9:8.1f} GFLOP/s on {e['cores']} cores, "
                     f"{e['one_core_flops_per_s'] / 1e9:8.1f} GFLOP/s on 1 core")
    for p, e in (entry.get("gpu") or {}).items():
        lines.append(f"  GPU {p}: {e['flops_per_s'] / 1e9:8.1f} GFLOP/s")
    return "\n".join(lines)


def main(argv) -> int:
    del argv
    unknown = [p for p in FLAGS.dtypes if p not in DTYPES]
    if unknown:
        helptext.fail_usage(f"--dtypes={','.join(unknown)} is unknown; choose fp32, bf16, fp16", PROG)
    if FLAGS.rounds < 1 or FLAGS.trials < 1:
        helptext.fail_usage(f"--rounds and --trials must be at least 1, got {FLAGS.rounds} and {FLAGS.trials}", PROG)
    if FLAGS.threads:
        print(json.dumps(measure_here(FLAGS.threads, FLAGS.dtypes, FLAGS.size, FLAGS.min_time, FLAGS.trials)))
        return 0
    entry = None if FLAGS.refresh else peaks.load()
    if entry is not None:
        print(f"cached in {peaks.cache_path()}; --refresh measures again")
        print(render(entry))
        return 0
    cores = len(os.sched_getaffinity(0))
    busy = peaks.busy_reason(os.getloadavg()[0], None, cores)
    if busy and not FLAGS.force:
        helptext.fail_usage(f"the machine is busy ({busy}): a peak measured now would be too low and every fraction of "
                         f"it too high; measure when it is quiet, or --force to store it anyway", PROG)
    entry = measure()
    c = entry["conditions"]
    busy = peaks.busy_reason(c["load_average_1m_before"], c["other_cpu_cores"], cores)
    if busy and not FLAGS.force:
        print(render(entry))
        print(f"{PROG}: not stored: the machine was busy ({busy}); measure again when it is quiet, or --force",
              file=sys.stderr)
        return 1
    if busy:
        c.update(forced=True, busy=busy)
    print(f"stored in {peaks.store(entry)} under {machine.key()!r}")
    print(render(entry))
    return 0


if __name__ == "__main__":
    groups = [("Peak", ["size", "min_time", "trials", "rounds", "dtypes", "refresh", "force"])]
    app.run(main, flags_parser=helptext.parser(__doc__, lambda: groups, PROG))
