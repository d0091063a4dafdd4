"""Hand-made run directories (config.json + results.jsonl, as tools.rundirs.runs reads them) whose
numbers are known in advance: with per-replica batch B, R replicas and steps of s seconds, the
cluster rate is B·R/s images/sec (the 5 measured steps of every task start together)."""
import json
import os

from tfbench.config import RunConfig
from tfbench.results import records
from tools.report import aggregate
from tools.rundirs.runs import find_runs

T0 = 1_700_000_000.0
JITTER = (-0.02, 0.0, 0.02, 0.0, 0.0)  # keeps the sum of 5 steps at 5 x the nominal step


def write_run(root, run_id, strategy, workers, step_s, *, placement="soft", resources=None, monitor=None,
              batch_size=16, mode="train", devices=0, extra_config=None, jitter=JITTER, cores=None, task_extra=None):
    """One ok run; mirrored runs are one task with `devices` replicas. `extra_config` adds keys
    RunConfig does not know, the way a future axis would appear in config.json."""
    path = os.path.join(root, run_id)
    os.makedirs(path)
    config = RunConfig(model="resnet50", image_size=64, batch_size=batch_size, num_warmup_steps=3, num_steps=5,
                       strategy=strategy, num_workers=workers, num_ps=1 if strategy == "parameter_server" else 0,
                       num_local_devices=devices, placement=placement, mode=mode, logdir=root,
                       run_id=run_id).to_dict()
    config.update(extra_config or {})
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    results = os.path.join(path, "results.jsonl")
    replicas_per_task = devices or 1
    replicas = workers * replicas_per_task
    tasks = []
    for index in range(workers):
        times = [step_s + j for j in jitter]
        starts = [T0 + sum(times[:k]) for k in range(len(times))]
        rec = records.task_record(run_id=run_id, role="worker", index=index,
                                  examples_per_step=batch_size * replicas_per_task, step_times_s=times,
                                  step_start_wall=starts,
                                  extra={"replicas": replicas, "global_batch_size": batch_size * replicas,
                                         "batch_size": batch_size, "placement": {"requested": placement},
                                         **({"cores": list(range(index * cores, (index + 1) * cores))}
                                            if cores else {}), **(task_extra or {})})
        records.append(results, rec)
        tasks.append(rec)
    extra = {"config": config, "strategy": strategy, "num_workers": workers, "num_ps": 1,
             "resources": resources or {}}
    records.append(results, records.cluster_record(run_id, tasks, extra=extra))
    if monitor:
        with open(os.path.join(path, "monitor.jsonl"), "w") as f:
            f.writelines(json.dumps(m) + "\n" for m in monitor)


def points_of(root):
    """The points tools.report would plot for the runs below root."""
    return aggregate.combine(find_runs(str(root)))


def monitor_samples(tasks, seconds=8):
    """One sample per task per second; the ps sends most, the chief idles, workers compute."""
    scale = {"chief": 0.1, "worker": 1.0, "ps": 0.4, "host": 2.0}
    samples = []
    for t in range(seconds):
        for name in tasks + ["host"]:
            role, _, index = name.rpartition("_") if name != "host" else ("host", "", "0")
            k = scale[role] * (1.1 if name == "worker_1" else 1.0)
            tx = 2 * 8000.0 if role == "ps" else 8000.0 * k
            samples.append({"time": T0 - 2 + t + 0.01 * int(index), "task": name, "role": role, "index": int(index),
                            "cpu_percent": 90.0 * k + t, "cpu_percent_normalized": 45.0 * k, "rss_mb": 500.0 * k + 10 * t,
                            "peak_rss_mb": 500.0 * k + 10 * t, "threads": 20, "net_tx_bytes": 1e3 * tx * t,
                            "net_rx_bytes": 1e3 * tx * t, "net_tx_kbps": tx + t, "net_rx_kbps": tx - t})
    samples.append({"time": T0, "task": "worker_0", "role": "worker"})  # a sample without numbers
    return samples
