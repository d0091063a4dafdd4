"""Transformer workloads: a BERT-style encoder (tfbench.models.transformer) on sequences of token
ids, counted in tokens (examples x --seq_length).

Presets: `bert_tiny` (2 layers, hidden 128, 2 heads: Google's smallest BERT miniature) and
`bert_base` (12 layers, hidden 768, 12 heads, 110 M parameters), both with BERT's vocabulary of
30,522 and sequences of 128 (BERT's first pre-training phase). --num_layers, --hidden_size,
--num_heads, --seq_length and --vocab_size override a preset's value (0: the preset's).

Synthetic batches, made before timing like the synthetic images: a [CLS] id, then ids uniform over
the vocabulary past the three reserved ids; the loss is
- masked_lm (default): MASKED_SHARE of the positions after [CLS] (at least one), distinct and
  drawn per example, replaced by [MASK]; the labels are the original ids there, and an example's
  loss is its mean cross-entropy over them (BERT's masked-language-model loss without the
  next-sentence task, every chosen position masked);
- classification: one class per sequence (uniform over --num_classes), softmax cross-entropy.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Tuple

from tfbench.workloads.arguments import Arg, Arguments
from tfbench.workloads.base import Workload, WorkloadKind, need

PAD, CLS, MASK = 0, 1, 2  # reserved ids; tokens are drawn from 3 .. vocab-1
MASKED_SHARE = 0.15
LOSSES = ("masked_lm", "classification")
ARGUMENTS = Arguments("Transformer (--model=bert_tiny, bert_base)", (
    Arg("integer", "num_layers", 0, "Transformers: encoder layers (0: the preset's)."),
    Arg("integer", "hidden_size", 0, "Transformers: hidden size (0: the preset's; a multiple of --num_heads)."),
    Arg("integer", "num_heads", 0, "Transformers: attention heads (0: the preset's)."),
    Arg("integer", "seq_length", 0, "Transformers: tokens per sequence (0: the preset's, 128)."),
    Arg("integer", "vocab_size", 0, "Transformers: vocabulary (0: the preset's, BERT's 30522)."),
    Arg("string", "transformer_loss", "", "Transformers: masked_lm (15% of the tokens masked, cross-entropy over the "
                                          "vocabulary there) or classification (one class of --num_classes per "
                                          "sequence); '': masked_lm."),
))
FLAGS = ARGUMENTS.names
MAX_SEQ_LENGTH = 8192


@dataclasses.dataclass(frozen=True)
class Sizes:
    """A transformer's sizes: a preset, or a preset with flags over it."""

    layers: int
    hidden: int
    heads: int
    length: int
    vocab: int
    loss: str = "masked_lm"

    @property
    def masked(self) -> int:
        """Masked positions per sequence (masked_lm)."""
        return max(1, round(MASKED_SHARE * (self.length - 1)))

    def params(self, num_classes: int) -> int:
        """Trainable parameters, in closed form (the model's own count agrees: tests/test_transformer.py)."""
        h, norm = self.hidden, 2 * self.hidden
        embeddings = (self.vocab + self.length) * h + norm
        block = 4 * (h * h + h) + norm + (h * 4 * h + 4 * h) + (4 * h * h + h) + norm
        head = (h * h + h + norm + self.vocab) if self.loss == "masked_lm" else (h * h + h + h * num_classes
                                                                                 + num_classes)
        return embeddings + self.layers * block + head


PRESETS = {
    "bert_tiny": Sizes(layers=2, hidden=128, heads=2, length=128, vocab=30522),
    "bert_base": Sizes(layers=12, hidden=768, heads=12, length=128, vocab=30522),
}


@dataclasses.dataclass(frozen=True)
class TransformerWorkload(Workload):
    preset: Optional[Sizes] = None
    unit: str = "tokens"
    inputs: str = "sequences of token ids"
    kind: str = "transformer"
    own_flags: Tuple[str, ...] = FLAGS + ("num_classes",)  # a classifying transformer's classes

    def sizes(self, config) -> Sizes:
        p = self.preset
        return Sizes(config.num_layers or p.layers, config.hidden_size or p.hidden, config.num_heads or p.heads,
                     config.seq_length or p.length, config.vocab_size or p.vocab,
                     config.transformer_loss or p.loss)

    def check(self, config) -> None:
        for flag in ("num_layers", "hidden_size", "num_heads", "seq_length", "vocab_size"):
            need(getattr(config, flag) >= 0, f"--{flag} must be 0 (the preset's) or positive, got "
                                             f"{getattr(config, flag)}")
        s = self.sizes(config)
        need(s.loss in LOSSES, f"--transformer_loss={s.loss!r} is unknown; choose masked_lm or classification")
        need(s.hidden % s.heads == 0, f"--hidden_size={s.hidden} must be a multiple of --num_heads={s.heads}")
        need(2 <= s.length <= MAX_SEQ_LENGTH, f"--seq_length={s.length} must be between 2 and {MAX_SEQ_LENGTH}")
        need(s.vocab > MASK + 1, f"--vocab_size={s.vocab} leaves no token besides the reserved [PAD], [CLS], [MASK]")
        need(config.data_format == "NHWC", f"--data_format={config.data_format} applies to images; "
                                           f"--model={self.name} reads token ids")

    def units_per_example(self, config) -> int:
        return self.sizes(config).length

    def describe(self, config) -> str:
        s = self.sizes(config)
        return (f"tokens={s.length}/sequence  layers={s.layers} hidden={s.hidden} heads={s.heads} vocab={s.vocab} "
                f"{s.loss}" + (f" ({s.masked} masked)" if s.loss == "masked_lm" else ""))

    def key(self, config) -> str:
        s = self.sizes(config)
        classes = f"|{config.num_classes} classes" if s.loss == "classification" else ""
        return f"transformer|{s.layers}x{s.hidden}x{s.heads}|{s.length} tokens|vocab {s.vocab}|{s.loss}{classes}"

    def record(self, config) -> Dict:
        s = self.sizes(config)
        out = {"preset": self.name, "layers": s.layers, "hidden_size": s.hidden, "heads": s.heads,
               "seq_length": s.length, "vocab_size": s.vocab, "loss": s.loss,
               "params_closed_form": s.params(config.num_classes)}
        if s.loss == "masked_lm":
            out["masked_per_sequence"] = s.masked
        else:
            out["num_classes"] = config.num_classes
        return out

    def build(self, config):
        from tfbench.models.transformer import transformer

        s = self.sizes(config)
        return transformer(layers=s.layers, hidden=s.hidden, heads=s.heads, length=s.length, vocab=s.vocab,
                           loss=s.loss, masked=s.masked, num_classes=config.num_classes)

    def batch(self, config, batch_size: int, shard=0) -> Tuple:
        from tfbench.framework.tf_import import tf

        s = self.sizes(config)
        shard = tf.cast(shard, tf.int64)
        seed = lambda k: tf.stack([tf.constant(config.seed, tf.int64), 3 * shard + k])  # noqa: E731
        ids = tf.random.stateless_uniform([batch_size, s.length - 1], seed=seed(0), minval=MASK + 1,
                                          maxval=s.vocab, dtype=tf.int32)
        ids = tf.concat([tf.fill([batch_size, 1], CLS), ids], axis=1)
        if s.loss == "classification":
            labels = tf.random.stateless_uniform([batch_size], seed=seed(1), minval=0, maxval=config.num_classes,
                                                 dtype=tf.int32)
            return {"token_ids": ids}, labels
        # distinct positions after [CLS]: the top `masked` of a random key per position
        keys = tf.random.stateless_uniform([batch_size, s.length - 1], seed=seed(2))
        positions = tf.sort(tf.math.top_k(keys, k=s.masked).indices, axis=1) + 1
        labels = tf.gather(ids, positions, batch_dims=1)
        rows = tf.repeat(tf.range(batch_size), s.masked)
        where = tf.stack([rows, tf.reshape(positions, [-1])], axis=1)
        masked_ids = tf.tensor_scatter_nd_update(ids, where, tf.fill([batch_size * s.masked], MASK))
        return {"token_ids": masked_ids, "masked_positions": positions}, labels

    def example_spec(self, config) -> Tuple:
        from tfbench.framework.tf_import import tf

        s = self.sizes(config)
        if s.loss == "classification":
            return {"token_ids": tf.TensorSpec((1, s.length), tf.int32)}, tf.TensorSpec((1,), tf.int32)
        return ({"token_ids": tf.TensorSpec((1, s.length), tf.int32),
                 "masked_positions": tf.TensorSpec((1, s.masked), tf.int32)}, tf.TensorSpec((1, s.masked), tf.int32))

    def per_example_loss(self, labels, outputs):
        from tfbench.framework.tf_import import keras, tf

        loss = keras.losses.sparse_categorical_crossentropy(labels, tf.cast(outputs, tf.float32), from_logits=True)
        return loss if loss.shape.rank == 1 else tf.reduce_mean(loss, axis=-1)  # masked_lm: mean over the masked

    def memory_bound(self, config) -> Optional[Dict[str, int]]:
        """Parameters in closed form; per example at most ACTIVATIONS_PER_TOKEN floats per token and
        layer plus the attention's heads x length^2, and the head's logits (checked against the
        count by tests/test_transformer.py)."""
        s = self.sizes(config)
        per_layer = s.length * (ACTIVATIONS_PER_HIDDEN * s.hidden) + ATTENTION_COPIES * s.heads * s.length ** 2
        head = (HEAD_COPIES * s.masked * (s.vocab + 4 * s.hidden) if s.loss == "masked_lm"
                else HEAD_COPIES * (s.hidden + config.num_classes))
        floats = s.layers * per_layer + EMBEDDING_COPIES * s.length * s.hidden + head
        return {"params": s.params(config.num_classes), "activation_floats": floats,
                "largest_floats": max(4 * s.length * s.hidden, s.heads * s.length ** 2, head)}


# Float outputs of the forward graph per token of one layer, as multiples of the hidden size (the
# projections with their reshapes, the 4x feed-forward and its GELU's ops, norms and residuals:
# ~80 counted); copies of each head's attention matrix (scores, scale, softmax and casts); and
# of the embeddings and of the head's logits. tests/test_transformer.py holds them over the count.
ACTIVATIONS_PER_HIDDEN = 100
ATTENTION_COPIES = 10
EMBEDDING_COPIES = 12
HEAD_COPIES = 4


TRANSFORMERS: Dict[str, TransformerWorkload] = {
    name: TransformerWorkload(name, f"BERT-style transformer encoder, {p.layers} layers, hidden {p.hidden}, "
                                    f"{p.heads} heads, {p.length} tokens, vocabulary {p.vocab}", preset=p)
    for name, p in PRESETS.items()}
KIND = WorkloadKind("transformer", f"a transformer ({', '.join(TRANSFORMERS)}; counted in tokens)", ARGUMENTS,
                    TRANSFORMERS)
