"""The Debian packages of the root tests (Slurm and munge; podman and mmdebstrap), for the tests
that need them.

make test installs them once, before any test runs (tools/scripts/install_test_packages.sh); a
test run on its own installs what it needs through the same scripts, which take one lock and wait
for apt's. Each pytest process asks once per package set. Where the packages cannot be had, the
first test that needs them says why (it fails, or skips where missing packages are not a failure)
and every later one skips naming that first test: the reason is said once, not once per test."""
from __future__ import annotations

from typing import Callable, Dict

import pytest

_REASONS: Dict[str, str] = {}  # package set -> '' (there) or why not
_SAID_BY: Dict[str, str] = {}  # package set -> the test that said why


def require(request, what: str, reason: Callable[[], str], fail: bool = False) -> None:
    """Returns when `what` is there (reason() '' after installing); else fails (fail=True) or skips
    the first test of this process that needs it with the reason, and skips every later one."""
    why = missing(what, reason)
    if not why:
        return
    if what in _SAID_BY:
        pytest.skip(f"{what} is missing here: said once, by {_SAID_BY[what]}")
    _SAID_BY[what] = request.node.nodeid
    if fail:
        pytest.fail(f"{what}: {why}", pytrace=False)
    pytest.skip(f"{what}: {why}")


def missing(what: str, reason: Callable[[], str]) -> str:
    """Why `what` cannot be had here ('' when it is there, after installing it), asked once per process."""
    if what not in _REASONS:
        _REASONS[what] = reason()
    return _REASONS[what]


def slurm(request, fail: bool = False) -> None:
    """Slurm and munge (tools/scripts/install_slurm.sh), for the Slurm tests."""
    from cluster.slurm import local_cluster

    require(request, "Slurm", local_cluster.unavailable_reason, fail)


def podman(request) -> None:
    """podman, runc and mmdebstrap (tools/scripts/install_podman.sh), for the container tests."""
    import podman_pods

    require(request, "podman", podman_pods.unavailable_reason)
