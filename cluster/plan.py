"""`python -m cluster.plan <tfbench flags>`: print every task's TF_CONFIG and environment.

For starting tasks by hand on your own machines: JSON by default, or shell `export` lines per
task with --format=export. Uses the same flags and validation as `python -m tfbench`.
"""
from __future__ import annotations

import json
import shlex
import sys

from absl import app, flags

from cluster.topology import make_plan
from tfbench import cli
from tfbench import config as config_lib
from tfbench import flags as tfbench_flags
from tfbench.errors import ConfigError

flags.DEFINE_enum("format", "json", ["json", "export"], "json: the whole plan; export: shell lines per task.")


def task_command(task, strategy: str) -> str:
    if strategy == "horovod":
        return "horovodrun --gloo ... python -m tfbench.task --run_dir RUN_DIR --task horovod"
    return f"python -m tfbench.task --run_dir RUN_DIR --task {task.name}"


def render_exports(plan) -> str:
    lines = []
    for t in plan.tasks:
        lines.append(f"# {t.name} on {t.host}" + (f" (cores {','.join(map(str, t.cores))})" if t.cores else ""))
        for key, value in sorted(t.full_env().items()):
            lines.append(f"export {key}={shlex.quote(value)}")
        lines.append(task_command(t, plan.strategy))
        lines.append("")
    if plan.horovod_hosts:
        lines.append(f"# horovodrun --gloo -np {len(plan.tasks)} -H {plan.horovod_hosts} ...")
    return "\n".join(lines)


def main(argv) -> int:
    if len(argv) > 1:
        cli.fail_usage(f"unexpected arguments: {' '.join(argv[1:])}")
    try:
        config = config_lib.validate(tfbench_flags.config_from_flags(), by_hand=True)
        plan = make_plan(config)
    except ConfigError as e:
        cli.fail_usage(str(e))
    for warning in plan.warnings:
        print(f"tfbench: warning: {warning}", file=sys.stderr)
    flag_values = flags.FLAGS
    if flag_values.format == "export":
        print(render_exports(plan))
    else:
        print(json.dumps(plan.to_dict(), indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    app.run(main, flags_parser=cli.parse_flags)
