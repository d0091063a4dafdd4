"""The summary's generated sentences, from runs whose rates are known in advance (see
tests/test_scaling_plots.py for the grid: MWMS 32, 40, 64 and PS 26.67, 32, 25.6 images/sec at
1, 2 and 4 workers)."""
import pytest

from tests.report_runs import points_of, write_run
from tests.test_scaling_plots import STEPS, write_grid
from tools.report import findings, summary

TRAIN = "train, batch 16/replica"


@pytest.fixture
def grid(tmp_path):
    write_grid(tmp_path)
    return points_of(tmp_path)


def test_fastest_at_each_worker_count_efficiency_and_where_gains_stop(grid):
    assert findings.findings(grid) == [(TRAIN, [
        "At 1 worker multi_worker_mirrored is fastest (32.0 images/sec, 1.20× parameter_server).",
        "At 2 workers multi_worker_mirrored is fastest (40.0 images/sec, 1.25× parameter_server).",
        "At 4 workers multi_worker_mirrored is fastest (64.0 images/sec, 2.50× parameter_server).",
        "Scaling efficiency at 4 workers: multi_worker_mirrored 50%, parameter_server 24%.",
        "multi_worker_mirrored gains at every step up to 4 workers (2 → 4: 1.60× the images/sec).",
        "parameter_server stops gaining after 2 workers (4 workers: 25.6 vs 32.0 images/sec).",
    ])]


def test_the_summary_carries_the_findings(grid):
    text = summary.render("t", grid, [], [], [], num_runs=6)
    assert "## Findings\n\n- At 1 worker multi_worker_mirrored is fastest" in text
    assert text.index("## Findings") < text.index("## Results")


def test_one_worker_count_cannot_judge_scaling(tmp_path):
    write_grid(tmp_path, {"multi_worker_mirrored": {2: 0.8}, "parameter_server": {2: 1.0}})
    assert findings.findings(points_of(tmp_path)) == [(TRAIN, [
        "At 2 workers multi_worker_mirrored is fastest (40.0 images/sec, 1.25× parameter_server).",
        "Only 2 workers measured: scaling cannot be judged.",
    ])]


def test_a_later_rise_is_not_hidden_by_a_stall(tmp_path):
    write_grid(tmp_path, {"parameter_server": {1: 0.5, 2: 1.25, 4: 1.0}})
    assert findings.findings(points_of(tmp_path))[0][1][-1] == (
        "parameter_server stops gaining after 1 worker (2 workers: 25.6 vs 32.0 images/sec), "
        "but is faster again at 4 (64.0 images/sec).")


def test_repeats_whose_intervals_overlap_are_not_called_different(tmp_path):
    """MWMS repeats agree (32 and 64 images/sec at 1 and 2 workers); PS repeats lie 0.2 s apart in
    step time (about 39 and 26 images/sec at 1 worker, 36 and 30 at 2): wide intervals whether
    they are taken within runs or across them."""
    for offset, prefix in ((-0.1, "a-"), (0.1, "b-")):
        write_grid(tmp_path, {"multi_worker_mirrored": {1: 0.5, 2: 0.5},
                              "parameter_server": {1: 0.51 + offset, 2: 0.98 + offset}}, prefix=prefix)
    sentences = findings.findings(points_of(tmp_path))[0][1]
    assert sentences[0].startswith("At 1 worker ") and "parameter_server" in sentences[0]
    assert sentences[0].endswith("lie within each other's 95% intervals: neither is clearly fastest.")
    assert sentences[-2].startswith("multi_worker_mirrored gains at every step up to 2 workers")
    assert sentences[-1].startswith("parameter_server gains nothing beyond its 95% intervals from 1 to 2 workers")


def test_efficiency_without_a_comparable_one_worker_point_says_so(tmp_path):
    write_grid(tmp_path, {"multi_worker_mirrored": {2: 0.8, 4: 1.0}})
    write_run(str(tmp_path), "ps-w1", "parameter_server", 1, 0.6)
    write_run(str(tmp_path), "ps-w4", "parameter_server", 4, 2.5)
    sentences = findings.findings(points_of(tmp_path))[0][1]
    assert "Scaling efficiency at 4 workers: parameter_server 24%." in sentences
    assert ("Scaling efficiency at 4 workers cannot be computed for multi_worker_mirrored: "
            "no comparable 1-worker point.") in sentences


def test_one_section_per_mode(tmp_path):
    write_grid(tmp_path)
    write_grid(tmp_path, prefix="fwd-", mode="forward")
    titles = [title for title, _ in findings.findings(points_of(tmp_path))]
    assert titles == [TRAIN, "forward, batch 16/replica"]
    lines = summary.findings_section(points_of(tmp_path))
    assert lines[0] == f"**{TRAIN}**" and "**forward, batch 16/replica**" in lines


@pytest.fixture
def mirrored(tmp_path):
    write_run(str(tmp_path), "mirrored-d1", "mirrored", 1, 0.5, devices=1)
    write_run(str(tmp_path), "mirrored-d2", "mirrored", 1, 0.5, devices=2)
    return points_of(tmp_path)


def test_mirrored_sentences_speak_of_local_devices(mirrored):
    assert findings.findings(mirrored)[0][1] == [
        "Scaling efficiency at 2 local devices: mirrored 100%.",
        "mirrored gains at every step up to 2 local devices (1 → 2: 2.00× the images/sec).",
    ]


def test_strategies_that_keep_gaining_share_one_sentence(tmp_path):
    write_grid(tmp_path, {**STEPS, "horovod": {1: 0.5, 2: 0.6, 4: 0.8}})
    sentences = findings.findings(points_of(tmp_path))[0][1]
    assert ("multi_worker_mirrored and horovod gain at every step up to 4 workers "
            "(2 → 4: multi_worker_mirrored 1.60×, horovod 1.50× the images/sec).") in sentences
    assert "Scaling efficiency at 4 workers: horovod 62%, multi_worker_mirrored 50%, parameter_server 24%." in sentences


def test_rates_within_half_a_percent_are_level(tmp_path):
    write_grid(tmp_path, {"multi_worker_mirrored": {2: 0.8}, "parameter_server": {2: 0.801}})
    assert findings.findings(points_of(tmp_path))[0][1][0] == (
        "At 2 workers multi_worker_mirrored and parameter_server are level (40.0 images/sec and 40.0).")


def test_no_strategy_is_called_fastest_on_defaults_this_machine_never_tuned(tmp_path):
    """make run on a machine with no tuning of its own: a strategy measured at its defaults because
    it was not tuned here is ranked by its defaults, and the sentence says so instead of crowning."""
    from tfbench.results import tuned

    write_grid(tmp_path, {"multi_worker_mirrored": {2: 0.8}}, extra_config={"knob_source": tuned.NOT_TUNED_HERE})
    write_grid(tmp_path, {"parameter_server": {2: 1.0}})
    (first, *_), = [sentences for _, sentences in findings.findings(points_of(tmp_path))]
    assert first == ("At 2 workers multi_worker_mirrored ran at its defaults, not tuned on this machine, so no "
                     "strategy is called fastest: the defaults decide this order, multi_worker_mirrored first "
                     "(40.0 images/sec, 1.25× parameter_server).")
    assert "is fastest" not in " ".join(s for _, ss in findings.findings(points_of(tmp_path)) for s in ss)
