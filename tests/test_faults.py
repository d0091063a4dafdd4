"""Injected faults (--fault): parsed and refused before anything starts; applied by the launcher
at the chosen measured step; a killed parameter-server worker is restarted at its address and
the run completes with its recovery measured; any other fault ends the run naming the fault,
with nothing left running."""
import pytest

from conftest import TINY, run_cli
from tfbench import faults
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
    out, run = run_tiny(logdir, "fault_ps", *PS, mode, "--num_steps=200", "--fault=worker_1:kill@5")
    record = cluster_record(run)
    (fault,) = record["faults"]
    assert fault["task"] == "worker_1" and fault["signal"] == "SIGKILL" and fault["applied_at_measured_step"] >= 5
    assert fault["restarted_wall"] >= fault["wall"] and fault["ready_wall"] > fault["restarted_wall"]
    (recovery,) = record["recovery"]
    assert recovery["time_to_ready_s"] == pytest.approx(fault["ready_wall"] - fault["wall"])
    assert recovery["images_per_sec_before"] > 0 and recovery["images_per_sec_during"] is not None
    assert recovery["time_to_first_update_s"] >= recovery["time_to_ready_s"] > 0  # back at work after restart
    assert recovery["images_per_sec_after"] > 0
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
