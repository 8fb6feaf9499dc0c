"""Each format loaded in its own runtime (TensorFlow, onnxruntime, the LiteRT interpreter,
OpenVINO), as a function of the exported file, the endpoint and its inputs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.training.export.endpoints import ExportEndpoint
from tapefit.training.export.formats import (
    EXTRA,
    SAVED_MODEL,
    litert_interpreter,
    package_version,
)

OPENVINO_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}  # compile_model's config when checking


Runner = Callable[[Path, ExportEndpoint, list[np.ndarray]], list[np.ndarray]]


def _saved_model_runtime() -> tuple[str, Runner]:
    """TensorFlow's `tf.saved_model.load`; the endpoint is called by name."""
    loaded: dict[Path, Any] = {}

    def run(path: Path, endpoint: ExportEndpoint, flat: list[np.ndarray]) -> list[np.ndarray]:
        root = path if path.is_dir() else path.parent
        if root not in loaded:
            loaded[root] = tf.saved_model.load(str(root))
        function = getattr(loaded[root], endpoint.name)
        signature = function.concrete_functions[0].structured_input_signature[0]
        traced = tf.nest.flatten(signature)  # the endpoint's own structure and dtypes
        declared = {str(i): spec.dtype.as_numpy_dtype for i, spec in enumerate(traced)}
        arrays = [tf.constant(a) for a in _feed(declared, endpoint, flat).values()]
        outputs = function(*tf.nest.pack_sequence_as(signature, arrays))
        return [np.asarray(o) for o in keras.tree.flatten(outputs)]

    return package_version("tensorflow"), run


ONNX_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


def _onnx_runtime() -> tuple[str, Runner]:
    """onnxruntime's CPU provider; inputs are fed by name."""
    import onnxruntime

    def run(path: Path, endpoint: ExportEndpoint, flat: list[np.ndarray]) -> list[np.ndarray]:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        declared = {i.name: ONNX_DTYPES.get(i.type) for i in session.get_inputs()}
        return [np.asarray(o) for o in session.run(None, _feed(declared, endpoint, flat))]

    return package_version("onnxruntime"), run


def _litert_runtime() -> tuple[str, Runner]:
    """The LiteRT interpreter's signature runner; inputs are fed by name."""
    found = litert_interpreter()
    if found is None:  # checked before writing (missing_packages)
        raise TapefitError(f"trainer.export_formats: litert needs ai_edge_litert: {EXTRA}")
    label, interpreter = found

    def run(path: Path, endpoint: ExportEndpoint, flat: list[np.ndarray]) -> list[np.ndarray]:
        runner = interpreter(model_path=str(path)).get_signature_runner()
        details = runner.get_input_details()
        declared = {n: details[n]["dtype"] for n in sorted(details, key=_natural_order)}
        outputs = runner(**_feed(declared, endpoint, flat))
        return [np.asarray(outputs[k]) for k in sorted(outputs, key=_natural_order)]

    return label, run


def _openvino_runtime() -> tuple[str, Runner]:
    """OpenVINO's CPU plugin in float32: by default it computes in bfloat16 or float16 where
    the processor has them, which a float32 model's outputs are not compared against."""
    import openvino as ov

    core = ov.Core()

    def run(path: Path, endpoint: ExportEndpoint, flat: list[np.ndarray]) -> list[np.ndarray]:
        compiled = core.compile_model(str(path), "CPU", OPENVINO_CONFIG)
        declared = {
            next(iter(i.get_names()), f"input {k}"): i.get_element_type().to_dtype()
            for k, i in enumerate(compiled.inputs)
        }
        result = compiled(list(_feed(declared, endpoint, flat).values()))
        return [np.asarray(result[output]) for output in compiled.outputs]

    settings = ", ".join(f"{k}={v}" for k, v in OPENVINO_CONFIG.items())
    return f"{package_version('openvino')} (CPU, {settings})", run


def _feed(declared: dict[str, Any], endpoint: ExportEndpoint, flat: list[np.ndarray]) -> dict:
    """The runtime's inputs (`{name: dtype}`, in its order) -> arrays in those dtypes: by the
    endpoint's input names, else in order (Keras' default endpoint)."""
    ours = {spec.name: array for spec, array in zip(endpoint.specs, flat, strict=True)}
    short = {name: name.split(":")[0] for name in declared}
    if sorted(short.values()) == sorted(ours):
        arrays = [ours[short[name]] for name in declared]
    else:
        arrays = list(flat)
    feed = {}
    for (name, dtype), array in zip(declared.items(), arrays, strict=True):
        numeric = dtype is not None and array.dtype.kind not in "OSU"
        feed[name] = array.astype(dtype, copy=False) if numeric else array
    return feed


def _natural_order(key: str) -> tuple[str, int]:
    """`output_10` after `output_2`, `args_0_10` after `args_0_2`."""
    head, _, tail = key.rpartition("_")
    return (head, int(tail)) if tail.isdigit() else (key, -1)


RUNTIMES: dict[str, Callable[[], tuple[str, Runner]]] = {
    SAVED_MODEL: _saved_model_runtime,
    "onnx": _onnx_runtime,
    "litert": _litert_runtime,
    "openvino": _openvino_runtime,
}
