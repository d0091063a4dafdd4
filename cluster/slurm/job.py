"""`python -m cluster.slurm.job --run_dir DIR`: submit the run's sbatch script and wait for the job.

The process tfbench's supervision starts and watches when it runs outside an allocation: it
exits when the job has left the queue, with the job's exit status; SIGTERM or SIGINT (the run
failed, hit its deadline, or was interrupted) make it scancel the job and wait until Slurm has
ended it, so that the job never outlives the run. The job id goes to tasks/slurm.jobid.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time

from cluster.slurm import batch
from tfbench.results.rundir import RunDir


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
    print(f"tfbench: Slurm job {job_id} ended: {facts['state']} (exit code {facts['exit_code']})", flush=True)
    return batch.exit_status(job_id)


if __name__ == "__main__":
    sys.exit(main())
