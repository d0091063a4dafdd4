"""The scaling plots read back from their matplotlib figures: which lines, which points, labels.

Runs (per-replica batch 16, rate = 16 × replicas / step seconds):
  multi_worker_mirrored  1, 2, 4 workers: 0.5, 0.8, 1.0 s steps -> 32, 40, 64 images/sec
  parameter_server       1, 2, 4 workers: 0.6, 1.0, 2.5 s steps -> 26.67, 32, 25.6 images/sec
"""
import os

import matplotlib.pyplot as plt
import pytest

from tests.report_runs import points_of, write_run
from tools.report import cli as report
from tools.report import plots

STEPS = {"multi_worker_mirrored": {1: 0.5, 2: 0.8, 4: 1.0}, "parameter_server": {1: 0.6, 2: 1.0, 4: 2.5}}
RATES = {"multi_worker_mirrored": [32.0, 40.0, 64.0], "parameter_server": [80 / 3, 32.0, 25.6]}


def write_grid(root, steps=STEPS, prefix="", **kwargs):
    for strategy, by_workers in steps.items():
        for workers, step_s in by_workers.items():
            write_run(str(root), f"{prefix}{strategy}-w{workers}", strategy, workers, step_s, **kwargs)


@pytest.fixture
def grid(tmp_path):
    write_grid(tmp_path)
    return points_of(tmp_path)


def series_lines(ax):
    """The data lines of one panel (ideal-scaling lines and error bars left out)."""
    return [line for line in ax.get_lines() if line.get_gid() == "series"]


def drawn(fig):
    """{panel title: {label: (xs, ys)}} of every visible panel."""
    return {ax.get_title(): {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
                             for line in series_lines(ax)}
            for ax in fig.axes if ax.get_visible()}


def legend_labels(fig):
    return [t.get_text() for t in fig.legends[0].get_texts()]


def test_throughput_has_one_line_per_strategy_across_workers(grid):
    fig = plots.throughput_figure(grid)
    panels = drawn(fig)
    assert list(panels) == ["train, batch 16/replica"]
    lines = panels["train, batch 16/replica"]
    assert list(lines) == ["multi_worker_mirrored", "parameter_server"]
    for strategy, (xs, ys) in lines.items():
        assert xs == [1, 2, 4]
        assert ys == pytest.approx(RATES[strategy])
    assert legend_labels(fig)[:2] == ["multi_worker_mirrored", "parameter_server"]
    assert fig.axes[0].get_xlabel() == "workers" and fig.axes[0].get_ylabel() == "cluster images/sec"
    plt.close(fig)


def test_throughput_draws_ideal_scaling_from_each_lines_one_worker_rate(grid):
    fig = plots.throughput_figure(grid)
    ax = fig.axes[0]
    ideal = [line for line in ax.get_lines() if line.get_gid() == "ideal"]
    assert len(ideal) == 2
    for line, strategy in zip(ideal, ["multi_worker_mirrored", "parameter_server"]):
        assert list(line.get_xdata()) == [1, 2, 4]
        assert list(line.get_ydata()) == pytest.approx([RATES[strategy][0] * n for n in (1, 2, 4)])
        assert line.get_linestyle() == "--"
    assert any(label.startswith("ideal:") for label in legend_labels(fig))
    assert ax.get_xscale() == "log"  # 1, 2, 4: doubling sizes evenly spaced
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4"]
    plt.close(fig)


def test_efficiency_has_one_line_per_strategy_in_percent(grid):
    fig = plots.efficiency_figure(grid)
    lines = drawn(fig)["train, batch 16/replica"]
    assert list(lines) == ["multi_worker_mirrored", "parameter_server"]
    assert lines["multi_worker_mirrored"][1] == pytest.approx([1.0, 40 / 64, 0.5])
    assert lines["parameter_server"][1] == pytest.approx([1.0, 32 / (2 * 80 / 3), 25.6 / (4 * 80 / 3)])
    assert fig.axes[0].get_ylim()[0] == 0
    plt.close(fig)


def test_report_writes_the_line_plots(grid, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert plots.throughput_vs_workers(grid, str(out / "t.png"))
    assert plots.scaling_efficiency(grid, str(out / "e.png"))
    assert (out / "t.png").read_bytes()[:4] == b"\x89PNG"


def test_other_differing_axes_get_lines_of_their_own(tmp_path):
    write_grid(tmp_path)
    write_grid(tmp_path, {"multi_worker_mirrored": {1: 0.7, 2: 1.0, 4: 1.4}}, prefix="hard-", placement="hard")
    lines = drawn(plots.throughput_figure(points_of(tmp_path)))["train, batch 16/replica"]
    assert sorted(lines) == ["multi_worker_mirrored (placement=hard)", "multi_worker_mirrored (placement=soft)",
                             "parameter_server"]  # placement tells apart MWMS lines only
    assert all(xs == [1, 2, 4] for xs, _ in lines.values())
    plt.close("all")


def test_a_config_key_tfbench_does_not_know_yet_is_an_axis_too(tmp_path):
    """E.g. a link bandwidth: every key that really differs splits lines, nothing else does."""
    for link in (1000, 200):
        write_grid(tmp_path, prefix=f"l{link}-", extra_config={"link_mbit": link})
    lines = drawn(plots.throughput_figure(points_of(tmp_path)))["train, batch 16/replica"]
    assert list(lines) == ["multi_worker_mirrored (link_mbit=200)", "multi_worker_mirrored (link_mbit=1000)",
                           "parameter_server (link_mbit=200)", "parameter_server (link_mbit=1000)"]
    assert all(len(xs) == 3 for xs, _ in lines.values())
    plt.close("all")


def test_mirrored_devices_share_the_workers_axis(tmp_path):
    write_grid(tmp_path, {"multi_worker_mirrored": {1: 0.5, 2: 0.8}})
    write_run(str(tmp_path), "mirrored-d1", "mirrored", 1, 0.5, devices=1)
    write_run(str(tmp_path), "mirrored-d2", "mirrored", 1, 0.6, devices=2)
    fig = plots.throughput_figure(points_of(tmp_path))
    lines = drawn(fig)["train, batch 16/replica"]
    assert list(lines) == ["mirrored", "multi_worker_mirrored"]
    assert lines["mirrored"] == ([1, 2], pytest.approx([32.0, 32 / 0.6]))
    assert fig.axes[0].get_xlabel() == "workers (mirrored: local devices)"
    plt.close(fig)


def test_each_mode_and_batch_is_a_panel_with_the_same_colours(tmp_path):
    write_grid(tmp_path)
    write_grid(tmp_path, prefix="fwd-", mode="forward")
    fig = plots.throughput_figure(points_of(tmp_path))
    panels = drawn(fig)
    assert list(panels) == ["train, batch 16/replica", "forward, batch 16/replica"]
    assert all(list(lines) == ["multi_worker_mirrored", "parameter_server"] for lines in panels.values())
    colours = [{line.get_label(): line.get_color() for line in series_lines(ax)} for ax in fig.axes if ax.get_visible()]
    assert colours[0] == colours[1]
    assert len(fig.legends) == 1  # one legend beside the panels, none over the data
    assert all(ax.get_legend() is None for ax in fig.axes)
    plt.close(fig)


def test_error_bars_only_from_repeats(tmp_path):
    write_grid(tmp_path)
    fig = plots.throughput_figure(points_of(tmp_path))
    assert not fig.axes[0].collections and "no error bars" in fig.get_suptitle()
    plt.close(fig)
    write_grid(tmp_path, {"multi_worker_mirrored": {1: 0.55, 2: 0.9, 4: 1.2}}, prefix="again-")
    fig = plots.throughput_figure(points_of(tmp_path))
    bars = fig.axes[0].collections
    assert len(bars) == 1  # the repeated strategy only
    assert len(bars[0].get_segments()) == 3
    assert "95% CI across repeats" in fig.get_suptitle()
    plt.close(fig)


def test_one_worker_count_gives_bars_per_strategy_and_no_efficiency_plot(tmp_path):
    write_grid(tmp_path, {"multi_worker_mirrored": {2: 0.8}, "parameter_server": {2: 1.0}})
    points = points_of(tmp_path)
    fig = plots.throughput_figure(points)
    ax = fig.axes[0]
    assert not series_lines(ax)
    assert [bar.get_height() for bar in ax.patches] == pytest.approx([40.0, 32.0])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["multi_worker_mirrored\n2 workers",
                                                            "parameter_server\n2 workers"]
    assert "no scaling curve" in fig.get_suptitle()
    plt.close(fig)
    assert plots.efficiency_figure(points) is None  # nothing at 1 worker to compare with
    assert not plots.scaling_efficiency(points, str(tmp_path / "e.png"))
    assert not os.path.exists(tmp_path / "e.png")


def test_step_time_has_one_line_per_strategy_across_batch_sizes(tmp_path):
    for batch in (16, 32):
        write_grid(tmp_path, {s: {w: t * batch / 16 for w, t in by.items() if w < 4} for s, by in STEPS.items()},
                   prefix=f"b{batch}-", batch_size=batch)
    fig = plots.step_time_figure(points_of(tmp_path))
    panels = drawn(fig)
    assert list(panels) == ["train, 1 worker", "train, 2 workers"]
    assert panels["train, 2 workers"] == {"multi_worker_mirrored": ([16, 32], pytest.approx([0.8, 1.6])),
                                          "parameter_server": ([16, 32], pytest.approx([1.0, 2.0]))}
    assert fig.axes[0].get_xlabel() == "batch per replica (images)"
    plt.close(fig)


def test_rates_ten_times_apart_get_a_log_axis(tmp_path):
    write_grid(tmp_path, {"multi_worker_mirrored": {1: 0.05, 2: 0.1}, "parameter_server": {1: 0.6, 2: 1.0}})
    fig = plots.throughput_figure(points_of(tmp_path))
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "cluster images/sec (log scale)"
    assert ax.get_xscale() == "linear"  # 1 and 2 workers: nothing to gain from log2
    plt.close(fig)


def test_a_strategy_keeps_its_colour_in_every_figure(tmp_path):
    write_grid(tmp_path)
    write_run(str(tmp_path), "default-w1", "default", 1, 0.45)  # in the throughput plot, not in efficiency
    points = points_of(tmp_path)
    figures = [plots.throughput_figure(points), plots.efficiency_figure(points)]
    colours = [{line.get_label(): line.get_color() for line in series_lines(fig.axes[0])} for fig in figures]
    assert "default" in colours[0] and "default" not in colours[1]
    assert colours[1] == {k: v for k, v in colours[0].items() if k != "default"}
    plt.close("all")


def test_a_report_of_one_worker_count_still_has_its_throughput_plot(tmp_path):
    """`make run` sweeps 2 workers only; CI expects the report to hold a plot."""
    write_grid(tmp_path / "runs", {"multi_worker_mirrored": {2: 0.8}, "parameter_server": {2: 1.0}})
    rep = report.build(str(tmp_path / "runs"), str(tmp_path / "out"))
    assert sorted(p.name for p in (tmp_path / "out").glob("*.png")) == ["throughput_vs_workers.png"]
    assert "(throughput_vs_workers.png)" in rep.markdown
    assert "- Only 2 workers measured: scaling cannot be judged." in rep.markdown
