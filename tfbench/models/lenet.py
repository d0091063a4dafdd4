"""A LeNet-like CNN for small real images (the digits dataset): two 3x3 convolutions with 2x2
max pooling, then a dense layer of 64 and the classifier. Small enough that a convergence run
of a few hundred updates takes seconds on one core, large enough to reach > 95% on digits."""
from tfbench.models.layout import input_shape, keras_data_format


def lenet(num_classes: int, image_size: int, data_format: str = "NHWC"):
    from tfbench.framework.tf_import import keras

    layers = keras.layers
    fmt = keras_data_format(data_format)
    return keras.Sequential(
        [
            keras.Input(input_shape(image_size, data_format)),
            layers.Conv2D(16, 3, padding="same", activation="relu", data_format=fmt),
            layers.MaxPooling2D(2, data_format=fmt),
            layers.Conv2D(32, 3, padding="same", activation="relu", data_format=fmt),
            layers.MaxPooling2D(2, data_format=fmt),
            layers.Flatten(data_format=fmt),
            layers.Dense(64, activation="relu"),
            layers.Dense(num_classes),
        ],
        name="lenet",
    )
