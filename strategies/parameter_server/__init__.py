"""ParameterServerStrategy through TF2's ClusterCoordinator, one module per job:

- coordinator: the adapter the chief runs (strategy, model, the run's loop, placement evidence);
- server: the ps and worker tasks, gRPC servers the coordinator drives;
- asynchronous: the scheduled update of one worker; rounds: its rounds of N closures, and the
  staleness bound's (stale-synchronous) rounds; staleness: how stale each update was;
- sync: the synchronous global step, aggregated and applied on the ps;
- split: where a global step's time goes; records: one record per worker and the coordinator's;
- variables: where the variables live (--ps_partitioner, --ps_placer, bytes per ps);
- ops: the small graph helpers the steps share (outputs on the worker, closures lost with it).
"""
