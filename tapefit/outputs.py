"""Run-directory artefacts: history.json, metrics.json and curves.png, written atomically."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


def to_builtin(value: Any) -> Any:
    """NumPy/TensorFlow scalars and arrays -> plain Python (NaN/inf -> None) for JSON."""
    if isinstance(value, dict):
        return {str(k): to_builtin(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_builtin(v) for v in value]
    if hasattr(value, "numpy"):
        value = value.numpy()
    if isinstance(value, np.ndarray):
        return to_builtin(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def atomic_write(path: Path, write: Any, mode: str = "w") -> Path:
    """Write through a temporary file in the same folder, then rename: no half-written files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, mode) as file:
            write(file)
        os.chmod(temporary, 0o666 & ~_current_umask())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: Path, data: Any) -> Path:
    """Write `data` as indented JSON, atomically."""
    text = json.dumps(to_builtin(data), indent=2, sort_keys=True) + "\n"
    return atomic_write(path, lambda file: file.write(text))


def plot_curves(history: dict[str, list[float]], path: Path) -> Path:
    """One panel per metric, train against validation, one point per epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [k for k in history if not k.startswith("val_") and k != "learning_rate"]
    figure, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 3.6), squeeze=False)
    for axis, name in zip(axes[0], names, strict=True):
        epochs = np.arange(1, len(history[name]) + 1)
        axis.plot(epochs, history[name], marker="o", label="train")
        if f"val_{name}" in history:
            axis.plot(epochs, history[f"val_{name}"], marker="o", label="validation")
        axis.set_title(name)
        axis.set_xlabel("epoch")
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    atomic_write(path, lambda file: figure.savefig(file, format="png", dpi=110), mode="wb")
    plt.close(figure)
    return path


def plot_similarity(scores: Any, gold: Any, label_type: str, path: Path) -> Path:
    """Predicted cosine against the gold label on the test split (a box per class if binary)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores, gold = np.asarray(scores).ravel(), np.asarray(gold).ravel()
    figure, axis = plt.subplots(figsize=(5.5, 4.2))
    if label_type == "binary":
        axis.boxplot([scores[gold == 0], scores[gold == 1]])
        axis.set_xticks([1, 2], ["different (0)", "same (1)"])
    else:
        axis.scatter(gold, scores, s=8, alpha=0.5)
        axis.set_xlabel("gold label")
    axis.set_ylabel("predicted cosine")
    axis.set_title(f"test split, {len(scores)} pairs")
    axis.grid(alpha=0.3)
    figure.tight_layout()
    atomic_write(path, lambda file: figure.savefig(file, format="png", dpi=110), mode="wb")
    plt.close(figure)
    return path
