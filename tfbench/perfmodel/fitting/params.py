"""The parameters file: what `tools.model fit` measures on tfbench runs and `predict` reads.

A versioned JSON document; every fitted figure names the runs it came from:

{"schema": "tfbench.perfmodel.fitting.params", "version": 1,
 "compute":  [{"model", "mode", "precision", "image_size", "num_classes", "batch_size", "cores",
               "ms_per_image", "from_runs"}],                       # one worker's compute
 "links":    {"1gbe" | "100mbit" | ...: {"alpha_s", "beta_bps", "from_runs"}},  # beta in bits/s
 "ps_apply_s": {"parameter_server_sync" | "parameter_server_async": {"value_s", "from_runs"}},
 "overhead_s": {STRATEGY_KEY: {"value_s", "from_runs"}},           # fixed seconds per step
 "link_efficiency": {STRATEGY_KEY: {"value", "from_runs"}},        # share of beta the protocol gets
 "duplex_chi": {"parameter_server_sync": {"value", "from_runs"}},  # non-overlapped share of a link's directions
 "bytes_per_step": [{"strategy", "num_workers", "num_ps", "ps_placement", "host" (ps|worker),
                     "predicted_bytes", "measured_bytes", "from_runs"}],
 "spread": {"method", "paths": [[key, ...]], "replicates": [[number per path]],  # optional: the
            "scatter": {"center", "scale", "dof", "errors", "from_runs"}}}       # fit's refits

`spread` holds the refits of tfbench.perfmodel.fitting.spread without naming a parameter: `paths` are the
numbers of this document that differ between refits (each a list of keys and list indices), and
each replicate lists their values in that order, so any parameter a fit adds has its spread.

A malformed file is refused with one line naming the first bad field, so a fit gone wrong
never feeds a prediction silently.
"""
from __future__ import annotations

import copy
import json
import os
from typing import Iterable, List, Optional, Sequence

SCHEMA = "tfbench.perfmodel.fitting.params"
VERSION = 4  # 2 added link_efficiency, 3 duplex_chi, 4 spread; older files are read as they are
STRATEGY_KEYS = ("parameter_server_sync", "parameter_server_async", "multi_worker_mirrored", "horovod", "tree")
PS_KEYS = STRATEGY_KEYS[:2]
COMPUTE_KEY = ("model", "mode", "precision", "image_size", "num_classes", "batch_size", "cores")
TOP_LEVEL = ("schema", "version", "compute", "links", "ps_apply_s", "overhead_s", "link_efficiency", "duplex_chi",
             "bytes_per_step", "spread")
FIXED = ("schema", "version", "bytes_per_step", "spread", "from_runs")  # never a fitted number
SPREAD = ("method", "paths", "replicates", "scatter")
SCATTER = ("center", "scale", "dof", "errors", "from_runs")


class ParamsError(ValueError):
    """A malformed parameters file or a lookup it cannot answer (reported as one line)."""


def strategy_key(strategy: str, ps_sync: bool = False) -> str:
    """The key of ps_apply_s and overhead_s: the strategy, a parameter server split by sync."""
    if strategy == "parameter_server":
        return "parameter_server_sync" if ps_sync else "parameter_server_async"
    return strategy


def empty() -> dict:
    return {"schema": SCHEMA, "version": VERSION, "compute": [], "links": {}, "ps_apply_s": {}, "overhead_s": {},
            "link_efficiency": {}, "duplex_chi": {}, "bytes_per_step": []}


def _need(ok: bool, where: str, what: str, value) -> None:
    if not ok:
        raise ParamsError(f"{where} must be {what}, got {json.dumps(value)[:60]}")


def _number(where: str, value, low: float = 0.0, strict: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (value > low if strict else value >= low)
    _need(ok, where, f"a number {'>' if strict else '>='} {low:g}", value)


def _integer(where: str, value, low: int) -> None:
    _need(isinstance(value, int) and not isinstance(value, bool) and value >= low, where, f"a whole number >= {low}",
          value)


def _text(where: str, value) -> None:
    _need(isinstance(value, str) and value.strip() != "", where, "a non-empty string", value)


def _runs(where: str, value) -> None:
    _need(isinstance(value, list) and value and all(isinstance(r, str) and r for r in value), where,
          "a non-empty list of run ids", value)


def _fields(where: str, entry, required: Iterable[str]) -> None:
    required = tuple(required)
    _need(isinstance(entry, dict), where, "an object", entry)
    missing = [f for f in required if f not in entry]
    unknown = [f for f in entry if f not in required]
    if missing or unknown:
        raise ParamsError(f"{where} " + "; ".join(([f"lacks {', '.join(missing)}"] if missing else [])
                                                  + ([f"has unknown {', '.join(unknown)}"] if unknown else [])))


def _compute(where: str, e) -> None:
    _fields(where, e, COMPUTE_KEY + ("ms_per_image", "from_runs"))
    for name in ("model", "mode", "precision"):
        _text(f"{where}.{name}", e[name])
    for name, low in (("image_size", 1), ("num_classes", 2), ("batch_size", 1), ("cores", 1)):
        _integer(f"{where}.{name}", e[name], low)
    _number(f"{where}.ms_per_image", e["ms_per_image"], strict=True)
    _runs(f"{where}.from_runs", e["from_runs"])


def _valued(where: str, table, keys) -> None:
    _need(isinstance(table, dict), where, "an object", table)
    for key, e in table.items():
        _need(key in keys, f"{where} key", f"one of {', '.join(keys)}", key)
        _fields(f"{where}.{key}", e, ("value_s", "from_runs"))
        _number(f"{where}.{key}.value_s", e["value_s"])
        _runs(f"{where}.{key}.from_runs", e["from_runs"])


def _shares(where: str, table, keys, strict: bool) -> None:
    """A table of shares per strategy key: {"value" (in (0, 1], or [0, 1] when not strict), "from_runs"}."""
    _need(isinstance(table, dict), where, "an object", table)
    for key, e in table.items():
        _need(key in keys, f"{where} key", f"one of {', '.join(keys)}", key)
        _fields(f"{where}.{key}", e, ("value", "from_runs"))
        _number(f"{where}.{key}.value", e["value"], strict=strict)
        _need(e["value"] <= 1, f"{where}.{key}.value", "at most 1", e["value"])
        _runs(f"{where}.{key}.from_runs", e["from_runs"])


def _bytes_check(where: str, e) -> None:
    _fields(where, e, ("strategy", "num_workers", "num_ps", "ps_placement", "host", "predicted_bytes",
                       "measured_bytes", "from_runs"))
    _text(f"{where}.strategy", e["strategy"])
    _integer(f"{where}.num_workers", e["num_workers"], 1)
    _integer(f"{where}.num_ps", e["num_ps"], 0)
    _need(e["ps_placement"] in ("separate", "collocated", ""), f"{where}.ps_placement",
          "separate, collocated or ''", e["ps_placement"])
    _need(e["host"] in ("ps", "worker"), f"{where}.host", "ps or worker", e["host"])
    _number(f"{where}.predicted_bytes", e["predicted_bytes"])
    _number(f"{where}.measured_bytes", e["measured_bytes"])
    _runs(f"{where}.from_runs", e["from_runs"])


def validate(data) -> dict:
    """`data` itself when it follows the schema; else ParamsError naming the first bad field."""
    _need(isinstance(data, dict), "the parameters", "a JSON object", data)
    _need(data.get("schema") == SCHEMA, "schema", repr(SCHEMA), data.get("schema"))
    version = data.get("version")
    _integer("version", version, 1)
    if version > VERSION:
        raise ParamsError(f"version {version} is newer than this tfbench reads ({VERSION})")
    unknown = [k for k in data if k not in TOP_LEVEL]
    if unknown:
        raise ParamsError(f"unknown field {unknown[0]!r}; the fields are {', '.join(TOP_LEVEL)}")
    _need(isinstance(data.get("compute", []), list), "compute", "a list", data.get("compute"))
    seen = set()
    for i, e in enumerate(data.get("compute", [])):
        _compute(f"compute[{i}]", e)
        key = tuple(e[f] for f in COMPUTE_KEY)
        if key in seen:
            raise ParamsError(f"compute[{i}] repeats an earlier entry: {describe(e)}")
        seen.add(key)
    links = data.get("links", {})
    _need(isinstance(links, dict), "links", "an object", links)
    for name, e in links.items():
        _need(name != "" and name == name.strip().lower(), "links key", "a lower-case class or rate (1gbe, 100mbit)",
              name)
        _fields(f"links.{name}", e, ("alpha_s", "beta_bps", "from_runs"))
        _number(f"links.{name}.alpha_s", e["alpha_s"])
        _number(f"links.{name}.beta_bps", e["beta_bps"], strict=True)
        _runs(f"links.{name}.from_runs", e["from_runs"])
    _valued("ps_apply_s", data.get("ps_apply_s", {}), PS_KEYS)
    _valued("overhead_s", data.get("overhead_s", {}), STRATEGY_KEYS)
    _shares("link_efficiency", data.get("link_efficiency", {}), STRATEGY_KEYS, strict=True)
    _shares("duplex_chi", data.get("duplex_chi", {}), PS_KEYS[:1], strict=False)
    _need(isinstance(data.get("bytes_per_step", []), list), "bytes_per_step", "a list", data.get("bytes_per_step"))
    for i, e in enumerate(data.get("bytes_per_step", [])):
        _bytes_check(f"bytes_per_step[{i}]", e)
    if "spread" in data:
        _spread(data)
    return data


def _spread(data: dict) -> None:
    spread = data["spread"]
    _fields("spread", spread, SPREAD)
    _text("spread.method", spread["method"])
    paths, replicates = spread["paths"], spread["replicates"]
    _need(isinstance(paths, list) and isinstance(replicates, list), "spread.paths and .replicates", "lists",
          [paths, replicates][0])
    leaves = _leaves(data)
    for i, path in enumerate(paths):
        _need(isinstance(path, list) and tuple(path) in leaves, f"spread.paths[{i}]", "the keys of a fitted number",
              path)
    for i, row in enumerate(replicates):
        _need(isinstance(row, list) and len(row) == len(paths) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in row), f"spread.replicates[{i}]",
            f"a list of {len(paths)} numbers", row)
    _fields("spread.scatter", spread["scatter"], SCATTER)
    for name in ("center", "scale", "dof"):
        _need(isinstance(spread["scatter"][name], (int, float)), f"spread.scatter.{name}", "a number",
              spread["scatter"][name])
    _need(spread["scatter"]["scale"] >= 0 and spread["scatter"]["dof"] > 0, "spread.scatter", "a scale >= 0 and "
          "dof > 0", spread["scatter"])


def _leaves(doc, prefix: tuple = ()) -> dict:
    """{path: number} of every fitted number of a parameters document (FIXED fields left out)."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    out = {}
    for key, value in items:
        if key in FIXED:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[prefix + (key,)] = value
        elif isinstance(value, (dict, list)):
            out.update(_leaves(value, prefix + (key,)))
    return out


def with_spread(data: dict, refits: Sequence[dict], scatter: dict, method: str) -> dict:
    """`data` with the refits' numbers that differ from it kept as its spread (validated)."""
    point, others = _leaves(data), [_leaves(r) for r in refits]
    paths = [p for p in point if any(o.get(p, point[p]) != point[p] for o in others)]
    out = copy.deepcopy(data)
    out["spread"] = {"method": method, "paths": [list(p) for p in paths],
                     "replicates": [[o.get(p, point[p]) for p in paths] for o in others], "scatter": scatter}
    return validate(out)


def refits(data: dict) -> List[dict]:
    """The documents of the refits kept in `spread` ([] without one)."""
    spread = data.get("spread")
    if not spread:
        return []
    out = []
    for row in spread["replicates"]:
        doc = copy.deepcopy({k: v for k, v in data.items() if k != "spread"})
        for path, value in zip(spread["paths"], row):
            target = doc
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
        out.append(doc)
    return out


def load(path: str) -> dict:
    """The validated file; ParamsError (one line, with the path) if unreadable or malformed."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ParamsError(f"{path}: cannot read it ({e.strerror or e})") from None
    except ValueError as e:
        raise ParamsError(f"{path}: not JSON ({str(e).splitlines()[0]})") from None
    try:
        return validate(data)
    except ParamsError as e:
        raise ParamsError(f"{path}: {e}") from None


def save(path: str, data: dict) -> None:
    """Validates, then replaces `path` atomically."""
    validate(data)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def describe(e: dict) -> str:
    return (f"{e['model']} {e['mode']} {e['precision']} {e['image_size']}px {e['num_classes']} classes "
            f"batch {e['batch_size']} on {e['cores']} cores")


def compute_entry(data: dict, model: str, mode: str, precision: str, image_size: int, num_classes: int,
                  batch_size: int, cores: Optional[int] = None) -> dict:
    """The compute entry for this configuration (any cores when `cores` is None, if only one
    matches); ParamsError listing what the file has otherwise."""
    want = {"model": model, "mode": mode, "precision": precision, "image_size": image_size,
            "num_classes": num_classes, "batch_size": batch_size}
    if cores is not None:
        want["cores"] = cores
    found = [e for e in data.get("compute", []) if all(e[k] == v for k, v in want.items())]
    if len(found) == 1:
        return found[0]
    asked = (f"{model} {mode} {precision} {image_size}px {num_classes} classes batch {batch_size}"
             + (f" on {cores} cores" if cores is not None else ""))
    if found:
        raise ParamsError(f"several compute entries fit {asked}: measured on "
                          f"{', '.join(str(e['cores']) for e in found)} cores; choose the cores per worker")
    have = "; ".join(describe(e) for e in data.get("compute", [])) or "no compute entries"
    raise ParamsError(f"no compute entry for {asked}; the file has: {have}")


def link_entry(data: dict, name: str) -> Optional[dict]:
    """The measured link of that class or rate string, or None."""
    return data.get("links", {}).get(name.strip().lower())


def strategy_value(data: dict, table: str, key: str) -> Optional[dict]:
    """ps_apply_s, overhead_s ({'value_s', 'from_runs'}), link_efficiency or duplex_chi ({'value',
    'from_runs'}) entry for a strategy key, or None."""
    return data.get(table, {}).get(key)
