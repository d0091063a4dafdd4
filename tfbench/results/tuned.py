"""Saved tunings: the knob settings `python -m tfbench --tune` found best for one setting.

A setting is everything that changes which knobs win besides the knobs themselves (model, mode,
image and batch size, workers and their cores, ps layout, network, precision, device). Sweeps
look a strategy's settings up here when an axis asks for `tuning: best`
(tools/sweeps/tuned.json is the store `make run` reads). Each entry names the tuning run it came
from, its date and commit, the images/sec of the best and of the default, and whether the two
differ beyond the noise; where they do not, the default is kept as best.
"""
from __future__ import annotations

import fcntl
import json
import os
from typing import Dict, Optional

from tfbench.config import knobs
from tfbench.config.errors import ConfigError

SETTING = ("model", "mode", "image_size", "batch_size", "num_workers", "cores_per_worker", "num_ps",
           "ps_placement", "ps_sync", "network", "link_bandwidth", "link_latency", "precision", "device")
DEFAULT_STORE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                             "tools", "sweeps", "tuned.json")
STORE_ENV = "TFBENCH_TUNED_STORE"  # another store for every reader and writer (tests, a user's own)


def store_path(path: Optional[str] = None) -> str:
    return path or os.environ.get(STORE_ENV) or DEFAULT_STORE


def setting_key(values: Dict) -> str:
    """'model=resnet50 mode=train ...' from a RunConfig's dict (or a sweep point's values)."""
    return " ".join(f"{name}={values.get(name)}" for name in SETTING)


def read(path: Optional[str] = None) -> Dict:
    path = store_path(path)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def best(values: Dict, strategy: str, path: Optional[str] = None) -> Optional[Dict]:
    """The saved entry for this setting and strategy, or None."""
    return read(path).get(setting_key(values), {}).get(strategy)


def best_knobs(config, path: Optional[str] = None) -> Dict[str, object]:
    """The knob settings a prior tuning saved for `config`'s setting and strategy ({} where no
    knob changes anything there); ConfigError (one line) when none was saved."""
    strategy, values = config.strategy, config.to_dict()
    if not knobs.tunable(config):
        return {}
    entry = best(values, strategy, path)
    if entry is None:
        raise ConfigError(f"no saved tuning of {strategy} for {setting_key(values)} in {store_path(path)}; run "
                          f"`python -m tfbench --tune` with that setting first")
    return dict(entry["knobs"])


def save(values: Dict, strategy: str, entry: Dict, path: Optional[str] = None) -> None:
    """Adds or replaces one entry, under a lock (two tunings may end at once)."""
    path = store_path(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    lock = os.open(folder, os.O_RDONLY)  # the folder is the lock: no lock file is left beside the store
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        store = read(path)
        store.setdefault(setting_key(values), {})[strategy] = entry
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(store, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        os.close(lock)
