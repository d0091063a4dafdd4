"""`python -m tools.bench.ps_peer`: tfbench's parameter-server step on the recommender against
tools/bench/minimal_ps_loop.py, side by side (goal: ratio >= 0.95); the last row of `python -m tools.bench`.

Both train --model=dlrm with tfbench's default tables (8 x 100000 rows x 16 dims, Zipf 1.0, one id
per table, hashed into the rows; RunConfig) at --ps_batch_size per worker, on the same examples (each
closure's batch the next of its worker's click stream, made on the worker: tfbench.workloads.clicks
on both sides, the minimal loop's --data=stream), on 2 workers pinned to a core each, 2 ps (every table split over both: a recommender's default) and a coordinator placed
alike (the minimal loop prints where it placed each process; the row says
whether that is tfbench's plan). tfbench's asynchronous step is a round of 2 closures, so its
--ps_num_warmup_steps + --ps_num_steps rounds face twice as many free-running closures of the
minimal loop. Rates: examples of the measured closures / the measured window (tfbench: the
cluster's examples/sec, from the workers' own first start to last end; the minimal loop: from
scheduling its first closure to its join).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

from absl import app, flags

from tfbench.config import RunConfig, helptext
from tfbench.workloads import recommender
from tools.bench import overhead as overhead_lib
from tools.rundirs import runs

flags.DEFINE_integer("ps_batch_size", RunConfig().batch_size, "Batch per worker of the parameter-server row (dlrm).")
flags.DEFINE_integer("ps_num_warmup_steps", 5, "Warm-up rounds of the parameter-server row (2 closures each).")
flags.DEFINE_integer("ps_num_steps", 100, "Measured rounds of the parameter-server row (2 closures each).")
FLAGS = flags.FLAGS
WORKERS = 2
PS = 2  # a recommender's default at 2 workers (one ps per worker): every table sharded
SHARED = ("embedding_tables", "embedding_rows", "embedding_dim", "ids_per_feature", "zipf_alpha", "dense_features",
          "id_layout")  # the workload's flags the minimal loop takes
ROOT = overhead_lib.ROOT
NAME = "tfbench parameter server / minimal ClusterCoordinator loop (dlrm, examples/sec, medians)"


def check() -> str:
    """The first bad flag of this row, '' when all are good."""
    for name in ("ps_batch_size", "ps_num_warmup_steps", "ps_num_steps"):
        if FLAGS[name].value < 1:
            return f"--{name} must be at least 1, got {FLAGS[name].value}"
    return ""


def table_flags() -> List[str]:
    """The dlrm workload's tables and ids at tfbench's defaults: the same on both sides."""
    defaults = RunConfig()
    return [f"--{name}={getattr(defaults, name)}" for name in recommender.RECOMMENDERS["dlrm"].own_flags
            if name in SHARED]


def tfbench_rate(logdir: str, run_id: str) -> Tuple[float, Dict[str, Dict]]:
    """(the cluster's examples/sec, where its plan put each task) of one tfbench run."""
    args = [sys.executable, "-m", "tfbench", "--model=dlrm", "--strategy=parameter_server", f"--num_workers={WORKERS}",
            f"--num_ps={PS}", "--cores_per_worker=1", f"--batch_size={FLAGS.ps_batch_size}", *table_flags(),
            f"--num_warmup_steps={FLAGS.ps_num_warmup_steps}", f"--num_steps={FLAGS.ps_num_steps}",
            f"--logdir={logdir}", f"--run_id={run_id}"]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"tools.bench: tfbench's parameter-server run failed: {proc.stderr.strip()[-300:]}")
    run = runs.load_run(os.path.join(logdir, run_id))
    return run.rate, run.placement


def minimal_rate() -> Tuple[float, Dict[str, Dict]]:
    """(examples/sec, where it placed each process) of one minimal ClusterCoordinator loop."""
    args = [sys.executable, os.path.join(ROOT, "tools", "bench", "minimal_ps_loop.py"), f"--num_workers={WORKERS}",
            f"--num_ps={PS}", f"--batch_size={FLAGS.ps_batch_size}", *table_flags(), "--data=stream",
            f"--num_warmup_steps={FLAGS.ps_num_warmup_steps * WORKERS}", f"--num_steps={FLAGS.ps_num_steps * WORKERS}"]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"tools.bench: the minimal parameter-server loop failed: {proc.stderr.strip()[-300:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out["examples_per_sec"], out["placement"]


def placement_text(placement: Dict[str, Dict]) -> str:
    return ", ".join(f"{name} cores {','.join(map(str, p['cores']))} ({p['intra_threads']}/{p['inter_threads']} "
                     f"threads)" for name, p in sorted(placement.items()))


def compare(logdir: str) -> Tuple[str, str]:
    """(the row's value, a line on what both ran and where), from --repeats alternating pairs."""
    ours: List[float] = []
    theirs: List[float] = []
    placements: Dict[str, Dict[str, Dict]] = {}

    def mine(r: int) -> None:
        rate, placements["tfbench"] = tfbench_rate(logdir, f"dlrm-ps-{r}")
        ours.append(rate)

    def reference(r: int) -> None:
        rate, placements["minimal"] = minimal_rate()
        theirs.append(rate)

    def shown(r: int) -> None:
        print(f"  pair {r}: minimal {theirs[-1]:.1f}, tfbench {ours[-1]:.1f} examples/sec", flush=True)

    overhead_lib.alternate(FLAGS.repeats, reference, mine, shown)
    same = placements["tfbench"] == placements["minimal"]
    where = (f"dlrm: batch {FLAGS.ps_batch_size}/worker, {' '.join(table_flags())}, {WORKERS} workers + {PS} ps, "
             f"{FLAGS.ps_num_warmup_steps} warm-up + {FLAGS.ps_num_steps} measured rounds of {WORKERS} closures; "
             + (f"both placed {placement_text(placements['tfbench'])}" if same else
                f"placed differently: tfbench {placement_text(placements['tfbench'])}; minimal loop "
                f"{placement_text(placements['minimal'])}"))
    return overhead_lib.ratio_text(ours, theirs), where



def main(argv) -> None:
    del argv
    bad = "" if FLAGS.repeats >= 1 else f"--repeats must be at least 1, got {FLAGS.repeats}"
    if bad or check():
        helptext.fail_usage(bad or check(), "tools.bench.ps_peer")
    print(f"{FLAGS.repeats} pairs in alternating order:", flush=True)
    with tempfile.TemporaryDirectory() as logdir:
        ratio, setting = compare(logdir)
    print(f"{NAME}: {ratio}   (goal >= 0.95)\n  ({setting})")


if __name__ == "__main__":
    groups = [("Benchmark", ["repeats", "ps_batch_size", "ps_num_warmup_steps", "ps_num_steps"])]
    app.run(main, flags_parser=helptext.parser(__doc__, lambda: groups, "tools.bench.ps_peer"))
