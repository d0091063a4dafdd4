"""The transformer workloads (tfbench.workloads.tokens, tfbench.models.transformer): presets and the
flags over them, what is refused, the closed forms against the model's own graph, and runs that
count tokens (the shared runs `horovod` and `ps_async_straggler_hard` of tests/clusters.py)."""
import pytest

from conftest import run_cli
from tfbench.config import RunConfig
from tfbench.workloads import tokens
from tfrun import cluster_record, task_records


def test_presets_and_flags_over_them():
    tiny = RunConfig(model="bert_tiny")
    sizes = tiny.workload.sizes(tiny)
    assert (sizes.layers, sizes.hidden, sizes.heads, sizes.length, sizes.vocab) == (2, 128, 2, 128, 30522)
    assert tiny.workload.unit == "tokens" and tiny.workload.units_per_example(tiny) == 128
    assert sizes.masked == 19  # 15% of the 127 positions after [CLS]
    base = RunConfig(model="bert_base")
    assert base.workload.sizes(base).params(2) == pytest.approx(109.2e6, rel=0.005)  # BERT-base: 110 M with 512 positions
    small = RunConfig(model="bert_tiny", seq_length=16, vocab_size=256, transformer_loss="classification")
    s = small.workload.sizes(small)
    assert (s.length, s.vocab, s.loss, s.layers) == (16, 256, "classification", 2)
    assert "classification" in small.workload.key(small) and "10 classes" not in small.workload.key(small).split("|")[0]
    assert small.workload.record(small)["num_classes"] == 1000 and "masked_per_sequence" not in small.workload.record(small)


@pytest.mark.parametrize("flags,says", [
    (["--model=bert_tiny", "--hidden_size=100", "--num_heads=3"], "--hidden_size=100 must be a multiple of --num_heads=3"),
    (["--model=bert_tiny", "--transformer_loss=next_sentence"], "--transformer_loss='next_sentence' is unknown"),
    (["--model=bert_tiny", "--seq_length=1"], "--seq_length=1 must be between 2 and"),
    (["--model=bert_tiny", "--vocab_size=3"], "leaves no token besides the reserved"),
    (["--model=resnet50", "--seq_length=64"], "--seq_length applies to transformer workloads"),
    (["--model=bert_tiny", "--dataset=digits", "--num_classes=10"], "--dataset applies to image workloads only"),
])
def test_bad_transformer_flags_are_refused_before_anything_starts(flags, says):
    proc = run_cli(*flags, "--dry_run")
    assert proc.returncode == 2 and says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_dry_run_of_bert_base_fits_by_its_bound_without_a_count():
    proc = run_cli("--model=bert_base", "--batch_size=8", "--dry_run")
    assert proc.returncode == 0, proc.stderr
    assert "memory: at most" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("flags", [dict(seq_length=32, vocab_size=1000),
                                   dict(seq_length=32, vocab_size=1000, transformer_loss="classification"),
                                   dict(num_layers=1, hidden_size=64, num_heads=4, seq_length=64)])
def test_closed_forms_hold_against_the_graph(flags):
    """Parameters in closed form equal the model's; the memory bound holds over the count; FLOPs per
    token counted from the graph are the closed form within 15% (the rest: GELU, softmax, norms):
    2 FLOPs per parameter a token goes through and 4 x layers x length x hidden of attention
    forward, 3 x that to train (as Kaplan et al., 2020: training ~ 6 x parameters per token); the
    embeddings are lookups, and the head runs at the masked positions (masked_lm) or once per
    sequence (classification)."""
    from tfbench.measure import flops, memory

    config = RunConfig(model="bert_tiny", **flags)
    workload = config.workload
    s = workload.sizes(config)
    counted = memory.count_model(config)
    bound = workload.memory_bound(config)
    assert counted["params"] == s.params(config.num_classes)
    assert counted["activation_floats"] <= bound["activation_floats"] and counted["largest_floats"] <= bound["largest_floats"]
    per_example = flops.count_model(config)
    h = s.hidden
    body = s.layers * (12 * h * h + 13 * h)  # the encoder blocks' parameters (tokens.Sizes.params)
    head = ((h * h + h * s.vocab) * s.masked if s.loss == "masked_lm" else h * h + h * config.num_classes) / s.length
    closed = 6 * (body + head) + 12 * s.layers * s.length * h
    assert per_example["train"] / s.length == pytest.approx(closed, rel=0.15)
    assert per_example["forward"] / s.length == pytest.approx(closed / 3, rel=0.15)


@pytest.mark.slow
def test_masked_lm_batches_mask_distinct_positions_and_label_them():
    config = RunConfig(model="bert_tiny", seq_length=24, vocab_size=500)
    features, labels = config.workload.batch(config, 5, shard=3)
    ids, positions = features["token_ids"].numpy(), features["masked_positions"].numpy()
    masked = config.workload.sizes(config).masked
    assert ids.shape == (5, 24) and positions.shape == labels.shape == (5, masked)
    assert (ids[:, 0] == tokens.CLS).all() and (positions >= 1).all()
    for row, where, label in zip(ids, positions, labels.numpy()):
        assert len(set(where)) == masked and (row[where] == tokens.MASK).all() and (label > tokens.MASK).all()
    again, _ = config.workload.batch(config, 5, shard=3)
    assert (again["token_ids"].numpy() == ids).all()  # made before timing, the same for a shard every time


@pytest.mark.slow
def test_a_transformer_run_counts_tokens_and_flops_per_token(clusters):
    """The shared Horovod run of bert_tiny made small (its aggregation: test_aggregation)."""
    launched = clusters["horovod"]
    config = launched.config
    cluster = cluster_record(launched.run)
    assert cluster["unit"] == "tokens" and cluster["units_per_example"] == config["seq_length"]
    assert cluster["tokens_per_sec"] == pytest.approx(cluster["examples_per_sec"] * config["seq_length"])
    assert cluster["workload"]["kind"] == "transformer" and cluster["workload"]["loss"] == "masked_lm"
    for record in task_records(launched.run).values():
        f = record["flops"]
        assert f["unit"] == "tokens" and f["train_per_unit"] == pytest.approx(f["train_per_example"] / config["seq_length"])
        assert "fraction_of_peak" in f
    assert "tokens/s" in launched.out and "GFLOP/token train" in launched.out
    assert f"cluster tokens/sec = {cluster['examples']} examples x {config['seq_length']} tokens" in launched.out


@pytest.mark.slow
def test_a_transformer_classifies_under_an_asynchronous_parameter_server(clusters):
    launched = clusters["ps_async_straggler_hard"]
    cluster = cluster_record(launched.run)
    assert cluster["workload"]["loss"] == "classification" and cluster["unit"] == "tokens"
    assert cluster["updates"] == 2 * launched.steps
