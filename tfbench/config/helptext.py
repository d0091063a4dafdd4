"""`--help` for every tfbench entry point: that command's own flags, grouped by purpose, each with
its help text and default. absl's own `--help` lists only flags defined in the main module, and
`--helpfull` starts with absl's debugger and logging flags; tfbench users need neither first, so
`--help` (also -h, -?, --helpshort) is answered here, and `--helpfull` adds absl's own flags
after them (absl's own --helpfull would exit 1, as if asking for help were an error).

`python -m tfbench.usage --markdown` prints README's flag reference, generated from the same groups.
"""
from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Callable, List, Optional, Sequence, Tuple

from absl import flags

FLAGS = flags.FLAGS
HELP_ARGS = ("--help", "-h", "-?", "--helpshort")
HELPFULL = "--helpfull"
ANY_HELP = (*HELP_ARGS, HELPFULL)  # for entry points whose --help and --helpfull print the same
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


def absl_help() -> str:
    """absl's own flags (logging, debugging), module by module, for --helpfull."""
    ours = ("tfbench", "cluster", "tools", "strategies", "__main__")
    modules = sorted(m for m in FLAGS.flags_by_module_dict() if not m.startswith(ours))
    return "absl's own flags:\n" + "\n".join(FLAGS.module_help(m).strip("\n") for m in modules)


def full_help(doc: str, groups: Groups) -> str:
    """--helpfull: the command's own flags as --help lists them, then absl's."""
    own = render(doc, groups).rsplit("\n", 1)[0]  # all but the pointer to --helpfull
    return f"{own}\n{absl_help()}"


def argument_parser(doc: str, prog: str) -> argparse.ArgumentParser:
    """An argparse parser for the entry points that take few flags: the module docstring's first
    paragraph (whole sentences, not its first line) as the description, and --helpfull accepted
    like --help, as on every other entry point."""
    description = doc.strip().split("\n\n", 1)[0]
    parser = argparse.ArgumentParser(prog=f"python -m {prog}", description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(HELPFULL, action="help", help="the same as --help: this command has no other flags")
    return parser


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
        if HELPFULL in argv[1:]:
            print(full_help(doc, groups()))
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

