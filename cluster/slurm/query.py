"""What slurmctld says about a job or nodes, read as delimited fields.

`scontrol -o show job|node` prints key=value pairs separated by spaces while values may hold
spaces and '=' themselves (a job's name or comment, a node's OS or Reason: `Reason=maintenance by
admin x=y [root@...]`), so splitting it on spaces breaks. Debian's slurm-wlm 22.05 has no
`scontrol --json`, and sacct needs accounting storage that small clusters (and tfbench's private
ones) do not run. squeue and sinfo print chosen fields (`-O Field:|`: the suffix '|' ends each
field, no padding), for a job still in slurmctld's memory (MinJobAge, 300 s by default, after it
ended: `squeue -t all`) as for one in the queue. A field that may hold free text (a reason) is
read last, so that a '|' inside it cannot shift the others.
"""
from __future__ import annotations

import os
import subprocess
from typing import Dict, Iterable, List, Optional, Sequence

SEP = "|"
JOB_FIELDS = ("State", "NodeList", "exit_code", "Reason")
NODE_FIELDS = ("NodeList", "NodeAddr", "StateLong", "Reason")


def format_option(fields: Sequence[str]) -> str:
    """squeue/sinfo -O value printing each field unpadded and followed by SEP."""
    return ",".join(f"{field}:{SEP}" for field in fields)


def parse(text: str, fields: Sequence[str]) -> List[Dict[str, str]]:
    """One {field: value} per line of `-O format_option(fields)` output; the last field keeps any SEP."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = line.removesuffix(SEP).split(SEP, len(fields) - 1)
        rows.append(dict(zip(fields, (v.strip() for v in values + [""] * (len(fields) - len(values))))))
    return rows


def exit_code(raw: str) -> str:
    """squeue's exit_code (22.05 prints the wait status: 768 for exit 3, 15 for SIGTERM) as
    scontrol's ExitCode, "status:signal" ("3:0", "0:15"); kept as it is when already so."""
    if ":" in raw or not raw.isdigit():
        return raw
    status = int(raw)
    if os.WIFSIGNALED(status):
        return f"0:{os.WTERMSIG(status)}"
    return f"{os.WEXITSTATUS(status)}:0"


def _run(command: List[str], timeout: float) -> Optional[str]:
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def job(job_id: str, timeout: float = 30.0) -> Dict[str, str]:
    """{"state", "nodes", "exit_code" ("status:signal"), "reason"} of a job slurmctld still knows;
    {} when it knows none (unknown id, or forgotten after MinJobAge) or cannot be asked."""
    out = _run(["squeue", "-h", "-t", "all", "-j", str(job_id), "-O", format_option(JOB_FIELDS)], timeout)
    rows = parse(out or "", JOB_FIELDS)
    if not rows:
        return {}
    row = rows[0]
    return {"state": row["State"], "nodes": row["NodeList"], "exit_code": exit_code(row["exit_code"]),
            "reason": row["Reason"]}


def nodes(names: Iterable[str], timeout: float = 30.0) -> Dict[str, Dict[str, str]]:
    """{node: {"address", "state", "reason"}} for the named nodes (a hostlist such as h[0-3] or
    names); {} when sinfo cannot answer."""
    names = ",".join(sorted(set(names)))
    if not names:
        return {}
    out = _run(["sinfo", "-h", "-N", "-n", names, "-O", format_option(NODE_FIELDS)], timeout)
    return {row["NodeList"]: {"address": row["NodeAddr"], "state": row["StateLong"], "reason": row["Reason"]}
            for row in parse(out or "", NODE_FIELDS) if row["NodeList"]}
