"""The emulated network's logic without namespaces: link rates and flags, hosts of a plan,
addresses, traffic in a measured window, stale-run detection; and the CLI's one-line refusals."""
import json
import os

import pytest

import tfbench.config as config_lib
from cluster.net import links, netns
from cluster.plan.topology import emulated_hosts, make_plan, with_hosts
from conftest import run_cli
from tfbench.config import ConfigError, RunConfig, link_rate_bps, validate
from tfbench.monitor import host_links
from tfbench.results.rundir import RunDir


@pytest.mark.parametrize("value,bps", [("", 0), ("1gbe", 10 ** 9), ("10GbE", 10 ** 10), ("fdr_ib", 56 * 10 ** 9),
                                       ("100mbit", 10 ** 8), ("2.5gbit", 25 * 10 ** 8), ("500kbit", 5 * 10 ** 5),
                                       ("64000", 64000)])
def test_link_rates_and_presets(value, bps):
    assert link_rate_bps(value) == bps


@pytest.mark.parametrize("value", ["1g", "fast", "1tbit", "10mbps"])
def test_bad_link_rate_is_one_line(value):
    with pytest.raises(ConfigError, match="is not a rate"):
        link_rate_bps(value)


@pytest.mark.parametrize("changes,message", [
    ({"network": "mesh"}, "--network='mesh' is unknown"),
    ({"link_bandwidth": "1gbit"}, "--link_bandwidth applies to --network=emulated only"),
    ({"link_latency": 5.0}, "--link_latency applies to --network=emulated only"),
    ({"network": "emulated", "link_latency": -1.0}, "--link_latency must be 0 or more"),
    ({"network": "emulated", "hosts": ("a", "b")}, "--hosts does not apply to --network=emulated"),
    ({"network": "emulated", "link_bandwidth": "10kbit"}, "below what tfbench shapes"),
])
def test_network_validation(tmp_path, changes, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        validate(RunConfig(logdir=str(tmp_path), **changes))


def test_emulated_hosts_per_topology():
    def hosts(**kw):
        return emulated_hosts(RunConfig(network="emulated", **kw))

    assert hosts() == ["h0"]
    assert hosts(strategy="multi_worker_mirrored", num_workers=3) == ["h0", "h1", "h2"]
    assert hosts(strategy="parameter_server", num_workers=2) == ["h0", "h1"]
    assert hosts(strategy="parameter_server", num_workers=2, num_ps=2, ps_placement="separate") == [
        "h0", "h1", "h2", "h3"]


def test_plan_hosts_become_addresses_in_tf_config_and_horovod_hosts():
    config = RunConfig(network="emulated", strategy="parameter_server", num_workers=2, ps_placement="separate")
    plan = make_plan(config, cores=(0, 1))
    assert {t.name: t.host for t in plan.tasks} == {"chief_0": "h0", "worker_0": "h0", "worker_1": "h1", "ps_0": "h2"}
    assert plan.task("worker_0").cores == (0,) and plan.task("worker_1").cores == (1,)
    net = links.plan_network("a1b2c3", 3)
    mapped = with_hosts(plan, {f"h{i}": h.address for i, h in enumerate(net.hosts)})
    assert mapped.cluster_spec["ps"] == [f"{net.hosts[2].address}:{plan.task('ps_0').port}"]
    assert mapped.task("worker_1").tf_config["cluster"] == mapped.cluster_spec
    hvd = make_plan(RunConfig(network="emulated", strategy="horovod", num_workers=2), cores=(0, 1))
    assert with_hosts(hvd, {"h0": "10.0.0.2", "h1": "10.0.0.3"}).horovod_hosts == "10.0.0.2:1,10.0.0.3:1"


def test_network_names_and_addresses_fit_the_kernel_limits():
    net = links.plan_network("0fab12", 12, 10 ** 9)
    assert net.bridge_address == "10.215.171.1" and net.hosts[0].address == "10.215.171.2"
    assert all(len(n) < 16 for n in net.namespaces) and netns.key_of(net.switch) == "0fab12"
    assert net.shaped and not links.plan_network("0fab12", 2, config_lib.LINK_PRESETS["fdr_ib"]).shaped
    assert netns.key_of("other-ns") is None and netns.key_of("tfb-toolong1-h0") is None


@pytest.mark.parametrize("rate_bps,burst,limit", [
    (5 * 10 ** 6, 2 * 1514, 256 * 1024 + 2 * 1514),  # slow: two frames of burst, 256 KiB of queue
    (100 * 10 ** 6, 50_000, 625_000 + 50_000),  # 4 ms of burst, 50 ms of queue
])
def test_tbf_burst_and_queue(rate_bps, burst, limit):
    """A slow link lets no burst of several frames through after an idle spell (a 32 KiB burst is a
    fifth of a 154 kB pull at 5 Mbit/s), and its queue holds enough frames of many flows for fast
    retransmit (tests/test_emulated.py measures the incast it avoids)."""
    assert links.tbf_params(rate_bps) == {"rate": rate_bps // 8, "burst": burst, "limit": limit}


def test_stale_runs_are_those_whose_owner_is_gone(tmp_path, monkeypatch):
    monkeypatch.setattr(netns, "OWNER_DIR", str(tmp_path))
    monkeypatch.setattr(netns, "NETNS_DIR", str(tmp_path / "none"))
    netns.claim("aaaaaa", "/runs/a")
    assert netns.owner_alive("aaaaaa") and netns.stale_keys() == []
    with open(tmp_path / "bbbbbb.json", "w") as f:
        json.dump({"pid": os.getpid(), "create_time": 1.0, "run_dir": "/runs/b"}, f)  # a reused pid
    assert netns.stale_keys() == ["bbbbbb"]
    netns.release("aaaaaa")
    assert not netns.owner_alive("aaaaaa")


def test_window_traffic_interpolates_between_samples(tmp_path):
    run = RunDir(str(tmp_path))
    with open(run.file(host_links.LINKS_FILE), "w") as f:
        for t, tx in [(0.0, 0), (1.0, 1000), (2.0, 3000), (3.0, 3000)]:
            f.write(json.dumps({"time": t, "host": "h0", "address": "10.0.0.2", "tx_bytes": tx, "rx_bytes": tx // 2}) + "\n")
    out = host_links.window_traffic(run, 0.5, 1.5, global_steps=4)["h0"]
    assert out["tx_bytes"] == pytest.approx(500 + 1000)
    assert out["rx_bytes"] == pytest.approx(750)
    assert out["tx_bytes_per_step"] == pytest.approx(375) and out["tx_mbit_per_s"] == pytest.approx(0.012)
    assert out["samples_in_window"] == 1 and "interpolated" in out["approximate"]
    assert "approximate" not in host_links.window_traffic(run, 0.0, 3.0, 4)["h0"]
    assert host_links.window_traffic(run, -5, 10, 1)["h0"]["tx_bytes"] == 3000


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_link_latency_passes_the_support_check_with_tap_devices_instead_of_netem(tmp_path):
    """This kernel has no sch_netem; the delay line needs TAP devices, which it has: a dry run
    with a delay prints its plan and writes nothing."""
    logdir = tmp_path / "runs"
    result = run_cli(f"--logdir={logdir}", "--network=emulated", "--link_latency=10", "--dry_run", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "delay line" in result.stdout and "10 ms" in result.stdout
    assert not logdir.exists()


def test_custom_scalars_layout_reads_back(tmp_path):
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.plugins.custom_scalar import layout_pb2, metadata

    from tfbench.tensorboard.layout import write_layout

    run = RunDir(str(tmp_path / "my-run"))
    os.makedirs(run.tb_dir)
    write_layout(run)
    acc = event_accumulator.EventAccumulator(run.tb_dir)
    acc.Reload()
    (event,) = acc.Tensors(metadata.CONFIG_SUMMARY_TAG)
    layout = layout_pb2.Layout.FromString(event.tensor_proto.string_val[0])
    (category,) = layout.category
    assert category.title == "my-run"
    tags = {chart.title: list(chart.multiline.tag) for chart in category.chart}
    assert tags["step time (ms), every worker"] == [r"^perf/step_time_ms$"]
    assert r"^link/(tx|rx)_kbps$" in tags["host traffic (kbit/s), every host: tx and rx"]
    assert tags["CPU (% of one core), every task"] == [r"^sys/cpu_percent$"]
