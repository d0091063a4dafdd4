"""Which installed distribution provides the `tensorflow` package, found without importing it.

tfbench depends on `tensorflow` (the distribution tf-keras requires); a machine that also has
`tensorflow-cpu` or `tensorflow-gpu` installed has two distributions writing one package folder,
so records name the distributions that claim it, not a guess from requirements.txt."""
from __future__ import annotations

import functools
import importlib.metadata
from typing import List, Optional, Tuple


def providers() -> List[str]:
    """Installed distributions that provide the top-level `tensorflow` package, sorted."""
    return list(_claimants())


@functools.lru_cache(maxsize=None)
def _claimants() -> Tuple[str, ...]:
    """Asked once per process: reading every installed distribution's metadata takes 0.2 s."""
    return tuple(sorted(set(importlib.metadata.packages_distributions().get("tensorflow", []))))


def tensorflow() -> dict:
    """{'name', 'version', 'providers'}: the distribution of the TensorFlow tasks import; when
    several claim the folder, the name says so."""
    names = providers()
    if not names:
        return {"name": None, "version": None, "providers": []}
    name = names[0] if len(names) == 1 else " + ".join(names)
    return {"name": name, "version": _version(names[0]), "providers": names}


def tensorflow_version() -> str:
    return tensorflow()["version"] or "none"


def _version(name: str) -> Optional[str]:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
