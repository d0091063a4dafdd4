"""A tiny CNN that trains in milliseconds: integration tests use it to exercise every path."""
from tfbench.models.layout import input_shape, keras_data_format


def tiny(num_classes: int, image_size: int, data_format: str = "NHWC"):
    from tfbench.framework.tf_import import keras

    fmt = keras_data_format(data_format)
    return keras.Sequential(
        [
            keras.Input(input_shape(image_size, data_format)),
            keras.layers.Conv2D(8, 3, padding="same", activation="relu", data_format=fmt),
            keras.layers.GlobalAveragePooling2D(data_format=fmt),
            keras.layers.Dense(num_classes),
        ],
        name="tiny",
    )
