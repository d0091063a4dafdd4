"""`--help` for every tfbench entry point: that command's own flags, grouped by purpose, each with
its help text and default. absl's own `--help` lists only flags defined in the main module, and
`--helpfull` starts with absl's debugger and logging flags; tfbench users need neither first, so
`--help` (also -h, -?, --helpshort) is answered here and `--helpfull` is left to absl.

`python -m tfbench.usage --markdown` prints README's flag reference, generated from the same groups.
"""
from __future__ import annotations

import sys
import textwrap
from typing import Callable, List, Optional, Sequence, Tuple

from absl import flags

FLAGS = flags.FLAGS
HELP_ARGS = ("--help", "-h", "-?", "--helpshort")
Groups = Sequence[Tuple[str, Sequence[str]]]  # (title, flag names)
_NAME_WIDTH = 34
_WIDTH = 100


def names_of(declared) -> List[Tuple[str, List[str]]]:
    """Groups as declared in tfbench.config.flags ((title, ((kind, name, help), ...))) -> (title, names)."""
    return [(title, [name for _, name, _ in entries]) for title, entries in declared]


def default_text(flag) -> str:
    value = flag.default
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) or "''"
    if value is None or value == "":
        return "''"
    return str(value)


def render(doc: str, groups: Groups) -> str:
    """The help text: the command's description, then each group's flags."""
    lines = [doc.strip(), ""]
    for title, names in groups:
        lines.append(f"{title}:")
        for name in names:
            flag = FLAGS[name]
            head = f"  --{name}={default_text(flag)}"
            help_lines = textwrap.wrap(flag.help or "", _WIDTH - _NAME_WIDTH) or [""]
            if len(head) < _NAME_WIDTH:
                lines.append(head.ljust(_NAME_WIDTH) + help_lines[0])
                help_lines = help_lines[1:]
            else:
                lines.append(head)
            lines.extend(" " * _NAME_WIDTH + text for text in help_lines)
        lines.append("")
    lines.append("--helpfull also lists absl's own flags (logging, debugging).")
    return "\n".join(lines)


def fail_usage(message: str, prog: str = "tfbench") -> None:
    """Bad input: one line on stderr and exit code 2, before anything is spawned or written."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def wants_help(argv: Sequence[str]) -> bool:
    return any(arg in HELP_ARGS for arg in argv[1:])


def parser(doc: str, groups: Callable[[], Groups], prog: str,
           define: Optional[Callable[[], None]] = None) -> Callable[[List[str]], List[str]]:
    """A flags_parser for absl's app.run: grouped --help (exit 0); a bad flag is one line on
    stderr and exit code 2 (absl would print its whole usage and exit 1)."""

    def parse(argv: List[str]) -> List[str]:
        if define is not None:
            define()
        if wants_help(argv):
            print(render(doc, groups()))
            sys.exit(0)
        try:
            return FLAGS(argv)
        except flags.Error as e:
            print(f"{prog}: error: {str(e).splitlines()[0]}", file=sys.stderr, flush=True)
            sys.exit(2)

    return parse


def markdown(groups: Groups) -> str:
    """README's flag reference: one table per group."""
    out = []
    for title, names in groups:
        out += [f"**{title}**", "", "| flag | default | meaning |", "|---|---|---|"]
        for name in names:
            flag = FLAGS[name]
            text = (flag.help or "").replace("|", "\\|")
            out.append(f"| `--{name}` | `{default_text(flag)}` | {text} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def tfbench_groups() -> List[Tuple[str, List[str]]]:
    from tfbench.config import flags as tfbench_flags

    tfbench_flags.define_flags()
    tfbench_flags.define_command_flags()
    return names_of(tfbench_flags.GROUPS + (tfbench_flags.COMMAND_GROUP,))

