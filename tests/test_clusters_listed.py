"""The shared TensorFlow runs (tests/clusters.py) stay what docs/testing.md says: each is read by
some test and listed there, so that what the suite launches can be read in one place."""
import os

from clusters import SCENARIOS
from conftest import ROOT


def test_every_shared_run_is_read_by_a_test_and_listed_in_the_docs():
    folder = os.path.join(ROOT, "tests")
    sources = "".join(open(os.path.join(folder, name)).read() for name in sorted(os.listdir(folder))
                      if name.startswith("test_") and name.endswith(".py"))
    with open(os.path.join(ROOT, "docs", "testing.md")) as f:
        docs = f.read()
    assert [name for name in SCENARIOS if f'"{name}"' not in sources] == []
    assert [name for name in SCENARIOS if f"| `{name}` |" not in docs] == []
