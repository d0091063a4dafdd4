"""The report's embedding-table section (tools.report.sparse_section) on hand-made recommender runs:
the rows a step touches and moves, and where the parameter server overtakes all-gather."""
from report_runs import points_of, write_run
from tools.report import sparse_section

SPARSE = {"tables": 2, "lookups_per_step": 32, "unique_rows_per_shard": [20, 24], "unique_rows_all_shards": 40,
          "row_bytes": 64, "wire_by_rule": {"rule": "all-gather: each host receives the rows of the N - 1 others",
                                    "per_host_step_bytes": 2000.0}}
RECOMMENDER = {"model": "dlrm"}


def test_the_section_finds_the_crossover_per_setting(tmp_path):
    # examples/sec = 16 x workers / step: all-gather wins at 2 workers, the parameter server at 4 and 8
    for strategy, steps in (("multi_worker_mirrored", {2: 0.10, 4: 0.30, 8: 0.90}),
                            ("parameter_server", {2: 0.20, 4: 0.25, 8: 0.40})):
        for n, step in steps.items():
            write_run(str(tmp_path), f"{strategy}-{n}", strategy, n, step, extra_config=RECOMMENDER,
                      task_extra={"sparse": SPARSE})
    write_run(str(tmp_path), "images", "multi_worker_mirrored", 2, 0.1)  # no tables: not in the section
    lines = sparse_section.section(points_of(tmp_path))
    text = "\n".join(lines)
    assert "## Embedding tables: where the parameter server earns its place" in text
    assert text.count("| multi_worker_mirrored |") == 3 and text.count("| parameter_server |") == 3
    assert "| 22 |" in text and "0.002 MB per host (all-gather)" in text
    (crossing,) = [line for line in lines if line.startswith("- ")]
    assert "crossover at 4 workers: the parameter server is faster from there on" in crossing
    assert "2: 0.50x" in crossing and "8: 2.25x" in crossing


def test_a_parameter_server_that_never_wins_is_said_so(tmp_path):
    for strategy, step in (("horovod", 0.1), ("parameter_server", 0.3)):
        write_run(str(tmp_path), strategy, strategy, 2, step, extra_config=RECOMMENDER, task_extra={"sparse": SPARSE})
    (line,) = [x for x in sparse_section.section(points_of(tmp_path)) if x.startswith("- ")]
    assert "never overtakes the fastest all-reduce strategy" in line and "2: 0.33x" in line


def test_no_tables_no_section(tmp_path):
    write_run(str(tmp_path), "r", "multi_worker_mirrored", 2, 0.1)
    assert sparse_section.section(points_of(tmp_path)) == []


def test_a_ps_per_worker_is_one_line_across_worker_counts(tmp_path):
    from tools.report import plot_lines

    for n in (2, 4):
        write_run(str(tmp_path), f"ps-{n}", "parameter_server", n, 0.2, extra_config={**RECOMMENDER, "num_ps": n})
        write_run(str(tmp_path), f"mwms-{n}", "multi_worker_mirrored", n, 0.1, extra_config=RECOMMENDER)
    points = points_of(tmp_path)
    assert plot_lines.ps_per_worker(points)
    (panel,) = plot_lines.panels(points, x=plot_lines.SCALE, panel_keys=(), primary="strategy")
    assert sorted((line.label, len(line.points)) for line in panel.lines) == [("multi_worker_mirrored", 2),
                                                                              ("parameter_server", 2)]


def test_tables_on_ps_beside_all_reduced_dense_layers_are_held_against_the_better_of_both(tmp_path):
    # examples/sec = 16 x workers / step; at 2 workers the better one is all-gather (0.10 s), at 4 the ps
    for strategy, steps in (("multi_worker_mirrored", {2: 0.10, 4: 0.30}), ("parameter_server", {2: 0.20, 4: 0.25}),
                            ("hybrid", {2: 0.08, 4: 0.50})):
        for n, step in steps.items():
            write_run(str(tmp_path), f"{strategy}-{n}", strategy, n, step, extra_config=RECOMMENDER,
                      task_extra={"sparse": SPARSE})
    lines = [x for x in sparse_section.section(points_of(tmp_path)) if x.startswith("- ")]
    crossing, split = lines
    assert "crossover at 4 workers" in crossing  # the parameter server's verdict leaves the hybrid out
    assert "better of the parameter server and all-reduce" in split and "2: 1.25x" in split and "4: 0.50x" in split
