"""The reference for tools.bench.overhead: a minimal hand-written tf.function training loop.

As plain as Horovod's synthetic benchmark: same model, data, optimizer and threads as tfbench,
no strategy, no reporting. Prints one JSON line with its images/sec.
"""
import argparse
import json
import os
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--helpfull", action="help", help="the same as --help")
    p.add_argument("--image_size", type=int, default=224)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--num_warmup_steps", type=int, default=5)
    p.add_argument("--num_steps", type=int, default=10)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    a = p.parse_args()
    import tensorflow as tf
    import tf_keras as keras

    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(min(2, a.threads))
    keras.utils.set_random_seed(0)
    model = keras.applications.ResNet50(weights=None, input_shape=(a.image_size, a.image_size, 3),
                                        classes=1000, classifier_activation=None)
    opt = keras.optimizers.SGD(0.1)
    images = tf.random.uniform([a.batch_size, a.image_size, a.image_size, 3])
    labels = tf.random.uniform([a.batch_size], 0, 1000, dtype=tf.int32)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    times = []
    for i in range(a.num_warmup_steps + a.num_steps):
        t0 = time.perf_counter()
        step().numpy()
        if i >= a.num_warmup_steps:
            times.append(time.perf_counter() - t0)
    print(json.dumps({"images_per_sec": a.batch_size * len(times) / sum(times)}))


if __name__ == "__main__":
    main()
