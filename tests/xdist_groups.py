"""A pytest plugin (tests/conftest.py loads it): under pytest-xdist's --dist loadgroup, the root
tests of one module run on one worker, one after another, so that a module's fixtures start one
private Slurm, not one per worker.

pytest-xdist's scheduler reads a test's group from its id ('...::test@group'), which pytest-xdist
3.8 writes into the string id pytest 9.2 no longer reads (its ids are structured:
pytest-dev/pytest-xdist#1386): the group is written here into the structured id as well."""
from __future__ import annotations

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Marks the group before pytest-xdist's hook reads the marks; writes it into the ids after."""
    for item in items:
        if item.get_closest_marker("root") is not None:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    result = yield
    if getattr(config.option, "loadgroup", False):
        for item in items:
            _group_in_id(item)
    return result


def _group_in_id(item) -> None:
    groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                     for m in item.iter_markers("xdist_group")})
    if groups and "@" not in item.nodeid and hasattr(item, "_id"):
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")
