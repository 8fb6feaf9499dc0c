"""A pretrained image backbone for the classifier (`model.backbone.preset`), with the image
preprocessing it was trained with.

KerasHub loads its own presets (by name, or a local folder written by `save_to_preset`) and,
through its converters, timm and Hugging Face checkpoints (ResNet, EfficientNet, MobileNet,
DenseNet, VGG, ViT, DeiT, DINOv2, ...). Beside the backbone it keeps the preset's
`ImageConverter`: the image size, and the scale and offset (normalisation) the backbone
expects of pixel values in [0, 255]. A folder without one gets a converter from
`model.backbone.image_size` that only resizes and rescales to [0, 1].
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras

from tapefit.errors import TapefitError
from tapefit.models.hf_image_processor import FILE as PROCESSOR_FILE
from tapefit.models.hf_image_processor import processor_settings

log = logging.getLogger("tapefit")

KEY = "model.backbone.preset"
POOLINGS = ("avg", "max", "cls")


@dataclass
class ImageBackboneParts:
    """What a preset gives: the backbone, the converter that prepares its images, where it came
    from, and how many channels it reads."""

    backbone: Any
    converter: Any
    source: str
    channels: int


def looks_like_path(preset: str) -> bool:
    """Whether `preset` names a local folder rather than a KerasHub preset name.

    Example:
        >>> looks_like_path("checkpoints/resnet"), looks_like_path("resnet_18_imagenet")
        (True, False)
    """
    return "/" in preset or preset.startswith(".") or Path(preset).expanduser().exists()


def check_image_folder(folder: Path) -> None:
    """Refuse a folder KerasHub could not read as a checkpoint, before it tries.

    Raises:
        TapefitError: no such folder, no `config.json`, or unreadable JSON.

    Example:
        >>> check_image_folder(Path("no/such/folder"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        tapefit.errors.TapefitError: model.backbone.preset=no/such/folder: no such folder ...
    """
    if not folder.is_dir():
        raise TapefitError(
            f"{KEY}={folder}: no such folder (give a KerasHub preset folder, a timm or Hugging "
            "Face folder with config.json and model.safetensors, or a KerasHub preset name)"
        )
    config = folder / "config.json"
    if not config.is_file():
        raise TapefitError(
            f"{KEY}={folder}: the folder has no config.json, so it is neither a KerasHub preset "
            "(save_to_preset) nor a timm or Hugging Face checkpoint"
        )
    try:
        json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise TapefitError(f"{KEY}={folder}: config.json is not readable JSON ({error})") from None


def image_channels(backbone: Any, source: str) -> int:
    """The channels the backbone reads; refuses a backbone that does not read images.

    Raises:
        TapefitError: its input is not one batch of images (a text or audio model).
    """
    inputs = backbone.input
    shape = getattr(inputs, "shape", None)
    if isinstance(inputs, dict | list | tuple) or shape is None or len(shape) != 4:
        raise TapefitError(
            f"{KEY}={source}: {type(backbone).__name__} does not read images (batch, height, "
            "width, channels): name an image backbone (ResNet, EfficientNet, MobileNet, ViT, ...)"
        )
    return int(shape[-1] or 3)


def load_image_backbone(preset: str, image_size: Any = None) -> ImageBackboneParts:
    """The backbone and image converter `preset` names.

    Args:
        preset: A local KerasHub preset folder, a timm or Hugging Face folder, or a KerasHub
            preset name (downloaded by KerasHub, or read from its cache).
        image_size: `[height, width]` the images are resized to; None: the preset's.

    Returns:
        The parts; the converter resizes to `image_size` (or the preset's size).

    Raises:
        TapefitError: keras-hub missing, a folder or name KerasHub cannot load, a backbone
            that does not read images, or no image size known.

    Example:
        >>> load_image_backbone("no/such/folder")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        tapefit.errors.TapefitError: model.backbone.preset=no/such/folder: no such folder ...
    """
    local = looks_like_path(preset)
    if local:
        check_image_folder(Path(preset).expanduser())
    try:
        import keras_hub
    except ImportError:
        raise TapefitError(f"{KEY} needs keras-hub: pip install 'tapefit[text]'") from None
    try:
        backbone = keras_hub.models.Backbone.from_preset(
            preset, dtype=keras.config.dtype_policy().name
        )
    except ModuleNotFoundError as error:
        raise TapefitError(f"{KEY}={preset} needs {error.name}: pip install it") from None
    except Exception as error:  # an unknown name, no network, a broken or unsupported folder
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        where = "" if local else "; give a local preset folder, or fetch it where there is a "
        where += "" if local else "network and save it with save_to_preset"
        if "does not contain tensor" in detail:  # e.g. a bare ViTModel: no `vit.` prefix
            where = (
                "; its weights are not named as KerasHub's converter reads them (keras-hub "
                "reads ViT weights as ViTForImageClassification saves them, prefixed `vit.`)"
            )
        raise TapefitError(f"{KEY}={preset}: KerasHub cannot load it ({detail}){where}") from None
    channels = image_channels(backbone, preset)
    converter = preset_converter(keras_hub, preset, local)
    size = _size(image_size) or (tuple(converter.image_size) if converter else None)
    size = size or _static_size(backbone)
    if size is None:
        raise TapefitError(
            f"{KEY}={preset} says no image size: set model.backbone.image_size=[height, width]"
        )
    if converter is None:  # resize, and pixels to [0, 1]: what a preset without one expects
        converter = keras_hub.layers.ImageConverter(image_size=size, scale=1 / 255.0)
    elif tuple(converter.image_size or ()) != size:
        config = {**converter.get_config(), "image_size": size}
        converter = type(converter).from_config(config)
    return ImageBackboneParts(backbone, converter, preset, channels)


def preset_converter(keras_hub: Any, preset: str, local: bool = False) -> Any:
    """The preset's `ImageConverter`; for a Hugging Face folder KerasHub reads no
    preprocessing of, one built from its `preprocessor_config.json`; None when there is
    neither (a bare backbone)."""
    try:
        converter = keras_hub.layers.ImageConverter.from_preset(preset)
    except Exception:  # no image_converter.json, or no converter for this architecture
        converter = None
    if converter is None and local:
        settings = processor_settings(Path(preset).expanduser())
        if settings is not None:
            log.info("%s=%s: preprocessing read from its %s", KEY, preset, PROCESSOR_FILE)
            return keras_hub.layers.ImageConverter(**settings)
    if converter is None:
        log.info("%s=%s has no image converter: images resized and scaled to [0, 1]", KEY, preset)
    return converter


def _size(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    size = [int(v) for v in value]
    if len(size) != 2 or min(size) < 1:
        raise TapefitError(
            f"model.backbone.image_size={list(value)} must be [height, width], each at least 1"
        )
    return size[0], size[1]


def _static_size(backbone: Any) -> tuple[int, int] | None:
    shape = backbone.input.shape
    return (int(shape[1]), int(shape[2])) if shape[1] and shape[2] else None


@keras.saving.register_keras_serializable(package="tapefit")
class ApplicationPreprocessing(keras.layers.Layer):
    """`keras.applications.<module>.preprocess_input` as a layer (pixels in [0, 255] in), so
    a saved model keeps its application's preprocessing by name.

    Args:
        module: The `keras.applications` module, e.g. `resnet50`, `mobilenet_v3`.
        **kwargs: `keras.layers.Layer`'s keyword arguments.

    Example:
        >>> import numpy as np
        >>> layer = ApplicationPreprocessing("mobilenet_v2")  # pixels to [-1, 1]
        >>> [float(v) for v in layer(np.array([[0.0, 255.0]]))[0]]
        [-1.0, 1.0]
    """

    def __init__(self, module: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.module = module
        self.preprocess = getattr(keras.applications, module).preprocess_input

    def call(self, pixels: Any) -> Any:
        return self.preprocess(pixels)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "module": self.module}


def load_application(name: str, weights: str | None, image_size: Any) -> ImageBackboneParts:
    """A `keras.applications` model without its top, from a local weights file, and a
    converter that resizes to `image_size` and applies its `preprocess_input`.

    Args:
        name: A `keras.applications` class, e.g. `ResNet50`, `EfficientNetB0`.
        weights: A weights file saved for it without its top (`.h5` or `.weights.h5`);
            None: random initial weights.
        image_size: `[height, width]` the model sees (its default: 224 by 224).

    Raises:
        TapefitError: an unknown name, a missing file, or weights of another model.

    Example:
        >>> load_application("ResNet5", None, None)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        tapefit.errors.TapefitError: model.backbone.application=ResNet5 is not a ...
    """
    known = sorted(n for n in dir(keras.applications) if n[:1].isupper())
    if name not in known:
        close = [n for n in known if n.lower().startswith(name.lower()[:3])][:4]
        raise TapefitError(
            f"model.backbone.application={name} is not a keras.applications model; "
            f"{'did you mean ' + ', '.join(close) + '? ' if close else ''}e.g. ResNet50, "
            "EfficientNetB0, MobileNetV3Small"
        )
    if weights is not None and not Path(weights).expanduser().is_file():
        raise TapefitError(
            f"model.backbone.weights={weights}: no such file (a weights file saved for "
            f"{name} without its top, e.g. from keras.applications' downloads)"
        )
    height, width = _size(image_size) or (224, 224)
    constructor = getattr(keras.applications, name)
    try:
        backbone = constructor(include_top=False, weights=weights, input_shape=(height, width, 3))
    except ValueError as error:
        detail = str(error).strip().splitlines()[0]
        raise TapefitError(
            f"model.backbone.weights={weights} does not fit {name} without its top ({detail})"
        ) from None
    module = constructor.__module__.rsplit(".", 1)[-1]
    converter = keras.Sequential(
        [keras.layers.Resizing(height, width), ApplicationPreprocessing(module)],
        name="application_converter",
    )
    converter.image_size = (height, width)
    return ImageBackboneParts(backbone, converter, f"keras.applications.{name}", 3)
