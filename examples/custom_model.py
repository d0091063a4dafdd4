"""Your own model in tfbench: `python -m tfbench --model=examples.custom_model:build` (run from the
repository's root, or with the directory that holds `examples/` on PYTHONPATH).

`build()` takes no arguments and returns the tf_keras model and a declaration of what it reads
and how it learns; tfbench makes synthetic batches of that shape (or reads --data_dir's JPEG
files, for images), differentiates the loss and runs it under any --strategy and launcher. This one:
a small residual CNN on 32 px RGB images of 10 classes, trained with softmax cross-entropy on its
logits. Other declarations: README, "Your own model".
"""
import tf_keras as keras


def build():
    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(inputs)
    for filters in (32, 64):
        shortcut = keras.layers.Conv2D(filters, 1, strides=2)(x)
        y = keras.layers.Conv2D(filters, 3, strides=2, padding="same", activation="relu")(x)
        y = keras.layers.Conv2D(filters, 3, padding="same")(y)
        x = keras.layers.ReLU()(keras.layers.Add()([shortcut, y]))
    x = keras.layers.GlobalAveragePooling2D()(x)
    logits = keras.layers.Dense(10)(x)
    model = keras.Model(inputs, logits, name="custom_resnet")
    return model, {"inputs": "images", "image_size": 32, "classes": 10, "loss": "sparse_categorical_crossentropy"}
