"""Writing one format: Keras' `model.export(path, format=...)` per serving endpoint, with the
converters' logs captured and their first problem told in one line; the SavedModel's own
endpoints."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.training.export.endpoints import (
    EndpointModel,
    ExportEndpoint,
)
from tapefit.training.export.formats import INFO

log = logging.getLogger("tapefit")


def write_format(
    model: keras.Model, endpoints: Sequence[ExportEndpoint], name: str, folder: Path
) -> dict[str, Path]:
    """Write one format's file per endpoint into `folder` with Keras' `model.export`.

    Args:
        model: The trained Keras model.
        endpoints: Its endpoints (`serving_endpoints`).
        name: `onnx`, `litert` or `openvino`.
        folder: Where the files go (created).

    Returns:
        `{endpoint: file written}` (OpenVINO's `.bin` lies beside its `.xml`).

    Raises:
        TapefitError: the converter refused the model (ops outside the format), in one line.
    """
    info = INFO[name]
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for endpoint in endpoints:
        path = folder / f"{endpoint.name}{info.suffix}"
        options: dict[str, Any] = {}
        if name == "litert":  # built-in ops only: a model needing Select TF ops is refused here
            options["target_spec"] = {"supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS]}
        if not endpoint.keras_default:
            options["input_signature"] = list(endpoint.specs)
        exported = model if endpoint.keras_default else EndpointModel(model, endpoint)
        with _converting(name) as problems:
            try:
                exported.export(str(path), format=info.keras_format, verbose=False, **options)
            except Exception as error:
                if name == "litert" and "ConverterError" in type(error).__name__:
                    problems.append(str(error))
                else:
                    raise
        if problems:
            raise TapefitError(
                f"trainer.export_formats: {name} cannot take {type(model).__name__}'s endpoint "
                f"{endpoint.name!r}: {_first_problem(name, problems)}; leave {name} out of "
                "trainer.export_formats"
            )
        if name == "openvino":
            drop_dangling_outputs(path)
        written[endpoint.name] = path
    return written


def drop_dangling_outputs(path: Path) -> None:
    """Keras' OpenVINO export (TensorFlow backend) turns tensors the graph computes but never
    returns, such as the shape slices of a `Resizing` layer, into outputs beside the
    function's own. TensorFlow names a function's results `Identity`, `Identity_1`, ...: the
    other outputs are removed and the model saved again (in float32), when there are both."""
    import openvino as ov

    model = ov.Core().read_model(str(path))

    def returned(output: Any) -> bool:
        return any(name.split(":")[0].startswith("Identity") for name in output.get_names())

    dangling = [
        r
        for r, output in zip(model.get_results(), model.outputs, strict=True)
        if not returned(output)
    ]
    if not dangling or len(dangling) == len(model.outputs):
        return
    for result in dangling:
        model.remove_result(result)
    pruned = path.with_name(f"{path.stem}.pruned.xml")  # the weights are mapped: not in place
    ov.save_model(model, str(pruned), compress_to_fp16=False)
    del model
    for suffix in (".xml", ".bin"):
        os.replace(pruned.with_suffix(suffix), path.with_suffix(suffix))


@contextlib.contextmanager
def _converting(name: str) -> Iterator[list[str]]:
    """Run a converter quietly (`quietly`, and tf2onnx's log lines held back); what says the
    conversion failed is collected into the list."""
    problems: list[str] = []
    handler = _Collect(problems)
    converter_log = logging.getLogger("tf2onnx")
    propagate, level = converter_log.propagate, converter_log.level
    converter_log.addHandler(handler)
    converter_log.propagate = False
    converter_log.setLevel(logging.ERROR)
    try:
        with quietly(f"the {name} converter") as held:
            yield problems
    finally:
        converter_log.removeHandler(handler)
        converter_log.propagate, converter_log.level = propagate, level
    if problems and name == "litert":
        problems.extend(line for line in "".join(held).splitlines() if "error:" in line)


@contextlib.contextmanager
def quietly(what: str) -> Iterator[list[str]]:
    """Hold back Python warnings and what C++ code writes to file descriptor 2 (converters,
    runtimes); the held text is logged at DEBUG and is in the list once the block is left."""
    held: list[str] = []
    handle, name = tempfile.mkstemp(prefix="tapefit-export-", suffix=".log")
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            os.dup2(handle, 2)
            try:
                yield held
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                held.append(Path(name).read_text(errors="replace"))
                if held[0].strip():
                    log.debug("%s wrote:\n%s", what, held[0])
    finally:
        os.close(saved)
        os.close(handle)
        Path(name).unlink(missing_ok=True)


class _Collect(logging.Handler):
    """A logging handler keeping the messages of the records that say a conversion failed."""

    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.ERROR)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "Unsupported ops" in message or "Failed to convert node" in message:
            self.into.append(message)


def _first_problem(name: str, problems: list[str]) -> str:
    """What a converter's complaints come to, on one short line: the TensorFlow ops the
    format has no conversion for when they are named, else the first error line."""
    text = "\n".join(problems)
    if name == "onnx":
        ops = re.findall(r"'(\w+)': \d+", text)  # tf2onnx: Unsupported ops: Counter({...})
        why = "tf2onnx has no ONNX conversion for"
    else:
        ops = re.findall(r"'tf\.(\w+)' op", text)  # the MLIR converter's diagnostics
        why = "ops outside LiteRT's built-ins (they would need TensorFlow's Select ops):"
    if ops:
        return f"{why} {', '.join(sorted(set(ops)))}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    telling = [line for line in lines if "Unsupported ops" in line or "error:" in line]
    line = (telling or lines or ["the converter failed"])[0]
    line = line.split("error:", 1)[-1].strip() if "error:" in line else line
    return line if len(line) <= 300 else line[:297] + "..."


def write_endpoints(model: keras.Model, path: Path, endpoints: Sequence[ExportEndpoint]) -> None:
    """Write a SavedModel at `path` offering `endpoints` (their names, functions and named
    input specs), the first of them also `serving_default`; `model` is tracked so lookup
    tables (a `TextVectorization`'s vocabulary) travel with it."""
    archive = keras.export.ExportArchive()
    archive.track(model)
    for endpoint in endpoints:
        archive.add_endpoint(endpoint.name, endpoint.function, list(endpoint.structure))
    archive.write_out(str(path), verbose=False)


def write_export(model: keras.Model, path: Path, endpoints: Sequence[ExportEndpoint]) -> None:
    """The SavedModel of `endpoints` (`serving_endpoints(model)`): the model's own, or Keras'
    `model.export`, whose endpoint `serve` takes what `call` was built with."""
    if endpoints[0].keras_default:
        model.export(str(path), format="tf_saved_model", verbose=False)
    else:
        write_endpoints(model, path, endpoints)
