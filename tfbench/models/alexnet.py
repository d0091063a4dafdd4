"""AlexNet after Krizhevsky et al. (2012), single tower, in tf_keras.

Five convolutions (96, 256, 384, 384, 256 filters; 11x11/4, 5x5, 3x3, 3x3, 3x3), max pooling
3x3/2 after the first, second and fifth, then dense 4096, 4096 and the classifier, with dropout
0.5 before each of the last two. Local response normalisation is left out, as tf_cnn_benchmarks
does. For images smaller than ImageNet's the first convolution's stride (and for the smallest,
its kernel) shrinks and pooling pads, so that every layer keeps a spatial extent of at least one.
"""
from tfbench.models.layout import input_shape, keras_data_format


def first_conv(image_size: int):
    """(kernel, stride, pool padding) of the first convolution for this image size."""
    if image_size >= 128:
        return 11, 4, "valid"
    if image_size >= 64:
        return 11, 2, "same"
    return 5, 1, "same"


def alexnet(num_classes: int, image_size: int, data_format: str = "NHWC"):
    from tfbench.framework.tf_import import keras

    layers = keras.layers
    fmt = keras_data_format(data_format)
    kernel, stride, pool_padding = first_conv(image_size)

    def conv(filters, size, strides=1, padding="same"):
        return layers.Conv2D(filters, size, strides=strides, padding=padding,
                             activation="relu", data_format=fmt)

    def pool():
        return layers.MaxPooling2D(3, 2, padding=pool_padding, data_format=fmt)

    return keras.Sequential(
        [
            keras.Input(input_shape(image_size, data_format)),
            conv(96, kernel, stride, padding="valid" if stride == 4 else "same"),
            pool(),
            conv(256, 5),
            pool(),
            conv(384, 3),
            conv(384, 3),
            conv(256, 3),
            pool(),
            layers.Flatten(data_format=fmt),
            layers.Dense(4096, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(4096, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(num_classes),
        ],
        name="alexnet",
    )
