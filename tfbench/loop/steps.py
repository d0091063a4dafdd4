"""The work of one step, shared by every strategy so that differences are the strategies'.

train: loss, gradients, SGD update; forward: model(x, training=False) only; shaped() is the one
builder of a step's shape (train or forward, XLA, where compute ends) that every strategy calls
with what differs. Losses are
averaged over the global batch (tf.nn.compute_average_loss), so summing the replicas'
gradients gives the gradient of the mean loss over the global batch. Under --compute=emulated the
model's forward and backward pass is a wait of the measured compute (tfbench.loop.emulated), and
everything around it stays the strategy's.
"""
from __future__ import annotations

from tfbench.framework import precision
from tfbench.framework.tf_import import keras, tf
from tfbench.loop import emulated


def sparse_categorical_loss(labels, logits):
    """Softmax cross-entropy of class labels, in fp32 (mixed precision computes the loss in fp32)."""
    logits = tf.cast(logits, tf.float32)
    return keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)


def scaled_loss(model, features, labels, global_batch_size: int, loss=sparse_categorical_loss):
    outputs = model(features, training=True)
    return tf.nn.compute_average_loss(loss(labels, outputs), global_batch_size=global_batch_size)


def gradients(model, features, labels, global_batch_size: int, tape_wrapper=None, optimizer=None,
              loss=sparse_categorical_loss, compute=None):
    """(loss, gradients of the trainable variables); `loss(labels, outputs)` is the workload's loss
    per example; `tape_wrapper` lets Horovod wrap the tape. An fp16 loss-scaling `optimizer` gets
    its loss scaled and its gradients unscaled here. `compute()`, when given, makes the loss on
    the tape in place of the model (emulated compute)."""
    with tf.GradientTape() as tape:
        loss = compute() if compute is not None else scaled_loss(model, features, labels, global_batch_size, loss)
        differentiated = precision.scale_loss(optimizer, loss)
    if tape_wrapper is not None:
        tape = tape_wrapper(tape)
    return loss, precision.unscale_gradients(optimizer, tape.gradient(differentiated, model.trainable_variables))


def train(model, optimizer, features, labels, global_batch_size: int, tape_wrapper=None, loss=sparse_categorical_loss):
    loss, grads = gradients(model, features, labels, global_batch_size, tape_wrapper, optimizer, loss)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


def shaped(config, model, optimizer, features, labels, global_batch_size: int, *, forward_scale: int = 1,
           tape_wrapper=None, marks=None, apply: bool = True):
    """One step's work as every strategy runs it, and the wall time its compute ends:
    (value, mark, gradients).

    train: the loss, the gradients (through `tape_wrapper`: Horovod's all-reducing tape) and, with
    `apply`, the update (a synchronous parameter server pushes the gradients instead: None is
    applied here). forward: the model's output only, divided by `forward_scale` (the replicas a
    strategy sums); no gradients. `mark` is tf.timestamp() once every gradient (or the output)
    exists, or `marks[-1]` when the tape wrapper takes it itself, before its all-reduce; under XLA,
    which compiles the step whole and has no timestamp inside it, 0.0 (no mark). A timestamp
    delays nothing."""
    no_mark = tf.constant(0.0, tf.float64)
    emulate = config.emulated_compute
    if config.mode == "forward":
        value = emulated.loss(config, model, features) if emulate else forward(model, features)
        value = value / forward_scale if forward_scale != 1 else tf.identity(value)
        if config.xla:
            return value, no_mark, None
        with tf.control_dependencies([value]):
            return value, tf.timestamp(), None
    loss, grads = gradients(model, features, labels, global_batch_size, tape_wrapper, optimizer,
                            config.workload.per_example_loss,
                            (lambda: emulated.loss(config, model, features)) if emulate else None)
    if config.xla:
        mark = no_mark
    elif marks is not None:
        mark = marks[-1]
    else:
        with tf.control_dependencies([g for g in grads if g is not None]):
            mark = tf.timestamp()
    if apply:
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss, mark, grads


def forward(model, features):
    """Inference only; the reduction makes the host fetch depend on every logit."""
    return tf.reduce_mean(model(features, training=False))


def optimizer(config):
    """--optimizer (tfbench.config.choices.OPTIMIZERS), one for every strategy. The legacy SGD is
    the default: its update of an embedding table's sparse gradient is a scatter of the rows the
    step touched (ResourceScatterAdd), while tf_keras' v2 SGD's costs the whole table on TF 2.21
    (README: Embedding models); TensorFlow's parameter-server tutorial trains with the legacy ones."""
    if config.optimizer == "sgd_v2":
        return keras.optimizers.SGD(learning_rate=config.learning_rate)
    return keras.optimizers.legacy.SGD(learning_rate=config.learning_rate)


def prepare(optimizer, variables) -> None:
    """Creates the optimizer's own variables (iterations, hyperparameters, slots) before the first
    step, in the caller's strategy scope, so that a strategy places and broadcasts them with the
    model's. The legacy optimizers have no public builder: _create_all_weights is theirs."""
    if hasattr(optimizer, "build"):
        optimizer.build(variables)
    else:
        optimizer._create_all_weights(variables)  # noqa: SLF001 - the legacy OptimizerV2's builder


def optimizer_record(config, applied_by: str = "") -> dict:
    """The records' `optimizer` entry: which ran, and what its sparse update costs."""
    from tfbench.config.choices import OPTIMIZERS

    cls, cost = OPTIMIZERS[config.optimizer]
    return {"name": config.optimizer, "class": cls, "sparse_update_costs": cost,
            "applied_by": applied_by or "the optimizer's apply_gradients in every replica's step"}
