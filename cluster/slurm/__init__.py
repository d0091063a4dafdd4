"""Running a tfbench cluster on Slurm.

- resolver: SlurmClusterResolver made to work on CPU-only nodes; each task's role and TF_CONFIG.
- steps: the srun commands of a run (the tasks' step, one system monitor per node).
- batch: the sbatch script of a run, and job state, end state and scancel.
- job: the job follower supervision starts outside an allocation (submit, wait, scancel).
- node_monitor: the system monitor of one node, and the monitor supervision sees.
- local_cluster, node_cluster: private Slurm clusters on this machine (one node; one node per
  emulated host behind a shaped link), with conf (their slurm.conf) and daemons (start and stop).
The launcher itself is cluster.launchers.slurm, behind the same interface as the others.
"""
