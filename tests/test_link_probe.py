"""The link measurements' arithmetic without namespaces: the Hockney fit on synthetic timings,
the message sizes, when a stream is window-limited, the refusal of measured links that are not
the configured ones, and the delay line's refusals."""
import numpy as np
import pytest

from cluster.net import delay_line, link_probe, links


def round_trips(sizes, alpha_s, beta, noise=0.0, seed=0):
    """Times of a message and its 1-byte reply under the Hockney model, with relative noise."""
    rng = np.random.default_rng(seed)
    exact = 2 * alpha_s + np.asarray(sizes, dtype=float) / beta
    return exact * (1 + rng.uniform(-noise, noise, len(sizes)))


@pytest.mark.parametrize("alpha_ms,mbit", [(0.05, 20000), (20.0, 95.6), (50.0, 1000), (2.0, 10)])
def test_hockney_fit_recovers_alpha_and_beta_exactly(alpha_ms, mbit):
    sizes = link_probe.message_sizes(mbit * 1e6 / 8)
    alpha, beta = link_probe.fit_hockney(sizes, round_trips(sizes, alpha_ms / 1000, mbit * 1e6 / 8))
    assert alpha * 1000 == pytest.approx(alpha_ms, rel=1e-6)
    assert beta * 8 / 1e6 == pytest.approx(mbit, rel=1e-6)


def test_hockney_fit_with_noise_keeps_both_parameters():
    """5% noise on each time: a small alpha is still found beside a large bandwidth term."""
    sizes = [1024 * 8 ** k for k in range(5)] * 3
    alpha, beta = link_probe.fit_hockney(sizes, round_trips(sizes, 0.001, 12.5e6, noise=0.05, seed=3))
    assert alpha == pytest.approx(0.001, rel=0.1)
    assert beta == pytest.approx(12.5e6, rel=0.1)


def test_hockney_fit_refuses_times_that_do_not_grow():
    with pytest.raises(ValueError, match="do not grow with size"):
        link_probe.fit_hockney([1024, 4096, 16384], [0.003, 0.002, 0.001])


def test_message_sizes_take_about_the_budget_at_the_measured_rate():
    assert link_probe.message_sizes(12.5e6) == [1024, 8192, 65536, 524288]  # 100 Mbit/s
    assert link_probe.message_sizes(1e3) == [1024, 8192, 65536]  # at least 64 KB
    assert link_probe.message_sizes(1e10)[-1] == link_probe.LARGEST


def test_a_stream_is_window_limited_when_its_bytes_in_flight_fill_half_its_send_buffer():
    """Measured here: one stream over 1 Gbit/s and 40 ms with a 4 MB buffer got 554 Mbit/s
    (2.8 MB in flight); the same buffer over 100 Mbit/s and 40 ms held 0.5 MB."""
    assert link_probe.window_limited(554e6, 0.041, 4 * 2 ** 20)
    assert not link_probe.window_limited(95.6e6, 0.041, 4 * 2 ** 20)
    assert not link_probe.window_limited(20e9, 0.00004, 8 * 2 ** 20)


def measured(rtt_ms, forward_bps, backward_bps=None, limited=False, delayed=2):
    return {"path": "10.1.1.2 -> 10.1.1.3", "delayed_directions_per_round_trip": delayed, "rtt_ms": rtt_ms,
            "throughput_bps": {"forward": forward_bps, "backward": backward_bps or forward_bps},
            "window_limited": {"forward": limited, "backward": limited}}


def test_check_accepts_links_that_match_their_configuration():
    goodput = links.expected_goodput(10 ** 8)
    assert link_probe.check(measured(100.4, goodput), 50.0) is None
    assert link_probe.check(measured(41.9, 0.95 * goodput), 20.0, 10 ** 8, shaped=True) is None
    assert link_probe.check(measured(0.9, 3e9), 0.0) is None  # no delay: within 1 ms of 0
    assert link_probe.check(measured(20.5, goodput, delayed=1), 20.0, 10 ** 8, shaped=True) is None
    # a stream held back by its own TCP window says nothing against the link
    assert link_probe.check(measured(40.0, 5.5e8, limited=True), 20.0, 10 ** 9, shaped=True) is None


def test_check_refuses_a_wrong_rtt_or_a_slow_link_in_one_line():
    rtt = link_probe.check(measured(112.0, 1e9), 50.0)
    assert rtt == "measured RTT 112.00 ms on 10.1.1.2 -> 10.1.1.3 is not 100 ± 10 ms (link delay 50 ms)"
    assert link_probe.check(measured(3.5, 1e9), 1.0).startswith("measured RTT 3.50 ms")  # 1 ms floor
    slow = link_probe.check(measured(40.0, links.expected_goodput(10 ** 8), 7e7), 20.0, 10 ** 8, shaped=True)
    assert slow == ("one TCP stream carried 70.0 Mbit/s backward on 10.1.1.2 -> 10.1.1.3, "
                    "below the 86.1 Mbit/s a 100 Mbit/s link carries")
    assert "\n" not in rtt + slow


@pytest.mark.parametrize("delay,jitter,rate,reason", [
    (20.0, 25.0, 0, "link jitter (25 ms) above the delay (20 ms) would need negative delays"),
    (0.0, 5.0, 0, "link jitter needs a link delay (--link_latency) to vary around"),
    (0.5, 0.0, 0, "a link delay of 0.5 ms is below what the user-space delay line keeps faithfully"),
    (10.0, 0.0, 10 ** 10, "a delayed link of 10 Gbit/s is beyond the user-space delay line"),
])
def test_delay_line_refuses_what_it_cannot_delay_faithfully(delay, jitter, rate, reason):
    assert delay_line.refusal(delay, jitter, rate).startswith(reason)
    with pytest.raises(ValueError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        links.plan_network("a1b2c3", 2, rate, delay, jitter)


def test_delay_line_accepts_what_it_can_delay():
    assert delay_line.refusal(0.0) is None and delay_line.refusal(50.0, 5.0, 10 ** 8) is None
    net = links.plan_network("a1b2c3", 2, 10 ** 8, 20.0, 2.0)
    assert net.delayed and not links.plan_network("a1b2c3", 2, 10 ** 8).delayed
    assert net.to_dict()["jitter_ms"] == 2.0 and net.to_dict()["links"] == "tap pairs and a user-space delay line"


def test_long_links_are_probed_with_fewer_round_trips():
    assert link_probe.samples_for(0.0002) == (link_probe.RTT_SAMPLES, link_probe.REPEATS)
    assert link_probe.samples_for(0.1) == (10, 2)
    assert link_probe.samples_for(0.4) == (5, 1)  # a 200 ms link: seconds, not a minute


def test_a_probe_that_waits_out_its_timeout_is_probed_once_more_and_a_second_stall_names_the_path(monkeypatch):
    from cluster.net import link_facts

    net = links.plan_network("0a1b2c", 2, 100_000_000)
    good = {"rtt_ms": 0.1, "alpha_ms": 0.05, "beta_bps": 94_000_000, "path": "a -> b",
            "throughput_bps": {"forward": 94_000_000, "backward": 94_000_000},
            "window_limited": {"forward": False, "backward": False}, "measured_with": "x"}
    calls = []

    def stalls_once(n):
        calls.append(n)
        if len(calls) == 1:
            raise TimeoutError("timed out")
        return good

    monkeypatch.setattr(link_probe, "probe", stalls_once)
    assert link_facts.facts(net, "100mbit")["measured_tx_bps"] == 94_000_000 and len(calls) == 2

    monkeypatch.setattr(link_probe, "probe", lambda n: (_ for _ in ()).throw(TimeoutError("timed out")))
    with pytest.raises(RuntimeError, match=rf"from {net.hosts[0].address} to {net.hosts[1].address} .*twice"):
        link_facts.facts(net, "100mbit")


def test_a_link_short_of_its_rate_is_probed_once_more_and_refused_when_the_second_probe_agrees(monkeypatch):
    from cluster.net import link_facts

    net = links.plan_network("0a1b2c", 2, 100_000_000)

    def probed(bps):
        return {"rtt_ms": 0.1, "alpha_ms": 0.05, "beta_bps": bps, "path": "a -> b",
                "throughput_bps": {"forward": bps, "backward": 94_000_000},
                "window_limited": {"forward": False, "backward": False}, "measured_with": "x"}

    answers = [probed(85_200_000), probed(94_000_000)]
    monkeypatch.setattr(link_probe, "probe", lambda n: answers.pop(0))
    assert link_facts.facts(net, "100mbit")["measured_tx_bps"] == 94_000_000 and not answers

    monkeypatch.setattr(link_probe, "probe", lambda n: probed(85_200_000))
    with pytest.raises(RuntimeError, match=r"in two probes: one TCP stream carried 85.2 Mbit/s forward on a -> b"):
        link_facts.facts(net, "100mbit")
