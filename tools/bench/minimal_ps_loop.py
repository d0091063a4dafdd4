"""The reference for tools.bench's parameter-server row: a minimal ClusterCoordinator training loop
of the DLRM-like recommender, written as a user would write it, with nothing of tfbench but the
workload's examples (--data=stream: tfbench.workloads.clicks, so both sides train on the same data).

It starts its own cluster of tf.distribute.Server processes on this machine (--num_ps ps, --num_workers
workers; with 2 ps or more every variable above 256 KiB split over them, TensorFlow's MinSizePartitioner),
is its coordinator, schedules --num_warmup_steps closures (untimed), waits for them,
then schedules --num_steps closures at once, free-running, and prints one JSON line: examples/sec
= batch x closures / the wall time from scheduling the first to the end of the last (join), and
where each process ran. A closure is one asynchronous update of whichever worker runs it (pull
the rows and weights, compute, push), as in TensorFlow's parameter-server tutorial.

--record says what becomes of each closure's record (its loss, start and end on the worker):
`none` (the default) lets it go, as the tutorial does; `held` keeps each closure's RemoteValue and
fetches them after the join (ClusterCoordinator's worker thread then copies every output to the
coordinator before it dispatches that worker's next closure); `per_worker` writes it into a
per-worker variable (`tf.Variable(..., per_worker_variable=True)`, on each worker) and reads every
worker's once after the join, so that nothing is held. The JSON line counts the records read back.

Placement, as tfbench places --num_workers=N --cores_per_worker=1 (cluster/plan): worker i is
pinned to the i-th core this process may use (1 intra-op, 2 inter-op threads); the ps, then the
coordinator, take a spare core each when there is one, else share the workers' cores (threads:
their cores, at most 2 inter-op). On 2 cores with 2 workers: worker_0 on core 0, worker_1 on
core 1, ps and coordinator on cores 0,1. The model and the data follow docs/definitions.md:
T tables of R rows x D dims looked up by unique ids, h values per table from Zipf(alpha), each
value's row a hash of it (--id_layout=hashed; --data=fixed: an affine map by a prime, a bijection
of the rows) or the value itself (hot_first), bottom MLP
64-32-D, dot interaction, top MLP 64-32-1, binary cross-entropy, the legacy SGD 0.1 (as
TensorFlow's parameter-server tutorial). Each closure's batch (--data): `stream` (the default) is the
next batch of its worker's click stream, the examples tfbench's run reads at that step, made on the
worker by a tf.data pipeline as a user's input would be; `fixed` repeats one batch per worker made
with numpy before timing, the tutorial's in-memory data, which costs the worker nothing a step.

The servers are children in process groups of their own, asked to die with this process
(PR_SET_PDEATHSIG): killed by any signal, it leaves no process behind; at the end it stops them.
TensorFlow's temporary files go to a directory of its own (TMPDIR), removed at the end; killed
outright, it leaves that directory.
"""
import argparse
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

ENVIRONMENT = {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "-1",
               "TF_ENABLE_ONEDNN_OPTS": "1"}  # the same kernels as tfbench
STOP_WAIT_S = 10.0


FLAGS = (("batch_size", int, 32, "examples per closure (per worker)"),
         ("embedding_tables", int, 8, "T tables"), ("embedding_rows", int, 100000, "R rows per table"),
         ("embedding_dim", int, 16, "D dims per row"), ("ids_per_feature", int, 1, "h ids per table and example"),
         ("zipf_alpha", float, 1.0, "values from Zipf(alpha) over a table's values; 0: uniform"),
         ("id_layout", str, "hashed", "each value's row: hashed (an affine bijection) or hot_first (the value)"),
         ("dense_features", int, 13, "inputs of the bottom MLP"), ("num_workers", int, 2, "worker servers"),
         ("num_ps", int, 1, "parameter servers"),
         ("num_warmup_steps", int, 10, "closures scheduled and waited for before timing"),
         ("num_steps", int, 100, "closures timed"), ("seed", int, 0, "seed of the data"),
         ("record", str, "none", "each closure's record: none (let go), held (fetched after the join), "
                                 "per_worker (written on its worker, read after the join)"),
         ("data", str, "stream", "each closure's batch: stream (the next of the recommender's click stream, made "
                                 "on its worker) or fixed (one batch per worker, made before timing, repeated)"))
RECORDS = ("none", "held", "per_worker")
DATA = ("stream", "fixed")


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        print(f"tools.bench.minimal_ps_loop: error: {message}", file=sys.stderr, flush=True)
        sys.exit(2)


def parse(argv):
    p = OneLineParser(prog="python -m tools.bench.minimal_ps_loop", description=__doc__.split("\n\n")[0])
    p.add_argument("--helpfull", action="help", help="the same as --help")
    for name, kind, default, text in FLAGS:
        p.add_argument(f"--{name}", type=kind, default=default, help=f"{text} (default {default})")
    p.add_argument("--serve", nargs=3, metavar=("JOB", "INTRA", "INTER"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    for name, kind, _, _ in FLAGS:
        if kind is int and name != "seed" and getattr(a, name) < 1:
            p.error(f"--{name} must be at least 1, got {getattr(a, name)}")
    if a.zipf_alpha < 0:
        p.error(f"--zipf_alpha must be 0 or more, got {a.zipf_alpha:g}")
    if a.id_layout not in ("hashed", "hot_first"):
        p.error(f"--id_layout must be hashed or hot_first, got {a.id_layout!r}")
    if a.record not in RECORDS:
        p.error(f"--record must be one of {', '.join(RECORDS)}, got {a.record!r}")
    if a.data not in DATA:
        p.error(f"--data must be {' or '.join(DATA)}, got {a.data!r}")
    return a


def serve(job, intra, inter):
    """A ps or worker: a gRPC server from TF_CONFIG, driven by the coordinator."""
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra, inter_op_parallelism_threads=inter)
    tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type, task_index=resolver.task_id,
                         protocol="grpc", config=config, start=True).join()


def placement(num_workers, cores, num_ps=1):
    """task -> (cores, intra-op threads, inter-op threads), as the module's docstring says."""
    cores = sorted(cores)
    out = {f"worker_{i}": ((cores[i % len(cores)],), 1, 2) for i in range(num_workers)}
    spare = cores[num_workers:]
    shared = tuple(sorted({core for mine, _, _ in out.values() for core in mine}))
    for name in [f"ps_{i}" for i in range(num_ps)] + ["chief_0"]:
        mine = (spare.pop(0),) if spare else shared
        out[name] = (mine, len(mine), 2 if name != "chief_0" else min(2, len(mine)))  # a server needs 2 inter-op
    return out


def start_servers(places, cluster):
    """One process per ps and worker, each pinned, in a process group of its own, dying with us."""
    parent = os.getpid()

    def child(cores):
        def preexec():
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
            if os.getppid() != parent:  # we died before the request was made
                os._exit(1)
            os.sched_setaffinity(0, cores)
        return preexec

    procs = []
    for job in ("ps", "worker"):
        for i in range(len(cluster[job])):
            cores, intra, inter = places[f"{job}_{i}"]
            env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": job, "index": i}}))
            command = [sys.executable, os.path.abspath(__file__), "--serve", job, str(intra), str(inter)]
            procs.append(subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=sys.stderr,
                                          start_new_session=True, preexec_fn=child(cores)))
    return procs


def stop(procs):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + STOP_WAIT_S
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        if all(p.poll() is not None for p in procs):
            return


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def make_data(a):
    """Every worker's batch (dense [W, B, F], ids [W, B, T, h], labels [W, B]), made before timing."""
    import numpy as np

    cdf = np.cumsum(np.arange(1, a.embedding_rows + 1, dtype=np.float64) ** -a.zipf_alpha)
    cdf /= cdf[-1]
    prime = 2654435761  # a prime above any table's rows: value -> (prime x value + 1) mod R is a bijection
    dense, ids, labels = [], [], []
    for w in range(a.num_workers):
        rng = np.random.default_rng([a.seed, w])
        dense.append(rng.random((a.batch_size, a.dense_features), dtype=np.float32))
        values = np.stack([np.minimum(np.searchsorted(cdf, rng.random(a.batch_size * a.ids_per_feature), "right"),
                                      a.embedding_rows - 1).reshape(a.batch_size, a.ids_per_feature)
                           for _ in range(a.embedding_tables)], axis=1).astype(np.int64)
        ids.append((values * prime + 1) % a.embedding_rows if a.id_layout == "hashed" else values)
        labels.append((rng.random(a.batch_size) < 0.25).astype(np.float32))
    return np.stack(dense), np.stack(ids), np.stack(labels)


def clicks_batch(a, worker, step):
    """Worker `worker`'s batch at `step` of the recommender's click stream: the examples tfbench's
    run reads at that step (tfbench.workloads.clicks, the workload's data, not its strategy)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if root not in sys.path:  # run as a file (its servers are), the repository is not on the path
        sys.path.insert(0, root)
    from tfbench.workloads import clicks

    features, labels = clicks.examples([a.embedding_rows] * a.embedding_tables, a.dense_features, a.ids_per_feature,
                                       a.zipf_alpha, a.id_layout, a.batch_size, a.seed, worker, step)
    return {"numeric": features["dense"], "ids": features["sparse"]}, labels


def build_model(a, tf, keras):
    class UniqueEmbedding(keras.layers.Embedding):  # each distinct id looked up once
        def call(self, ids):
            unique, where = tf.unique(tf.reshape(ids, [-1]))
            rows = tf.gather(tf.nn.embedding_lookup(self.embeddings, unique), where)
            return tf.reshape(rows, [-1, ids.shape[1], self.output_dim])

    dense_in = keras.Input((a.dense_features,), name="numeric")
    ids_in = keras.Input((a.embedding_tables, a.ids_per_feature), name="ids", dtype="int64")
    x = dense_in
    for units in (64, 32, a.embedding_dim):
        x = keras.layers.Dense(units, activation="relu")(x)
    vectors = [x] + [tf.reduce_sum(UniqueEmbedding(a.embedding_rows, a.embedding_dim)(ids_in[:, t, :]), axis=1)
                     for t in range(a.embedding_tables)]
    n = len(vectors)
    stacked = tf.stack(vectors, axis=1)
    dots = tf.reshape(tf.matmul(stacked, stacked, transpose_b=True), [-1, n * n])
    z = tf.concat([x, tf.gather(dots, [i * n + j for i in range(n) for j in range(i + 1, n)], axis=1)], axis=1)
    for units in (64, 32):
        z = keras.layers.Dense(units, activation="relu")(z)
    return keras.Model({"numeric": dense_in, "ids": ids_in}, keras.layers.Dense(1)(z))


def train(a, cluster, cores, intra, inter):
    os.sched_setaffinity(0, cores)
    import tensorflow as tf
    import tf_keras as keras

    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(inter)
    dense, ids, labels = make_data(a) if a.data == "fixed" else (None, None, None)
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc")
    partitioner = (tf.distribute.experimental.partitioners.MinSizePartitioner(min_shard_bytes=256 << 10,
                                                                              max_shards=a.num_ps)
                   if a.num_ps > 1 else None)
    strategy = tf.distribute.ParameterServerStrategy(resolver, variable_partitioner=partitioner)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    print(f"minimal_ps_loop: coordinator of {a.num_workers} workers and {a.num_ps} ps connected", file=sys.stderr,
          flush=True)
    with strategy.scope():
        model = build_model(a, tf, keras)
        optimizer = keras.optimizers.legacy.SGD(0.1)

    def dataset_fn(_):
        w = tf.distribute.coordinator.experimental_get_current_worker_index()
        if a.data == "fixed":
            batch = ({"numeric": tf.gather(dense, w), "ids": tf.gather(ids, w)}, tf.gather(labels, w))
            return tf.data.Dataset.from_tensors(batch).repeat()
        return tf.data.Dataset.range(2 ** 62).map(lambda step: clicks_batch(a, w, step)).prefetch(2)

    @tf.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(dataset_fn)

    iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    total = a.num_warmup_steps + a.num_steps
    if a.record == "per_worker":
        with strategy.scope():
            book = tf.Variable(tf.zeros([total, 3], tf.float64), per_worker_variable=True)
            written = tf.Variable(tf.constant(0, tf.int64), per_worker_variable=True)

    @tf.function
    def step(iterator):
        if a.record == "none":  # the tutorial's step, exactly
            return strategy.run(replica_fn, args=next(iterator))
        start = tf.timestamp()
        with tf.control_dependencies([start]):
            features, y = next(iterator)
        loss = strategy.run(replica_fn, args=(features, y))
        with tf.control_dependencies([loss]):
            record = tf.stack([tf.cast(loss, tf.float64), start, tf.timestamp()])
        if a.record == "held":
            return record
        book.scatter_nd_update([[written.assign_add(1) - 1]], [record])
        return None

    def replica_fn(features, y):
        with tf.GradientTape() as tape:
            logits = tf.reshape(model(features, training=True), [-1])
            loss = tf.nn.compute_average_loss(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits),
                                              global_batch_size=a.batch_size)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    held = []

    def run(closures):
        for _ in range(closures):
            value = coordinator.schedule(step, args=(iterator,))
            if a.record == "held":
                held.append(value)
        coordinator.join()

    run(a.num_warmup_steps)
    t0 = time.perf_counter()
    run(a.num_steps)
    window = time.perf_counter() - t0
    if a.record == "held":
        return window, len([v.fetch() for v in held])
    if a.record == "per_worker":
        counts = [int(c.numpy()) for c in written.read_all()]
        rows = [b.numpy()[:k] for b, k in zip(book.read_all(), counts)]
        return window, sum(int((r[:, 2] >= r[:, 1]).sum()) for r in rows)  # every record has its end after its start
    return window, 0


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    for name, value in ENVIRONMENT.items():  # before TensorFlow starts, here and in the servers
        os.environ.setdefault(name, value)
    if a.serve:
        serve(a.serve[0], int(a.serve[1]), int(a.serve[2]))
        return
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends us at once; the kernel then ends the servers
    # TensorFlow's autograph sources go to the temporary directory and are deleted only by a teardown
    # this process skips (os._exit): a directory of its own, removed at the end
    scratch = tempfile.tempdir = os.environ["TMPDIR"] = tempfile.mkdtemp(prefix="minimal_ps_loop-")
    print(f"minimal_ps_loop: temporary directory: {scratch}", file=sys.stderr, flush=True)
    places = placement(a.num_workers, os.sched_getaffinity(0), a.num_ps)
    ports = free_ports(a.num_workers + a.num_ps + 1)
    cluster = {"chief": [f"localhost:{ports[0]}"], "ps": [f"localhost:{p}" for p in ports[1:1 + a.num_ps]],
               "worker": [f"localhost:{p}" for p in ports[1 + a.num_ps:]]}
    servers = start_servers(places, cluster)
    try:
        window, records = train(a, cluster, *places["chief_0"])
    except BaseException:
        traceback.print_exc()
        stop(servers)
        shutil.rmtree(scratch, ignore_errors=True)
        sys.stderr.flush()
        os._exit(1)
    stop(servers)
    shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({"examples_per_sec": a.batch_size * a.num_steps / window, "closures": a.num_steps,
                      "window_s": window, "record": a.record, "data": a.data, "records_read": records,
                      "placement": {k: {"cores": list(c), "intra_threads": i, "inter_threads": j}
                                    for k, (c, i, j) in places.items()}}), flush=True)
    os._exit(0)  # TensorFlow's own teardown would call the stopped servers


if __name__ == "__main__":
    main()
