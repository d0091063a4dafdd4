"""The one step loop (tfbench.loop.step_loop), driven with fake steps: which steps are measured,
where a restore resumes, the order of hooks, step and reporter, the measuring callback, and a
step whose tail raises after it is done (a Horovod elastic commit). And that no other module
of tfbench or strategies runs a step loop of its own."""
import os
import re

import pytest

from conftest import ROOT
from tfbench.config import RunConfig
from tfbench.loop.step_loop import StepLoop, StepTiming, Timed, first_measured_step


class Events:
    """Hooks and reporter that write down what the loop called, in order."""

    def __init__(self):
        self.seen = []

    def before(self, i):
        self.seen.append(("before", i))

    def after(self, i):
        self.seen.append(("after", i))

    def step_done(self, i, timing, measured):
        self.seen.append(("report", i, measured))

    def step(self, i):
        self.seen.append(("step", i))
        return f"kept {i}"


def config(warmup=2, steps=3):
    return RunConfig(num_warmup_steps=warmup, num_steps=steps)


def test_warmup_steps_are_run_and_reported_but_not_measured():
    events = Events()
    loop = StepLoop(config(2, 3), reporter=events, hooks=events)
    done = loop.run(events.step)
    assert [d.index for d in done] == [0, 1, 2, 3, 4]
    assert [d.measured for d in done] == [False, False, True, True, True]
    assert len(loop.timings) == 3 and all(t.duration_s >= 0 for t in loop.timings)
    assert loop.kept() == ["kept 2", "kept 3", "kept 4"] and loop.kept(measured=False) == ["kept 0", "kept 1"]


def test_hooks_sit_around_the_step_and_the_reporter_comes_after_them():
    events = Events()
    StepLoop(config(1, 1), reporter=events, hooks=events).run(events.step)
    assert events.seen == [("before", 0), ("step", 0), ("after", 0), ("report", 0, False),
                           ("before", 1), ("step", 1), ("after", 1), ("report", 1, True)]


def test_the_loop_times_a_step_from_just_before_it_to_its_return():
    import time

    loop = StepLoop(config(1, 2), hooks=type("Slow", (), {"before": lambda s, i: time.sleep(0.2),
                                                           "after": lambda s, i: time.sleep(0.2)})())
    loop.run(lambda i: time.sleep(0.01))
    assert all(0.01 <= t.duration_s < 0.2 for t in loop.timings)  # the hooks are outside


def test_a_restore_resumes_at_its_step_and_its_first_step_is_not_measured():
    events = Events()
    loop = StepLoop(config(2, 4), first_step=3, reporter=events)
    done = loop.run(events.step)
    assert [d.index for d in done] == [3, 4, 5]
    assert [d.measured for d in done] == [False, True, True]
    assert loop.first_measured == 4 == first_measured_step(config(2, 4), 3)
    assert first_measured_step(config(2, 4), 0) == 2 and first_measured_step(config(5, 4), 1) == 5


def test_the_first_warmup_step_runs_through_first_warmup_only_before_the_warmup_ends():
    probed = []

    def probe(run_step):
        probed.append("probe")
        return run_step()

    events = Events()
    StepLoop(config(2, 2)).run(events.step, first_warmup=probe)
    assert probed == ["probe"] and [s for s in events.seen if s[0] == "step"] == [("step", i) for i in range(4)]
    probed.clear()
    StepLoop(config(3, 2), first_step=1).run(events.step, first_warmup=probe)  # resumed inside the warm-up
    assert probed == ["probe"]
    probed.clear()
    StepLoop(config(2, 3), first_step=3).run(events.step, first_warmup=probe)  # resumed past it
    assert probed == []


def test_the_measuring_callback_runs_once_before_the_first_measured_steps_hooks():
    events = Events()
    loop = StepLoop(config(2, 2), hooks=events, on_measure_start=lambda: events.seen.append(("measuring",)))
    loop.run(events.step)
    assert events.seen.count(("measuring",)) == 1
    at = events.seen.index(("measuring",))
    assert events.seen[at - 1] == ("after", 1) and events.seen[at + 1] == ("before", 2)


def test_a_step_that_times_itself_keeps_its_timing_and_what_it_returned():
    events = Events()

    def step(i):
        return Timed(StepTiming(100.0 + i, 0.5 * i), {"round": i})

    loop = StepLoop(config(1, 2), reporter=events)
    loop.run(step)
    assert loop.timings == [StepTiming(101.0, 0.5), StepTiming(102.0, 1.0)]
    assert loop.kept() == [{"round": 1}, {"round": 2}]
    assert events.seen == [("report", 0, False), ("report", 1, True), ("report", 2, True)]


class NewHosts(Exception):
    pass


def test_a_step_whose_tail_raises_after_it_is_done_is_recorded_and_the_loop_resumes():
    events = Events()
    loop = StepLoop(config(1, 4), first_step=0, reporter=events, hooks=events)
    committed = []

    def commit(i):
        committed.append(i)
        if i == 2 and committed.count(2) == 1:
            raise NewHosts("hosts changed")

    with pytest.raises(NewHosts):
        loop.run(events.step, finish=commit)
    assert events.seen[-3:] == [("step", 2), ("after", 2), ("report", 2, True)]
    assert [d.index for d in loop.done] == [0, 1, 2]
    loop.run(events.step, start=3, finish=commit)  # the committed step after the reset
    assert [d.index for d in loop.done] == [0, 1, 2, 3, 4]
    assert [d.index for d in loop.done if d.measured] == [1, 2, 3, 4]


def test_a_step_that_raises_itself_is_not_recorded():
    events = Events()
    loop = StepLoop(config(1, 2), reporter=events, hooks=events)

    def step(i):
        if i == 1:
            raise RuntimeError("collective failed")

    with pytest.raises(RuntimeError):
        loop.run(step)
    assert [d.index for d in loop.done] == [0] and ("after", 1) not in events.seen


def test_step_scalars_are_written_at_each_steps_end():
    written = []

    class Reporter(Events):
        events = type("Writer", (), {"scalars": lambda s, values, step, wall_time: written.append((values, wall_time))})()

        def step_axis(self, wall):
            return int(wall)

    StepLoop(config(1, 1), reporter=Reporter(), step_scalars=lambda d: {"perf/ranks": d.index + 2}).run(
        lambda i: Timed(StepTiming(10.0, 1.0), None))
    assert written == [({"perf/ranks": 2}, 11.0), ({"perf/ranks": 3}, 11.0)]


# -- one loop only --------------------------------------------------------------------------
LOOP_MODULE = "tfbench/loop/step_loop.py"
# what only the loop decides or calls: the first measured step, the reporter's step, the hooks
OWN = re.compile(r"\bfirst_measured_step\s*\(|\.step_done\s*\(|\bhooks\.(before|after)\s*\(")


def test_only_the_step_loop_decides_the_measured_steps_and_calls_hooks_and_reporter():
    found = []
    for package in ("tfbench", "strategies"):
        for root, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                rel = os.path.relpath(os.path.join(root, name), ROOT)
                if not name.endswith(".py") or rel == LOOP_MODULE:
                    continue
                for number, line in enumerate(open(os.path.join(root, name), encoding="utf-8"), 1):
                    if OWN.search(line):
                        found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "a step loop outside tfbench/loop/step_loop.py:\n" + "\n".join(found)


def test_the_checker_sees_a_loop_of_its_own():
    assert OWN.search("first = benchmark.first_measured_step(config, 3)")
    assert OWN.search("        self.reporter.step_done(i, timing, measured)")
    assert OWN.search("    if hooks: hooks.before(i)") and OWN.search("hooks.after(i)")
    assert not OWN.search("loop.first_measured") and not OWN.search("hook.before(i)")


def test_a_reporter_writes_progress_at_each_phase_start_and_the_last_step_not_every_fast_step(tmp_path, monkeypatch):
    """Steps of a millisecond: the progress file is replaced at most once per PROGRESS_EVERY_S in a
    phase, at once when the phase changes, and at the run's last step, which the file ends with."""
    from tfbench.loop import benchmark, progress

    writes = []
    real = progress.write_progress
    monkeypatch.setattr(progress, "write_progress", lambda *a: (writes.append(a[2:4]), real(*a)))
    os.makedirs(tmp_path / "tasks")
    cfg = config(warmup=300, steps=700)
    reporter = benchmark.Reporter(str(tmp_path), "chief_0", str(tmp_path / "tb"), cfg, examples_per_step=32)
    clock = [0.0]
    monkeypatch.setattr(benchmark.time, "monotonic", lambda: clock[0])
    for i in range(cfg.total_steps):
        clock[0] += 0.001  # a millisecond a step: one second in all
        reporter.step_done(i, StepTiming(1e9 + clock[0], 0.001), measured=i >= 300)
    reporter.close()
    assert writes[0] == ("warmup", 1) and ("measure", 301) in writes  # each phase's first step at once
    assert writes[-1] == ("measure", 1000) == tuple(progress.read_progress(str(tmp_path), "chief_0")[k]
                                                    for k in ("phase", "step"))
    assert len(writes) <= 1.0 / benchmark.PROGRESS_EVERY_S + 3  # not 1000
    steps = [s for _, s in writes]
    assert steps == sorted(steps) and len(writes) >= 1.0 / benchmark.PROGRESS_EVERY_S - 1  # still moving
