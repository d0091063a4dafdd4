"""Image layout helpers shared by the model builders."""
import contextlib


def keras_data_format(data_format: str) -> str:
    return {"NHWC": "channels_last", "NCHW": "channels_first"}[data_format]


def input_shape(image_size: int, data_format: str):
    if data_format == "NCHW":
        return (3, image_size, image_size)
    return (image_size, image_size, 3)


@contextlib.contextmanager
def image_data_format(data_format: str):
    """keras.applications reads the global image format; set it only while building."""
    from tfbench.framework.tf_import import keras

    previous = keras.backend.image_data_format()
    keras.backend.set_image_data_format(keras_data_format(data_format))
    try:
        yield
    finally:
        keras.backend.set_image_data_format(previous)
