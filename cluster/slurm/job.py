"""`python -m cluster.slurm.job --run_dir DIR`: submit the run's sbatch script and wait for the job.

The process tfbench's supervision starts and watches when it runs outside an allocation: it
exits when the job has left the queue, with the job's exit status (1 when the job did not
complete although its script's status says 0: a job ended by Slurm, e.g. NODE_FAIL when a node
was lost, keeps ExitCode 0:0); SIGTERM or SIGINT (the run failed, hit its deadline, or was
interrupted) make it scancel the job and wait until Slurm has ended it, so that the job never
outlives the run. The job id goes to tasks/slurm.jobid. describe() says how a job ended, naming
the nodes Slurm took down under it.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Dict

from cluster.slurm import batch, query
from tfbench.results.rundir import RunDir


def failed_nodes(nodelist: str) -> Dict[str, str]:
    """{node: "state: reason"} of the nodes in `nodelist` that Slurm has down, drained or failing."""
    if not nodelist or nodelist == "(null)":
        return {}
    found = {}
    for name, node in query.nodes([nodelist]).items():
        state, reason = node["state"], node["reason"]
        if state.startswith(("down", "drain", "fail")):
            found[name] = f"{state}: {reason}" if reason and reason != "none" else state
    return found


def describe(job_id: str) -> str:
    """E.g. `Slurm job 7 ended NODE_FAIL (NodeDown); node h1 down*: Not responding`."""
    job = query.job(job_id)
    state, reason = job.get("state") or "unknown", job.get("reason", "None")
    text = f"Slurm job {job_id} ended {state}" + (f" ({reason})" if reason not in ("None", "") else "")
    nodes = failed_nodes(job.get("nodes", ""))
    return text + "".join(f"; node {name} {how}" for name, how in sorted(nodes.items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run_dir", required=True)
    args = parser.parse_args(argv)
    run = RunDir(args.run_dir)
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.append(signal.Signals(signum).name))
    try:
        job_id = batch.submit(run.file(batch.SCRIPT))
    except RuntimeError as e:
        print(f"tfbench: {e}", flush=True)
        return 1
    with open(run.file(batch.JOB_ID_FILE), "w", encoding="utf-8") as f:
        f.write(job_id + "\n")
    print(f"tfbench: submitted Slurm job {job_id}; its output: tasks/slurm-{job_id}.out", flush=True)
    while batch.job_state(job_id):
        if stop:
            print(f"tfbench: {stop[0]}: cancelling Slurm job {job_id}", flush=True)
            gone = batch.cancel(job_id)
            print(f"tfbench: Slurm job {job_id} {'ended' if gone else 'is still listed after scancel'}", flush=True)
            return 1
        time.sleep(batch.POLL_S)
    facts = batch.job_facts(job_id)
    print(f"tfbench: {describe(job_id)} (exit code {facts['exit_code']})", flush=True)
    status = batch.exit_status(job_id)
    return status if status or facts["state"] == "COMPLETED" else 1


if __name__ == "__main__":
    sys.exit(main())
