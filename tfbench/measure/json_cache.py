"""A small JSON file of cached counts (FLOPs, model memory), shared by every run of a machine.

Writes replace the file atomically, so tasks of one run that count at once never leave it torn.
"""
from __future__ import annotations

import json
import os


def read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def write(path: str, key: str, value) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = read(path)
    data[key] = value
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
    os.replace(tmp, path)
