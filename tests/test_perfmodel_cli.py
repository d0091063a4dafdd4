"""The performance model's inputs and outputs: link classes, the parameters file, and
`python -m tools.model predict` (its table, its CSV, and its one-line refusals)."""
import copy
import json
import os
import subprocess
import sys

import pytest

import tfbench.config as config_lib
from conftest import RESNET50_PREDICT, ROOT, run_cli
from tfbench.perfmodel.dense import links
from tfbench.perfmodel.fitting import nofit
from tfbench.perfmodel.fitting import params as params_lib
from tfbench.perfmodel.fitting.params import ParamsError

RESNET50 = {"params": 25_583_592, "variables": 214, "activation_floats": 1, "largest_floats": 1}
HEADLINE = RESNET50_PREDICT


@pytest.fixture
def cached_counts(tmp_path):
    """Model-count caches that already hold ResNet50 (its parameters; for the ps placement one
    variable of them all), so that predict needs no TensorFlow."""
    path, variables = tmp_path / "counts.json", tmp_path / "variables.json"
    path.write_text(json.dumps({"resnet50|224px|1000 classes|NHWC": RESNET50}))
    variables.write_text(json.dumps({"resnet50|224px|1000 classes": [
        {"name": "all", "shape": [RESNET50["params"]], "itemsize": 4, "trainable": True}]}))
    return {"TFBENCH_MODEL_MEMORY_CACHE": str(path), "TFBENCH_MODEL_VARIABLES_CACHE": str(variables)}


def model_cli(*args, env=None, timeout=120):
    return run_cli(*args, module="tools.model", env=env, timeout=timeout)


def good_params() -> dict:
    data = params_lib.empty()
    data["compute"].append({"model": "resnet50", "mode": "train", "precision": "fp32", "image_size": 224,
                            "num_classes": 1000, "batch_size": 32, "cores": 2, "ms_per_image": 50.0,
                            "from_runs": ["r1", "r2"]})
    data["links"]["100mbit"] = {"alpha_s": 2e-4, "beta_bps": 9.4e7, "from_runs": ["net1"]}
    data["ps_apply_s"]["parameter_server_async"] = {"value_s": 0.04, "from_runs": ["r3"]}
    data["overhead_s"]["multi_worker_mirrored"] = {"value_s": 0.01, "from_runs": ["r4"]}
    data["bytes_per_step"].append({"strategy": "parameter_server", "num_workers": 2, "num_ps": 1,
                                   "ps_placement": "collocated", "host": "ps", "predicted_bytes": 1.0e8,
                                   "measured_bytes": 1.02e8, "from_runs": ["r1"]})
    return data


# ---- link classes ------------------------------------------------------------------------------

def test_every_link_preset_has_a_stated_alpha():
    assert set(links.LINK_ALPHA_S) == set(config_lib.LINK_PRESETS)
    assert config_lib.link_rate_bps("25gbe") == 25 * 10 ** 9 and config_lib.link_rate_bps("100gbe") == 10 ** 11


def test_link_alpha_and_beta_say_where_they_came_from():
    named = links.resolve("1gbe", 1e9)
    assert named.link == links.Link(50e-6, 1.25e8) and named.alpha_source.startswith("stated for 1gbe")
    assert "1 Gbit/s" in named.beta_source
    plain = links.resolve("100mbit", 1e8)
    assert plain.link.alpha_s == links.DEFAULT_ALPHA_S and "default for a plain rate" in plain.alpha_source
    given = links.resolve("100mbit", 1e8, latency_ms=2.0)
    assert given.link.alpha_s == pytest.approx(2e-3) and given.alpha_source == "given (--link_latency_ms)"
    measured = {"alpha_s": 2e-4, "beta_bps": 9.4e7, "from_runs": ["net1"]}
    fitted = links.resolve("100mbit", 1e8, measured=measured)
    assert fitted.link == links.Link(2e-4, 9.4e7 / 8) and "fitted on runs net1" in fitted.beta_source
    assert links.resolve("100mbit", 1e8, 1.0, measured).link.alpha_s == pytest.approx(1e-3)  # the flag wins


# ---- parameters file ---------------------------------------------------------------------------

def test_params_file_round_trip(tmp_path):
    path = str(tmp_path / "params.json")
    params_lib.save(path, good_params())
    loaded = params_lib.load(path)
    assert loaded == good_params()
    entry = params_lib.compute_entry(loaded, "resnet50", "train", "fp32", 224, 1000, 32)
    assert entry["ms_per_image"] == 50.0 and params_lib.compute_entry(loaded, "resnet50", "train", "fp32", 224,
                                                                      1000, 32, cores=2) == entry
    assert params_lib.link_entry(loaded, "100MBIT")["beta_bps"] == 9.4e7
    assert params_lib.link_entry(loaded, "1gbe") is None
    key = params_lib.strategy_key("parameter_server", ps_sync=False)
    assert params_lib.strategy_value(loaded, "ps_apply_s", key)["value_s"] == 0.04


def _broken(change):
    data = copy.deepcopy(good_params())
    change(data)
    return data


@pytest.mark.parametrize("change,message", [
    (lambda d: d.update(schema="other"), "schema must be"),
    (lambda d: d.update(version=params_lib.VERSION + 1), "is newer than this tfbench reads"),
    (lambda d: d["duplex_chi"].update(horovod={"value": 0.5, "from_runs": ["r"]}), "duplex_chi key must be one of"),
    (lambda d: d["duplex_chi"].update(parameter_server_sync={"value": 1.5, "from_runs": ["r"]}), "at most 1"),
    (lambda d: d["link_efficiency"].update(horovod={"value": 1.5, "from_runs": ["r"]}), "at most 1"),
    (lambda d: d.update(extra=1), "unknown field 'extra'"),
    (lambda d: d["compute"][0].pop("cores"), "compute[0] lacks cores"),
    (lambda d: d["compute"][0].update(ms_per_image=0), "compute[0].ms_per_image must be a number > 0"),
    (lambda d: d["compute"][0].update(from_runs=[]), "compute[0].from_runs must be a non-empty list"),
    (lambda d: d["compute"].append(dict(d["compute"][0])), "compute[1] repeats an earlier entry"),
    (lambda d: d["links"].update({"1GbE": d["links"]["100mbit"]}), "links key must be a lower-case"),
    (lambda d: d["links"]["100mbit"].update(beta_bps=-1), "links.100mbit.beta_bps must be a number > 0"),
    (lambda d: d["ps_apply_s"].update(horovod={"value_s": 1, "from_runs": ["x"]}), "ps_apply_s key must be one of"),
    (lambda d: d["overhead_s"]["multi_worker_mirrored"].update(value_s="1"), "value_s must be a number >= 0"),
    (lambda d: d["bytes_per_step"][0].update(host="chief"), "bytes_per_step[0].host must be ps or worker"),
])
def test_a_malformed_params_file_is_one_line(tmp_path, change, message):
    path = tmp_path / "params.json"
    path.write_text(json.dumps(_broken(change)))
    with pytest.raises(ParamsError) as e:
        params_lib.load(str(path))
    assert message in str(e.value) and "\n" not in str(e.value) and str(e.value).startswith(str(path))


def test_unreadable_params_are_one_line(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    for path in (tmp_path / "bad.json", tmp_path / "missing.json"):
        with pytest.raises(ParamsError) as e:
            params_lib.load(str(path))
        assert "\n" not in str(e.value)
    with pytest.raises(ParamsError):
        params_lib.save(str(tmp_path / "x.json"), _broken(lambda d: d.update(version=0)))
    assert not (tmp_path / "x.json").exists()


def test_compute_lookup_lists_what_the_file_has():
    data = good_params()
    with pytest.raises(ParamsError) as e:
        params_lib.compute_entry(data, "resnet50", "train", "bf16", 224, 1000, 32)
    assert "no compute entry for resnet50 train bf16 224px" in str(e.value)
    assert "the file has: resnet50 train fp32 224px 1000 classes batch 32 on 2 cores" in str(e.value)
    data["compute"].append(dict(data["compute"][0], cores=1))
    with pytest.raises(ParamsError, match="measured on 2, 1 cores"):
        params_lib.compute_entry(data, "resnet50", "train", "fp32", 224, 1000, 32)
    assert params_lib.compute_entry(data, "resnet50", "train", "fp32", 224, 1000, 32, cores=1)["cores"] == 1


# ---- python -m tools.model ---------------------------------------------------------------------

BAD = [
    (["frobnicate"], "unknown verb 'frobnicate'"),
    ([], "give a verb first"),
    (["predict", "--strategy=ring", "--compute_ms_per_image=1"], "--strategy='ring' is unknown"),
    (["predict", "--num_workers=0", "--link_bandwidth=1gbe", "--compute_ms_per_image=1"], "--num_workers='0'"),
    (["predict", "--num_workers=4,1025", "--link_bandwidth=1gbe", "--compute_ms_per_image=1"], "--num_workers='1025'"),
    (["predict"], "give the compute: --compute_ms_per_image=MS or --params=FILE"),
    (["predict", "--compute_ms_per_image=1", "--params=p.json"], "not both"),
    (["predict", "--model=vgg99", "--compute_ms_per_image=1"], "--model='vgg99' is unknown"),
    (["predict", "--link_bandwidth=fast", "--compute_ms_per_image=1"], "--link_bandwidth='fast' is not a rate"),
    (["predict", "--mode=forward", "--compute_ms_per_image=1"], "training steps only"),
    (["predict", "--ps_placement=rack", "--compute_ms_per_image=1"], "--ps_placement='rack' is unknown"),
    (["predict", "--format=xml", "--compute_ms_per_image=1"], "--format='xml' is unknown"),
    (["predict", "--params=/no/such/params.json"], "cannot read it"),
    (["predict", "--batch_size=x", "--compute_ms_per_image=1"], "batch_size"),
    (["predict", "--compute_ms_per_image=1"], "--link_bandwidth is empty (unshaped)"),
    (["predict", "--link_bandwidth=1gbe", "--compute_ms_per_image=1", "--devices_per_node=0"], "--devices_per_node"),
    (["predict", "--link_bandwidth=1gbe", "--compute_ms_per_image=1", "--ps_partitioner=even"], "--ps_partitioner"),
    (["predict", "--link_bandwidth=1gbe", "--compute_ms_per_image=1", "--oversubscription=0.5"], "--oversubscription"),
    (["predict", "--link_bandwidth=1gbe", "--compute_ms_per_image=1", "--link_latency=-1"], "--link_latency"),
    (["predict", "--link_bandwidth=1gbe", "--compute_ms_per_image=1", "--global_batch_size=4", "--num_workers=8"],
     "less than one image"),
    (["predict", "--link_bandwidth=1gbe", "--compute_ms_per_image=1", "--model=inception_v3", "--image_size=64"],
     "too small for inception_v3"),
    (["published", "--format=xml"], "--format='xml' is unknown"),
    (["published", "--point_rule=lucky"], "--point_rule='lucky' is unknown"),
    (["published", "--table=mine"], "--table='mine' is unknown"),
    (["cluster", "x.csv", "--link_ceiling=fast"], "--link_ceiling='fast' is not a rate"),
    (["cluster"], "give one CSV file"),
    (["cluster", "/no/such.csv"], "cannot read it"),
]


@pytest.mark.parametrize("args,message", BAD)
def test_bad_input_is_one_line_and_exit_2_before_tensorflow(tmp_path, args, message):
    env = {"TFBENCH_MODEL_MEMORY_CACHE": str(tmp_path / "never-written.json")}
    result = model_cli(*args, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tfbench: error: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "never-written.json").exists()


def test_predict_never_imports_tensorflow_itself(cached_counts):
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "tools.model", *HEADLINE], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, env=dict(os.environ, **cached_counts))
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    assert "tensorflow" not in imported and "numpy" in imported


def test_a_refusal_imports_no_scipy():
    """scipy takes a second or two to import: the model's modules import it where they fit."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "tools.model", "predict", "--strategy=ring"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    imported = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    assert "scipy" not in imported and "tools" in imported


def test_predict_table_header_and_rows(cached_counts):
    result = model_cli(*HEADLINE, env=cached_counts)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "|w| = 102.3 MB: 25,583,592 trainable parameters in 214 variables" in out
    assert "stay fp32 under every --precision" in out and "given (--compute_ms_per_image)" in out
    assert "stated for 1gbe" in out and "--link_bandwidth=1gbe: 1 Gbit/s" in out and "assumptions:" in result.stderr
    # an asynchronous ps was never fitted: its unknowns take the values of the protocol it shares
    assert "interval: every prediction over the ranges of what nothing here fits" in out
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:1] == ["num_workers"])
    assert "images_per_sec [range]" in lines[head]
    rows = [line.replace(", ", ",").split() for line in lines[head + 1:]]
    assert [r[0] for r in rows] == ["1", "16", "64", "256", "1024"]
    assert rows[0][8] == "1.000" and rows[-1][9:12] == ["network", "at", "ps"]
    point, ends = float(rows[-1][6]), rows[-1][7].strip("[]").split(",")
    assert float(ends[0]) < point < float(ends[1])  # the rule's point inside a range that reaches both ways


def test_predict_csv_is_plain_csv_header_first_facts_on_stderr(cached_counts):
    # the same command line with another --strategy: its --num_ps is said to be ignored
    result = model_cli(*HEADLINE, "--strategy=multi_worker_mirrored", "--format=csv", env=cached_counts)
    assert result.returncode == 0, result.stderr
    assert "multi_worker_mirrored (ring all-reduce); --num_ps ignored (parameter_server only)" in result.stderr
    assert "assumptions:" in result.stderr and "#" not in result.stdout
    assert "share of the link's rate the protocol gets" in result.stderr and "overlap phi 1 [0, 1]" in result.stderr
    table = result.stdout.splitlines()
    columns = table[0].split(",")
    assert columns[0] == "num_workers" and {"images_per_sec", "bottleneck", "busbw_GBps"} <= set(columns)
    assert {"images_per_sec_low", "images_per_sec_high", "interval_level"} <= set(columns)
    rows = [dict(zip(columns, line.split(","))) for line in table[1:]]
    assert [r["num_workers"] for r in rows] == ["1", "16", "64", "256", "1024"]
    assert float(rows[-1]["images_per_sec"]) > 1.5 * float(rows[-2]["images_per_sec"])
    # 1gbe's 0.125 GB/s at the share of it the no-fit rule gives the ring's point
    share = nofit.unknowns("multi_worker_mirrored", 0.0)["share"].point
    assert rows[0]["busbw_GBps"] == "" and float(rows[1]["busbw_GBps"]) == pytest.approx(0.125 * share, rel=0.01)
    # no fit: the point at the median of tfbench's fits, the range down to the slowest share and up to
    # communication hidden behind compute
    last = rows[-1]
    assert float(last["images_per_sec_low"]) < float(last["images_per_sec"]) < float(last["images_per_sec_high"])
    assert last["interval_level"] == "range"


def test_predict_json_with_cost_per_image(cached_counts):
    result = model_cli(*HEADLINE, "--format=json", "--num_workers=16", "--price_per_node_hour=2",
                       "--watts_per_node=400", "--ps_placement=separate", env=cached_counts)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    (row,) = doc["rows"]
    assert row["nodes"] == 17  # 16 workers and the ps on a host of its own
    rate = row["images_per_sec"]["point"]
    assert row["usd_per_million_images"]["point"] == pytest.approx(2 * 17 / 3600 / rate * 1e6)
    assert row["joules_per_image"]["point"] == pytest.approx(400 * 17 / rate)
    assert {"point", "low", "high", "level", "basis"} <= set(row["images_per_sec"])
    assert any(f.startswith("cost: $2 per node-hour and 400 W per node") for f in doc["facts"])


def test_predict_from_a_params_file_names_the_runs(tmp_path, cached_counts):
    path = str(tmp_path / "params.json")
    params_lib.save(path, good_params())
    result = model_cli("predict", f"--params={path}", "--num_workers=1,4", "--link_bandwidth=100mbit",
                       "--ps_placement=collocated", env=cached_counts)
    assert result.returncode == 0, result.stderr
    assert "fitted on runs r1, r2 (resnet50 train fp32 224px 1000 classes batch 32 on 2 cores)" in result.stdout
    assert "fitted on runs net1 (link 100mbit): 94 Mbit/s" in result.stdout
    assert "ps apply = 40 ms per update" in result.stdout and "fitted on runs r3" in result.stdout
    bad = model_cli("predict", f"--params={path}", "--batch_size=64", env=cached_counts)
    assert bad.returncode == 2 and "no compute entry for resnet50 train fp32 224px 1000 classes batch 64" in bad.stderr


def test_help_lists_the_verbs_and_the_predict_flags():
    overview = model_cli("--help")
    assert overview.returncode == 0 and "predict" in overview.stdout
    verb = model_cli("predict", "--help")
    assert verb.returncode == 0
    for text in ("Cluster:", "Link:", "--compute_ms_per_image", "--params", "--format=table", "--devices_per_node",
                 "--global_batch_size", "--ps_partitioner"):
        assert text in verb.stdout
    assert "--verbosity" not in verb.stdout


@pytest.mark.slow
def test_predict_counts_resnet50_from_its_graph(resnet50_counted):
    """End to end with the real count (TensorFlow in a child process, then cached): the session's
    `resnet50_counted` run of HEADLINE."""
    result, cache = resnet50_counted
    assert result.args[3:] == HEADLINE
    assert result.returncode == 0, result.stderr
    counted = json.loads(cache.read_text())["resnet50|224px|1000 classes|NHWC"]
    assert counted["params"] == RESNET50["params"] and counted["variables"] > 100
    assert f"in {counted['variables']} variables" in result.stdout and "|w| = 102.3 MB" in result.stdout
