"""ResNet50 from tf_keras.applications, untrained, producing logits."""
from tfbench.models.layout import image_data_format, input_shape


def resnet50(num_classes: int, image_size: int, data_format: str = "NHWC"):
    from tfbench.framework.tf_import import keras

    with image_data_format(data_format):
        return keras.applications.ResNet50(
            weights=None,
            input_shape=input_shape(image_size, data_format),
            classes=num_classes,
            classifier_activation=None,
        )
