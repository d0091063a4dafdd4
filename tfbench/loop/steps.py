"""The work of one step, shared by every strategy so that differences are the strategies'.

train: loss, gradients, SGD update; forward: model(x, training=False) only. Losses are
averaged over the global batch (tf.nn.compute_average_loss), so summing the replicas'
gradients gives the gradient of the mean loss over the global batch.
"""
from __future__ import annotations

from tfbench.framework import precision
from tfbench.framework.tf_import import keras, tf


def per_example_loss(labels, logits):
    logits = tf.cast(logits, tf.float32)  # mixed precision: the loss is computed in fp32
    return keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)


def scaled_loss(model, images, labels, global_batch_size: int):
    logits = model(images, training=True)
    return tf.nn.compute_average_loss(per_example_loss(labels, logits), global_batch_size=global_batch_size)


def gradients(model, images, labels, global_batch_size: int, tape_wrapper=None, optimizer=None):
    """(loss, gradients of the trainable variables); `tape_wrapper` lets Horovod wrap the tape.
    An fp16 loss-scaling `optimizer` gets its loss scaled and its gradients unscaled here."""
    with tf.GradientTape() as tape:
        loss = scaled_loss(model, images, labels, global_batch_size)
        differentiated = precision.scale_loss(optimizer, loss)
    if tape_wrapper is not None:
        tape = tape_wrapper(tape)
    return loss, precision.unscale_gradients(optimizer, tape.gradient(differentiated, model.trainable_variables))


def train(model, optimizer, images, labels, global_batch_size: int, tape_wrapper=None):
    loss, grads = gradients(model, images, labels, global_batch_size, tape_wrapper, optimizer)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


def train_marked(model, optimizer, images, labels, global_batch_size: int):
    """train(), plus tf.timestamp() taken once every gradient exists: where a parameter-server
    update's compute ends and its push begins (the timestamp delays nothing)."""
    loss, grads = gradients(model, images, labels, global_batch_size, None, optimizer)
    with tf.control_dependencies([g for g in grads if g is not None]):
        computed = tf.timestamp()
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss, computed


def forward(model, images):
    """Inference only; the reduction makes the host fetch depend on every logit."""
    return tf.reduce_mean(model(images, training=False))


def optimizer(config):
    return keras.optimizers.SGD(learning_rate=config.learning_rate)
