"""A workload kind's own arguments: the flags only that kind reads, each declared once, beside the
kind's code, as one `Arg` line of its `Arguments`.

From that line follow the flag itself and its help (tfbench.config.flags: one --help group per
kind), its default, its value in every run's config (`config.<name>`, held in RunConfig.args, not
as a field of RunConfig), its column in results.csv, and the refusal of the flag off its default
for every workload that does not read it (tfbench.workloads.check). The kind's `check` states its
range.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

KINDS = ("integer", "float", "string", "boolean", "list")  # absl's DEFINE_<kind> a flag is declared with


@dataclasses.dataclass(frozen=True)
class Arg:
    kind: str  # one of KINDS
    name: str  # the flag (--name) and the config's attribute (config.name)
    default: Any
    help: str


@dataclasses.dataclass(frozen=True)
class Arguments:
    """The arguments of one workload kind: the --help group `title`, then its flags in order."""

    title: str
    args: Tuple[Arg, ...] = ()

    def __post_init__(self):
        assert all(a.kind in KINDS for a in self.args), self.title

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(a.name for a in self.args)

    def entries(self) -> Tuple[Tuple[str, str, str], ...]:
        """(kind, name, help) of each flag, as tfbench.config.flags groups them."""
        return tuple((a.kind, a.name, a.help) for a in self.args)


@dataclasses.dataclass(frozen=True)
class Values:
    """Every workload kind's arguments of one run, by name, in declaration order (frozen and
    hashable like the RunConfig that holds them)."""

    items: Tuple[Tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, declared: Iterable[Arguments], given: Optional[Mapping[str, Any]] = None) -> "Values":
        """The defaults of `declared`, with `given` (name -> value) over them; KeyError for a name no kind declares."""
        values: Dict[str, Any] = {a.name: a.default for arguments in declared for a in arguments.args}
        unknown = set(given or ()) - set(values)
        if unknown:
            raise KeyError(", ".join(sorted(unknown)))
        values.update(given or {})
        return cls(tuple(values.items()))

    def as_dict(self) -> Dict[str, Any]:
        return dict(self.items)

    def __contains__(self, name: str) -> bool:
        return any(k == name for k, _ in self.items)

    def __getitem__(self, name: str) -> Any:
        for k, v in self.items:
            if k == name:
                return v
        raise KeyError(name)
