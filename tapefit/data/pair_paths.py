"""Which files a pair-file option names: a path, a glob or a list of them, each checked to be
a file, with errors that name the `data` option."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

from tapefit.errors import TapefitError


def expand_paths(value: Any, key: str) -> list[Path]:
    """A path, a glob (`shards/*.tsv`) or a list of either -> the files, sorted and each once;
    a pattern that matches nothing is a one-line error naming `data.<key>`.

    Args:
        value: What `data.<key>` holds: a path or glob, or a list of them.
        key: The option under `data` the errors name (`train_path`, ...).

    Returns:
        The files, a glob's matches sorted, each file once in the order first named.

    Raises:
        TapefitError: `value` is empty or not strings, or a glob matches no file.

    Examples:
        >>> from pathlib import Path
        >>> for name in ("b.tsv", "a.tsv"):
        ...     _ = Path(name).write_text("")
        >>> [path.name for path in expand_paths(["*.tsv", "a.tsv"], "train_path")]
        ['a.tsv', 'b.tsv']
    """
    patterns = [value] if isinstance(value, str) else list(value or [])
    if not patterns or not all(isinstance(p, str) and p for p in patterns):
        raise TapefitError(
            f"data.{key}={value!r} must be a file, a glob such as 'shards/*.tsv', or a list of them"
        )
    files: list[Path] = []
    for pattern in patterns:
        expanded = str(Path(pattern).expanduser())
        if glob.has_magic(expanded):
            matched = sorted(Path(p) for p in glob.glob(expanded) if Path(p).is_file())
            if not matched:
                raise TapefitError(
                    f"data.{key}: no file matches {pattern!r}: check the folder and the pattern"
                )
            files += matched
        else:
            files.append(Path(expanded))
    return list(dict.fromkeys(files))


def is_saved_dataset(path: Path) -> bool:
    """Whether `path` is a Hugging Face dataset written by `Dataset.save_to_disk`."""
    return (path / "state.json").is_file() and (path / "dataset_info.json").is_file()


def checked_file(path: str | Path, what: str = "pair file", key: str | None = None) -> Path:
    """`path` as an existing file (or a Hugging Face `save_to_disk` folder), or a one-line
    error saying what it is instead.

    Args:
        path: A pair file's path (`~` expanded).
        what: What the errors call the file (`pair file`, `image table`).
        key: The `data` option that names it, for the errors (default: the paths' keys).

    Returns:
        The path, `~` expanded.

    Raises:
        TapefitError: `path` is another directory (a DatasetDict's: naming its splits) or does
            not exist.

    Examples:
        >>> checked_file("missing.tsv")
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: pair file missing.tsv does not exist: check ...
    """
    path = Path(path).expanduser()
    if is_saved_dataset(path):
        return path  # a Hugging Face `save_to_disk` folder: read as one file
    if (path / "dataset_dict.json").is_file():
        splits = sorted(p.name for p in path.iterdir() if is_saved_dataset(p))
        raise TapefitError(
            f"{what} {path} is a Hugging Face DatasetDict with splits {', '.join(splits)}: "
            f"point each path at one split's folder ({path / (splits or ['train'])[0]})"
        )
    if path.is_dir():
        raise TapefitError(f"{what} {path} is a directory: point the path at a file in it")
    if not path.is_file():
        keys = f"data.{key}" if key else "data.train_path/test_path"
        raise TapefitError(f"{what} {path} does not exist: check {keys}")
    return path
