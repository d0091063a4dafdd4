"""Saved tunings: the knob settings `python -m tfbench --tune` found best for one setting on one
machine.

A setting is everything that changes which knobs win besides the knobs themselves (model, mode,
image and batch size, workers and their cores, ps layout, network, precision, device); the
machine is the rest (tfbench.measure.machine: CPU model, CPUs, GPUs, TensorFlow version). The
best knob of one machine can lose on another (on 2026-11-27, MWMS's 4 MiB packs, tuned on a
2-core box, beat the default at 2 workers on a 16-core one and lost to it at 4 and 8), so the
store keys each tuning by machine, then setting, then strategy, and only this machine's are ever
applied. Sweeps look a strategy's settings up here when an axis asks for `tuning: best`
(tools/sweeps/tuned.json is the store `make run` reads); a setting tuned only on other machines
is measured at its defaults, and the sweep says so (NotTunedHere). Each entry names the tuning
run it came from by its run id (no path of the machine it ran on), its date and commit, the
images/sec of the best and of the default, and whether the two differ beyond the noise; where
they do not, the default is kept as best.

Two stores, read in this order: the committed one (tools/sweeps/tuned.json: tunings made on
purpose with `python -m tfbench --tune`, on machines others share, such as CI's, and reviewed
with the code), and the user's cache (~/.cache/tfbench/tuned.json): the tunings a sweep makes on
the spot where this machine has none (tools.sweep's tune_budget_s, as `make run` does). Those
belong to the machine, not to the code: kept out of the checkout (a clone stays as committed)
and beside the environment `make setup` caches, they serve every later sweep and every clone on
this machine (CI's fresh clones too).
"""
from __future__ import annotations

import fcntl
import json
import os
from typing import Dict, List, Optional

from tfbench.config import knobs
from tfbench.config.errors import ConfigError
from tfbench.measure import machine

SETTING = ("model", "mode", "image_size", "batch_size", "num_workers", "cores_per_worker", "num_ps",
           "ps_placement", "ps_sync", "network", "link_bandwidth", "link_latency", "precision", "device")
DEFAULT_STORE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                             "tools", "sweeps", "tuned.json")
NOT_TUNED_HERE = "not tuned on this machine"  # the knobs of a point at its defaults where `best` was asked for
STORE_ENV = "TFBENCH_TUNED_STORE"  # another store for every reader and writer (tests, a user's own)
CACHE_ENV = "TFBENCH_TUNED_CACHE"  # another cache of on-the-spot tunings (tests)


def store_path(path: Optional[str] = None) -> str:
    return path or os.environ.get(STORE_ENV) or DEFAULT_STORE


def cache_path() -> str:
    """The user's cache of tunings made on the spot (by a sweep's tune_budget_s)."""
    return os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "tfbench", "tuned.json")


def _stores(path: Optional[str]) -> List[str]:
    """The stores a lookup reads, first found first: `path` alone, or the committed store and the cache."""
    return [path] if path else [store_path(), cache_path()]


def setting_key(values: Dict) -> str:
    """'model=resnet50 mode=train ...' from a RunConfig's dict (or a sweep point's values)."""
    return " ".join(f"{name}={values.get(name)}" for name in SETTING)


class NotTunedHere(ConfigError):
    """The setting was tuned for the strategy, but only on other machines (`machines`, their keys)."""

    def __init__(self, message: str, machines: List[str]):
        super().__init__(message)
        self.machines = machines


def read(path: Optional[str] = None) -> Dict:
    """{machine key: {setting key: {strategy: entry}}}; ConfigError for a store of settings alone
    (written before tunings named their machine: nothing says where those were measured)."""
    path = store_path(path)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        store = json.load(f)
    unplaced = [key for key in store if key.startswith("model=")]
    if unplaced:
        raise ConfigError(f"{path} holds tunings keyed by setting alone, with no machine ({unplaced[0]}); "
                          f"tune again with `python -m tfbench --tune`, which saves this machine's")
    return store


def best(values: Dict, strategy: str, path: Optional[str] = None) -> Optional[Dict]:
    """This machine's saved entry for the setting and strategy (the committed store's, else the
    cache's, or `path`'s alone), or None."""
    for store in _stores(path):
        entry = read(store).get(machine.key(), {}).get(setting_key(values), {}).get(strategy)
        if entry is not None:
            return entry
    return None


def elsewhere(values: Dict, strategy: str, path: Optional[str] = None) -> Dict[str, Dict]:
    """{machine key: entry} of the setting and strategy, saved on machines other than this one."""
    here = machine.key()
    saved = {key: settings.get(setting_key(values), {}).get(strategy) for store in reversed(_stores(path))
             for key, settings in read(store).items() if key != here}
    return {key: entry for key, entry in saved.items() if entry is not None}


def best_knobs(config, path: Optional[str] = None) -> Dict[str, object]:
    """The knob settings a prior tuning on this machine saved for `config`'s setting and strategy
    ({} where no knob changes anything there); NotTunedHere when only other machines have one,
    ConfigError (one line) when none was saved."""
    strategy, values = config.strategy, config.to_dict()
    if not knobs.tunable(config):
        return {}
    entry = best(values, strategy, path)
    if entry is None:
        where = f"on this machine ({machine.key()}) in {' or '.join(_stores(path))}"
        others = sorted(elsewhere(values, strategy, path))
        if others:
            raise NotTunedHere(f"{strategy} was tuned for {setting_key(values)} on {'; '.join(others)}, not {where}; "
                               f"`python -m tfbench --tune` with that setting tunes it here", others)
        raise ConfigError(f"no saved tuning of {strategy} for {setting_key(values)} {where}; run "
                          f"`python -m tfbench --tune` with that setting first")
    return dict(entry["knobs"])


def save(values: Dict, strategy: str, entry: Dict, path: Optional[str] = None) -> str:
    """Adds or replaces this machine's entry, under a lock (two tunings may end at once); returns
    the machine key it was saved under."""
    path = store_path(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    here = machine.key()
    lock = os.open(folder, os.O_RDONLY)  # the folder is the lock: no lock file is left beside the store
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        store = read(path)
        store.setdefault(here, {}).setdefault(setting_key(values), {})[strategy] = entry
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(store, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        os.close(lock)
    return here
