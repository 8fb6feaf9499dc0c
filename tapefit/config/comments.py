"""A config key's description, read from the comments beside it: in a YAML file of `conf/`,
or in a dataclass schema's source (`tapefit.config.schemas`).

`tapefit.config.reference` builds the configuration reference from these descriptions.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import itertools
import tokenize


def yaml_comments(text: str) -> dict[str, str]:
    """Each key's comment in a YAML file: the comment lines right above it, then the one after.

    Args:
        text: The YAML file's text (block style, two-space indents, as `conf/` is written).

    Returns:
        Dotted key (relative to the file's root) to its comment, for the keys that have one.

    Examples:
        >>> yaml_comments("seed: 0\\n# size of a batch\\nbatch_size: 32  # at least 1\\n")
        {'batch_size': 'size of a batch at least 1'}
    """
    comments: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    lines = text.splitlines()
    header = len(lines) - len(list(itertools.dropwhile(lambda ln: ln.startswith("#"), lines)))
    for line in lines[header:]:  # the file's leading comment is its summary, not a key's
        stripped = line.strip()
        if stripped.startswith("#"):
            if not stripped.startswith("# @package"):
                pending.append(stripped.lstrip("#").strip())
            continue
        key, rest = _key_of(line)
        if key is None:
            pending = []
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        dotted = ".".join([name for _, name in stack] + [key])
        value, trailing = _split_comment(rest)
        described = " ".join([*pending, *([trailing] if trailing else [])]).strip()
        if described:
            comments[dotted] = described
        pending = []
        if not value:
            stack.append((indent, key))
    return comments


def _key_of(line: str) -> tuple[str | None, str]:
    stripped = line.strip()
    if not stripped or stripped.startswith("-") or ":" not in stripped:
        return None, ""
    key, _, rest = stripped.partition(":")
    if not key.replace("_", "").replace(".", "").isalnum():
        return None, ""
    return key, rest


def _split_comment(rest: str) -> tuple[str, str]:
    """`' 32  # at least 1'` -> (`'32'`, `'at least 1'`), a `#` inside quotes kept."""
    quote = None
    for index, char in enumerate(rest):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or rest[index - 1] == " "):
            return rest[:index].strip(), rest[index + 1 :].strip()
    return rest.strip(), ""


def header_comment(text: str) -> str:
    """The comment lines a YAML file starts with (its summary), `@package` lines left out.

    Args:
        text: The YAML file's text.

    Returns:
        The leading comment lines joined by spaces (empty when the file starts with a key).

    Examples:
        >>> header_comment("# @package _global_\\n# Fast runs.\\n# Few epochs.\\nseed: 0\\n")
        'Fast runs. Few epochs.'
    """
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("# @package"):
            lines.append(line.lstrip("#").strip())
    return " ".join(lines)


def schema_comments(schema: type) -> dict[str, str]:
    """Each field's comment in a dataclass schema's source (lines above it, then beside it).

    Args:
        schema: A dataclass from `tapefit.config.schemas`.

    Returns:
        Field name to its comment, for the fields that have one.

    Examples:
        >>> from tapefit.config.schemas import SpaceEntry
        >>> schema_comments(SpaceEntry)["values"]
        'choice: the values to pick from'
    """
    source = inspect.getsource(schema)
    comments: dict[str, str] = {}
    pending: list[str] = []
    names = {f.name for f in dataclasses.fields(schema)}
    lines = source.splitlines()
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    trailing = {t.start[0]: t.string for t in tokens if t.type == tokenize.COMMENT}
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
            continue
        name = stripped.split(":", 1)[0].strip()
        if name in names and ":" in stripped:
            after = trailing.get(number, "") if not stripped.startswith("#") else ""
            text = " ".join([*pending, after.lstrip("#").strip()]).strip()
            if text:
                comments[name] = text
        pending = []
    return comments
