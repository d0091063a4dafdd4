"""Injected faults (--fault): parsed and refused before anything starts; applied by the launcher
at the chosen measured step; a killed parameter-server worker is restarted at its address and
the run completes with its recovery measured; any other fault ends the run naming the fault,
with nothing left running."""
import pytest

from conftest import TINY, run_cli
from tfbench.config import faults
from tfrun import cluster_record, records, run_tiny


def test_parse_several_faults():
    assert faults.parse("worker_1:kill@5, worker_0:hang@2") == [
        faults.Fault("worker_1", "kill", 5), faults.Fault("worker_0", "hang", 2)]
    for bad in ("worker_1:kill", "worker_1:explode@3", "kill@3", "worker_1:kill@x"):
        with pytest.raises(ValueError, match="expected TASK:kill@STEP"):
            faults.parse(bad)


PS = ("--strategy=parameter_server", "--num_workers=2", "--image_size=32", "--batch_size=16")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["--ps_sync=false", "--ps_sync"])
def test_a_killed_parameter_server_worker_is_restarted_and_the_run_completes(logdir, mode):
    # enough steps that the restarted worker (ready again after about 4 s) still finds work to do
    out, run = run_tiny(logdir, "fault_ps", *PS, mode, "--num_steps=1500", "--fault=worker_1:kill@5")
    record = cluster_record(run)
    (fault,) = record["faults"]
    assert fault["task"] == "worker_1" and fault["signal"] == "SIGKILL" and fault["applied_at_measured_step"] >= 5
    assert fault["restarted_wall"] >= fault["wall"] and fault["ready_wall"] > fault["restarted_wall"]
    (recovery,) = record["recovery"]
    assert recovery["time_to_ready_s"] == pytest.approx(fault["ready_wall"] - fault["wall"])
    assert recovery["examples_per_sec_before"] > 0 and recovery["examples_per_sec_during"] is not None
    assert recovery["time_to_first_update_s"] >= recovery["time_to_ready_s"] > 0  # back at work after restart
    assert recovery["examples_per_sec_after"] > 0
    assert recovery["closure_results_lost"] >= 0
    assert ("updates_without_result" in recovery) == (mode != "--ps_sync")  # async only
    assert recovery.get("updates_without_result", 0) >= 0
    assert "fault: worker_1 kill (SIGKILL) after measured step" in out and "recovery of worker_1 (kill)" in out


def failed_mwms_run(logdir, run_id, fault, stall_timeout):
    """A 2-worker MWMS run with `fault` that must fail; its cluster record."""
    proc = run_cli(*TINY, f"--logdir={logdir}", f"--run_id={run_id}", "--strategy=multi_worker_mirrored",
                   "--num_workers=2", "--num_steps=200", f"--fault={fault}", f"--stall_timeout={stall_timeout}")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    (failed,) = [r for r in records(f"{logdir}/{run_id}") if r["kind"] == "cluster"]
    assert failed["status"] == "failed"
    return failed


@pytest.mark.slow
def test_a_killed_all_reduce_worker_ends_the_run_naming_the_fault(logdir):
    failed = failed_mwms_run(logdir, "fault_mwms", "worker_1:kill@2", 60)
    assert failed["failed_task"] == "worker_1" and "(--fault kill after measured step" in failed["reason"]
    assert failed["faults"][0]["task"] == "worker_1"


@pytest.mark.slow
def test_a_hung_worker_stalls_the_run_and_is_still_torn_down(logdir):
    failed = failed_mwms_run(logdir, "fault_hang", "worker_0:hang@2", 8)
    assert "stall timeout" in failed["reason"] and failed["faults"][0]["signal"] == "SIGSTOP"
    # the logdir fixture asserts that no process of the run is left (a stopped one included)


@pytest.mark.slow
def test_a_killed_parameter_server_ends_the_run_naming_it(logdir):
    proc = run_cli(*TINY, f"--logdir={logdir}", "--run_id=fault_ps0", *PS, "--num_steps=200",
                   "--fault=ps_0:kill@3", "--stall_timeout=60")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    (failed,) = [r for r in records(f"{logdir}/fault_ps0") if r["kind"] == "cluster"]
    assert failed["failed_task"] == "ps_0" and "(--fault kill after measured step" in failed["reason"]


@pytest.mark.slow
@pytest.mark.parametrize("strategy,task", [("multi_worker_mirrored", "worker_1"), ("parameter_server", "ps_0")])
def test_a_killed_task_restarts_every_task_from_the_last_checkpoint(logdir, strategy, task):
    out, run = run_tiny(logdir, "fault_ckpt", f"--strategy={strategy}", "--num_workers=2",
                        "--image_size=32", "--batch_size=16", "--num_steps=200", "--checkpoint_every=50",
                        f"--fault={task}:kill@60")
    record = cluster_record(run)
    (fault,) = record["faults"]
    assert fault["cluster_restarted_wall"] >= fault["wall"]
    (recovery,) = record["recovery"]
    # the last checkpoint before the kill (2 warm-up steps); the injector sees a task's step through
    # its progress file, polled, so a fast task may pass one more checkpoint before SIGKILL lands
    restored = recovery["restored_from_step"]
    assert restored % 50 == 0 and 50 <= restored <= 2 + fault["applied_at_measured_step"] + 50
    # (then nothing is done again: the record counts no step below 0)
    assert recovery["steps_redone"] == max(0, 2 + fault["applied_at_measured_step"] - restored)
    assert recovery["time_to_resume_s"] > 0
    tasks = [r for r in records(run) if r["kind"] == "task"]
    trained = [r for r in tasks if r.get("cluster_steps")] or tasks  # PS: the coordinator's rounds
    assert {r["restored_from_step"] for r in trained} == {restored}
    # measured after the restore: every step from the restored one on, less the re-traced first
    assert all(r["num_measured_steps"] == 202 - restored - 1 for r in trained)
    assert "every task restarted from the last checkpoint" in out
