"""Run-directory artefacts: history.json, metrics.json and curves.png, written atomically."""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from tapefit.errors import UnsaveableModelError
from tapefit.step.rebuild_check import check_rebuildable


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


@contextmanager
def atomic_path(path: Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `path` to write to; rename it onto `path` only when the
    block succeeds, so readers never see a half-written file (`suffix` keeps an extension that
    a writer insists on, such as `.keras`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{suffix}"
    )
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        os.chmod(temporary, 0o666 & ~_current_umask())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def atomic_write(path: Path, write: Any, mode: str = "w") -> Path:
    """Call `write(file)` on a temporary file in the same folder, then rename it onto `path`."""
    with atomic_path(path) as temporary, open(temporary, mode) as file:
        write(file)
    return path


def save_model(model: Any, path: Path) -> Path:
    """`model.save` through a temporary `.keras` name, so a crash never leaves a broken file;
    a model whose config would not rebuild it is a one-line error, and nothing is written."""
    check_saveable(model)
    with atomic_path(path, suffix=".keras") as temporary:
        model.save(temporary)
    return path


def check_saveable(model: Any) -> None:
    """Refuse a model whose `.keras` file would not load again (see `check_rebuildable`),
    naming the setting that skips saving."""
    try:
        check_rebuildable(model)
    except UnsaveableModelError as error:
        raise UnsaveableModelError(f"{error}, or set trainer.save_model=false") from None


def weights_digest(model: Any) -> str:
    """A short SHA-256 of every weight's bytes: equal digests mean identical models (multi-worker
    runs log it on every worker, so a user can see that they agree)."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()[:16]


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def read_json(path: Path, missing: Any = None) -> Any:
    """The JSON in `path`, or `missing` when there is no such file or it does not parse (a
    run killed mid-write leaves none, thanks to `atomic_write`, but a user may)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return missing


def write_json(path: Path, data: Any) -> Path:
    """Write `data` as indented JSON, atomically."""
    text = json.dumps(to_builtin(data), indent=2, sort_keys=True) + "\n"
    return atomic_write(path, lambda file: file.write(text))


def curve_panels(history: dict[str, list[float]]) -> list[tuple[str, list[str]]]:
    """(title, series) per panel: every logged metric with its `val_` counterpart, a validation
    metric without a training one (the Siamese `val_spearman`) on its own, and the learning
    rate or skipped steps only when they changed."""
    panels: dict[str, list[str]] = {}
    for key in history:
        name = key.removeprefix("val_")
        panels.setdefault(name, [])
        panels[name].append(key)
    changing = {k for k, v in history.items() if len({x for x in v if x is not None}) > 1}
    quiet = ("learning_rate", "skipped_steps")
    return [
        (name, sorted(keys, key=lambda k: k.startswith("val_")))
        for name, keys in panels.items()
        if name not in quiet or set(keys) & changing
    ]


def curves_figure(
    history: dict[str, list[float]],
    objective: str | None = None,
    best_epoch: int | None = None,
    tested_epoch: int | None = None,
) -> Any:
    """The figure of `curve_panels`, epochs numbered from 0 as History, `history.csv` and
    TensorBoard number them. The epoch whose weights were tested (`tested_epoch`, counted from
    1 as in metrics.json; default `best_epoch`) is a dashed line on every panel, and the
    objective's best value (`best_epoch`, as `objective_epoch`) a star on its own panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    panels = curve_panels(history)
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.5 * columns, 3.4 * rows), squeeze=False)
    for axis in axes.flat[len(panels) :]:
        axis.set_visible(False)
    for axis, (name, series) in zip(axes.flat, panels, strict=False):
        for key in series:
            values = [math.nan if v is None else v for v in history[key]]
            label = "validation" if key.startswith("val_") else "train"
            color = "C1" if label == "validation" else "C0"  # the same colours on every panel
            axis.plot(np.arange(len(values)), values, "o-", markersize=3, color=color, label=label)
        tested = tested_epoch or best_epoch
        if tested is not None:
            axis.axvline(
                tested - 1,
                color="grey",
                linestyle="--",
                linewidth=1,
                label=f"tested weights (tested_epoch {tested})",
            )
        if best_epoch is not None and objective in series:
            axis.plot(
                [best_epoch - 1],
                [history[objective][best_epoch - 1]],
                marker="*",
                markersize=12,
                color="black",
                linestyle="none",
                label=f"best {objective} (objective_epoch {best_epoch})",
            )
        axis.set_title(name)
        axis.set_xlabel("epoch")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small")
    figure.tight_layout()
    return figure


def plot_curves(
    history: dict[str, list[float]],
    path: Path,
    objective: str | None = None,
    best_epoch: int | None = None,
    tested_epoch: int | None = None,
) -> Path:
    """Write `curves_figure` to `path` (PNG), atomically."""
    import matplotlib.pyplot as plt

    figure = curves_figure(history, objective, best_epoch, tested_epoch)
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
