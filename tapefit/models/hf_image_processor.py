"""The preprocessing a Hugging Face image folder asks for, read from its
`preprocessor_config.json` where KerasHub's converter reads none (ViT, DeiT, DINOv2 in
keras-hub 0.32: only Swin's converter reads that file).

A Hugging Face image processor resizes, rescales by `rescale_factor` (1/255) and normalises
by `image_mean` and `image_std`; that is a KerasHub `ImageConverter` with
`scale = rescale_factor / std` and `offset = -mean / std`. A processor that resizes the
shortest edge and then crops the centre (DINOv2's 256 then 224) is read as a resize to the
crop: the classifier resizes whole images and does not crop them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tapefit.errors import TapefitError

FILE = "preprocessor_config.json"


def processor_settings(folder: Path) -> dict[str, Any] | None:
    """`ImageConverter` keyword arguments for the folder's image processor, or None when the
    folder has no `preprocessor_config.json`.

    Raises:
        TapefitError: the file is not JSON, or says no image size.

    Example:
        >>> import json, tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / FILE).write_text(json.dumps({
        ...     "size": {"height": 224, "width": 224}, "rescale_factor": 1 / 255,
        ...     "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}))
        >>> settings = processor_settings(folder)
        >>> settings["image_size"], [round(v, 5) for v in settings["scale"]], settings["offset"]
        ((224, 224), [0.00784, 0.00784, 0.00784], [-1.0, -1.0, -1.0])
    """
    path = folder / FILE
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise TapefitError(f"{path}: not readable JSON ({error})") from None
    size = _image_size(config)
    if size is None:
        raise TapefitError(
            f"{path} says no image size (no size.height/width, size.shortest_edge or "
            "crop_size): set model.backbone.image_size=[height, width]"
        )
    rescale = float(config.get("rescale_factor", 1 / 255))
    rescale = rescale if config.get("do_rescale", True) else 1.0
    if not config.get("do_normalize", True) or "image_mean" not in config:
        return {"image_size": size, "scale": rescale}
    mean, std = _channels(config["image_mean"]), _channels(config["image_std"])
    return {
        "image_size": size,
        "scale": [rescale / s for s in std],
        "offset": [-m / s for m, s in zip(mean, std, strict=True)],
    }


def _image_size(config: dict[str, Any]) -> tuple[int, int] | None:
    crop = config.get("crop_size")
    if config.get("do_center_crop") and crop:
        return _pair(crop)
    return _pair(config.get("size"))


def _pair(size: Any) -> tuple[int, int] | None:
    if isinstance(size, int):
        return size, size
    if not isinstance(size, dict):
        return None
    if "height" in size and "width" in size:
        return int(size["height"]), int(size["width"])
    if "shortest_edge" in size:
        return int(size["shortest_edge"]), int(size["shortest_edge"])
    return None


def _channels(values: Any) -> list[float]:
    values = [float(v) for v in (values if isinstance(values, list) else [values])]
    return values * 3 if len(values) == 1 else values
