"""Files tapefit writes: atomically (a reader, or a crash, never sees half of one), and JSON
made of plain Python values."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np


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


# zlib's fastest level: a run's figures are a few tens of kB either way, and at matplotlib's
# default level the compression took about a tenth of each figure's time.
PNG_COMPRESSION = 1


def write_png(figure: Any, path: Path, dpi: int = 110) -> Path:
    """Save a matplotlib `figure` as PNG at `path`, atomically.

    Examples:
        >>> import tempfile
        >>> from matplotlib.figure import Figure
        >>> figure = Figure(figsize=(2, 1))
        >>> _ = figure.subplots().plot([0, 1], [1, 0])
        >>> path = write_png(figure, Path(tempfile.mkdtemp()) / "line.png")
        >>> path.read_bytes()[:4]
        b'\\x89PNG'
    """
    pil = {"compress_level": PNG_COMPRESSION}
    save = lambda file: figure.savefig(file, format="png", dpi=dpi, pil_kwargs=pil)  # noqa: E731
    return atomic_write(path, save, mode="wb")


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
