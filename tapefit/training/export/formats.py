"""The export formats `trainer.export_formats` names, what each needs installed, and the
tolerance its outputs are checked to."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import keras
import tensorflow as tf

from tapefit.errors import TapefitError

SAVED_MODEL = "saved_model"  # written at export/ itself, the others in export/<format>/


FORMATS = (SAVED_MODEL, "onnx", "litert", "openvino")


VERIFY_FILE = "verify.json"


VERIFY_ROWS = 32  # rows of the first test batch every export is checked on


DEFAULT_TOLERANCE = 1e-4  # trainer.export_tolerance=null, for a float32 model


MIXED_TOLERANCE = 1e-2  # ... and for a mixed-precision one: 16-bit floats keep ~3 digits


EXTRA = 'pip install "tapefit[export]"'


@dataclass(frozen=True)
class FormatInfo:
    """What one format needs: Keras' name for it, its file suffix, the packages that write
    and run it, and why a model with string inputs cannot take it."""

    keras_format: str
    suffix: str
    packages: tuple[str, ...]  # import names; `litert` also needs a LiteRT interpreter
    strings: str  # what the text processing inside a model with string inputs lacks there


INFO = {
    "onnx": FormatInfo(
        "onnx",
        ".onnx",
        ("tf2onnx", "onnx", "onnxruntime"),
        "no ONNX operators (tf2onnx converts no string lowercasing, regex, split or "
        "vocabulary lookup)",
    ),
    "litert": FormatInfo(
        "litert",
        ".tflite",
        (),
        "no LiteRT built-in ops (only TensorFlow's Select ops, which the LiteRT interpreter lacks)",
    ),
    "openvino": FormatInfo(
        "openvino",
        ".xml",
        ("openvino",),
        "no OpenVINO conversion without the separate openvino-tokenizers extension",
    ),
}


def normalize_formats(formats: Sequence[Any] | None) -> list[str]:
    """The requested formats as plain names, in order, without repeats.

    Args:
        formats: `trainer.export_formats` (enum members or strings); `None` for the default.

    Returns:
        The format names, e.g. `["saved_model", "onnx"]`.

    Raises:
        TapefitError: an unknown format, or none at all.
    """
    if formats is None:
        return [SAVED_MODEL]
    names: list[str] = []
    for item in formats:
        name = str(getattr(item, "value", item))
        if name not in FORMATS:
            raise TapefitError(
                f"trainer.export_formats: unknown format {name!r}; choose from {', '.join(FORMATS)}"
            )
        if name not in names:
            names.append(name)
    if not names:
        raise TapefitError(
            "trainer.export_formats=[] exports nothing: name at least one of "
            f"{', '.join(FORMATS)}, or set trainer.export=false"
        )
    return names


def resolve_tolerance(model: keras.Model, tolerance: float | None) -> float:
    """The largest difference an export may show: `tolerance`, or by default 1e-4 for a
    float32 model and 1e-2 for one computing in float16 or bfloat16 (mixed precision, where
    even TensorFlow's own graph of the model differs from its eager run by about 1e-3).

    Args:
        model: The trained Keras model.
        tolerance: `trainer.export_tolerance`; `None` for the default.

    Returns:
        The tolerance.

    Raises:
        TapefitError: a negative or non-finite tolerance.
    """
    if tolerance is None:
        compute = str(getattr(model.dtype_policy, "compute_dtype", "float32"))
        return MIXED_TOLERANCE if compute in ("float16", "bfloat16") else DEFAULT_TOLERANCE
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise TapefitError(f"trainer.export_tolerance={tolerance} must be a number at least 0")
    return float(tolerance)


def missing_packages(formats: Sequence[str]) -> dict[str, list[str]]:
    """The packages each requested format needs and this environment lacks.

    Args:
        formats: Format names.

    Returns:
        `{format: [missing import names]}` for the formats that cannot be written here.
    """
    missing: dict[str, list[str]] = {}
    for name in formats:
        if name == SAVED_MODEL:
            continue
        lacking = [p for p in INFO[name].packages if importlib.util.find_spec(p) is None]
        if name == "litert" and litert_interpreter() is None:
            lacking.append("ai_edge_litert")
        if lacking:
            missing[name] = lacking
    return missing


def litert_interpreter() -> tuple[str, Callable[..., Any]] | None:
    """The LiteRT interpreter: `ai_edge_litert`'s, else TensorFlow's `tf.lite.Interpreter`."""
    if importlib.util.find_spec("ai_edge_litert") is not None:
        from ai_edge_litert.interpreter import Interpreter

        return package_version("ai-edge-litert"), Interpreter
    interpreter = getattr(getattr(tf, "lite", None), "Interpreter", None)
    if interpreter is None:
        return None
    return f"{package_version('tensorflow')} (tf.lite.Interpreter)", interpreter


def package_version(package: str) -> str:
    """`package version`, or the package alone when its version is unknown."""
    try:
        return f"{package} {importlib.metadata.version(package)}"
    except importlib.metadata.PackageNotFoundError:
        return package
