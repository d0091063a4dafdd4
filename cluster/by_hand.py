"""`python -m cluster.by_hand <tfbench flags>`: the cluster of a run, for starting its tasks by hand.

- JSON (default): the whole plan; `--format=export`: each task's TF_CONFIG as shell lines.
- `--run_dir=DIR`: prepares DIR as a run directory (config.json, plan.json, environment.json,
  tasks/, tb/) and prints, per host, the exact commands that start its tasks; when they are
  done, `python -m cluster.merge --run_dir=DIR` writes the cluster record and prints the table.
  DIR must be on a filesystem every host sees, at the same path, with tfbench at the same path.
Uses the same flags and validation as `python -m tfbench`, except that --hosts may name any machine.
"""
from __future__ import annotations

import json
import os
import shlex
import sys
from typing import Dict, List

from absl import app, flags

import tfbench.config as config_lib
from cluster.plan.topology import make_plan
from tfbench.app.run_setup import prepare_run_dir
from tfbench.config import flags as tfbench_flags
from tfbench.config import helptext
from tfbench.config.errors import ConfigError
from tfbench.config.kinds import KINDS

flags.DEFINE_enum("format", "json", ["json", "export"], "json: the whole plan; export: shell lines per task.")
flags.DEFINE_string("run_dir", "", "Prepare this run directory and print the commands that start each host's tasks.")

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def task_command(task, plan) -> str:
    if task.horovod_rank >= 0:
        return "horovodrun --gloo ... python -m tfbench.task --run_dir RUN_DIR --task horovod"
    return f"python -m tfbench.task --run_dir RUN_DIR --task {task.name}"


def render_exports(plan) -> str:
    lines = ["# RUN_DIR must be a prepared run directory: the same flags with --run_dir=DIR prepare it",
             "# and print these commands ready to run.", ""]
    for t in plan.tasks:
        lines.append(f"# {t.name} on {t.host}" + (f" (cores {','.join(map(str, t.cores))})" if t.cores else ""))
        for key, value in sorted(t.full_env().items()):
            lines.append(f"export {key}={shlex.quote(value)}")
        lines.append(task_command(t, plan))
        lines.append("")
    if plan.horovod_hosts:
        lines.append(f"# horovodrun --gloo -np {len(plan.ranked_tasks)} -H {plan.horovod_hosts} ...")
    return "\n".join(lines)


def host_commands(plan, run_dir: str, paths=()) -> Dict[str, List[str]]:
    """Host -> shell lines starting its tasks in the background, each logging to tasks/<name>.log.

    The task reads its TF_CONFIG, cores and threads from run_dir/plan.json; Horovod's ranks are
    all started by one horovodrun on the first host. `paths`: more directories to import from (a
    user's model: the directory its module is in, at the same path on every host)."""
    env = (f"cd {shlex.quote(PROJECT_ROOT)} && PYTHONUNBUFFERED=1 "
           f"PYTHONPATH={shlex.quote(os.pathsep.join((PROJECT_ROOT, *paths)))}")
    python = shlex.quote(sys.executable)
    rd = shlex.quote(run_dir)
    by_host: Dict[str, List[str]] = {}
    ranked = plan.ranked_tasks
    if ranked:
        horovodrun = shlex.quote(os.path.join(os.path.dirname(sys.executable), "horovodrun"))
        log = shlex.quote(os.path.join(run_dir, "tasks", "horovodrun.log"))
        by_host[ranked[0].host] = [
            f"({env} {horovodrun} --gloo -np {len(ranked)} -H {plan.horovod_hosts} {python} -m tfbench.task "
            f"--run_dir {rd} --task horovod > {log} 2>&1 &)"]
    for t in plan.tasks:
        if t in ranked:
            continue
        log = shlex.quote(os.path.join(run_dir, "tasks", f"{t.name}.log"))
        by_host.setdefault(t.host, []).append(
            f"({env} {python} -m tfbench.task --run_dir {rd} --task {t.name} > {log} 2>&1 &)")
    return by_host


def render_run_commands(plan, run_dir: str, paths=()) -> str:
    lines = [f"# tfbench run directory {run_dir} is ready; start each host's tasks:"]
    for host, commands in host_commands(plan, run_dir, paths).items():
        lines.append(f"# on {host}:")
        lines.extend(commands)
    services = [t.name for t in plan.tasks if t.service]
    if services:
        lines.append(f"# {', '.join(services)} serve until stopped: stop them once "
                     f"{', '.join(t.name for t in plan.tasks if not t.service)} has finished "
                     f"(pkill -f 'tfbench.task --run_dir {run_dir}' on their hosts)")
    lines.append("# when every task has finished (tasks/<name>.progress says done), merge the records:")
    lines.append(f"cd {shlex.quote(PROJECT_ROOT)} && "
                 + (f"PYTHONPATH={shlex.quote(os.pathsep.join((PROJECT_ROOT, *paths)))} " if paths else "")
                 + f"{shlex.quote(sys.executable)} -m cluster.merge --run_dir {shlex.quote(run_dir)}")
    return "\n".join(lines)


def main(argv) -> int:
    if len(argv) > 1:
        helptext.fail_usage(f"unexpected arguments: {' '.join(argv[1:])}")
    flag_values = flags.FLAGS
    run_dir = os.path.abspath(flag_values.run_dir) if flag_values.run_dir else ""
    try:
        config = tfbench_flags.config_from_flags()
        if run_dir:
            config = config.replace(logdir=os.path.dirname(run_dir), run_id=os.path.basename(run_dir))
        config = config_lib.validate(config, kind=KINDS["by_hand"])
        plan = make_plan(config)
    except ConfigError as e:
        helptext.fail_usage(str(e))
    for warning in plan.warnings:
        print(f"tfbench: warning: {warning}", file=sys.stderr)
    if run_dir:
        try:
            prepare_run_dir(config, plan)
        except ConfigError as e:
            helptext.fail_usage(str(e))
        print(render_run_commands(plan, run_dir, config.workload.import_paths()))
    elif flag_values.format == "export":
        print(render_exports(plan))
    else:
        print(json.dumps(plan.to_dict(), indent=2, sort_keys=True))
    return 0


def help_groups():
    return helptext.names_of(tfbench_flags.GROUPS) + [("Plan output", ["format", "run_dir"])]


if __name__ == "__main__":
    app.run(main, flags_parser=helptext.parser(__doc__, help_groups, "cluster.by_hand", tfbench_flags.define_flags))
