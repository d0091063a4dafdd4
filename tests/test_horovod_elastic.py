"""Horovod elastic (--horovod_elastic): flags refused where the elastic driver does not start the
ranks; the hosts, discovery script and horovodrun command; global steps merged by step number
when ranks leave and join; the recovery of a killed rank; and a real run in which a rank is
killed, the other goes on alone and the killed one rejoins."""
import os
import subprocess

import pytest

import tfbench.config as config_lib
from cluster.faults import recovery
from cluster.horovod import elastic as horovod_elastic
from cluster.plan.spec import ClusterPlan, TaskSpec
from tfbench.config.errors import ConfigError
from tfbench.config.kinds import KINDS
from tfbench.measure import elastic_steps
from tfbench.results import records, table
from tfrun import cluster_record, run_tiny, scalars, task_records

ELASTIC = ("--strategy=horovod", "--num_workers=2", "--horovod_elastic")
ELASTIC_STEPS = 1000
# the killed run's steps wait 20 ms (emulated compute: a sleep, no CPU), so that the rank alone cannot
# finish the run before the killed one is back: alone, the tiny model's real steps took 3 ms (892
# steps in 2.8 s, 2026-11-28), shorter than a rank's restart and rejoin (about 10 s)
PACED = ("--compute=emulated", "--compute_ms=20")


def make(by_hand=False, **kw):
    base = dict(strategy="horovod", num_workers=2, horovod_elastic=True)
    base.update(kw)
    return config_lib.validate(config_lib.RunConfig(**base), gpu_count=0, kind=KINDS["by_hand"] if by_hand else None)


@pytest.mark.parametrize("kw,message", [
    (dict(strategy="multi_worker_mirrored"), "--horovod_elastic applies to --strategy=horovod only"),
    (dict(network="emulated"), "--horovod_elastic runs with --network=local only"),
    (dict(num_workers=1), "--horovod_elastic needs --num_workers=2 or more"),
    (dict(horovod_min_workers=2), r"--horovod_min_workers must be 1\.\.1"),
    (dict(mode="forward"), "--horovod_elastic applies to --mode=train only"),
    (dict(horovod_elastic=False, horovod_min_workers=1), "--horovod_min_workers applies to --horovod_elastic only"),
    (dict(launcher="slurm"), "--horovod_elastic runs with --network=local only"),
    (dict(dataset="digits", model="lenet", num_classes=10, image_size=8), "--horovod_elastic runs on synthetic data"),
])
def test_elastic_flags_are_refused_where_they_cannot_apply(kw, message):
    with pytest.raises(ConfigError, match=message):
        make(**kw)


def test_elastic_is_refused_for_tasks_started_by_hand():
    with pytest.raises(ConfigError, match="--horovod_elastic needs tfbench's launcher"):
        make(by_hand=True)  # `python -m cluster.by_hand` prints commands for a user to start


def test_elastic_config_with_a_minimum_is_accepted():
    assert make(num_workers=4, horovod_min_workers=2).horovod_min_workers == 2


def test_each_rank_gets_a_host_and_the_task_follows_the_host(tmp_path):
    addresses = horovod_elastic.hosts(3)
    assert addresses == ["127.0.1.1", "127.0.1.2", "127.0.1.3"]
    plan = ClusterPlan("horovod", [TaskSpec(role="worker", index=i, host="localhost")
                                   for i in range(3)])
    assert horovod_elastic.task_of(plan, "127.0.1.3", ",".join(addresses)).name == "worker_2"
    with pytest.raises(ValueError, match="none of the elastic hosts"):
        horovod_elastic.task_of(plan, "localhost", ",".join(addresses))
    assert "worker_1 on 127.0.1.2" in horovod_elastic.describe(2)
    script = horovod_elastic.write_discovery_script(str(tmp_path), addresses)
    assert subprocess.run([script], capture_output=True, text=True).stdout.split() == [f"{a}:1" for a in addresses]
    command = horovod_elastic.command(plan, "/runs/r", script, min_workers=0, horovodrun=["horovodrun"])
    assert command[:9] == ["horovodrun", "--gloo", "-np", "3", "--min-np", "1", "--max-np", "3",
                           "--host-discovery-script"]
    assert ["--blacklist-cooldown-range", "1", "2"] == command[10:13] and command[-2:] == ["--task", "horovod"]


def rank_record(index, steps, ranks, start=100.0, step_s=0.1, batch=4, **extra):
    """A rank's task record: steps `steps` (numbers) each `step_s` long, back to back from `start`."""
    starts = [start + k * step_s for k in steps]
    return dict(kind="task", role="worker", index=index, examples_per_step=batch, step_index=list(steps),
                step_ranks=list(ranks), step_start_wall=starts, step_times_s=[step_s] * len(starts),
                num_measured_steps=len(starts), window_start=starts[0], window_end=starts[-1] + step_s,
                examples_per_sec=batch / step_s, shares_cores_with=[], cores=[0], **extra)


def elastic_run():
    """worker_1 killed during step 4: worker_0 did 4..6 alone, a gap, then worker_1 rejoined for 8..9."""
    survivor = rank_record(0, range(10), [2, 2, 2, 2, 1, 1, 1, 2, 2, 2],
                           elastic_resets=[{"wall": 100.4, "ranks": 1}, {"wall": 101.5, "ranks": 2}])
    survivor["step_start_wall"][7:] = [s + 1.0 for s in survivor["step_start_wall"][7:]]  # no step for 1 s
    rejoined = rank_record(1, [8, 9], [2, 2], start=101.0, joined_at_step=7)
    return [survivor, rejoined]


def test_a_step_a_rank_did_again_after_a_reset_counts_once_at_its_last_time():
    rank = rank_record(0, [0, 1, 2, 2, 3], [2, 2, 2, 1, 1], step_s=0.1)  # step 2 undone by a reset, done again
    rank["step_start_wall"] = [100.0, 100.1, 100.2, 101.0, 101.1]
    steps = elastic_steps.merged([rank])
    assert [(s.index, s.rank_count) for s in steps] == [(0, 2), (1, 2), (2, 1), (3, 1)]
    assert steps[2].start == 101.0


def test_global_steps_are_merged_by_number_and_count_the_ranks_in_each():
    tasks = elastic_run()
    steps = elastic_steps.merged(tasks)
    assert [s.index for s in steps] == list(range(10)) and [s.rank_count for s in steps] == [2, 2, 2, 2, 1, 1, 1, 2, 2, 2]
    record = records.cluster_record("r", tasks)
    assert record["images"] == 4 * (2 * 7 + 3)  # the killed rank's own record is lost; the survivor's counts it
    assert record["window_s"] == pytest.approx(2.0)
    assert len(record["step_times_s"]) == 10 and record["step_definition"] == elastic_steps.DEFINITION


def test_recovery_of_a_killed_elastic_rank():
    fault = {"task": "worker_1", "kind": "kill", "wall": 100.4, "applied_at_measured_step": 4,
             "time_to_ready_s": 0.9}
    (entry,) = recovery.analyse([fault], elastic_run())
    assert entry["rejoined_by"] == "horovodrun's elastic driver" and entry["fewest_ranks"] == 1
    assert entry["time_to_continue_s"] == pytest.approx(0.1)  # step 4 with one rank ends at 100.5
    assert entry["steps_with_fewer_ranks"] == 3
    assert entry["time_to_first_update_s"] == pytest.approx(101.8 - 100.4)  # step 7, every rank again
    assert entry["time_without_steps_s"] == pytest.approx(1.0)
    assert entry["examples_per_sec_before"] == pytest.approx(4 * 2 * 4 / 0.4)
    assert entry["examples_per_sec_during"] == pytest.approx(4 * 3 / 1.3)
    assert entry["resets"] == 2
    line = table.recovery_line(entry)
    assert line.startswith("recovery of worker_1 (kill, Horovod elastic): the others went on with 1 rank(s) after 0.1 s")


def spaced(record, gap):
    """The record's steps with `gap` s more between consecutive steps (the usual per-step overhead)."""
    record["step_start_wall"] = [t + k * gap for k, t in enumerate(record["step_start_wall"])]
    return record


def test_time_without_steps_counts_only_the_recovery_beyond_the_usual_gap():
    survivor = spaced(rank_record(0, range(12), [2] * 4 + [1] * 3 + [2] * 5), 0.02)
    survivor["step_start_wall"][7:] = [t + 1.0 for t in survivor["step_start_wall"][7:]]
    fault = {"task": "worker_1", "kind": "kill", "wall": survivor["step_start_wall"][4] - 0.01}
    (entry,) = recovery.analyse([fault], [survivor], num_workers=2)
    assert entry["time_without_steps_s"] == pytest.approx(0.01 + 1.0)  # not the 0.02 s gaps, nor after the return
    assert entry["steps_with_fewer_ranks"] == 3 and entry["fewest_ranks"] == 1


def test_a_rank_that_never_rejoins_and_one_killed_before_a_full_step():
    alone = rank_record(0, range(5), [1] * 5)  # every measured step ran without the killed rank
    fault = {"task": "worker_1", "kind": "kill", "wall": 99.9}
    (entry,) = recovery.analyse([fault], [alone], num_workers=2)
    assert entry["time_to_continue_s"] == pytest.approx(0.2) and entry["steps_with_fewer_ranks"] == 5
    assert entry["time_to_first_update_s"] is None and entry["examples_per_sec_after"] is None
    assert "it had not rejoined when the run ended" in table.recovery_line(entry)


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="elastic ranks get loopback addresses in a network namespace (root)")
def test_a_killed_rank_is_dropped_the_other_goes_on_and_it_rejoins(logdir):
    # 2026-11-25 on 2 cores: killed after step 103, alone for 371 steps (13 s), back at step 476 of
    # 1502; at 20 ms or more a step, 1000 steps last about 20 s, twice a rejoin
    out, run = run_tiny(logdir, "elastic", *ELASTIC, *PACED, f"--num_steps={ELASTIC_STEPS}",
                        "--fault=worker_1:kill@100")
    record = cluster_record(run)
    (fault,) = record["faults"]
    assert fault["restarted_by"] == "horovodrun's elastic driver" and fault["restarted_pid"] != fault["pid"]
    (entry,) = record["recovery"]
    assert entry["fewest_ranks"] == 1 and entry["steps_with_fewer_ranks"] > 0 and entry["time_to_continue_s"] > 0
    assert entry["time_to_first_update_s"] > entry["time_to_ready_s"] > 0  # back in a step after joining
    assert all(entry[f"examples_per_sec_{when}"] > 0 for when in ("before", "during", "after"))
    assert 0 < entry["time_without_steps_s"] < entry["time_to_first_update_s"] and entry["resets"] >= 2  # lost, rejoined
    steps = elastic_steps.merged([r for r in records.read(os.path.join(run, "results.jsonl"))])
    assert [s.index for s in steps] == list(range(2, 2 + ELASTIC_STEPS))  # every measured step once, none lost
    assert steps[-1].rank_count == 2
    rejoined = task_records(run)["worker_1"]
    assert rejoined["joined_at_step"] > 100 and rejoined["step_index"][0] > rejoined["joined_at_step"]
    assert "launched" not in rejoined["startup"]["marks"]  # its start-up counts from its own process start
    ranks = [e.value for e in scalars(os.path.join(run, "tb", "worker_0"))["perf/ranks"]]
    assert 1 in ranks and ranks[-1] == 2  # TensorBoard shows the dip and the return
    assert record["horovod_elastic"]["hosts"] == ["127.0.1.1", "127.0.1.2"]
    assert "recovery of worker_1 (kill, Horovod elastic)" in out


def test_elastic_needs_root_and_says_so_before_starting(monkeypatch):
    from cluster.launchers import preflight

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ConfigError, match="--horovod_elastic needs root"):
        preflight.check_elastic_root()


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="elastic ranks get loopback addresses in a network namespace (root)")
def test_a_killed_launcher_takes_horovodrun_and_its_ranks_with_it(logdir):
    """horovodrun is no task of ours: the launcher's death kills it (PR_SET_PDEATHSIG, SIGKILL:
    cluster.horovod.horovodrun), and its per-rank middlemen then stop the ranks it started."""
    import signal
    import sys
    import time

    from conftest import ROOT, TINY, processes_mentioning
    from tfbench.loop import progress

    run = os.path.join(logdir, "killed")
    launcher = subprocess.Popen([sys.executable, "-m", "tfbench", *TINY, f"--logdir={logdir}", "--run_id=killed",
                                 *ELASTIC, "--num_steps=100000"], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not all(progress.reached(progress.read_progress(run, f"worker_{i}"), "measure") for i in range(2)):
            assert time.monotonic() < deadline and launcher.poll() is None, "the ranks never measured"
            time.sleep(0.2)
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(timeout=10)
    finally:
        launcher.kill()
    deadline = time.monotonic() + 30
    while processes_mentioning(run) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not processes_mentioning(run)  # horovodrun, its shells and both ranks
    cleanup = subprocess.run([sys.executable, "-m", "cluster.net.netns", "--cleanup"], cwd=ROOT, capture_output=True,
                             text=True, timeout=60)  # what the next run does: the dead run's namespace goes
    assert cleanup.returncode == 0 and "stale run" in cleanup.stdout
    from cluster.supervision import scratch
    from tfbench.results.rundir import RunDir

    left = RunDir(os.path.abspath(run)).scratch  # the ranks' temporary files, which no clean-up of the run removed
    assert left in scratch.stale() and os.listdir(left)
    assert left in scratch.remove_stale() and not os.path.exists(left)  # as the next run's start does


def test_tensorboard_layout_of_an_elastic_run_charts_the_ranks_in_each_step():
    from tfbench.tensorboard import layout as tb_layout

    def titles(elastic):
        return [chart.title for chart in tb_layout.layout("r", elastic).category[0].chart]

    assert tb_layout.ELASTIC_CHART[0] in titles(True) and tb_layout.ELASTIC_CHART[0] not in titles(False)
