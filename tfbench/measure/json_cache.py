"""A small JSON file of cached counts (FLOPs, model memory, peaks), shared by every run of a machine.

Tasks of one run (and runs at once) may add keys at the same time: each write reads, updates and
replaces the file while holding an exclusive lock on `<file>.lock` (fcntl), so that no writer
drops another's key, and replaces it atomically (a temporary file, then os.replace), so that a
reader never sees it torn. Readers take no lock: they see the file before or after a write.
"""
from __future__ import annotations

import fcntl
import json
import os
import tempfile


def read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def write(path: str, key: str, value) -> None:
    """Sets `key` to `value` in the file, keeping every key another writer set meanwhile."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    with open(f"{path}.lock", "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            data = read(path)
            data[key] = value
            fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=folder)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(data, f, indent=2, sort_keys=True)
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
