"""docs/results.md as data: the fields it documents, and the written fields it does not.

The document marks each table of fields with `<!-- fields: KIND ... -->` (task, cluster,
environment, csv; a table may serve several) on the line before it; the first cell of every row
names its fields in backticks. A nested field is a dotted path (`stats.mean_s`); a segment with a
part in angle brackets stands for keys of that form: `<index>` for digits, any other `<name>` for
any text (`<role>_<index>`: worker_0, ps_1; `<task>`: any key). A field with documented
sub-fields has every sub-field checked; one without any is taken as a whole (its row says what
it holds). Adding a field to a record therefore means adding one row.
"""
from __future__ import annotations

import json
import os
import re
from typing import Dict, Iterable, List, Set, Tuple

from conftest import ROOT

DOC = os.path.join(ROOT, "docs", "results.md")
KINDS = ("task", "cluster", "environment", "csv")
_MARK = re.compile(r"<!--\s*fields:\s*([\w ]+?)\s*-->")
_NAME = re.compile(r"`([^`]+)`")

Path = Tuple[str, ...]


def documented(path: str = DOC) -> Dict[str, List[Path]]:
    """{kind: [field path, ...]} in the document's order."""
    found: Dict[str, List[Path]] = {kind: [] for kind in KINDS}
    kinds, in_table = (), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            mark = _MARK.search(line)
            if mark:
                kinds, in_table = tuple(mark.group(1).split()), False
                assert set(kinds) <= set(KINDS), f"docs/results.md: unknown fields kind in {line.strip()}"
                continue
            if kinds and line.startswith("|"):
                in_table = True
                for name in _NAME.findall(line.split("|")[1]):  # the first cell may name several
                    for kind in kinds:
                        found[kind].append(tuple(name.split(".")))
            elif in_table:
                kinds, in_table = (), False
    return found


def _segment(doc: str) -> "re.Pattern[str]":
    parts = re.split(r"(<[^>]+>)", doc)
    return re.compile("".join(r"\d+" if p == "<index>" else ".+" if p.startswith("<") else re.escape(p)
                              for p in parts))


def _matches(doc: Path, path: Path) -> bool:
    return len(doc) == len(path) and all(d == p or ("<" in d and _segment(d).fullmatch(p)) for d, p in zip(doc, path))


def undocumented(value: dict, fields: Iterable[Path]) -> Set[str]:
    """Dotted paths of the keys in `value` that no documented field covers."""
    fields = list(fields)
    missing: Set[str] = set()

    def under(path: Path, longer: bool) -> bool:
        return any(len(f) >= len(path) + longer and _matches(f[:len(path)], path) for f in fields)

    def walk(prefix: Path, obj: dict) -> None:
        for key, sub in obj.items():
            path = prefix + (str(key),)
            if not under(path, False):
                missing.add(".".join(path))
            elif isinstance(sub, dict) and under(path, True):
                walk(path, sub)

    walk((), value)
    return missing


def undocumented_in_run(run_dir: str, fields: Dict[str, List[Path]] = None) -> List[str]:
    """Every field a run directory's results.jsonl and environment.json hold that docs/results.md
    does not document, as "file: kind record: field"."""
    fields = fields or documented()
    out = []
    results = os.path.join(run_dir, "results.jsonl")
    if os.path.exists(results):
        with open(results, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    record = json.loads(line)
                    kind = record.get("kind")
                    out += [f"results.jsonl: {kind} record: {p}" for p in undocumented(record, fields.get(kind, []))]
    environment = os.path.join(run_dir, "environment.json")
    if os.path.exists(environment):
        with open(environment, encoding="utf-8") as f:
            out += [f"environment.json: {p}" for p in undocumented(json.load(f), fields["environment"])]
    return sorted(set(out))
