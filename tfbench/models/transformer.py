"""A BERT-style transformer encoder built from tf_keras layers (tfbench.workloads.tokens runs it).

Token and learned position embeddings, then `layers` post-LayerNorm encoder blocks (multi-head
self-attention over `heads` heads, a feed-forward network of 4 x hidden with GELU, residuals),
as BERT. Two heads:
- masked_lm: the hidden states at the masked positions through a dense GELU layer and a
  LayerNorm, then logits over the vocabulary from the token embedding's own matrix (tied, as
  BERT) plus a bias;
- classification: the first token's state through a dense tanh layer (BERT's pooler) and a
  classifier.

Every matrix product is a Dense layer (MatMul) or tf.matmul (BatchMatMulV2), never an einsum,
so that TensorFlow's profiler counts every FLOP of the graph (tfbench.measure.flops: it has no
statistics for Einsum, which tf_keras' MultiHeadAttention uses); the batched products are those
of attention, square in the sequence, which its statistics count right.
"""
from __future__ import annotations

import math

from tfbench.framework.tf_import import keras, tf

LAYER_NORM_EPSILON = 1e-12  # BERT's


def _dense(units: int, name: str, activation=None):
    return keras.layers.Dense(units, activation=activation, name=name,
                              kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02))


class SelfAttention(keras.layers.Layer):
    """Multi-head self-attention: Q, K, V projections, softmax(QK^T / sqrt(d)) V, the output projection."""

    def __init__(self, hidden: int, heads: int, **kwargs):
        super().__init__(**kwargs)
        self.hidden, self.heads, self.head_size = hidden, heads, hidden // heads
        self.query, self.key, self.value = (_dense(hidden, n) for n in ("query", "key", "value"))
        self.out = _dense(hidden, "output")

    def _split(self, x):
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        x = tf.reshape(x, [batch, length, self.heads, self.head_size])
        return tf.transpose(x, [0, 2, 1, 3])  # [batch, heads, length, head_size]

    def call(self, x):
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = tf.matmul(q, k, transpose_b=True) / tf.cast(math.sqrt(self.head_size), q.dtype)
        weights = tf.cast(tf.nn.softmax(tf.cast(scores, tf.float32), axis=-1), v.dtype)
        context = tf.transpose(tf.matmul(weights, v), [0, 2, 1, 3])
        context = tf.reshape(context, [tf.shape(x)[0], tf.shape(x)[1], self.hidden])
        return self.out(context)


class EncoderBlock(keras.layers.Layer):
    """Attention and feed-forward, each with a residual and a LayerNorm after it (post-LN, as BERT)."""

    def __init__(self, hidden: int, heads: int, **kwargs):
        super().__init__(**kwargs)
        self.attention = SelfAttention(hidden, heads, name="attention")
        self.attention_norm = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="attention_norm")
        self.intermediate = _dense(4 * hidden, "intermediate", activation="gelu")
        self.output_dense = _dense(hidden, "ffn_output")
        self.output_norm = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="output_norm")

    def call(self, x):
        x = self.attention_norm(x + self.attention(x))
        return self.output_norm(x + self.output_dense(self.intermediate(x)))


class Embeddings(keras.layers.Layer):
    """Token plus learned position embeddings, then a LayerNorm."""

    def __init__(self, vocab: int, hidden: int, length: int, **kwargs):
        super().__init__(**kwargs)
        self.tokens = keras.layers.Embedding(vocab, hidden, name="token_embedding",
                                             embeddings_initializer=keras.initializers.TruncatedNormal(stddev=0.02))
        self.length, self.hidden = length, hidden
        self.norm = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="embedding_norm")

    def build(self, input_shape):
        self.positions = self.add_weight("position_embedding", shape=(self.length, self.hidden),
                                         initializer=keras.initializers.TruncatedNormal(stddev=0.02))
        super().build(input_shape)

    def call(self, ids):
        x = self.tokens(ids)
        return self.norm(x + tf.cast(self.positions, x.dtype)[tf.newaxis, :tf.shape(ids)[1]])


class MaskedLmHead(keras.layers.Layer):
    """Logits over the vocabulary at the masked positions, from the tied token embedding."""

    def __init__(self, embedding, hidden: int, **kwargs):
        super().__init__(**kwargs)
        self.embedding = embedding
        self.transform = _dense(hidden, "transform", activation="gelu")
        self.norm = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="transform_norm")

    def build(self, input_shape):
        self.bias = self.add_weight("output_bias", shape=(self.embedding.input_dim,), initializer="zeros")
        super().build(input_shape)

    def call(self, hidden_states, positions):
        picked = tf.gather(hidden_states, positions, batch_dims=1)  # [batch, masked, hidden]
        picked = self.norm(self.transform(picked))
        table = tf.cast(self.embedding.embeddings, picked.dtype)
        # one 2-D product: the profiler miscounts a batched product's gradient with adj_x (it reads
        # transpose_a, which BatchMatMul does not have), here by a factor of vocab / masked
        rows = tf.reshape(picked, [-1, tf.shape(picked)[-1]])
        logits = tf.matmul(rows, table, transpose_b=True) + tf.cast(self.bias, picked.dtype)
        return tf.reshape(logits, [tf.shape(picked)[0], tf.shape(picked)[1], -1])


def transformer(*, layers: int, hidden: int, heads: int, length: int, vocab: int, loss: str, masked: int,
                num_classes: int):
    """The encoder with its head: inputs {'token_ids' [B, length]} (+ 'masked_positions' [B, masked]
    for masked_lm); outputs logits [B, masked, vocab] or [B, num_classes]."""
    ids = keras.Input((length,), dtype=tf.int32, name="token_ids")
    embeddings = Embeddings(vocab, hidden, length, name="embeddings")
    x = embeddings(ids)
    for i in range(layers):
        x = EncoderBlock(hidden, heads, name=f"layer_{i}")(x)
    if loss == "masked_lm":
        positions = keras.Input((masked,), dtype=tf.int32, name="masked_positions")
        logits = MaskedLmHead(embeddings.tokens, hidden, name="masked_lm")(x, positions)
        inputs = {"token_ids": ids, "masked_positions": positions}
    else:
        first = keras.layers.Lambda(lambda h: h[:, 0], name="first_token")(x)
        pooled = _dense(hidden, "pooler", activation="tanh")(first)
        logits = _dense(num_classes, "classifier")(pooled)
        inputs = {"token_ids": ids}
    logits = keras.layers.Activation("linear", dtype="float32", name="logits")(logits)
    return keras.Model(inputs, logits, name=f"transformer_{layers}x{hidden}")
