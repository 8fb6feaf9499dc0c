"""A tiny pretrained image backbone and folders of photos the tests write themselves (no
network): a random ResNet saved with KerasHub's `save_to_preset` beside its image converter,
and class folders of JPEG photos of several sizes."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np

COLORS = {"red": (200, 40, 40), "blue": (40, 40, 200)}


def tiny_resnet(seed: int = 0):
    """A random two-stack ResNet (basic blocks, 89k parameters, BatchNorm)."""
    import keras_hub

    keras.utils.set_random_seed(seed)
    return keras_hub.models.ResNetBackbone(
        input_conv_filters=[64],
        input_conv_kernel_sizes=[3],
        stackwise_num_filters=[64, 16],
        stackwise_num_blocks=[1, 1],
        stackwise_num_strides=[1, 2],
        block_type="basic_block",
    )


def write_resnet_preset(folder: Path, image_size: tuple[int, int] = (32, 32), seed: int = 0):
    """A KerasHub preset folder: the backbone and a converter (resize, pixels to [0, 1],
    ImageNet's mean and deviation); returns the backbone written."""
    import keras_hub

    backbone = tiny_resnet(seed)
    backbone.save_to_preset(str(folder))
    converter = keras_hub.layers.ResNetImageConverter(
        image_size=image_size,
        scale=[1 / (255 * s) for s in (0.229, 0.224, 0.225)],
        offset=[-m / s for m, s in zip((0.485, 0.456, 0.406), (0.229, 0.224, 0.225), strict=True)],
    )
    converter.save_to_preset(str(folder))
    return backbone


def write_photos(root: Path, per_class: int, seed: int = 0) -> None:
    """`root/<class>/<i>.jpg`, RGB photos of 30-45 by 40 pixels, one colour per class."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for name, color in COLORS.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            shape = (30 + i % 16, 40, 3)
            pixels = np.clip(np.array(color) + rng.normal(0, 50, shape), 0, 255)
            Image.fromarray(pixels.astype("uint8")).save(root / name / f"{i}.jpg")
