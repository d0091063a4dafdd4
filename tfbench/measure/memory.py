"""Will the run fit in this machine's memory? An estimate made before any task starts.

A batch that cannot fit used to fail inside a task ("Resource exhausted", or the kernel's OOM
killer) after every task had imported TensorFlow and built its model. The estimate adds, per
task the launcher would start on this machine:

- the TensorFlow runtime of one process (RUNTIME_BYTES; a tiny-model task peaks near it here);
- weights: every task that builds the model holds |w| (the PS coordinator and workers read the
  ps' copy but keep their own gradients, |w| again); a ps holds its share of what lives on the
  ps (|w|, or the embedding tables when the strategy replicates the rest): for the dense variables
  as much again (the optimizer's share, a synchronous ps's accumulators); of an embedding table only
  its shard (the update scatters the touched rows, and a synchronous ps keeps them in row slots),
  twice that under --optimizer=sgd_v2, whose sparse update makes temporaries of the whole table;
- activations: train keeps every float output of the forward pass for the backward pass (the
  floats of one example's forward graph x examples per step; their gradients are transient);
  forward needs about the largest op's input, output and workspace (3 x its output x examples).
- embedding tables a strategy replicates (the workload's replicated_bytes) are in |w| already:
  every worker of an all-reduce strategy holds them whole, a parameter server its shard.

Checked here: ResNet50 trained at 64 px, batch 64, one task: estimated 1.86 GB, measured peak
RSS 1.71 GB.

Counts come from the model's own graph at batch 1 (count_model, cached per workload key like the
FLOP counts), in a child process so that the launcher never imports TensorFlow; a dry run counts
nothing and says when only a count could tell. It is an estimate, meant to refuse the hopeless
(more than the machine has), not to pack memory tightly.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, Iterable, Optional

from tfbench.config import RunConfig
from tfbench.config.errors import ConfigError
from tfbench.measure import json_cache

RUNTIME_BYTES = 600 * 10 ** 6  # one TensorFlow process with a tiny model: ~400-600 MB RSS here
GB = 10 ** 9
CACHE_ENV = "TFBENCH_MODEL_MEMORY_CACHE"
FIGURES = ("params", "variables", "activation_floats", "largest_floats")  # what count_model returns


def cache_path() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "tfbench", "model_memory.json")


def _key(config) -> str:
    return config.workload.key(config)


def count_model(config) -> Dict[str, int]:
    """{'params', 'variables', 'activation_floats', 'largest_floats'}: trainable parameters and
    variables (the performance model's |w| and its variables), and per example the float outputs
    of every op of the training-mode forward graph at batch 1 that depends on the inputs."""
    from tfbench.framework.tf_import import tf
    from tfbench.measure.flops import placeholders

    workload = config.workload
    graph = tf.Graph()
    with graph.as_default():
        model_ = workload.build(config)
        features, _ = placeholders(workload.example_spec(config))
        model_(features, training=True)
        sizes = [out.shape.num_elements() for op in _downstream([f.op for f in tf.nest.flatten(features)])
                 for out in op.outputs if out.dtype.is_floating and out.shape.is_fully_defined()]
        params = int(sum(v.shape.num_elements() for v in model_.trainable_variables))
        variables = len(model_.trainable_variables)
    return {"params": params, "variables": variables, "activation_floats": int(sum(sizes)),
            "largest_floats": int(max(sizes, default=0))}


def _downstream(sources) -> list:
    """The ops that depend on `sources` (the inputs): activations, never weights, initializers
    or the moving-statistics updates, which do not scale with the batch."""
    seen, stack = set(sources), list(sources)
    while stack:
        for out in stack.pop().outputs:
            for consumer in out.consumers():
                if consumer not in seen:
                    seen.add(consumer)
                    stack.append(consumer)
    return list(seen - set(sources))


def counts(config) -> Dict[str, int]:
    """count_model's figures for a RunConfig (or a run's config.json as a dict), from the cache or
    counted now in a child process (the launcher never imports TensorFlow, and TensorFlow's
    start-up logs stay in the child's stderr)."""
    config = config if not isinstance(config, dict) else RunConfig.from_dict(config)
    cached = cached_counts(config)
    if cached:
        return cached
    proc = subprocess.run([sys.executable, "-m", "tfbench.measure.memory", json.dumps(config.to_dict())],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"could not count {config.model}'s memory before starting: {tail}")
    value = json.loads(proc.stdout.strip().splitlines()[-1])
    _write_cache(_key(config), value)
    return value


def cached_counts(config) -> Optional[Dict[str, int]]:
    """The cached figures, or None; an entry cached before a figure was added to count_model
    (one without 'variables') counts as none, so it is counted again."""
    cached = _read_cache().get(_key(config))
    return cached if cached and all(name in cached for name in FIGURES) else None


def _read_cache() -> dict:
    return json_cache.read(cache_path())


def _write_cache(key: str, value: dict) -> None:
    json_cache.write(cache_path(), key, value)


def task_bytes(role: str, config, model: Dict[str, int], examples_per_step: int) -> int:
    """Estimated peak bytes of one task (see the module docstring)."""
    weights = 4 * model["params"]
    tables = config.workload.replicated_bytes(config)  # embedding tables: sparse gradients, the touched rows only
    if role == "ps":  # what lives there: every variable, or (dense layers replicated) the tables
        dense = 0 if config.traits.dense_replicated else weights - tables
        whole_table = 2 if config.optimizer == "sgd_v2" else 1
        return RUNTIME_BYTES + (2 * dense + whole_table * tables) // max(1, config.effective_num_ps)
    if config.traits.ps_tasks:  # tables on ps stay there: a worker holds the rows it touches
        weights -= tables
        tables = 0
    if config.mode == "train":
        activations = 4 * model["activation_floats"] * examples_per_step
        return RUNTIME_BYTES + 2 * weights - tables + activations
    return RUNTIME_BYTES + weights + 3 * 4 * model["largest_floats"] * examples_per_step


def estimate(config, roles: Iterable[str], model: Dict[str, int]) -> Dict[str, int]:
    """{'total', 'largest_task', 'tasks'}: bytes of the tasks with these roles on this machine."""
    local = max(1, config.num_local_devices) if not config.traits.multi_task else 1
    examples = config.batch_size * local
    sizes = [task_bytes(role, config, model, 0 if role == "chief" and config.traits.coordinated
                        else examples) for role in roles]
    return {"total": sum(sizes), "largest_task": max(sizes, default=0), "tasks": len(sizes)}


def available_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def bound(config, roles) -> Optional[Dict[str, int]]:
    """estimate() at the workload's own bound (Workload.memory_bound): no run of it needs more;
    None when only a count can tell."""
    model = config.workload.memory_bound(config)
    return estimate(config, roles, model) if model else None


def check(config, roles, available: Optional[int] = None, model: Optional[Dict[str, int]] = None,
          count: bool = True) -> Dict[str, int]:
    """Raises ConfigError (one line, with the estimate) when the tasks cannot fit; else the
    estimate (the bound when that already fits).

    count=False (--dry_run, which starts no process and writes nothing): when only a count of the
    model's graph could tell and none is cached, nothing is counted; the result says so under
    'unchecked' and the real run counts before it starts anything."""
    roles = list(roles)
    have = available_bytes() if available is None else available
    if model is None:
        upper = bound(config, roles)
        if upper and upper["total"] <= have:
            return dict(upper, available=have, bound=True)
        model = cached_counts(config) or config.workload.memory_figures(config)
        if model is None and not count:
            why = (f"the bound for any model, {upper['total'] / GB:.1f} GB, is more than the {have / GB:.1f} GB "
                   f"available, and" if upper else "no bound holds for this workload:")
            return dict(upper or {"total": 0, "largest_task": 0, "tasks": len(roles)}, available=have, unchecked=(
                f"not counted in a dry run: {why} only a count of {config.model}'s graph (TensorFlow, a child "
                f"process) can tell; the run counts it before starting anything and refuses a batch that does not fit"))
        model = model or counts(config)
    est = estimate(config, roles, model)
    replicated = config.workload.replicated_bytes(config)
    if est["total"] > have and replicated and not config.traits.ps_tasks:
        raise ConfigError(replicated_refusal(config, replicated, est, have))
    if est["total"] > have:
        per_example = 4 * model["activation_floats"] if config.mode == "train" else 3 * 4 * model["largest_floats"]
        unit = config.workload.unit.rstrip("s")
        raise ConfigError(
            f"--batch_size={config.batch_size} does not fit: {est['tasks']} task(s) need about "
            f"{est['total'] / GB:.1f} GB ({config.model} {config.workload.describe(config)} {config.mode}: "
            f"{model['params'] / 1e6:.1f} M parameters, {per_example / 1e6:.1f} MB of activations per "
            f"{unit if unit != 'token' else 'example'}, {RUNTIME_BYTES / GB:.1f} GB of runtime per task) and this "
            f"machine has {have / GB:.1f} GB available; lower --batch_size or the workload's size")
    return dict(est, available=have)


def replicated_refusal(config, replicated: int, est: Dict[str, int], have: int) -> str:
    """Why a strategy that replicates the embedding tables on every worker cannot run, and which can."""
    from tfbench.config import strategy_traits

    sharding = " or ".join(strategy_traits.names(lambda t: t.ps_tasks))
    ps = config.workload.default_num_ps(config.num_workers)
    if replicated + RUNTIME_BYTES * (config.num_workers + 1 + ps) <= have:  # each ps holds its shard once
        where = f"its {ps} ps would hold them between them, on this machine"
    else:
        needed = -(-replicated // max(1, have - RUNTIME_BYTES))
        where = (f"about {needed} ps of {have / GB:.0f} GB for these tables"
                 + (", so on a cluster: --launcher=slurm, python -m cluster.k8s or python -m cluster.by_hand"
                    if needed > 1 else ""))
    return (f"--strategy={config.strategy} replicates {config.model}'s {replicated / GB:.1f} GB of embedding tables "
            f"on every worker: its {est['tasks']} task(s) need about {est['total'] / GB:.1f} GB and this machine has "
            f"{have / GB:.1f} GB available; --strategy={sharding} shards the tables over its ps instead ({where})")


def describe(result: Dict[str, int]) -> str:
    """The dry run's line about memory."""
    if result.get("unchecked"):
        return f"memory: {result['unchecked']}"
    if result.get("bound"):
        return (f"memory: at most {result['total'] / GB:.1f} GB for {result['tasks']} task(s) (the bound for any "
                f"model at this batch and image size), {result['available'] / GB:.1f} GB available")
    return (f"memory: about {result['total'] / GB:.1f} GB for {result['tasks']} task(s) (counted from the model's "
            f"graph), {result['available'] / GB:.1f} GB available")


def main(argv) -> int:
    """python -m tfbench.measure.memory CONFIG_JSON: the counts of that config's workload, as JSON."""
    print(json.dumps(count_model(RunConfig.from_dict(json.loads(argv[1])))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
