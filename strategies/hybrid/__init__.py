"""--strategy=hybrid: embedding tables on parameter servers, every other variable all-reduced.

Each worker is a Horovod rank that also joins a TensorFlow cluster holding the ps tasks
(tf.config.experimental_connect_to_cluster, under a job of its own). A table is split into row
ranges, one per ps; each ps stacks the ranges it holds in one resource variable under a name
every rank shares, so all ranks read and update the same rows. A step pulls the rows its batch
touches (one ResourceGather on each ps), computes, all-reduces the dense gradients with Horovod,
pushes its rows' SGD step (one ResourceScatterAdd on each ps) and waits until every rank has
pushed: the tables get one update per global step, as the synchronous parameter server's. A model
without tables runs the dense all-reduce alone.

- server: the ps tasks' gRPC servers;
- tables: the row ranges and their stacks on the ps, their pull and push, and the rank's
  connection to the ps;
- step: the traced step and the marks that split it;
- adapter: the strategy adapter (a Horovod rank, strategies.horovod);
- records: what its records add (rows per ps, the step split, the all-reduce).
"""
