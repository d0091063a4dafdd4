# tfbench entry points. `make run` and `make test` set everything up on a fresh machine:
# a virtualenv with the pinned requirements, and Horovod (built once, wheel cached in
# ~/.cache/tfbench/wheels). Set-up is skipped when already done.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The pinned requirements: the package's (requirements.txt, pyproject.toml's dependencies) and the
# test suite's (pyproject.toml's dependency group `test`), hashed as one list.
TEST_PINS := import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["dependency-groups"]["test"]))
REQ_HASH := $(shell { cat requirements.txt; $(PYTHON) -c '$(TEST_PINS)'; } 2>/dev/null | sha1sum | cut -c1-12)
REQ_STAMP := $(VENV)/.requirements-$(REQ_HASH)
HVD_STAMP := $(VENV)/.horovod-$(shell sha1sum tools/scripts/build_horovod.sh 2>/dev/null | cut -c1-12)
# The environment lives once per interpreter and requirements under the user's cache, and every
# clone links it as .venv (tools/scripts/setup_venv.sh). `make SHARED_VENV= ...` keeps it in the clone.
SHARED_VENV ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/tfbench/venvs/$(shell $(PYTHON) -c 'import sys; print("py%d.%d" % sys.version_info[:2])' 2>/dev/null)-$(REQ_HASH)

.PHONY: setup run test test-packages test-fast bench soak sweep strategies network network-slurm staleness emulated model model-scale latency dlrm dlrm-scale dlrm-rows dlrm-auc horovod slurm image clean

setup: $(REQ_STAMP) $(HVD_STAMP)

$(REQ_STAMP): | requirements.txt pyproject.toml
	@bash tools/scripts/setup_venv.sh "$(PYTHON)" "$(VENV)" "$(SHARED_VENV)" "$@"

$(HVD_STAMP): | $(REQ_STAMP)
	@test -e $@ || { VENV=$(VENV) bash tools/scripts/build_horovod.sh && rm -f $(VENV)/.horovod* && touch $@; }

horovod: $(HVD_STAMP)

# Slurm and munge from Debian (root), for --launcher=slurm on this machine and the Slurm tests,
# which also call this themselves when run as root.
slurm:
	bash tools/scripts/install_slurm.sh

# The container image (Containerfile) with podman: tfbench installed with its requirements and
# Horovod, tagged tfbench:latest; `make image VARIANT=gpu` the GPU variant (tfbench:gpu),
# BASE=<image> another base than the Debian 12 one made here with mmdebstrap (BUILD.md). Installs
# podman and mmdebstrap first (root, Debian: tools/scripts/install_podman.sh).
image:
	bash tools/scripts/build_image.sh

# The default job: a few-minute comparison of strategies on ResNet50 at their tuned and default knobs
# (3-5 points: a strategy whose saved tuning kept its defaults runs once at its defaults; 2-3 min on
# 2 cores), table and plots. A strategy this machine never tuned is tuned first within 4 min, smallest
# grid first, and the tuning kept in ~/.cache/tfbench/tuned.json for the next make run (on a new
# machine: MWMS in the first make run, Horovod in the second; tools/sweeps/quick.yaml).
# Every `make run` measures afresh, into sweeps/quick-<time>.
run: setup
	$(PY) -m tools.sweep --config=tools/sweeps/quick.yaml --sweep_dir=sweeps/quick-$$(date +%Y%m%d-%H%M%S)

# First the Debian packages of the root tests (Slurm, podman; root only), installed once so that
# no two tests install at once. Then the tests that start no TensorFlow and time nothing, three at
# a time (pytest-xdist): the root tests of one module (Slurm daemons, namespaces: mostly waiting)
# on one worker, the rest on the others; then the slow and serial tests one at a time, as they pin
# tasks to cores and time what they start.
test: setup test-packages
	$(PY) -m pytest -n 3 --dist loadgroup -m "not slow and not serial" tests; first=$$?; \
	$(PY) -m pytest -m "slow or serial" tests; rest=$$?; \
	test $$first -eq 0 && test $$rest -eq 0

test-packages:
	@bash tools/scripts/install_test_packages.sh

test-fast: setup
	$(PY) -m pytest -n 2 -m "not slow and not root" tests

# Side by side: tfbench vs a minimal loop, bf16 vs fp32, fraction of the GEMM peak, 2 vs 1
# one-core workers (MWMS, Horovod), tfbench's parameter server vs a minimal ClusterCoordinator loop
# on the recommender (tools/bench/ps_peer.py, tools/bench/minimal_ps_loop.py); then the monitor's
# cost. About 13 minutes on 2 cores.
# tools.bench.peak refuses a busy machine (a peak measured under load is too low): the benchmark then
# goes on and its fraction-of-peak line says the peak is unknown.
bench: setup
	-$(PY) -m tools.bench.peak
	$(PY) -m tools.bench --repeats=2
	$(PY) -m tools.bench.overhead --against=monitor_off --repeats=2

# 50 short runs of every strategy and launcher present, then a sweep interrupted by SIGINT and
# SIGKILL and resumed; prints what each left behind (processes, ports, namespaces, Slurm jobs,
# temp dirs, open files; goal: 0) and checks every sweep point is done exactly once (~12 min).
soak: setup
	$(PY) -m tools.bench.soak --runs=50

# PS vs MWMS vs Horovod, 1-2 one-core workers, batch 8/16/32, forward and train, ResNet50 32 px:
# 36 points, ~18 min on 2 cores (docs/sweeps.md).
sweep: setup
	$(PY) -m tools.sweep --config=tools/sweeps/default.yaml

# Every strategy, 1 and 2 one-core workers, ResNet50 64 px: rates and scaling efficiency
# (11 points, ~6 min on 2 cores).
strategies: setup
	$(PY) -m tools.sweep --config=tools/sweeps/strategies.yaml

# Sync vs async vs bounded-staleness parameter servers, MWMS and Horovod on real data (digits),
# 1-4 workers, with and without a straggler: staleness, idleness, time to 90% accuracy:
# 23 points, ~10 min on 2 cores (docs/sync-async.md).
staleness: setup
	$(PY) -m tools.sweep --config=tools/sweeps/staleness.yaml --sweep_dir=sweeps/staleness-$$(date +%Y%m%d-%H%M%S)

# Emulated compute (--compute=emulated) against real compute, side by side: every strategy at 2 and 4
# one-core workers on 200 Mbit/s emulated hosts (AlexNet 64 px), then default, mirrored and Horovod
# (also elastic) on this machine's loopback; the report's "Emulated vs real compute" table holds each
# pair's ratio: 32 points, ~45 min on 2 cores (docs/network.md#emulated-compute). Not part of make test.
emulated: setup
	d=sweeps/emulated-$$(date +%Y%m%d-%H%M%S); \
	$(PY) -m tools.sweep --config=tools/sweeps/emulated.yaml --sweep_dir=$$d/hosts --report=false; \
	$(PY) -m tools.sweep --config=tools/sweeps/emulated-local.yaml --sweep_dir=$$d/local --report=false; \
	$(PY) -m tools.sweep --config=tools/sweeps/emulated-local.yaml --strategy=horovod --num_workers=2 \
		--set=horovod_elastic=true --sweep_dir=$$d/elastic --report=false; \
	$(PY) -m tools.report $$d

# PS (collocated, separate), MWMS and Horovod on emulated hosts, 1-4 workers, per link rate:
# 32 points, ~10 min on 2 cores (docs/network.md).
network: setup
	$(PY) -m tools.sweep --config=tools/sweeps/network.yaml --sweep_dir=sweeps/network-$$(date +%Y%m%d-%H%M%S)

# The performance model: a sweep on emulated hosts (PS vs MWMS, 1-3 workers, 50/100/200 Mbit/s),
# then fit, validate on held-out runs and predict to 1024 workers; prints `median abs error = X%`
# and `coverage = X% of held-out points inside their 90% interval, median width Y%`, and writes
# <sweep>/model/summary.md with one plot per link: 18 points, ~5 min on 2 cores
# (docs/performance-model.md).
model: setup
	d=sweeps/model-$$(date +%Y%m%d-%H%M%S); \
	$(PY) -m tools.sweep --config=tools/sweeps/model.yaml --sweep_dir=$$d --report=false; \
	$(PY) -m tools.model report $$d

# The performance model at 8-16 workers: PS (one ps on its own host; k = N shards collocated), MWMS
# and Horovod on emulated hosts, LeNet 16 px on 5 Mbit/s links, 1-16 workers, and PS with 2 and 3 ps
# at 4 workers, on emulated compute (each worker's forward and backward pass a wait that uses no CPU);
# fits on N <= 6 and prints per strategy the error at 8, 12, 16 and its trend per doubling of N, each
# ps host's bytes against its shards, then `median abs error = X%` and the coverage of the held-out
# runs by their 90% intervals with the intervals' median width: 34 points, ~27 min on 2 cores, at
# most 9 GiB in use (docs/performance-model.md). MODEL_SCALE_COMPUTE=real: the same points on real
# compute (16 workers share 2 cores). MODEL_SCALE_REPEATS=2: every point run twice, so that the fit
# and its intervals see the runs' own scatter (68 points, ~54 min). Not part of make test.
MODEL_SCALE_COMPUTE ?= emulated
MODEL_SCALE_REPEATS ?= 1
model-scale: setup
	d=sweeps/model-scale-$(MODEL_SCALE_COMPUTE)-$$(date +%Y%m%d-%H%M%S); \
	c="--compute=$(MODEL_SCALE_COMPUTE) --repeats=$(MODEL_SCALE_REPEATS)"; \
	$(PY) -m tools.sweep --config=tools/sweeps/model-scale.yaml $$c --sweep_dir=$$d/shared --report=false; \
	for n in 1 2 3 4 6 8 12 16; do \
		$(PY) -m tools.sweep --config=tools/sweeps/model-scale.yaml $$c --strategy=parameter_server \
			--ps_placement=collocated --num_workers=$$n --num_ps=$$n --sweep_dir=$$d/ps-k$$n --report=false; \
	done; \
	for k in 2 3; do \
		$(PY) -m tools.sweep --config=tools/sweeps/model-scale.yaml $$c --strategy=parameter_server \
			--num_workers=4 --num_ps=$$k --sweep_dir=$$d/ps-sep$$k --report=false; \
	done; \
	$(PY) -m tools.model scale $$d

# Worker idleness and images/sec against link latency (0-200 ms, the user-space delay line):
# asynchronous parameter servers at 1 and 2 ps for 2 workers and batch 32 and 256, and a
# synchronous series; says whether the studies' direction holds: 25 points, ~40 min on 2 cores
# (a 200 ms point takes 3-4 min, mostly TensorFlow's cluster start-up over 400 ms round trips;
# docs/network.md).
latency: setup
	d=sweeps/latency-$$(date +%Y%m%d-%H%M%S); \
	$(PY) -m tools.sweep --config=tools/sweeps/latency.yaml --sweep_dir=$$d/async --report=false; \
	$(PY) -m tools.sweep --config=tools/sweeps/latency.yaml --ps_sync=true --num_ps=1 --batch_size=32 \
		--sweep_dir=$$d/sync --report=false; \
	$(PY) -m tools.report.latency $$d

# Embedding tables: a recommender (DLRM-like, Zipf values hashed into the rows) under a synchronous
# parameter server with a ps on every host, MWMS, Horovod and the hybrid (tables on the ps, dense
# layers all-reduced), 2-8 one-core workers on 10 and 100 Mbit links, two skews, 3 runs a point, and
# the hot_first layout as one more series; then the same grid on emulated compute at 100 and 250
# Mbit/s, where the links and not the 2 cores decide. The report says where the parameter server
# overtakes all-gather, and why (rows, bytes, step split). The point counts and an estimate:
# `make -n dlrm` and tools.sweep --dry_run (docs/sweeps.md). Not part of make test.
dlrm: setup
	d=sweeps/dlrm-$$(date +%Y%m%d-%H%M%S); \
	$(PY) -m tools.sweep --config=tools/sweeps/dlrm.yaml --sweep_dir=$$d/hashed --report=false; \
	$(PY) -m tools.sweep --config=tools/sweeps/dlrm.yaml --id_layout=hot_first --zipf_alpha=1.2 \
		--link_bandwidth=10mbit --sweep_dir=$$d/hot_first --report=false; \
	$(PY) -m tools.sweep --config=tools/sweeps/dlrm.yaml --compute=emulated --link_bandwidth=100mbit,250mbit \
		--sweep_dir=$$d/emulated --report=false; \
	$(PY) -m tools.report $$d

# The recommender's step model judged where it never looked: fitted on MWMS, Horovod, a synchronous
# parameter server with a ps per host and the hybrid at 1-4 workers (3 runs each), judged on MWMS
# and Horovod at 8, 12, 16 and the parameter server and the hybrid at 8, 12 (2 runs each), on
# 10 Mbit links; prints each held-out run's error and interval, their coverage and median width, and
# the crossover as an interval of N: 68 runs, at most 17 GB (docs/performance-model.md). Not part
# of make test.
dlrm-scale: setup
	d=sweeps/dlrm-scale-$$(date +%Y%m%d-%H%M%S); \
	$(PY) -m tools.sweep --config=tools/sweeps/dlrm-scale.yaml --sweep_dir=$$d/fit --report=false; \
	$(PY) -m tools.sweep --config=tools/sweeps/dlrm-scale.yaml --strategy=multi_worker_mirrored,horovod \
		--num_workers=8,12,16 --repeats=2 --sweep_dir=$$d/allgather --report=false; \
	$(PY) -m tools.sweep --config=tools/sweeps/dlrm-scale.yaml --strategy=parameter_server,hybrid \
		--num_workers=8,12 --repeats=2 --sweep_dir=$$d/ps --report=false; \
	$(PY) -m tools.model recommender $$d

# A step costs the rows it touches: the recommender at 250,000 and 4,000,000 rows per table under every
# strategy on 2 workers (2 runs each), and the v2 optimizer's cost on one device: 22 runs, about
# 4 min on 2 cores, at most 4 GB. README: Embedding models.
dlrm-rows: setup
	d=sweeps/dlrm-rows-$$(date +%Y%m%d-%H%M%S); \
	$(PY) -m tools.sweep --config=tools/sweeps/dlrm-rows.yaml --sweep_dir=$$d/strategies --report=false; \
	$(PY) -m tools.sweep --config=tools/sweeps/dlrm-rows.yaml --strategy=default --num_workers=1 \
		--optimizer=sgd,sgd_v2 --embedding_rows=250000,1000000,4000000 --repeats=1 --sweep_dir=$$d/optimizer \
		--report=false; \
	$(PY) -m tools.report $$d

# What each way of training learns of the recommender's planted clicks: held-out AUC over 300 steps,
# time and examples to an AUC of 0.7, at 2 workers: 8 runs, about 3 min on 2 cores. README:
# Embedding models.
dlrm-auc: setup
	$(PY) -m tools.sweep --config=tools/sweeps/dlrm-auc.yaml --sweep_dir=sweeps/dlrm-auc-$$(date +%Y%m%d-%H%M%S)

# PS (separate) vs MWMS, 1-4 workers on 100 Mbit links: local emulated hosts and Slurm jobs on a
# private Slurm of emulated nodes side by side, bytes per step per host against the law:
# 16 points, ~9 min on 2 cores, root (docs/clusters.md).
network-slurm: setup slurm
	$(PY) -m tools.sweep --config=tools/sweeps/network-slurm.yaml --sweep_dir=sweeps/network-slurm-$$(date +%Y%m%d-%H%M%S)

clean:
	rm -rf $(VENV) .pytest_cache
