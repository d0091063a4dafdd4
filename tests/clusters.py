"""The TensorFlow runs that several tests read: each is launched once per test session, the
first time a test asks for it (the `clusters` fixture in conftest.py), and every test that reads
it asserts on the same records. docs/testing.md lists them with the tests that read each.

A scenario merges runs that used to differ only in flags that matter to one test and not to the
other (e.g. hard placement and a straggler); the tests read the step counts and flags from the
run's own config.json, not from constants. A launch that fails, or leaves a process of its run
behind, fails every test that reads it, with the run's output, and is not launched again; so does one that leaves its scratch directory (its tasks'
temporary files) behind. The one exception: a task that died of a memory fault inside a native
library (SIGSEGV, SIGBUS) gets its run launched once more, with a warning that shows the crash."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from typing import Dict, Optional, Tuple

import imagenet_records
import pytest

from conftest import TINY, processes_mentioning, run_cli
from tfbench.results.rundir import RunDir

PS2 = ("--strategy=parameter_server", "--num_workers=2")
MWMS2 = ("--strategy=multi_worker_mirrored", "--num_workers=2")
HOROVOD2 = ("--strategy=horovod", "--num_workers=2")
STRAGGLER = ("--straggler=worker_1:4",)


# A small recommender (tfbench.workloads.recommender): 4 tables of 2000 rows x 8 dims, Zipf ids.
DLRM = ("--model=dlrm", "--embedding_tables=4", "--embedding_rows=2000", "--embedding_dim=8", "--batch_size=16",
        "--num_warmup_steps=2", "--num_steps=3", "--monitor_interval=0.5")
# TINY's flags that every workload reads (its model, image size and classes are an image workload's)
EVERY_WORKLOAD = tuple(f for f in TINY if not f.startswith(("--model=", "--image_size=", "--num_classes=")))
# the transformer preset, made small (its classification head: 10 classes)
BERT_SMALL = EVERY_WORKLOAD + ("--model=bert_tiny", "--seq_length=16", "--vocab_size=256", "--num_classes=10")
CUSTOM = EVERY_WORKLOAD + ("--model=examples.custom_model:build",)  # the user's own model of the README
# The image sets the runs with files read, each made once per session: "tools.data" (python -m
# tools.data: 4 shards), "imagenet" (one shard as ImageNet's conversion script writes it, labels
# 1..1000, by tests/imagenet_records.py, read with --num_classes=1001 as ImageNet's are)
RECORDS = {"tools.data": ("--num_examples=48", "--image_size=40", "--num_shards=4", "--num_classes=10"),
           "imagenet": ("--shards=1", "--examples=64", "--size=40", "--labels=1:1000")}
IMAGENET = ("--num_classes=1001",)


@dataclasses.dataclass(frozen=True)
class Scenario:
    flags: Tuple[str, ...]
    dump_weights: bool = False  # TFBENCH_DUMP_WEIGHTS: initial and final weights, for test_aggregation
    base: Tuple[str, ...] = tuple(TINY)  # the workload's flags before the scenario's own
    data_dir: str = ""  # --data_dir: the session's image set of this name (RECORDS)


# name -> the run (after TINY); the comment names the tests that read it.
SCENARIOS: Dict[str, Scenario] = {
    # test_end_to_end (records, events, table), test_performance_tf (start-up phases, FLOP/s)
    "default": Scenario(()),
    # test_end_to_end: forward mode, and soft GPU placement falling back to the CPU
    "forward_soft_gpu": Scenario(("--mode=forward", "--device=gpu", "--placement=soft")),
    # test_step_definitions: hard placement of a one-task run; test_profile (a one-task profile, its
    # input pipeline read from files); test_input (the step split's input part)
    # (test_input: one shard read by one reader, with two threads)
    "hard_default": Scenario(("--placement=hard", "--profile") + IMAGENET, data_dir="imagenet"),
    # test_strategies, test_aggregation
    "mirrored": Scenario(("--strategy=mirrored", "--num_local_devices=2"), dump_weights=True),
    # test_strategies, test_step_definitions (collective ops of a train step), test_aggregation
    # (packs change no sum), test_knobs (the packs and the timeout reach the live strategy)
    "mwms": Scenario(MWMS2 + ("--mwms_bytes_per_pack=1048576", "--mwms_timeout=300"), dump_weights=True),
    # test_strategies, test_step_definitions (a forward step never communicates), test_profile;
    # test_input (each worker reads its own files); test_quiet_console (with horovod_fp16_hard, the
    # other run of the session's tools.data set: the first of the two checks its shards)
    "mwms_ring_forward": Scenario(MWMS2 + ("--all_reduce=ring", "--mode=forward", "--profile"), data_dir="tools.data"),
    # test_strategies (async case; updates with two ps), test_step_definitions (where a ps worker's
    # ops ran), test_staleness (async updates are stale), test_knobs (whole variables placed by
    # the greedy placer, as the performance model places them)
    "ps_async": Scenario(PS2 + ("--num_ps=2", "--ps_placement=separate", "--num_steps=15", "--ps_placer=greedy",
                                "--ps_partitioner=none")),
    # test_strategies (sync case; one update per global step; sys and perf series per task),
    # test_step_definitions (bytes per global step of |w| = 9 x 100000 x 4), test_staleness
    # (never stale), test_aggregation
    "ps_sync": Scenario(PS2 + ("--num_ps=1", "--ps_sync", "--ps_placement=separate", "--num_classes=100000",
                               "--num_steps=30", "--monitor_interval=0.2"), dump_weights=True),
    # test_strategies: a forward-only parameter-server run, two ps collocated with the workers;
    # test_knobs (the fixed partitioner splits every variable over both), test_profile (the coordinator's);
    # test_input (the workers' closures wait for their batches of one shard, read by two threads each)
    "ps_two_ps_forward": Scenario(PS2 + ("--num_ps=2", "--mode=forward", "--ps_partitioner=fixed", "--profile",
                                         "--input_threads=2") + IMAGENET, data_dir="imagenet"),
    # test_strategies (fp16 all-reduce), test_step_definitions (hard placement of a Horovod rank),
    # test_knobs (fusion threshold, cycle time and compression reach Horovod's environment);
    # test_workloads (the user's own model, reading images from files, reaches every rank)
    "horovod_fp16_hard": Scenario(HOROVOD2 + ("--horovod_compression=fp16", "--placement=hard",
                                              "--horovod_fusion_threshold_mb=4", "--horovod_cycle_time_ms=2.5"),
                                  data_dir="tools.data", base=CUSTOM),
    # test_input: one shard read by two Horovod ranks of two threads each
    "horovod_one_shard": Scenario(HOROVOD2 + ("--input_threads=2",) + IMAGENET, data_dir="imagenet"),
    # test_aggregation (an fp16 all-reduce would not equal the single-device step) of the transformer's
    # masked-LM steps; test_workloads (tokens/sec, FLOPs per token)
    "horovod": Scenario(HOROVOD2, dump_weights=True, base=BERT_SMALL),
    # test_bounded_staleness (unbounded: the straggler makes updates clock-stale),
    # test_step_definitions (hard placement of asynchronous ps steps); test_workloads (the transformer
    # classifying sequences under a parameter server)
    "ps_async_straggler_hard": Scenario(PS2 + ("--num_steps=12", "--placement=hard") + STRAGGLER
                                        + ("--transformer_loss=classification",), base=BERT_SMALL),
    # test_recommender, test_aggregation: every strategy's sparse path on embedding tables (rows all-gathered by
    # MWMS and Horovod; rows pulled and pushed, accumulated on the 2 ps that shard every table; asynchronous)
    "dlrm_mwms": Scenario(MWMS2, dump_weights=True, base=DLRM),
    "dlrm_horovod": Scenario(HOROVOD2, dump_weights=True, base=DLRM),
    "dlrm_ps_sync": Scenario(PS2 + ("--ps_sync", "--num_ps=2", "--ps_partitioner=fixed"), dump_weights=True, base=DLRM),
    "dlrm_ps_async": Scenario(PS2 + ("--num_ps=2", "--ps_partitioner=fixed"), base=DLRM),
    # test_sparse_paths: the same paths with the compute emulated (a wait, then the rows' gradients)
    "dlrm_ps_sync_emulated": Scenario(PS2 + ("--ps_sync", "--num_ps=2", "--ps_partitioner=fixed", "--compute=emulated",
                                             "--compute_ms=5"), base=DLRM),
    "dlrm_ps_async_emulated": Scenario(PS2 + ("--num_ps=2", "--ps_partitioner=fixed", "--compute=emulated",
                                              "--compute_ms=5"), base=DLRM),
    "dlrm_mwms_emulated": Scenario(MWMS2 + ("--compute=emulated", "--compute_ms=5"), base=DLRM),
    # test_sparse_paths: Horovod all-reducing the tables' gradients dense
    "dlrm_horovod_dense": Scenario(HOROVOD2 + ("--horovod_sparse_as_dense",), base=DLRM),
    # test_hybrid, test_aggregation: the tables' row ranges on 2 ps, rows pulled and pushed by 2 Horovod ranks
    # that all-reduce the dense gradients; rank 0 evaluates held-out AUC after every step (reading the ps)
    "dlrm_hybrid": Scenario(("--strategy=hybrid", "--num_workers=2", "--num_ps=2", "--eval_every=1"),
                            dump_weights=True, base=DLRM),
    # test_hybrid: the same with the compute emulated (a wait of 20 ms once the rows are pulled)
    "dlrm_hybrid_emulated": Scenario(("--strategy=hybrid", "--num_workers=2", "--num_ps=2", "--compute=emulated",
                                      "--compute_ms=20"), base=DLRM),
    # test_hybrid: a model without embedding tables under the hybrid is an all-reduce of every gradient
    "hybrid_no_tables": Scenario(("--strategy=hybrid", "--num_workers=2")),
    # test_straggler (synchronous peers wait), test_step_definitions (hard placement of sync ps steps)
    "ps_sync_straggler_hard": Scenario(PS2 + ("--ps_sync", "--image_size=64", "--batch_size=32", "--num_steps=8",
                                              "--placement=hard") + STRAGGLER),
}


# Signals of a memory fault: a native library's bug (tfbench's Python cannot raise them)
MEMORY_FAULTS = ("SIGSEGV", "SIGBUS")


def crashed_task(output: str) -> Optional[str]:
    """'<task> exited with code -N (<signal>)' when a launch failed because a task died of a memory fault."""
    failed = re.search(r"run failed: (\S+ exited with code -\d+ \((\w+)\))", output)
    return failed.group(1) if failed and failed.group(2) in MEMORY_FAULTS else None


@dataclasses.dataclass(frozen=True)
class Launched:
    """A finished run: what it printed (stdout, then stderr), its run directory, and its weights file (or None)."""
    name: str
    out: str
    run: str
    weights: Optional[str]
    err: str = ""

    @property
    def config(self) -> dict:
        with open(os.path.join(self.run, "config.json")) as f:
            return json.load(f)

    @property
    def steps(self) -> int:
        return self.config["num_steps"]


class Clusters:
    """Launches each scenario at most once below `root`; clusters[name] is its Launched."""

    def __init__(self, root: str):
        self.root = root
        self._done: Dict[str, object] = {}

    def __getitem__(self, name: str) -> Launched:
        if name not in self._done:
            self._done[name] = self._launch(name)
        done = self._done[name]
        if isinstance(done, str):
            pytest.fail(done, pytrace=False)
        return done

    def _launch(self, name: str):
        """The scenario's run; launched once more when a task of it died of a memory fault inside a
        native library (the launcher names the signal), with a warning that shows the crash: such
        a fault is TensorFlow's, not what a test reads, and a second crash fails the tests."""
        done = self._launch_once(name, name)
        crash = crashed_task(done) if isinstance(done, str) else None
        if crash is None:
            return done
        warnings.warn(f"scenario {name}: {crash}; launched once more. The first launch's output:\n{done}")
        return self._launch_once(name, f"{name}-again")

    def _launch_once(self, name: str, directory: str):
        scenario = SCENARIOS[name]
        logdir = os.path.join(self.root, directory)
        weights = os.path.join(self.root, f"{name}.weights.npz") if scenario.dump_weights else None
        env = {"TFBENCH_DUMP_WEIGHTS": weights} if weights else None
        files = (f"--data_dir={self.records(scenario.data_dir)}",) if scenario.data_dir else ()
        proc = run_cli(*scenario.base, f"--logdir={logdir}", f"--run_id={name}", "--stall_timeout=120", *scenario.flags,
                       *files, env=env, timeout=300)
        run = os.path.join(logdir, name)
        left = self.kill_leftovers(run)
        if proc.returncode != 0:
            return f"scenario {name} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        if left:
            return f"scenario {name} left processes behind: {left}"
        if os.path.exists(RunDir(run).scratch):
            return f"scenario {name} left its scratch directory {RunDir(run).scratch}: {os.listdir(RunDir(run).scratch)}"
        return Launched(name, proc.stdout, run, weights, proc.stderr)

    def records(self, name: str = "tools.data") -> str:
        """The session's image set `name` (RECORDS), written the first time a run reads it."""
        path = os.path.join(self.root, f"records-{name}")
        if not os.path.isdir(path):
            if name == "tools.data":
                proc = run_cli(f"--data_dir={path}", *RECORDS[name], module="tools.data", timeout=300)
                if proc.returncode != 0:
                    pytest.fail(f"python -m tools.data exited {proc.returncode}: {proc.stderr[-2000:]}", pytrace=False)
            else:
                imagenet_records.written(path, *RECORDS[name])
        return path

    def kill_leftovers(self, path: Optional[str] = None):
        """Pids of live processes that mention `path` (default: every scenario), killed."""
        left = processes_mentioning(path or self.root)
        for p in left:
            p.kill()
        return [p.pid for p in left]
