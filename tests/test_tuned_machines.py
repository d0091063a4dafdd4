"""Saved tunings know their machine (tfbench.results.tuned, tfbench.measure.machine): one saved on
another machine is never applied here; the sweep measures the defaults and its notes and table say
so; the shipped store names machines and holds no path of the one it was made on."""
import json
import os

import pytest

from conftest import ROOT
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
