"""Running a tfbench cluster on Slurm.

- resolver: SlurmClusterResolver made to work on CPU-only nodes; each task's role and TF_CONFIG.
- steps: the srun commands of a run (the tasks' step, one system monitor per node).
- driver: inside an allocation, runs those steps, ends the servers, merges the records.
- batch: outside one, writes the sbatch script, submits it, follows the job, scancels it.
- node_monitor: the system monitor of one node.
"""
