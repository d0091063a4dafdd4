"""A shared run (tests/clusters.py) whose task died of a memory fault inside a native library is
launched once more, with a warning carrying the first launch's output; any other failure, and a
second crash, fail the tests that read it."""
import pytest

from clusters import Clusters, Launched, crashed_task

CRASH = ("tfbench: all 3 measuring tasks ready after 10.7 s\n"
         "tfbench: run failed: chief_0 exited with code -11 (SIGSEGV)\n"
         "tfbench: last 2 lines of /x/tasks/chief_0.log:\n    Fatal Python error: Segmentation fault\n")


def launches(monkeypatch, outcomes):
    """Clusters whose launches return `outcomes` in turn; the directories they were given."""
    asked = []

    def launch_once(self, name, directory):
        asked.append(directory)
        return outcomes[len(asked) - 1]

    monkeypatch.setattr(Clusters, "_launch_once", launch_once)
    return Clusters("/nonexistent"), asked


def test_a_memory_fault_is_launched_once_more_with_the_crash_shown(monkeypatch):
    ran = Launched("dlrm_ps_sync_emulated", "ok", "/run", None)
    clusters, asked = launches(monkeypatch, [f"scenario dlrm_ps_sync_emulated exited 1:\n{CRASH}", ran])
    with pytest.warns(UserWarning, match=r"chief_0 exited with code -11 \(SIGSEGV\); launched once more") as seen:
        assert clusters["dlrm_ps_sync_emulated"] is ran
    assert "Fatal Python error: Segmentation fault" in str(seen[0].message)
    assert asked == ["dlrm_ps_sync_emulated", "dlrm_ps_sync_emulated-again"]


def test_a_second_crash_fails(monkeypatch):
    clusters, asked = launches(monkeypatch, [f"exited 1:\n{CRASH}", f"exited 1:\n{CRASH}"])
    with pytest.warns(UserWarning), pytest.raises(pytest.fail.Exception, match="SIGSEGV"):
        clusters["dlrm_ps_sync_emulated"]
    assert len(asked) == 2


@pytest.mark.parametrize("output", [
    "tfbench: run failed: worker_1 exited with code -9 (SIGKILL)",  # killed: a fault test's or the OS's
    "tfbench: run failed: chief_0: InvalidArgumentError: Received a label value of 50",
    "scenario x left processes behind: [123]",
])
def test_any_other_failure_is_not_launched_again(monkeypatch, output):
    assert crashed_task(output) is None
    clusters, asked = launches(monkeypatch, [output])
    with pytest.raises(pytest.fail.Exception):
        clusters["dlrm_ps_sync_emulated"]
    assert len(asked) == 1


def test_the_crash_line_names_the_task_and_its_signal():
    assert crashed_task(CRASH) == "chief_0 exited with code -11 (SIGSEGV)"
    assert crashed_task("tfbench: run failed: worker_0 exited with code -7 (SIGBUS)") == \
        "worker_0 exited with code -7 (SIGBUS)"
