"""Saved tunings know their machine (tfbench.results.tuned, tfbench.measure.machine): one saved on
another machine is never applied here; the sweep measures the defaults and its notes and table say
so; the shipped store names machines and holds no path of the one it was made on."""
import json
import os

import pytest

from conftest import ROOT, run_cli
from tfbench.config import RunConfig
from tfbench.config.errors import ConfigError
from tfbench.measure import machine
from tfbench.results import tuned
from tools.report import summary
from tools.sweep import grid as grid_lib

MIB = 1 << 20
OTHER = "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz | 16 cpus | no GPU | tensorflow 2.21.0"
SETTING = dict(strategy="multi_worker_mirrored", num_workers=2, model="tiny", image_size=16, batch_size=4,
               cores_per_worker=1)
AXES = {"strategy": ["multi_worker_mirrored"], "num_workers": [2], "model": ["tiny"], "image_size": [16],
        "batch_size": [4], "fixed": {"cores_per_worker": 1}}


def write_store(path, machine_key, knobs):
    entry = {"knobs": knobs, "measured": "2026-11-27", "tfbench_commit": "abc1234", "tune_run": "t"}
    path.write_text(json.dumps({machine_key: {tuned.setting_key(RunConfig(**SETTING).to_dict()):
                                              {"multi_worker_mirrored": entry}}}))


def test_the_machine_key_names_cpu_cpus_gpus_by_model_and_tensorflow():
    assert machine.accelerator([]) == "no GPU"
    lines = ["GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1a2b)", "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-3c4d)"]
    assert machine.accelerator(lines) == "2x NVIDIA A100-SXM4-40GB"  # no serial numbers
    ident = machine.identity(lines)
    assert machine.key(ident) == (f"{machine.cpu_model()} | {os.cpu_count()} cpus | 2x NVIDIA A100-SXM4-40GB | "
                                  f"tensorflow {ident['tensorflow']}")


@pytest.mark.parametrize("tuning", [["default", "best"], ["best"]])
def test_a_tuning_from_another_machine_is_not_applied_the_default_runs_and_says_so(tmp_path, monkeypatch, tuning):
    store = tmp_path / "tuned.json"
    monkeypatch.setenv(tuned.STORE_ENV, str(store))
    write_store(store, OTHER, {"mwms_bytes_per_pack": 4 * MIB})
    config = RunConfig(**SETTING)
    with pytest.raises(tuned.NotTunedHere, match="tuned for .* on Intel.*Gold 6338.*not on this machine"):
        tuned.best_knobs(config)
    points, notes = grid_lib.expand(grid_lib.Grid.from_dict({**AXES, "tuning": tuning}), str(tmp_path / "runs"))
    (point,) = points  # the default alone, never the other machine's 4 MiB packs
    assert not point.knobs and not point.id.endswith("-tuned-r0")
    flags = point.flags({})
    assert not any(f.startswith("--mwms_bytes_per_pack") for f in flags)
    assert f"--knob_source={grid_lib.NOT_TUNED_HERE}" in flags
    (note,) = [n for n in notes if grid_lib.NOT_TUNED_HERE in n]
    assert machine.key() in note and OTHER in note and "--tune" in note
    row = {**config.to_dict(), "knob_source": grid_lib.NOT_TUNED_HERE}
    assert summary.knobs_cell(row) == f"default ({grid_lib.NOT_TUNED_HERE})"  # the report's table says so


def test_this_machines_tuning_is_applied_beside_another_machines(tmp_path, monkeypatch):
    store = tmp_path / "tuned.json"
    monkeypatch.setenv(tuned.STORE_ENV, str(store))
    write_store(store, OTHER, {"mwms_bytes_per_pack": 32 * MIB})
    config = RunConfig(**SETTING)
    assert tuned.save(config.to_dict(), config.strategy, {"knobs": {"mwms_bytes_per_pack": 4 * MIB},
                                                          "measured": "2026-11-27", "tfbench_commit": "abc1234"}) \
        == machine.key()
    assert tuned.best_knobs(config) == {"mwms_bytes_per_pack": 4 * MIB}
    assert set(json.loads(store.read_text())) == {OTHER, machine.key()}  # the other machine's is kept
    points, notes = grid_lib.expand(grid_lib.Grid.from_dict({**AXES, "tuning": ["default", "best"]}),
                                    str(tmp_path / "runs"))
    assert [bool(p.knobs) for p in points] == [False, True]
    assert "--mwms_bytes_per_pack=4194304" in points[1].flags({})
    assert not [n for n in notes if grid_lib.NOT_TUNED_HERE in n]


def test_a_store_of_settings_without_machines_is_refused_with_one_line(tmp_path):
    store = tmp_path / "tuned.json"
    store.write_text(json.dumps({tuned.setting_key(RunConfig(**SETTING).to_dict()): {"multi_worker_mirrored": {}}}))
    with pytest.raises(ConfigError, match="keyed by setting alone, with no machine"):
        tuned.read(str(store))


def test_the_shipped_store_names_its_machines_and_no_path():
    with open(os.path.join(ROOT, "tools", "sweeps", "tuned.json"), encoding="utf-8") as f:
        store = json.load(f)
    assert store and all(" cpus | " in key and " | tensorflow " in key for key in store)

    def strings(value):
        if isinstance(value, dict):
            return [s for k, v in value.items() for s in [k, *strings(v)]]
        return [value] if isinstance(value, str) else []

    paths = [s for s in strings(store) if "/" in s or s.startswith("~")]
    assert not paths, paths


def test_a_sweep_that_tunes_on_the_spot_runs_what_it_could_not_tune_at_its_defaults(tmp_path, monkeypatch):
    """tune_budget_s: a setting tuned on no machine is no error; it runs at its defaults, labelled."""
    monkeypatch.setenv(tuned.STORE_ENV, str(tmp_path / "tuned.json"))
    monkeypatch.setenv(tuned.CACHE_ENV, str(tmp_path / "cache.json"))
    with pytest.raises(ConfigError, match="no saved tuning of multi_worker_mirrored"):
        grid_lib.expand(grid_lib.Grid.from_dict({**AXES, "tuning": ["default", "best"]}), str(tmp_path / "runs"))
    grid = grid_lib.Grid.from_dict({**AXES, "tuning": ["default", "best"], "tune_budget_s": 60})
    (point,), notes = grid_lib.expand(grid, str(tmp_path / "runs"))
    assert not point.knobs and point.knob_source == grid_lib.NOT_TUNED_HERE
    assert [n for n in notes if grid_lib.NOT_TUNED_HERE in n and "--tune" in n]


def test_the_cache_of_tunings_made_on_the_spot_is_read_after_the_committed_store(tmp_path, monkeypatch):
    store, cache = tmp_path / "tuned.json", tmp_path / "cache" / "tuned.json"
    monkeypatch.setenv(tuned.STORE_ENV, str(store))
    monkeypatch.setenv(tuned.CACHE_ENV, str(cache))
    config = RunConfig(**SETTING)
    entry = {"measured": "2026-11-27", "tfbench_commit": "abc1234"}
    tuned.save(config.to_dict(), config.strategy, {**entry, "knobs": {"mwms_bytes_per_pack": 32 * MIB}}, str(cache))
    assert tuned.best_knobs(config) == {"mwms_bytes_per_pack": 32 * MIB}  # the cache's, where the store has none
    tuned.save(config.to_dict(), config.strategy, {**entry, "knobs": {"mwms_bytes_per_pack": 4 * MIB}})
    assert tuned.best_knobs(config) == {"mwms_bytes_per_pack": 4 * MIB}  # the committed store's first


def test_the_tuning_stage_tunes_what_this_machine_lacks_smallest_grid_first(tmp_path, monkeypatch):
    from tools.sweep import tune_stage

    monkeypatch.setenv(tuned.STORE_ENV, str(tmp_path / "tuned.json"))
    monkeypatch.setenv(tuned.CACHE_ENV, str(tmp_path / "cache.json"))
    axes = {**AXES, "strategy": ["horovod", "parameter_server", "multi_worker_mirrored"], "num_ps": [2],
            "tuning": ["default", "best"], "tune_budget_s": 60}
    grid = grid_lib.Grid.from_dict(axes)
    order = [p.values["strategy"] for p in tune_stage.needed(grid, str(tmp_path / "runs"))]
    assert order == ["multi_worker_mirrored", "parameter_server", "horovod"]  # grids of 3, 4 and 6 points
    config = RunConfig(**SETTING)
    write_store(tmp_path / "tuned.json", machine.key(), {"mwms_bytes_per_pack": 0})
    assert tuned.best(config.to_dict(), config.strategy)
    order = [p.values["strategy"] for p in tune_stage.needed(grid, str(tmp_path / "runs"))]
    assert order == ["parameter_server", "horovod"]
    one_ps = grid_lib.Grid.from_dict({**axes, "num_ps": [1]})  # a partitioner needs two ps: nothing to tune
    assert [p.values["strategy"] for p in tune_stage.needed(one_ps, str(tmp_path / "runs"))] == ["horovod"]


@pytest.mark.slow
def test_a_sweep_tunes_on_the_spot_what_fits_its_budget_keeps_it_and_crowns_no_untuned_default(tmp_path):
    """make run's path on a machine with no tuning of its own, on tiny runs: MWMS's 3-point grid is
    tuned first and kept in the user's cache; Horovod's 6-point grid does not fit in what is left (it
    is not started, or its grid is cut short and nothing saved), so it runs at its defaults, a note
    says why, and the findings call no strategy fastest. The budget, 40 s, holds MWMS's grid (10-25 s
    measured here, 3-8 s a point) and leaves at most 30 s, less than Horovod's 6 points take
    (each about twice an MWMS point: horovodrun starts its ranks; 42 s measured) however fast the
    machine runs both."""
    cache = tmp_path / "cache" / "tuned.json"
    env = {tuned.STORE_ENV: str(tmp_path / "tuned.json"), tuned.CACHE_ENV: str(cache)}
    sweep = tmp_path / "sweep"
    proc = run_cli("--strategy=multi_worker_mirrored,horovod", "--num_workers=2", "--model=tiny", "--image_size=16",
                   "--batch_size=4", "--tuning=default,best", "--tune_budget=40", "--set=cores_per_worker=1",
                   "--set=num_warmup_steps=2", "--set=num_steps=3", "--set=num_classes=10", f"--sweep_dir={sweep}",
                   module="tools.sweep", env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    config = RunConfig(strategy="multi_worker_mirrored", num_workers=2, model="tiny", image_size=16, batch_size=4,
                       cores_per_worker=1, num_classes=10)
    saved = json.load(open(cache))[machine.key()][tuned.setting_key(config.to_dict())]
    assert set(saved) == {"multi_worker_mirrored"} and saved["multi_worker_mirrored"]["tune_run"]
    mwms = [d for d in os.listdir(sweep / "tunings") if d.startswith("multi_worker_mirrored-") and "." not in d]
    assert json.load(open(sweep / "tunings" / mwms[0] / "tune.json"))["whole_grid"]
    notes = json.load(open(sweep / "sweep.json"))["notes"]
    assert any(n.startswith("multi_worker_mirrored tuned on the spot") for n in notes), notes
    assert any(n.startswith("horovod not tuned on the spot: its") for n in notes), notes  # not started, or cut short
    text = open(sweep / "report" / "summary.md").read()
    points = [json.loads(line) for line in open(sweep / "points.jsonl") if line.strip()]
    assert f"{len(points)} run(s) found" in text  # the sweep's points alone, none of the tuning's runs
    assert f"| horovod | 2 | 0 | 4 | 8 | train | soft | cpu | default ({grid_lib.NOT_TUNED_HERE}) |" in text
    assert "so no strategy is called fastest: the defaults decide this order" in text and " is fastest (" not in text
