"""The recommender's examples: a stream of clicks made by TensorFlow ops on the task that trains,
from (seed, data shard, step), with labels a fixed planted model gives, so that training can learn
them and a held-out AUC means something.

- **Values**: each categorical feature's value is drawn from a Zipf law of exponent α over the
  table's R values (value k, 0-based, with probability ∝ (k + 1)^-α; α = 0: uniform), by
  rejection-inversion (Hörmann and Derflinger 1996, as Apache Commons' RejectionInversionZipfSampler
  writes it): exact, a few operations per id and no array of R entries, whatever R is.
- **Rows** (--id_layout): `hashed` puts value k in row π(k), π a fixed pseudo-random permutation of
  the table's rows (a 4-round Feistel network on the bits of k, cycle-walked into [0, R)), as
  hashing categorical values does in production recommenders: the hot values land anywhere in the
  table, so on every shard of it. `hot_first` puts value k in row k: the hottest rows are the
  first ones, all on a table's first shard.
- **Labels**: P(click) = sigmoid(b + a_d z_d + a_e z_e), z_d the dense features' projection on
  fixed weights drawn from the seed, z_e the sum of a hidden effect per (table, value), a hash of
  both into [-√3, √3] (unit variance), each part scaled to unit variance; b sets the click rate
  near Criteo's 25%. The model learns z_d from its bottom MLP and each value's effect in its row.

Each (shard, step) has its own stateless seed, so every strategy sees the same examples at the
same step; the held-out set is a stream no worker trains on.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

ID_LAYOUTS = ("hashed", "hot_first")
DENSE_WEIGHT, VALUE_WEIGHT = 1.5, 1.5  # a_d, a_e
CLICK_RATE = 0.25  # share of positive labels (Criteo's Kaggle set: about 26%)
HELD_OUT_SHARD = -1  # the held-out stream's shard
HELD_OUT_EXAMPLES = 4096
_MIX = (0x5BD1E995, 0x27D4EB2D)  # odd multipliers below 2**31: products of 32-bit values stay in int64
_M32 = (1 << 32) - 1
_FEISTEL_ROUNDS = 4
DEFINITION = (f"clicks of a planted model (tfbench.workloads.clicks): P(click) = sigmoid(b + {DENSE_WEIGHT:g} z_dense + "
              f"{VALUE_WEIGHT:g} z_values), z_dense the dense features on fixed weights, z_values the ids' hidden "
              f"effects, each of unit variance; b for a click rate near {CLICK_RATE:.0%}")


def bias() -> float:
    """b: the logit's offset that makes the mean click rate about CLICK_RATE (the probit
    approximation of E[sigmoid(b + sigma Z)])."""
    sigma2 = DENSE_WEIGHT ** 2 + VALUE_WEIGHT ** 2
    return math.log(CLICK_RATE / (1 - CLICK_RATE)) * math.sqrt(1 + math.pi * sigma2 / 8)


def keys(seed: int, table: int, what: int, count: int) -> np.ndarray:
    """`count` 32-bit keys of one table, from the seed (what: 0 the permutation, 1 the planted effects)."""
    return np.random.SeedSequence([int(seed) & _M32, table, what]).generate_state(count).astype(np.int64)


def _mix(x, key):
    """A 32-bit hash of x (int64 holding 32 bits) and a key: multiply-xorshift, in int64 without overflow."""
    from tfbench.framework.tf_import import tf

    x = tf.bitwise.bitwise_and(tf.bitwise.bitwise_xor(x, key), _M32)
    x = tf.bitwise.bitwise_and(x * _MIX[0], _M32)
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 15))
    x = tf.bitwise.bitwise_and(x * _MIX[1], _M32)
    return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 13))


def half_bits(rows: Sequence[int]) -> np.ndarray:
    """Bits of each half of the Feistel network's domain (2^(2 half) >= R, less than 4 R)."""
    return np.array([(max(2, (int(r) - 1).bit_length()) + 1) // 2 for r in rows], dtype=np.int64)


def permute(values, rows: Sequence[int], seed: int):
    """Row of each value: π_t(value) for the table t of each column, values [..., T, h] (module docstring)."""
    from tfbench.framework.tf_import import tf

    half = tf.constant(half_bits(rows)[:, None])  # [T, 1], broadcast over [..., T, h]
    mask = tf.bitwise.left_shift(tf.ones_like(half), half) - 1
    round_keys = tf.constant(np.stack([keys(seed, t, 0, _FEISTEL_ROUNDS) for t in range(len(rows))])[:, :, None])
    limit = tf.constant(np.asarray(rows, dtype=np.int64)[:, None])

    def once(x):
        left, right = tf.bitwise.right_shift(x, half), tf.bitwise.bitwise_and(x, mask)
        for i in range(_FEISTEL_ROUNDS):
            left, right = right, tf.bitwise.bitwise_xor(left, tf.bitwise.bitwise_and(
                _mix(right, round_keys[:, i]), mask))
        return tf.bitwise.bitwise_or(tf.bitwise.left_shift(left, half), right)

    # cycle-walking: a value the network sends past R goes round again (its cycle holds values below R)
    return tf.while_loop(lambda x: tf.reduce_any(x >= limit), lambda x: [tf.where(x >= limit, once(x), x)],
                         [once(values)])[0]


def _zipf_constants(rows: Sequence[int], alpha: float):
    """Per table: H(1.5) - 1, H(R + 1/2) and the squeeze s of rejection-inversion (float64, [T, 1])."""
    def h_integral(x):
        log_x = math.log(x)
        t = (1 - alpha) * log_x
        return (math.expm1(t) / t if abs(t) > 1e-8 else 1 + t / 2) * log_x

    def h_inverse(x):
        t = max(-1.0, x * (1 - alpha))
        return math.exp((math.log1p(t) / t if abs(t) > 1e-8 else 1 - t / 2) * x)

    x1 = h_integral(1.5) - 1
    squeeze = 2 - h_inverse(h_integral(2.5) - 2 ** -alpha)
    return x1, np.array([[h_integral(r + 0.5)] for r in rows]), squeeze


def zipf_values(rows: Sequence[int], alpha: float, shape, seed):
    """Values in [0, R_t) drawn from Zipf(alpha) (value 0 the hottest), shape [B, T, h], T = len(rows):
    rejection-inversion, every rejected draw redrawn until none is left."""
    from tfbench.framework.tf_import import tf

    limit = tf.constant(np.asarray(rows, dtype=np.int64)[:, None])
    if alpha == 0:
        u = tf.random.stateless_uniform(shape, seed, dtype=tf.float64)
        return tf.minimum(tf.cast(u * tf.cast(limit, tf.float64), tf.int64), limit - 1)
    x1, hn, squeeze = _zipf_constants(rows, alpha)
    hn = tf.constant(hn)

    def h_integral(x):
        log_x = tf.math.log(x)
        t = (1 - alpha) * log_x
        small = tf.abs(t) <= 1e-8
        return tf.where(small, 1 + t / 2, tf.math.expm1(t) / tf.where(small, tf.ones_like(t), t)) * log_x

    def h_inverse(x):
        t = tf.maximum(tf.constant(-1.0, tf.float64), x * (1 - alpha))
        small = tf.abs(t) <= 1e-8
        return tf.exp(tf.where(small, 1 - t / 2, tf.math.log1p(t) / tf.where(small, tf.ones_like(t), t)) * x)

    def draw(i, k, pending):
        u = hn + tf.random.stateless_uniform(shape, tf.random.experimental.stateless_fold_in(seed, i),
                                             dtype=tf.float64) * (x1 - hn)
        x = h_inverse(u)
        candidate = tf.clip_by_value(tf.floor(x + 0.5), 1.0, tf.cast(limit, tf.float64))
        accept = tf.logical_or(candidate - x <= squeeze, u >= h_integral(candidate + 0.5) - candidate ** -alpha)
        take = tf.logical_and(pending, accept)
        return i + 1, tf.where(take, tf.cast(candidate, tf.int64) - 1, k), tf.logical_and(pending, ~accept)

    _, values, _ = tf.while_loop(lambda i, k, pending: tf.reduce_any(pending), draw,
                                 [tf.constant(0, tf.int64), tf.zeros(shape, tf.int64), tf.ones(shape, tf.bool)])
    return values


def value_effects(values, seed: int):
    """The planted effect of each (table, value), in [-√3, √3]: values [..., T, h]."""
    from tfbench.framework.tf_import import tf

    tables = values.shape[-2]
    key = tf.constant(np.stack([keys(seed, t, 1, 1) for t in range(tables)]))  # [T, 1]
    unit = tf.cast(_mix(tf.bitwise.bitwise_and(values, _M32), key), tf.float64) / float(1 << 32)
    return (2 * unit - 1) * math.sqrt(3.0)


def dense_weights(features: int, seed: int) -> np.ndarray:
    """The planted weights of the dense features, unit norm."""
    w = np.random.default_rng([int(seed) & _M32, 0xC11C]).standard_normal(features)
    return w / np.linalg.norm(w)


def examples(rows: Sequence[int], dense_features: int, ids_per_feature: int, alpha: float, layout: str,
             batch_size: int, seed: int, shard, step):
    """({"dense": [B, F] float32, "sparse": [B, T, h] int64}, labels [B] float32) of one (shard, step)."""
    from tfbench.framework.tf_import import tf

    base = tf.random.experimental.stateless_fold_in(
        tf.random.experimental.stateless_fold_in(tf.constant([int(seed) & _M32, 0x5EED], tf.int64),
                                                 tf.cast(shard, tf.int64) + 1), tf.cast(step, tf.int64))
    part = lambda i: tf.random.experimental.stateless_fold_in(base, i)  # noqa: E731
    dense = tf.random.stateless_uniform([batch_size, dense_features], part(0), dtype=tf.float32)
    values = zipf_values(rows, alpha, [batch_size, len(rows), ids_per_feature], part(1))
    ids = permute(values, rows, seed) if layout == "hashed" else values
    z_dense = tf.linalg.matvec(tf.cast(dense, tf.float64) - 0.5, tf.constant(dense_weights(dense_features, seed))) \
        * math.sqrt(12.0)
    z_values = tf.reduce_sum(value_effects(values, seed), axis=[1, 2]) / math.sqrt(len(rows) * ids_per_feature)
    p = tf.sigmoid(bias() + DENSE_WEIGHT * z_dense + VALUE_WEIGHT * z_values)
    labels = tf.cast(tf.random.stateless_uniform([batch_size], part(2), dtype=tf.float64) < p, tf.float32)
    return {"dense": dense, "sparse": ids}, labels


def auc(labels, scores) -> float:
    """Area under the ROC curve of scores for binary labels: the Mann-Whitney U of the positives'
    scores against the negatives', over their product (ties count half); nan with one class only."""
    from scipy import stats

    labels, scores = np.asarray(labels) > 0.5, np.asarray(scores, dtype=np.float64)
    positives, negatives = scores[labels], scores[~labels]
    if not positives.size or not negatives.size:
        return float("nan")
    return float(stats.mannwhitneyu(positives, negatives).statistic / (positives.size * negatives.size))
