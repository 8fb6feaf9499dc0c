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
