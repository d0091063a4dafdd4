"""tools.bench.delay_line_ceiling: its links are checked before anything is built."""
import pytest

from tfbench.config import ConfigError
from tools.bench import delay_line_ceiling


def test_links_parse_as_rate_and_delay():
    assert delay_line_ceiling.parse(["unshaped:1", "100mbit:20"]) == [("unshaped", 0, 1.0), ("100mbit", 10 ** 8, 20.0)]


@pytest.mark.parametrize("item,reason", [("100mbit", "not rate:delay_ms"), ("fast:5", "not rate:delay_ms"),
                                         ("unshaped:0", "starts no delay line"), ("unshaped:0.5", "at least 1 ms"),
                                         ("10gbit:5", "beyond the user-space delay line")])
def test_links_the_delay_line_cannot_carry_are_refused_in_one_line(item, reason):
    with pytest.raises(ConfigError, match=reason):
        delay_line_ceiling.parse([item])
