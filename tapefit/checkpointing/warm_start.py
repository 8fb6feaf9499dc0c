"""Warm start (`init_from=...`): a run that begins from another run's weights — fine-tuning, a
curriculum — unlike `resume`, which continues the same run exactly.

The weights are matched as Keras' `load_weights` matches them, layer by layer along the
model's structure (attribute and layer names), so a model whose head changed (10 classes to 3)
takes every other layer with `init_from_strict=false`. The optimizer starts afresh.
"""

from __future__ import annotations

import json
import logging
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras
import numpy as np

from tapefit.errors import TapefitError

log = logging.getLogger("tapefit")

WEIGHTS_IN_KERAS_FILE = "model.weights.h5"  # the member of a .keras archive holding weights


@dataclass(frozen=True)
class WarmStart:
    """A saved model a run continues from, with its optimizer (Hyperband's next round): unlike
    `init_from`, its epochs count as done.

    Attributes:
        model_file: The earlier trial's `model.keras`.
        epochs_done: The epochs it trained (`tuner/initial_epoch`).

    Example:
        >>> WarmStart(Path("trial_00/model.keras"), 2).epochs_done
        2
    """

    model_file: Path
    epochs_done: int


def weights_file(source: str | Path, scratch: Path) -> Path:
    """The `.weights.h5` file `source` names: itself, the weights inside a `.keras` file, or
    those of a run directory's `model.keras`.

    Args:
        source: A run directory, a `.keras` file or a `.weights.h5` file.
        scratch: A folder to unpack a `.keras` file's weights into.

    Returns:
        A `.weights.h5` path `keras.Model.load_weights` reads.

    Raises:
        TapefitError: `source` is none of those.
    """
    path = Path(source)
    if path.is_dir():
        path = path / "model.keras"
        if not path.is_file():
            raise TapefitError(
                f"init_from={source}: the run directory has no model.keras (it did not "
                "complete); name a finished run, a .keras or a .weights.h5 file"
            )
    if path.name.endswith(".weights.h5") and path.is_file():
        return path
    if path.suffix == ".keras" and path.is_file():
        try:
            with zipfile.ZipFile(path) as archive:
                archive.extract(WEIGHTS_IN_KERAS_FILE, scratch)
        except (zipfile.BadZipFile, KeyError):
            raise TapefitError(f"init_from={source} is not a readable .keras file") from None
        return scratch / WEIGHTS_IN_KERAS_FILE
    raise TapefitError(
        f"init_from={source}: not found, or not a run directory, .keras or .weights.h5 file"
    )


def source_config(source: str | Path) -> dict[str, Any]:
    """The constructor arguments of the model saved in `source` (a run directory or a `.keras`
    file), read from the archive's `config.json`; `{}` for a `.weights.h5` file (it holds no
    config) or anything unreadable (`init_from` then says what is wrong)."""
    path = Path(source)
    path = path / "model.keras" if path.is_dir() else path
    try:
        with zipfile.ZipFile(path) as archive:
            saved = json.loads(archive.read("config.json"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return {}
    config = saved.get("config") if isinstance(saved, dict) else None
    return config if isinstance(config, dict) else {}


def shared_vocabulary(source: str | Path, supplied: dict[str, Any]) -> dict[str, Any]:
    """`supplied` (the arguments the data decide) with the source model's vocabulary: its
    embedding rows are indexed by that vocabulary, so a run that starts from its weights must
    read texts with it, not with one learnt again on its own (possibly other) training data.

    Args:
        source: `init_from`'s value.
        supplied: The data's `model_arguments()` the new model takes.

    Returns:
        `supplied`, its `vocabulary` replaced by the source's when both have one.

    Raises:
        TapefitError: the source learnt another kind of vocabulary (word vs. WordPiece).

    Examples:
        >>> shared_vocabulary("no/such/run", {"vocabulary": ["a", "b"]})
        {'vocabulary': ['a', 'b']}
    """
    if supplied.get("vocabulary") is None:
        return supplied
    config = source_config(source)
    vocabulary = config.get("vocabulary")
    if not isinstance(vocabulary, list):
        if not config:
            log.warning(
                "init_from=%s holds no vocabulary: this run's, learnt on its own training "
                "data, must be the one the weights were trained with",
                source,
            )
        return supplied
    theirs, ours = config.get("tokenizer", "word"), supplied.get("tokenizer", "word")
    if theirs != ours:
        raise TapefitError(
            f"init_from={source} read texts with a {theirs} vocabulary, this run with a {ours} "
            f"one: set data.tokenizer={theirs}"
        )
    if vocabulary != supplied["vocabulary"]:
        log.info(
            "init_from=%s: texts read with its vocabulary (%d entries), not the %d learnt on "
            "this run's training data",
            source,
            len(vocabulary),
            len(supplied["vocabulary"]),
        )
    return {**supplied, "vocabulary": vocabulary}


def init_from(model: keras.Model, source: str | Path, strict: bool = True) -> dict[str, int]:
    """Load `source`'s weights into `model` before training, and say what was loaded.

    Args:
        model: The built model of the new run.
        source: A finished run directory, a `.keras` file or a `.weights.h5` file.
        strict: Refuse a layer whose weights have other shapes; False skips such layers.

    Returns:
        `{"loaded": n, "kept": m}`: variables that took the source's values, and variables
        that kept their initial values (layers the source lacks or whose shapes differ).

    Raises:
        TapefitError: an unreadable source, or (strict) a layer whose shapes differ.

    Examples:
        >>> import keras, tempfile, os
        >>> inputs = keras.Input((3,))
        >>> source = keras.Model(inputs, keras.layers.Dense(2)(inputs))
        >>> path = os.path.join(tempfile.mkdtemp(), "source.weights.h5")
        >>> source.save_weights(path)
        >>> target = keras.Model(inputs, keras.layers.Dense(2)(inputs))
        >>> init_from(target, path)
        {'loaded': 2, 'kept': 0}
    """
    before = [np.array(v) for v in model.weights]
    # A float variable is filled with NaN first: the ones still NaN after loading are those the
    # source did not give (whatever their values), and they get their initial values back.
    marked = [np.issubdtype(value.dtype, np.floating) for value in before]
    for variable, value, mark in zip(model.weights, before, marked, strict=True):
        if mark:
            variable.assign(np.full(value.shape, np.nan, value.dtype))
    try:
        with tempfile.TemporaryDirectory() as scratch:
            path = weights_file(source, Path(scratch))
            try:
                model.load_weights(path, skip_mismatch=not strict)
            except ValueError as error:
                lines = [line.strip() for line in str(error).splitlines() if line.strip()]
                first = lines[0] if lines else type(error).__name__
                if first.endswith(":") and len(lines) > 1:  # Keras' detail is on the next line
                    first = f"{first} {lines[1]}"
                raise TapefitError(
                    f"init_from={source}: {first}; set init_from_strict=false to skip the "
                    "layers whose weights differ"
                ) from None
    except TapefitError:
        for variable, value in zip(model.weights, before, strict=True):
            variable.assign(value)  # nothing half-loaded
        raise
    changed = []
    for variable, value, mark in zip(model.weights, before, marked, strict=True):
        now = np.array(variable)
        taken = not np.isnan(now).all() if mark and now.size else not np.array_equal(now, value)
        if not taken:
            variable.assign(value)
        changed.append(taken)
    counts = {"loaded": sum(changed), "kept": len(changed) - sum(changed)}
    kept = [v.path for v, moved in zip(model.weights, changed, strict=True) if not moved]
    log.info(
        "init_from=%s: %d weights loaded, %d kept their initial values%s",
        source,
        counts["loaded"],
        counts["kept"],
        f" ({', '.join(kept[:6])}{', ...' if len(kept) > 6 else ''})" if kept else "",
    )
    return counts
