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
        raise TapefitError(f"{KEY}={preset}: KerasHub cannot load it ({detail}){where}") from None
    channels = image_channels(backbone, preset)
    converter = preset_converter(keras_hub, preset)
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


def preset_converter(keras_hub: Any, preset: str) -> Any:
    """The preset's `ImageConverter`, or None when it has none (a bare backbone)."""
    try:
        return keras_hub.layers.ImageConverter.from_preset(preset)
    except Exception:  # no image_converter.json, or no converter for this architecture
        log.info("%s=%s has no image converter: images resized and scaled to [0, 1]", KEY, preset)
        return None


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
