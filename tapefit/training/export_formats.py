"""`trainer.export_formats`: ONNX, LiteRT and OpenVINO exports beside the SavedModel, and the
check that each one, loaded in its own runtime, gives the Keras model's outputs.

Every format is written by Keras' own `model.export(path, format=...)`, one file per serving
endpoint: `export/<format>/<endpoint>.<suffix>`. A model without `serving_endpoints()` is
exported as it is (Keras' default `serve`, on what the model was built with). Keras exports a
model's `__call__`, so each endpoint a model names itself is wrapped in a small Keras model
whose `call` is that endpoint; its inputs keep the endpoint's argument names (`images`).

The check (`verify_exports`) feeds a batch of real inputs (the first test batch, at most 32
rows) to every endpoint of every format in its own runtime (TensorFlow, onnxruntime, the LiteRT
interpreter, OpenVINO) and records the largest absolute difference from the Keras model.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import inspect
import logging
import math
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tapefit.errors import TapefitError

log = logging.getLogger("tapefit")

SAVED_MODEL = "saved_model"  # written at export/ itself, the others in export/<format>/
FORMATS = (SAVED_MODEL, "onnx", "litert", "openvino")
VERIFY_FILE = "verify.json"
VERIFY_ROWS = 32  # rows of the first test batch every export is checked on
DEFAULT_TOLERANCE = 1e-4  # trainer.export_tolerance=null, for a float32 model
MIXED_TOLERANCE = 1e-2  # ... and for a mixed-precision one: 16-bit floats keep ~3 digits
EXTRA = 'pip install "tapefit[export]"'
OPENVINO_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}  # compile_model's config when checking


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


@dataclass(frozen=True)
class ExportEndpoint:
    """One serving function: `function(*arguments)` on the Keras model, its flat input specs
    (named) and how flat inputs pack into its positional arguments. Keras' default endpoint
    (a model without `serving_endpoints()`) has no specs of its own: Keras traces what the
    model was built with, and it is checked on the batch's structure (`for_batch`)."""

    name: str
    function: Callable[..., Any]
    structure: tuple[Any, ...] | None  # one spec structure per positional argument
    specs: tuple[tf.TensorSpec, ...]  # flat, each named

    @property
    def keras_default(self) -> bool:
        """Whether this is Keras' default `serve`, exported by `model.export` as it is."""
        return self.structure is None

    def for_batch(self, batch: VerifyBatch) -> ExportEndpoint:
        """Keras' default endpoint as taking the batch's `x` as its one argument (others are
        returned as they are)."""
        if not self.keras_default:
            return self
        arrays = [np.asarray(a) for a in keras.tree.flatten(batch.x)]
        specs = tuple(
            tf.TensorSpec((None, *a.shape[1:]), tf.as_dtype(a.dtype), name=f"inputs_{i}")
            for i, a in enumerate(arrays)
        )
        structure = keras.tree.pack_sequence_as(batch.x, list(specs))
        return ExportEndpoint(self.name, self.function, (structure,), specs)

    def arguments(self, flat: Sequence[Any]) -> list[Any]:
        """Pack flat inputs into the endpoint's positional arguments.

        Args:
            flat: One value per flat spec, in order.

        Returns:
            The positional arguments of `function` (and of the SavedModel's endpoint).
        """
        return list(keras.tree.pack_sequence_as(self.structure, list(flat)))


@dataclass(frozen=True)
class VerifyBatch:
    """The inputs every export is checked on: a split's first batch (`x` only, as a nested
    structure of arrays), at most `VERIFY_ROWS` rows."""

    split: str
    x: Any

    @property
    def rows(self) -> int:
        """The number of rows in the batch."""
        return int(np.shape(keras.tree.flatten(self.x)[0])[0])


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
        if name == "litert" and _litert_interpreter() is None:
            lacking.append("ai_edge_litert")
        if lacking:
            missing[name] = lacking
    return missing


def serving_endpoints(model: keras.Model) -> list[ExportEndpoint]:
    """The model's endpoints as flat, named functions.

    The model's `serving_endpoints()` when it has them, else Keras' default: `serve`, which
    calls the model on what it was built with (`ExportEndpoint.keras_default`).

    Args:
        model: The trained Keras model.

    Returns:
        One `ExportEndpoint` per endpoint, the first being `serving_default`.
    """
    own = getattr(model, "serving_endpoints", None)
    if callable(own):
        endpoints = []
        for name, (function, signature) in own().items():
            params = list(inspect.signature(function).parameters)
            names = params + [f"input_{i}" for i in range(len(params), len(signature))]
            endpoints.append(_endpoint(name, function, list(signature), names))
        return endpoints

    def serve(*arguments: Any) -> Any:
        return model(*arguments, training=False)

    return [ExportEndpoint("serve", serve, None, ())]


def _endpoint(
    name: str, function: Callable[..., Any], signature: list[Any], names: list[str]
) -> ExportEndpoint:
    """An endpoint whose flat specs are `tf.TensorSpec`s named after its arguments (a nested
    argument's leaves get `_<i>` suffixes)."""
    structure = tuple(keras.tree.map_structure(_tensor_spec, signature))
    specs: list[tf.TensorSpec] = []
    for argument, base in zip(structure, names, strict=False):
        leaves = keras.tree.flatten(argument)
        for i, spec in enumerate(leaves):
            label = spec.name or (base if len(leaves) == 1 else f"{base}_{i}")
            specs.append(tf.TensorSpec(spec.shape, spec.dtype, name=label))
    named = keras.tree.pack_sequence_as(list(structure), specs)
    return ExportEndpoint(name, function, tuple(named), tuple(specs))


def _tensor_spec(spec: Any) -> tf.TensorSpec:
    """A `keras.InputSpec` or `tf.TensorSpec` as a `tf.TensorSpec`."""
    if isinstance(spec, tf.TensorSpec):
        return spec
    return tf.TensorSpec(spec.shape, spec.dtype, name=getattr(spec, "name", None))


def check_exportable(model: keras.Model, formats: Sequence[str]) -> list[ExportEndpoint]:
    """Refuse the formats a model's endpoints cannot go through, before anything is written.

    Args:
        model: The trained Keras model.
        formats: Format names.

    Returns:
        The model's endpoints (`serving_endpoints`).

    Raises:
        TapefitError: a format whose packages are missing, or that cannot take the model's
            string inputs, in one line naming each format and why.
    """
    missing = missing_packages(formats)
    if missing:
        needs = "; ".join(f"{name} needs {', '.join(p)}" for name, p in missing.items())
        raise TapefitError(f"trainer.export_formats: {needs}, which are not installed: {EXTRA}")
    compute = str(getattr(model.dtype_policy, "compute_dtype", "float32"))
    converted = [name for name in formats if name != SAVED_MODEL]
    if converted and compute != "float32":
        raise TapefitError(
            f"trainer.export_formats: {' and '.join(converted)} cannot take "
            f"{type(model).__name__}: it computes in {compute} (mixed precision), and their "
            "converters need a float32 model (Keras' rule for ONNX; LiteRT's built-ins and "
            "OpenVINO's CPU plugin refuse its 16-bit graph); train with "
            f"trainer.precision=float32 for them, or export it as {SAVED_MODEL}"
        )
    endpoints = serving_endpoints(model)
    strings = [
        f"{e.name}: {', '.join(s.name for s in e.specs)}"
        for e in endpoints
        if any(s.dtype == tf.string for s in e.specs)
    ]
    refused = [name for name in formats if name != SAVED_MODEL and strings]
    if refused:
        lacks = " and ".join(INFO[name].strings for name in refused)
        raise TapefitError(
            f"trainer.export_formats: {' and '.join(refused)} cannot take "
            f"{type(model).__name__}: its endpoints take strings ({'; '.join(strings)}), and "
            f"the text processing inside has {lacks}; export it as {SAVED_MODEL}, whose "
            "endpoints keep the text processing inside"
        )
    return endpoints


class _Endpoint(keras.Model):
    """One endpoint as a Keras model taking flat named tensors, so that Keras' own
    `model.export(format=...)`, which exports a model's `__call__`, exports that endpoint."""

    def __init__(self, model: keras.Model, endpoint: ExportEndpoint) -> None:
        super().__init__(name=endpoint.name, dtype="float32")
        self.source = model  # tracked: its variables and lookup tables go into the export
        self.endpoint = endpoint
        self.built = True

    def call(self, *flat: Any, training: bool = False) -> Any:
        return self.endpoint.function(*self.endpoint.arguments(flat))


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
        exported = model if endpoint.keras_default else _Endpoint(model, endpoint)
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
        written[endpoint.name] = path
    return written


@contextlib.contextmanager
def _converting(name: str) -> Iterator[list[str]]:
    """Run a converter quietly (`_quietly`, and tf2onnx's log lines held back); what says the
    conversion failed is collected into the list."""
    problems: list[str] = []
    handler = _Collect(problems)
    converter_log = logging.getLogger("tf2onnx")
    propagate, level = converter_log.propagate, converter_log.level
    converter_log.addHandler(handler)
    converter_log.propagate = False
    converter_log.setLevel(logging.ERROR)
    try:
        with _quietly(f"the {name} converter") as held:
            yield problems
    finally:
        converter_log.removeHandler(handler)
        converter_log.propagate, converter_log.level = propagate, level
    if problems and name == "litert":
        problems.extend(line for line in "".join(held).splitlines() if "error:" in line)


@contextlib.contextmanager
def _quietly(what: str) -> Iterator[list[str]]:
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


def first_batch(data: Any, rows: int = VERIFY_ROWS) -> VerifyBatch | None:
    """The first batch of the test split (else validation, else training), `x` only.

    Args:
        data: The run's data object (`train`, `val`, `test` pipelines).
        rows: At most this many rows are kept.

    Returns:
        The batch, or `None` when the data has no split to take one from.
    """
    for split in ("test", "val", "train"):
        dataset = getattr(data, split, None)
        if dataset is None:
            continue
        try:
            element = next(iter(dataset))
        except StopIteration:
            continue
        x, _, _ = keras.utils.unpack_x_y_sample_weight(element)
        return VerifyBatch(split, keras.tree.map_structure(lambda t: np.asarray(t)[:rows], x))
    return None


def endpoint_inputs(endpoint: ExportEndpoint, batch: VerifyBatch) -> list[np.ndarray] | None:
    """The batch's arrays that fit an endpoint's flat specs, in order.

    All of them when they fit one for one (`serve`), else the first that fits each spec in
    turn (the Siamese `encode` takes the first text of each pair).

    Args:
        endpoint: The endpoint.
        batch: The verification batch.

    Returns:
        One array per spec, or `None` when the batch has nothing that fits.
    """
    arrays = [np.asarray(a) for a in keras.tree.flatten(batch.x)]
    if len(arrays) == len(endpoint.specs) and all(map(_fits, endpoint.specs, arrays)):
        return [_as_spec(spec, a) for spec, a in zip(endpoint.specs, arrays, strict=True)]
    chosen, start = [], 0
    for spec in endpoint.specs:
        index = next((i for i in range(start, len(arrays)) if _fits(spec, arrays[i])), None)
        if index is None:
            return None
        chosen.append(_as_spec(spec, arrays[index]))
        start = index + 1
    return chosen


def _fits(spec: tf.TensorSpec, array: np.ndarray) -> bool:
    """Whether `array` can be fed to `spec` (same kind of dtype, compatible shape)."""
    if not spec.shape.is_compatible_with(array.shape):
        return False
    if spec.dtype == tf.string:
        return array.dtype.kind in "OSU"
    kind = "f" if spec.dtype.is_floating else "iu" if spec.dtype.is_integer else "b"
    return array.dtype.kind in kind


def _as_spec(spec: tf.TensorSpec, array: np.ndarray) -> np.ndarray:
    """`array` in the spec's dtype (strings as they are)."""
    if spec.dtype == tf.string:
        return array
    return array.astype(spec.dtype.as_numpy_dtype, copy=False)


def verify_exports(
    model: keras.Model,
    endpoints: Sequence[ExportEndpoint],
    root: Path,
    files: dict[str, dict[str, str]],
    batch: VerifyBatch | None,
    tolerance: float,
) -> dict[str, Any]:
    """Load every export in its own runtime and compare its outputs with the Keras model's.

    Args:
        model: The trained Keras model (named in the refusal).
        endpoints: Its endpoints.
        root: The export folder being written (the SavedModel is `root` itself).
        files: `{format: {endpoint: file path relative to root}}`.
        batch: The inputs to compare on; `None` records the exports as unverified.
        tolerance: The largest absolute difference allowed.

    Returns:
        What `verify.json` holds: the tolerance, the inputs, and per format its runtime, the
        largest absolute difference over its endpoints and each endpoint's file and difference.

    Raises:
        TapefitError: an export whose outputs differ by more than `tolerance` (or are not
            finite, or have other shapes), in one line.
    """
    report: dict[str, Any] = {
        "tolerance": tolerance,
        "verified": batch is not None,
        "inputs": None if batch is None else {"split": batch.split, "rows": batch.rows},
        "formats": {},
    }
    if batch is not None:
        endpoints = [e.for_batch(batch) for e in endpoints]
    inputs: dict[str, list[np.ndarray] | None] = {}
    expected: dict[str, list[np.ndarray] | None] = {}
    for endpoint in endpoints:
        flat = None if batch is None else endpoint_inputs(endpoint, batch)
        if batch is not None and flat is None:
            log.warning(
                "export: endpoint %s is not verified: nothing in the first %s batch fits %s",
                endpoint.name,
                batch.split,
                ", ".join(f"{s.name}: {s.dtype.name} {s.shape}" for s in endpoint.specs),
            )
        inputs[endpoint.name] = flat
        expected[endpoint.name] = None if flat is None else _reference(endpoint, flat)
    for name, paths in files.items():
        runtime, run = RUNTIMES[name]()
        checked: dict[str, dict[str, Any]] = {}
        for endpoint in endpoints:
            flat, want = inputs[endpoint.name], expected[endpoint.name]
            difference = None
            if flat is not None and want is not None:
                with _quietly(runtime):
                    got = run(root / paths[endpoint.name], endpoint, flat)
                difference = _difference(name, model, endpoint, want, got, tolerance, batch)
            checked[endpoint.name] = {"file": paths[endpoint.name], "max_abs_diff": difference}
        known = [e["max_abs_diff"] for e in checked.values() if e["max_abs_diff"] is not None]
        report["formats"][name] = {
            "runtime": runtime,
            "max_abs_diff": max(known) if known else None,
            "endpoints": checked,
        }
    return report


def _reference(endpoint: ExportEndpoint, flat: list[np.ndarray]) -> list[np.ndarray]:
    """The Keras model's outputs for the endpoint, run eagerly."""
    with warnings.catch_warnings():  # e.g. a functional model given a tuple for its list
        warnings.simplefilter("ignore")
        outputs = endpoint.function(*endpoint.arguments([tf.constant(a) for a in flat]))
    return [np.asarray(o) for o in keras.tree.flatten(outputs)]


def _difference(
    name: str,
    model: keras.Model,
    endpoint: ExportEndpoint,
    expected: list[np.ndarray],
    got: list[np.ndarray],
    tolerance: float,
    batch: VerifyBatch | None,
) -> float:
    """The largest absolute difference between the export's and the model's outputs."""
    where = f"the {name} export of {type(model).__name__} (endpoint {endpoint.name!r})"
    shapes = [np.shape(a) for a in expected], [np.shape(a) for a in got]
    if shapes[0] != shapes[1]:
        raise TapefitError(
            f"trainer.export_formats: {where} returns outputs of shapes {shapes[1]} where the "
            f"Keras model returns {shapes[0]}; nothing was exported; leave {name} out"
        )
    worst = 0.0
    for want, have in zip(expected, got, strict=True):
        if want.size:
            gap = np.abs(want.astype("float64") - np.asarray(have).astype("float64"))
            worst = max(worst, float(np.max(gap)))
    if not math.isfinite(worst) or worst > tolerance:
        raise TapefitError(
            f"trainer.export_formats: {where} differs from the Keras model by {worst:.3g} on "
            f"the first {getattr(batch, 'split', 'test')} batch, more than "
            f"trainer.export_tolerance={tolerance:g}; nothing "
            f"was exported; leave {name} out of trainer.export_formats or raise the tolerance"
        )
    return worst


def _version(package: str) -> str:
    """`package version`, or the package alone when its version is unknown."""
    try:
        return f"{package} {importlib.metadata.version(package)}"
    except importlib.metadata.PackageNotFoundError:
        return package


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

    return _version("tensorflow"), run


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

    return _version("onnxruntime"), run


def _litert_interpreter() -> tuple[str, Callable[..., Any]] | None:
    """The LiteRT interpreter: `ai_edge_litert`'s, else TensorFlow's `tf.lite.Interpreter`."""
    if importlib.util.find_spec("ai_edge_litert") is not None:
        from ai_edge_litert.interpreter import Interpreter

        return _version("ai-edge-litert"), Interpreter
    interpreter = getattr(getattr(tf, "lite", None), "Interpreter", None)
    if interpreter is None:
        return None
    return f"{_version('tensorflow')} (tf.lite.Interpreter)", interpreter


def _litert_runtime() -> tuple[str, Runner]:
    """The LiteRT interpreter's signature runner; inputs are fed by name."""
    found = _litert_interpreter()
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
    return f"{_version('openvino')} (CPU, {settings})", run


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
