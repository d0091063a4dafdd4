"""Every tf_keras.applications model by a snake-case name (inception_v3, resnet152, vgg16, ...),
untrained (weights=None), producing logits, as tf_cnn_benchmarks offered its forty models.

The names are listed here, not read from tf_keras, so that the registry (and flag validation)
never imports TensorFlow; a slow test checks that each one exists in the installed tf_keras.
The smallest image each takes is that of its builder (imagenet_utils.obtain_input_shape's
min_size: 75 for the Inception family, 71 for Xception, 32 for the rest).
"""
from __future__ import annotations

import re
from typing import Dict

# tf_keras 2.21's keras.applications classes (keras_export names).
CLASSES = (
    "ConvNeXtTiny", "ConvNeXtSmall", "ConvNeXtBase", "ConvNeXtLarge", "ConvNeXtXLarge",
    "DenseNet121", "DenseNet169", "DenseNet201",
    "EfficientNetB0", "EfficientNetB1", "EfficientNetB2", "EfficientNetB3", "EfficientNetB4", "EfficientNetB5",
    "EfficientNetB6", "EfficientNetB7",
    "EfficientNetV2B0", "EfficientNetV2B1", "EfficientNetV2B2", "EfficientNetV2B3", "EfficientNetV2S",
    "EfficientNetV2M", "EfficientNetV2L",
    "InceptionResNetV2", "InceptionV3",
    "MobileNet", "MobileNetV2", "MobileNetV3Small", "MobileNetV3Large",
    "NASNetMobile", "NASNetLarge",
    "RegNetX002", "RegNetX004", "RegNetX006", "RegNetX008", "RegNetX016", "RegNetX032", "RegNetX040",
    "RegNetX064", "RegNetX080", "RegNetX120", "RegNetX160", "RegNetX320",
    "RegNetY002", "RegNetY004", "RegNetY006", "RegNetY008", "RegNetY016", "RegNetY032", "RegNetY040",
    "RegNetY064", "RegNetY080", "RegNetY120", "RegNetY160", "RegNetY320",
    "ResNet50", "ResNet101", "ResNet152", "ResNet50V2", "ResNet101V2", "ResNet152V2",
    "ResNetRS50", "ResNetRS101", "ResNetRS152", "ResNetRS200", "ResNetRS270", "ResNetRS350", "ResNetRS420",
    "VGG16", "VGG19", "Xception",
)
MIN_IMAGE_SIZE = {"InceptionV3": 75, "InceptionResNetV2": 75, "Xception": 71}
_STEMS = ("XLarge", "ResNetRS", "ResNet", "DenseNet", "MobileNet", "NASNet", "EfficientNet", "ConvNeXt", "RegNet",
          "Inception", "Xception", "VGG")
_TOKEN = re.compile("|".join(_STEMS) + r"|V\d+|[A-Z][a-z]+|[A-Z]\d+|[A-Z]|\d+")


def snake_case(class_name: str) -> str:
    """InceptionV3 -> inception_v3, ResNet50V2 -> resnet50_v2, VGG16 -> vgg16,
    EfficientNetV2S -> efficientnet_v2_s, ResNetRS50 -> resnet_rs50, RegNetX002 -> regnet_x002."""
    out = ""
    for token in _TOKEN.findall(class_name):
        word = "resnet_rs" if token == "ResNetRS" else token.lower()
        out += word if (token.isdigit() and out) else ("_" if out else "") + word
    return out


NAMES: Dict[str, str] = {snake_case(c): c for c in CLASSES}


def min_image_size(name: str) -> int:
    return MIN_IMAGE_SIZE.get(NAMES[name], 32)


def build(name: str, num_classes: int, image_size: int, data_format: str = "NHWC"):
    """The tf_keras.applications model `name`, weights=None, logits for `num_classes`."""
    from tfbench.framework.tf_import import keras
    from tfbench.models.layout import image_data_format, input_shape

    with image_data_format(data_format):
        return getattr(keras.applications, NAMES[name])(weights=None, input_shape=input_shape(image_size, data_format),
                                                        classes=num_classes, classifier_activation=None)
